"""Held-out evaluation of any model: a run's own held-out split, or a corpus's."""
from __future__ import annotations

import copy
from pathlib import Path

import torch

from .. import family
from ..checkpoint import load_pretrained, resolve_folder
from ..heads import load_classifier
from ..methods.registry import DEFAULT as DEFAULT_METHOD
from ..methods.registry import RECORDS as METHOD_RECORDS
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
    ev, source = held_out(model_or_run, model, tok, corpus, max_docs, batches, batch_size, mask_rate, seed)
    model.eval()
    return {"source": source, "examples": sum(len(b["input_ids"]) for b in ev.batches),
            "masked_tokens": sum(int((b["labels"] != -100).sum()) for b in ev.batches), **ev(model)}


def held_out(model_or_run, model, tok, corpus: str = "imdb", max_docs: int | None = None, batches: int = 50,
             batch_size: int = 32, mask_rate: float = 0.15, seed: int = 0) -> tuple[Evaluator, str]:
    """The fixed masked batches evaluate_model scores on (an Evaluator), and where they come from."""
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
    return Evaluator(batcher, held, batches, unigram, tok), source


# ---- what fine-tuning forgot ---------------------------------------------------------------------------
UNTOUCHED = tuple(m.name for m in METHOD_RECORDS if m.keeps_base)  # add modules, keep every pre-trained weight


def starting_point(source: str = "default", batches: int = 8, batch_size: int = 32) -> tuple:
    """(model, its fixed masked batches, its masked-word accuracy on them) for a run's starting model."""
    pre, tok = load_pretrained(None if source == "default" else source)
    if "masked-LM head" not in getattr(pre, "head_names", {}).values():
        raise ValueError(f"{source} has no masked-word head ({type(pre).__name__}): there is no masked-LM skill "
                         f"to lose")
    pre.eval()
    ev, _ = held_out(None if source == "default" else source, pre, tok, batches=batches, batch_size=batch_size)
    return pre, ev, ev.mlm(pre)["mlm_acc"]


def mlm_left(run_dirs, batches: int = 8, batch_size: int = 32, start=starting_point) -> list[dict]:
    """Catastrophic forgetting, measured: for each fine-tune run, the masked-word accuracy of the model it
    started from and of that model with the run's fine-tuned encoder weights under the same masked-LM head,
    on the same fixed masks (the starting model's held-out text; 8 batches of 32: about 5,000 masked
    tokens). The MLM head's output layer is the word table, so a method that changed the words moves it
    too. Adapters, prefix and prompt tuning keep every pre-trained weight (their own modules do the task):
    their encoder, without those modules, is the starting model's, `untouched`. `start(source, batches,
    batch_size)`: starting_point, or a cached one. One row per run: {run, method, lr, before, after, left,
    untouched}."""
    rows, starts = [], {}
    for d in map(Path, run_dirs):
        spec = runs.Run(d).spec_dict() or {}
        if spec.get("kind") != "finetune":
            raise ValueError(f"{d.name}: not a fine-tuning run")
        folder = d / "model"
        if not (folder / "config.json").exists() and not (folder / "adapter_config.json").exists():
            raise ValueError(f"{d.name}: no saved model yet (it is saved when the run ends or is stopped)")
        source = spec.get("model") or "default"
        if source not in starts:  # runs from one model share its masks
            starts[source] = start(source, batches, batch_size)
        pre, ev, before = starts[source]
        method = spec.get("method", DEFAULT_METHOD)
        after = before
        if method not in UNTOUCHED:
            ft, _ = load_classifier(folder)
            model = copy.deepcopy(pre)
            enc = family.encoder_of(model)
            own = enc.state_dict()
            enc.load_state_dict({k: v for k, v in family.encoder_of(ft).state_dict().items() if k in own}, strict=False)
            after = ev.mlm(model.eval())["mlm_acc"]
        rows.append({"run": d.name, "method": method, "lr": spec.get("lr"), "before": before, "after": after,
                     "left": after / before if before else None, "untouched": method in UNTOUCHED})
    return rows
