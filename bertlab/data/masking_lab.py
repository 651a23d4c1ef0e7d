"""Numbers for the masking lab: one masked draw of a sentence, and what many draws add up to.
Both call `mask_tokens`, pre-training's own function, so the student sees exactly what the model saw."""
from __future__ import annotations

import weakref

import torch

from ..tokenizer import special_token_ids
from .masking import (IGNORE_INDEX, KEPT, MASKED, NOT_SELECTED, RANDOM, mask_tokens, special_tokens_mask,
                      word_continuation, word_ids_from_pieces)

RULE_NAMES = {NOT_SELECTED: "not selected", MASKED: "[MASK]", RANDOM: "random", KEPT: "kept"}
MAX_SAMPLES = 5000
_continuation: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _cont_table(tok) -> torch.Tensor:
    """(V,) bool table of the pieces that continue a word, by the tokenizer's kind ('##ing'; not 'Ġfilm' or
    '▁film'), built once per tokenizer (a vocabulary scan is ~10 ms for 30k tokens)."""
    table = _continuation.get(tok)
    if table is None:
        table = _continuation[tok] = word_continuation(tok)
    return table


def mask_kwargs(tok, rate: float, mask_frac: float = 0.8, random_frac: float = 0.1, spans: bool = False) -> dict:
    """The arguments pre-training's Batcher passes: [MASK] and the random replacements from the tokenizer;
    the shares of the selected tokens that become [MASK] and a random token (the rest stay); spans or not."""
    special = special_token_ids(tok)
    return dict(mask_token_id=special.mask, random_ids=special.random, rate=float(rate),
                mask_frac=float(mask_frac), random_frac=float(random_frac), spans=bool(spans))


def prepare(tok, ids, whole_word: bool):
    """(ids (T,), special mask (T,), word ids (T,) or None) for `mask_tokens`."""
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    special = special_tokens_mask(ids, special_token_ids(tok).all)  # [CLS] [SEP] [UNK] [MASK] [PAD]: never picked
    words = word_ids_from_pieces(ids[None], _cont_table(tok), special[None])[0] if whole_word else None
    return ids, special, words


def preview(tok, ids, rate: float = 0.15, whole_word: bool = False, seed: int = 0, mask_frac: float = 0.8,
            random_frac: float = 0.1, spans: bool = False) -> dict:
    """One draw: per position the rule code, the id the model sees, and the label (original id). The
    shares only move the rule thresholds: the same seed selects the same positions whatever they are."""
    ids_t, special, words = prepare(tok, ids, whole_word or spans)  # spans are runs of whole words
    g = torch.Generator().manual_seed(int(seed))
    m = mask_tokens(ids_t, special, word_ids=words, generator=g,
                    **mask_kwargs(tok, rate, mask_frac, random_frac, spans))
    return {"rule": m.rule.tolist(), "input_ids": m.input_ids.tolist(), "labels": m.labels.tolist(),
            "word_ids": None if words is None else words.tolist(),
            "eligible": int((~special).sum())}


def expected_share(rate: float, word_lengths: list[int]) -> float:
    """Expected share of eligible tokens selected, with the at-least-one-per-sequence rule: the forced
    position is uniform over eligible tokens, so a word of length l is forced with probability l / n."""
    n = sum(word_lengths)
    if n == 0:
        return 0.0
    p_none = (1.0 - rate) ** len(word_lengths)
    return rate + p_none * sum(l * l for l in word_lengths) / (n * n)


def span_share(rate: float, eligible: int) -> float:
    """The share spans hide in every draw: their budget, round(rate × eligible tokens), at least one (a
    row of whole words of several pieces may miss it by less than half a word)."""
    return max(1, round(rate * eligible)) / eligible if eligible else 0.0


def sample_stats(tok, ids, rate: float = 0.15, whole_word: bool = False, n_samples: int = 200,
                 seed: int = 0, mask_frac: float = 0.8, random_frac: float = 0.1, spans: bool = False) -> dict:
    """Count what `n_samples` independent masks of one sequence (one per epoch, as in training) did."""
    n = n_samples
    if isinstance(n, bool) or not isinstance(n, (int, float)) or int(n) != n or not 1 <= n <= MAX_SAMPLES:
        raise ValueError(f"the number of samples must be a whole number from 1 to {MAX_SAMPLES}, got {n!r}")
    n = int(n)
    ids_t, special, words = prepare(tok, ids, whole_word or spans)
    eligible = int((~special).sum())
    if eligible == 0:
        raise ValueError("nothing to mask: every token is [CLS], [SEP], [UNK] or [MASK]")
    B = lambda x: None if x is None else x[None].expand(n, -1).contiguous()  # noqa: E731
    g = torch.Generator().manual_seed(int(seed) + 1_000_003)  # not the preview's draw
    m = mask_tokens(B(ids_t), B(special), word_ids=B(words), generator=g,
                    **mask_kwargs(tok, rate, mask_frac, random_frac, spans))
    counts = {name: int((m.rule == code).sum()) for code, name in RULE_NAMES.items() if code}
    selected = sum(counts.values())
    lengths = [1] * eligible if words is None else \
        torch.unique_consecutive(words[words >= 0], return_counts=True)[1].tolist()
    return {
        "samples": n, "eligible_tokens": eligible, "words": len(lengths), "selected_tokens": selected,
        "selected_share": selected / (n * eligible),
        "expected_share": span_share(float(rate), eligible) if spans else expected_share(float(rate), lengths),
        "rate": float(rate),
        "counts": counts,
        "split": {k: (v / selected if selected else 0.0) for k, v in counts.items()},
        "expected_split": {"[MASK]": float(mask_frac), "random": float(random_frac),
                           "kept": max(0.0, round(1.0 - float(mask_frac) - float(random_frac), 12))},
        # whole words share one rule, so the split is over words there, and noisier per token
        "whole_word": bool(whole_word), "spans": bool(spans),
        "mean_run": mean_run(m.labels != IGNORE_INDEX),  # in pieces: masked words come in runs with spans
        "mean_run_words": None if words is None else mean_run_words(m.labels != IGNORE_INDEX, words),
    }


def _runs(selected: torch.Tensor) -> int:
    """How many runs of consecutive selected positions (B, T) `selected` holds."""
    x = selected.int()
    return int((x[:, 1:] > x[:, :-1]).sum() + x[:, 0].sum())


def mean_run(selected: torch.Tensor) -> float:
    """Mean length, in tokens, of the runs of consecutive selected positions of (B, T) `selected`."""
    starts = _runs(selected)
    return float(selected.sum()) / starts if starts else 0.0


def mean_run_words(selected: torch.Tensor, words: torch.Tensor) -> float:
    """The same runs counted in words: (B, T) `selected`, (T,) word ids (-1 at specials)."""
    starts = _runs(selected)
    first = torch.cat([words[:1] >= 0, (words[1:] != words[:-1]) & (words[1:] >= 0)])  # (T,) a word's first piece
    return float((selected & first).sum()) / starts if starts else 0.0
