"""Held-out evaluation of any model: a run's own held-out split, or a corpus's."""
from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint import load_pretrained, resolve_folder
from ..data.corpus import (
    load_documents,
    make_pretraining_examples,
    split_heldout,
    tokenize_documents,
)
from ..data.masking import Batcher
from . import runs
from .loop import resolve_device
from .pretrain import Evaluator, unpack_examples


def evaluate_model(model_or_run=None, corpus: str = "imdb", max_docs: int | None = None,
                   batches: int = 50, batch_size: int = 32, mask_rate: float = 0.15, seed: int = 0,
                   device: str = "cpu") -> dict:
    """MLM loss / masked-token accuracy / NSP accuracy on fixed masks. A run folder is scored on the
    held-out documents it set aside; anything else on the held-out 2 % of `corpus` (by document,
    seed 0: the same documents `pretrain` holds out with its defaults)."""
    model, tok = load_pretrained(model_or_run)
    model = model.to(resolve_device(device))
    run = Path(model_or_run) if model_or_run is not None else None
    if run is not None and (run / "data" / "examples.pt").exists():
        blob = torch.load(run / "data" / "examples.pt", weights_only=True)
        held, unigram, source = unpack_examples(blob["heldout"]), blob["unigram"].tolist(), f"run {run}"
        mask_rate = (runs.Run(run).spec_dict() or {}).get("mask_rate", mask_rate)
    else:
        docs = load_documents(corpus, max_docs=max_docs)
        train_docs, held_docs = split_heldout(docs, 0.02, seed)
        if len(held_docs) < 2:
            raise ValueError(f"{corpus}: too few documents ({len(docs)}) to hold out at least two")
        max_len = min(128, model.config.max_tokens)
        held = make_pretraining_examples(tokenize_documents(held_docs, tok), max_len=max_len, seed=seed + 1,
                                         cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
        ids = [i for d in tokenize_documents(train_docs[:2000], tok) for s in d for i in s]
        counts = torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=tok.vocab_size)
        counts[sorted(tok.special_ids)] = 0
        unigram, source = counts.tolist(), f"{resolve_folder(model_or_run)} on {corpus}"
    batcher = Batcher.from_tokenizer(held, batch_size, tok, rate=mask_rate, shuffle=False)
    ev = Evaluator(batcher, held, batches, unigram, tok)
    model.eval()
    return {"source": source, "examples": sum(len(b["input_ids"]) for b in ev.batches),
            "masked_tokens": sum(int((b["labels"] != -100).sum()) for b in ev.batches), **ev(model)}
