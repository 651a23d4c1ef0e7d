"""Sparse attention patterns (Longformer, BigBird): which query-key pairs a layer computes instead of all
T², what that saves in FLOPs at long inputs, and how much of a trained head's attention falls inside the
pattern (what the pattern would have thrown away)."""
from __future__ import annotations

import torch

from ..config import BertConfig
from .sizing import flops

PATTERNS = {  # name -> (label, what it keeps)
    "full": ("Full (BERT)", "every token attends to every token"),
    "local": ("Sliding window", "each token attends to the w tokens on each side of it"),
    "longformer": ("Window + global (Longformer)", "the window, and g global tokens ([CLS] first) that attend to "
                                                   "and are attended by every token"),
    "bigbird": ("Window + global + random (BigBird)", "Longformer's pattern and r random keys per query"),
}
# The published settings, for the FLOPs at long inputs: Longformer's window of 512 (256 a side) with
# [CLS] global; BigBird-ITC's blocks of 64: a 3-block window, 2 global blocks and 3 random blocks.
PUBLISHED = {"local": dict(window=256), "longformer": dict(window=256, n_global=1),
             "bigbird": dict(window=96, n_global=128, n_random=192)}
LENGTHS = (512, 4096)


def pattern(T: int, kind: str, window: int = 2, n_global: int = 1, n_random: int = 0, seed: int = 0) -> torch.Tensor:
    """(T, T) bool: True where query i attends to key j. `window` keys on each side (itself included),
    `n_global` global tokens from the start, `n_random` extra random keys a query (BigBird)."""
    if kind not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {kind!r}")
    if min(window, n_global, n_random) < 0:
        raise ValueError("window, global tokens and random keys cannot be negative")
    if kind == "full":
        return torch.ones(T, T, dtype=torch.bool)
    i = torch.arange(T)
    keep = (i[:, None] - i[None, :]).abs() <= window  # (T, T) the band
    if kind in ("longformer", "bigbird") and n_global:
        keep[:n_global, :] = True  # global tokens see everything ...
        keep[:, :n_global] = True  # ... and everything sees them
    if kind == "bigbird" and n_random:
        g = torch.Generator().manual_seed(seed)
        scores = torch.rand(T, T, generator=g).masked_fill(keep, -1.0)  # only keys not kept yet
        picks = scores.topk(min(n_random, T), dim=-1)
        extra = torch.zeros_like(keep).scatter_(1, picks.indices, picks.values >= 0)  # a row with fewer free
        keep |= extra  # keys takes what is left
    return keep


def band_pairs(T: int, window: int) -> int:
    """Pairs inside a band of `window` keys a side, in closed form: T(2w+1) - w(w+1) while w < T."""
    w = min(window, T - 1)
    return T * (2 * w + 1) - w * (w + 1)


def longformer_pairs(T: int, window: int, n_global: int) -> int:
    """The band among the T - g other tokens, and every pair with a global token: band + T² - (T - g)²."""
    g = min(n_global, T)
    return (band_pairs(T - g, window) if T > g else 0) + T * T - (T - g) ** 2


def coverage(attentions: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(L, A) the share of each head's attention that falls inside the pattern, averaged over queries:
    1.0 means the sparse layer would have computed everything this head uses."""
    return (attentions * keep).sum(-1).mean(-1)  # attentions (L, A, T, T), rows sum to 1


def flops_at(c: BertConfig, T: int, kind: str, **settings) -> dict:
    """Forward FLOPs of one sequence of T tokens with this pattern in every layer: the attention scores and
    the weighted values cost 2·H FLOPs per kept pair each; the projections and feed-forward are unchanged."""
    full = flops(c, T, heads=False)
    pairs = T * T if kind == "full" else int(pattern(T, kind, **settings).sum())
    attention_full = full["attention_scores"] + full["attention_values"]
    attention = attention_full * pairs // (T * T)
    total = full["total"] - attention_full + attention
    return {"tokens": T, "pattern": kind, "pairs": pairs, "pair_share": pairs / (T * T),
            "attention_flops": attention, "total_flops": total, "full_total_flops": full["total"],
            "saved": 1 - total / full["total"], "attention_share_of_full": attention_full / full["total"]}


def flops_table(c: BertConfig, lengths=LENGTHS) -> list[dict]:
    """Every pattern at the published settings, at each length (a pattern's window capped by the length)."""
    return [flops_at(c, T, kind, **PUBLISHED.get(kind, {})) for T in lengths for kind in PATTERNS]
