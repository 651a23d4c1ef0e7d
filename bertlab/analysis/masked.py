"""One token replaced by [MASK]: what the model guesses there, and every head's attention again.

BERT learned by guessing hidden tokens from both sides, so masking one token and re-running shows
both what the context predicts and how the other tokens' attention to that spot changes."""
from __future__ import annotations

import dataclasses

import torch

from .attention_views import AttentionRun, forward


def check_position(run: AttentionRun, pos) -> int:
    """A token position that may be masked (not [CLS]/[SEP]), or ValueError."""
    if isinstance(pos, bool) or not isinstance(pos, (int, float)) or pos != int(pos):
        raise ValueError(f"click a token to mask it (got {pos!r})")
    pos = int(pos)
    if not 0 <= pos < len(run.tokens):
        raise ValueError(f"there is no token {pos}: this text has {len(run.tokens)} (press Show attention again?)")
    if run.special[pos]:
        raise ValueError(f"{run.tokens[pos]} marks the start or a sentence end: pick a word piece to mask")
    return pos


def mask_token(model, tok, run: AttentionRun, pos: int, top_k: int = 10) -> tuple[AttentionRun, dict]:
    """(run of the text with token `pos` masked, guesses): guesses holds the top-k tokens with their
    probabilities, and the original token's probability and rank (1 = the model's first guess)."""
    pos = check_position(run, pos)
    ids = list(run.ids)
    ids[pos] = tok.mask_token_id
    att, logits = forward(model, ids, run.token_type_ids)
    if logits is None:
        raise ValueError("this model has no masked-LM head, so it cannot guess the masked token")
    probs = logits[pos].softmax(-1)  # (V,)
    probs[torch.tensor(sorted(tok.special_ids), device=probs.device)] = 0.0  # a [SEP] or [PAD] is never a useful answer
    top = probs.topk(min(top_k, probs.numel()))
    orig = run.ids[pos]
    guesses = {"position": pos, "original": run.tokens[pos], "original_prob": float(probs[orig]),
               "original_rank": int((probs > probs[orig]).sum()) + 1,
               "top": [{"token": tok.id_to_token(i), "prob": p} for p, i in zip(top.values.tolist(),
                                                                                 top.indices.tolist())]}
    tokens = list(run.tokens)
    tokens[pos] = tok.id_to_token(tok.mask_token_id)
    return dataclasses.replace(run, tokens=tokens, ids=ids, attentions=att), guesses
