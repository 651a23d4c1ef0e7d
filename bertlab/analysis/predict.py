"""What the pre-training heads say about a text: fill-mask and next-sentence scores."""
from __future__ import annotations

import itertools
import math
import re

import torch

from .. import family
from ..model import device_of

MASK_RE = re.compile(r"\[mask\]|<mask>", re.IGNORECASE)  # users type BERT's [MASK] or RoBERTa's <mask>
MAX_MASKS = 20


def with_masks(tok, text: str) -> tuple[str, str]:
    """(text with every [MASK]/<mask> written as this tokenizer's mask token, that token)."""
    mask = tok.id_to_token(tok.mask_token_id)
    return MASK_RE.sub(lambda _: mask, text), mask


def need_mlm_head(model, what: str = "guess masked words") -> None:
    if not family.has_mlm_head(model):
        extra = (" It is a replaced-token discriminator: it tells which tokens were replaced instead"
                 if family.is_discriminator(model) else "")
        raise ValueError(f"this {family.family_name(model.config)} model has no masked-LM head, so it "
                         f"cannot {what}.{extra}")


def need_pair_head(model) -> None:
    if not family.MEMBERS[model.config.model_type].pair_head:
        raise ValueError(f"{family.family_name(model.config)} was pre-trained without a sentence-pair task "
                         f"(no next-sentence or sentence-order head): pick a BERT or ALBERT model")


def check_text(text, what: str = "text", required: bool = True) -> str | None:
    """`text` if it holds more than spaces; else ValueError, or None when it is not `required`."""
    if text is not None and not isinstance(text, str):
        raise TypeError(f"the {what} must be text, got {type(text).__name__}")
    if text is None or not text.strip():
        if required:
            raise ValueError(f"the {what} is empty: type a sentence")
        return None
    return text


def masked_text(model, tok, text: str, top_k: int, what: str = "guess masked words") -> tuple[str, int]:
    """What every masked-word view checks first: a masked-LM head, real text with a [MASK] in it, a top_k
    from 1 to 100. (The text with the tokenizer's own mask marker, how many masks it holds.)"""
    need_mlm_head(model, what)
    text, mask = with_masks(tok, check_text(text))
    if not isinstance(top_k, int) or not 1 <= top_k <= 100:
        raise ValueError(f"top_k must be an integer from 1 to 100, got {top_k!r}")
    n = text.count(mask)
    if n == 0:
        raise ValueError("no [MASK] in the text: write [MASK] where the model should guess a word")
    return text, n


@torch.no_grad()
def fill_mask(model, tok, text: str, top_k: int = 5, causal: bool = False) -> list[list[dict]]:
    """Top-k candidates for each [MASK], as Hugging Face's fill-mask widget reports them
    (score, token, token_str, sequence). `causal` hides the right-hand context from every token."""
    text, n = masked_text(model, tok, text, top_k)
    if n > MAX_MASKS:
        raise ValueError(f"{n} [MASK]s: at most {MAX_MASKS} at once")
    enc = tok.encode(text)
    where = [i for i, t in enumerate(enc.ids) if t == tok.mask_token_id]
    if len(where) < n:
        raise ValueError(f"the text is longer than the model's {tok.model_max_length} tokens and "
                         f"a [MASK] was cut off: shorten it")
    dev = device_of(model)  # inputs go where the weights are (a GPU model takes no CPU tensor)
    out = model(torch.tensor([enc.ids], device=dev), torch.tensor([enc.token_type_ids], device=dev), causal=causal)
    probs = out.mlm_logits[0, where].float().softmax(-1)  # (n, V)
    probs[:, torch.tensor(sorted(tok.special_ids), device=dev)] = 0.0  # a [SEP] or [PAD] is never a useful answer
    top = probs.topk(min(top_k, probs.size(-1)), dim=-1)
    return [[{"score": p, "token": t, "token_str": tok.id_to_token(t),
              "sequence": _decode_keep_masks(tok, enc.ids[:pos] + [t] + enc.ids[pos + 1:])}
             for p, t in zip(top.values[i].tolist(), top.indices[i].tolist())]
            for i, pos in enumerate(where)]


MAX_IN_TURN = 6  # [MASK]s filled one at a time: 3n forward passes


@torch.no_grad()
def fill_in_turn(model, tok, text: str) -> dict:
    """Several [MASK]s filled two ways. BERT's loss scores each hidden word from the visible words alone,
    so one pass fills every mask as if the others stayed hidden ("independent"): two side by side can
    each take their own best word and make a pair no one writes ("in the the last year"). Filled one at
    a time (the surest mask first, the model re-run with it in place), each later word sees the earlier
    ones. Both fillings are then scored by the same yardstick, the chain rule left to right: each
    mask's probability given the text with the masks before it filled, as a left-to-right reading of
    p(w1, ..., wn | text) would have it."""
    text, n = masked_text(model, tok, text, 1, "fill masked words")
    if n < 2:
        raise ValueError("write two or more [MASK]s (side by side shows it best): with one there is "
                         "nothing to fill in turn")
    if n > MAX_IN_TURN:
        raise ValueError(f"{n} [MASK]s: at most {MAX_IN_TURN} are filled one at a time")
    enc = tok.encode(text)
    ids = list(enc.ids)
    where = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    if len(where) < n:
        raise ValueError(f"the text is longer than the model's {tok.model_max_length} tokens and "
                         f"a [MASK] was cut off: shorten it")
    dev = device_of(model)
    special = torch.tensor(sorted(tok.special_ids), device=dev)
    types = torch.tensor([enc.token_type_ids], device=dev)

    def probs(cur: list[int]) -> torch.Tensor:  # (n, V) at the mask positions
        p = model(torch.tensor([cur], device=dev), types).mlm_logits[0, where].float().softmax(-1)
        p[:, special] = 0.0
        return p

    alone = probs(ids)
    independent = alone.argmax(-1).tolist()
    cur, order, left = list(ids), [], set(range(n))
    while left:  # the surest remaining mask first, then run again with its word in place
        p = probs(cur)
        best = max(left, key=lambda i: p[i].max().item())
        cur[where[best]] = int(p[best].argmax())
        order.append(best)
        left.remove(best)
    in_turn = [cur[w] for w in where]

    def scored(fill: list[int]) -> dict:
        cur, chain = list(ids), []
        for i, w in enumerate(where):
            chain.append(probs(cur)[i, fill[i]].item())
            cur[w] = fill[i]
        return {"tokens": [tok.id_to_token(t) for t in fill], "sequence": tok.decode(cur),
                "alone": [alone[i, t].item() for i, t in enumerate(fill)], "chain": chain,
                "chain_log_prob": sum(math.log(max(c, 1e-30)) for c in chain)}

    return {"masks": n, "independent": scored(independent), "in_turn": {**scored(in_turn), "order": order}}


def _decode_keep_masks(tok, ids: list[int]) -> str:
    """Decode, showing the other [MASK]s instead of dropping them as special tokens."""
    runs = itertools.groupby(ids, key=lambda i: i == tok.mask_token_id)
    mask = tok.id_to_token(tok.mask_token_id)
    parts = [" ".join(mask for _ in run) if masked else tok.decode(list(run)) for masked, run in runs]
    return " ".join(p.strip() for p in parts if p.strip())


@torch.no_grad()
def replaced_tokens(model, tok, text: str) -> list[dict]:
    """A replaced-token discriminator (ELECTRA's, DeBERTa-v3's) on a text: for each token, the probability
    that it was replaced (it was trained on sentences in which a generator swapped some tokens for
    plausible others)."""
    if not family.is_discriminator(model):
        raise ValueError("only a replaced-token discriminator (ELECTRA's, DeBERTa-v3's) tells replaced tokens "
                         "apart; this model guesses masked words instead")
    enc = tok.encode(check_text(text))
    dev = device_of(model)
    out = model(torch.tensor([enc.ids], device=dev), torch.tensor([enc.token_type_ids], device=dev))
    p = out.rtd_logits[0].float().sigmoid().tolist()
    return [{"token": t, "replaced": q, "special": bool(s)}
            for t, q, s in zip(enc.tokens, p, enc.special_tokens_mask)]


@torch.no_grad()
def nsp_scores(model, tok, first: str, seconds: list[str]) -> list[float]:
    """P(IsNext) for each candidate second sentence (label 0 = IsNext, as in Hugging Face)."""
    need_pair_head(model)
    check_text(first, "first sentence")
    seconds = [check_text(s, "second sentence") for s in seconds]
    if not seconds:
        raise ValueError("give at least one second sentence")
    return _nsp_pairs(model, tok, [(first, s, 0) for s in seconds])


@torch.no_grad()
def nsp_accuracy(model, tok, pairs: list[tuple[str, str, int]], batch_size: int = 50) -> dict:
    """How often the NSP head is right on labelled (A, B, is_next) pairs, taking P(IsNext) > 0.5 as
    "next"; and how often it says "next" for true and for random pairs."""
    need_pair_head(model)
    if not pairs:
        raise ValueError("give at least one labelled pair")
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))  # less padding
    p = [0.0] * len(pairs)
    for k in range(0, len(order), batch_size):
        chunk = order[k:k + batch_size]
        for i, s in zip(chunk, _nsp_pairs(model, tok, [pairs[i] for i in chunk])):
            p[i] = s
    said = [s > 0.5 for s in p]
    truth = [bool(y) for _, _, y in pairs]
    true_next = [s for s, y in zip(said, truth) if y]
    random_b = [s for s, y in zip(said, truth) if not y]
    return {"pairs": len(pairs), "accuracy": sum(s == y for s, y in zip(said, truth)) / len(pairs),
            "next_said_next": sum(true_next) / max(1, len(true_next)),
            "random_said_next": sum(random_b) / max(1, len(random_b)),
            "true_next_pairs": len(true_next), "random_pairs": len(random_b)}


def _nsp_pairs(model, tok, pairs) -> list[float]:
    """P(IsNext) of each (A, B, _) pair, in one batch on the model's device."""
    batch = tok.encode_batch([a for a, _, _ in pairs], pairs=[b for _, b, _ in pairs])
    dev = device_of(model)  # the tokenizer pads into CPU tensors
    out = model(*(batch[k].to(dev) for k in ("input_ids", "token_type_ids", "attention_mask")))
    return out.nsp_logits.float().softmax(-1)[:, 0].tolist()
