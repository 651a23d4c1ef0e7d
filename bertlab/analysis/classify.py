"""What a fine-tuned model says about a text: label probabilities and logits (one label), per-label
probabilities (multi-label), a value (regression), a tag per word, or an answer span (extractive QA).
`python -m bertlab classify` and the Fine-tune tab's try-it box share it, so both say the same."""
from __future__ import annotations

import torch

from ..methods import load_finetuned
from ..model import device_of
from ..tokenizer import ptb_words
from .predict import check_text

MAX_CHARS = 200_000  # beyond this, tokenizing alone would stall a shared CPU; the model reads a few hundred pieces
MAX_ANSWER_TOKENS = 30  # the longest answer span considered (transformers' pipeline default)


def load(path_or_hub_id):
    """(model, tokenizer) of any fine-tuned folder (plain, merged, Houlsby adapters, a peft adapter folder,
    a run folder) or hub id, in eval mode; ValueError when it is not one."""
    model, tok = load_finetuned(path_or_hub_id)
    return model.eval(), tok


def problem_of(model) -> str:
    """single | multi | regression | qa (token taggers are "single", their kind "token")."""
    if kind_of(model) == "qa":
        return "qa"
    return getattr(model, "problem", None) or "single"


def kind_of(model) -> str:
    return getattr(model, "kind", None) or ("token" if getattr(model, "per_token", False) else "sequence")


def _text(text, what: str, required: bool = True) -> str | None:
    """predict.check_text, with a wrong type as a ValueError (one line in the CLI) and a length cap."""
    try:
        text = check_text(text, what, required)
    except TypeError as e:
        raise ValueError(str(e)) from None
    if text is None:
        return None
    if len(text) > MAX_CHARS:
        raise ValueError(f"the {what} has {len(text):,} characters; give at most {MAX_CHARS:,} "
                         f"(the model reads only its first few hundred pieces)")
    return text


def _labels(model) -> list[str]:
    return list(getattr(model, "id2label", None) or [f"LABEL_{i}" for i in range(model.num_labels)])


@torch.no_grad()
def predict(model, tok, text: str, pair: str | None = None, question: str | None = None) -> dict:
    """The model's answer for one input, with "problem", "kind" and "truncated" (the input was cut to
    the model's length). `pair`: the second text of a sentence-pair task (segment B); `question`:
    for a question-answering model, with `text` as the passage that holds the answer."""
    text = _text(text, "text")
    pair, question = _text(pair, "second text", False), _text(question, "question", False)
    kind, problem = kind_of(model), problem_of(model)
    if kind == "qa":
        if question is None:
            raise ValueError("this model answers questions: give a question (the text is the passage to search)")
        return answer(model, tok, question, text)
    if question is not None:
        raise ValueError("this model does not answer questions; leave the question out")
    if kind == "token":
        if pair is not None:
            raise ValueError("this model tags the words of one text; leave the second text out")
        return tag_words(model, tok, text)
    enc = tok.encode(text, pair=pair)
    dev = device_of(model)  # inputs go where the weights are; the answer comes back as plain numbers
    out = model(torch.tensor([enc.ids], device=dev), torch.tensor([enc.token_type_ids], device=dev))
    logits = out.logits[0].float()
    names = _labels(model)
    out = {"problem": problem, "kind": kind, "truncated": enc.truncated, "pair": pair is not None}
    if problem == "regression":
        return {**out, "value": float(logits[0]), "logits": {names[0]: float(logits[0])}}
    probs = logits.sigmoid() if problem == "multi" else logits.softmax(-1)
    out.update(labels=dict(zip(names, probs.tolist())), logits=dict(zip(names, logits.tolist())))
    if problem == "multi":
        return {**out, "predicted": [n for n, p in zip(names, probs.tolist()) if p >= 0.5]}
    return {**out, "label": names[int(probs.argmax())]}


def tag_words(model, tok, text: str) -> dict:
    """A tag per word, read off its first piece (as the tagger was trained: data.tasks.encode_tagged)."""
    words = ptb_words(text)
    if not words:
        raise ValueError("the text has no words to tag")
    spaced = [w if i == 0 else " " + w for i, w in enumerate(words)]
    enc = tok.backend.encode(spaced, is_pretokenized=True, add_special_tokens=False)
    n = tok.model_max_length - 2
    ids = [tok.cls_token_id, *enc.ids[:n], tok.sep_token_id]
    logits = model(torch.tensor([ids], device=device_of(model))).logits[0, 1:-1].float()  # (T, labels)
    ws = enc.word_ids[:n]
    firsts = [i for i, (w, prev) in enumerate(zip(ws, [None] + ws)) if w is not None and w != prev]
    p, k = logits[firsts].softmax(-1).max(-1)
    names = _labels(model)
    return {"problem": "single", "kind": "token", "truncated": len(firsts) < len(words),
            "words": [{"word": words[ws[i]], "label": names[int(c)], "score": float(q)}
                      for i, q, c in zip(firsts, p, k)]}


def answer(model, tok, question: str, context: str, max_answer_tokens: int = MAX_ANSWER_TOKENS) -> dict:
    """The best span of `context` for `question`: [CLS] question [SEP] passage [SEP] as BERT's SQuAD
    models read it; start and end are character offsets in the passage, score the probability of
    that start times that end (softmax over the passage's pieces), as transformers' pipeline reports."""
    enc = tok.encode(question, pair=context)
    dev = device_of(model)
    out = model(torch.tensor([enc.ids], device=dev), torch.tensor([enc.token_type_ids], device=dev))
    start, end = _start_end(out)
    in_passage = torch.tensor([s == 1 for s in enc.sequence_ids], device=dev)
    if not bool(in_passage.any()):
        raise ValueError("the question fills the model's whole length: no room is left for the passage")
    start, end = start.masked_fill(~in_passage, float("-inf")), end.masked_fill(~in_passage, float("-inf"))
    ps, pe = start.softmax(-1), end.softmax(-1)
    T = len(enc.ids)
    pair_scores = ps[:, None] * pe[None, :]
    ones = torch.ones(T, T, dtype=torch.bool, device=dev)
    allowed = ones.triu() & ~ones.triu(max_answer_tokens)
    pair_scores = pair_scores.masked_fill(~allowed, -1.0)
    best = int(pair_scores.argmax())
    s, e = divmod(best, T)
    a, b = enc.offsets[s][0], enc.offsets[e][1]
    return {"problem": "qa", "kind": "qa", "answer": context[a:b], "score": float(pair_scores[s, e]),
            "start": a, "end": b, "start_logit": float(start[s]), "end_logit": float(end[e]),
            "start_token": s, "end_token": e, "truncated": enc.truncated}


def _start_end(out) -> tuple[torch.Tensor, torch.Tensor]:
    """(start, end) logits of one input, from a QA head's output (HF names, or logits (1, T, 2))."""
    if getattr(out, "start_logits", None) is not None:
        return out.start_logits[0].float(), out.end_logits[0].float()
    return out.logits[0, :, 0].float(), out.logits[0, :, 1].float()
