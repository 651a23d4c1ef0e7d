"""Head finder: which heads follow neighbours, subject–verb pairs and long-range links? Word pairs are
marked on whole words, the model sees pieces, so attention is first brought to words as Clark et al.
(2019) did: attention *from* a split word is the mean over its pieces, attention *to* it the sum.
Every function but `run_set` is pure (attentions and pairs in, scores out), so tests build tensors.

A score is the mean attention from one end of a pair to the other over every pair of the set; top-1
is how often that word is the one the head attends to most (among the sentence's words)."""
from __future__ import annotations

from typing import Iterable

import torch

from .attention_views import forward

# relation -> its two directions (from -> to); a ranking keeps, per head, the better direction
RELATIONS = {"neighbours": ("previous word", "next word"),
             "subject–verb": ("verb → subject", "subject → verb"),
             "long-range": ("later → earlier", "earlier → later")}
MIN_LONG = 4  # a long-range link spans at least this many words
# Adjacent subject–verb pairs ("the audience loved") are what a previous/next-word head finds anyway:
# the subject–verb ranking counts only pairs at least this many words apart.
SV_MIN_GAP = 2


def word_spans(words: list[str]) -> list[tuple[int, int]]:
    """Character span of each word in ' '.join(words)."""
    spans, at = [], 0
    for w in words:
        spans.append((at, at + len(w)))
        at += len(w) + 1
    return spans


def align(words: list[str], offsets: list[tuple[int, int]], sequence_ids: list[int | None]) -> list[list[int]]:
    """Piece positions of each word of ' '.join(words), from the tokenizer's character offsets (any
    family's pieces: '##ing', 'Ġword', '▁word'); specials ([CLS], [SEP], pair text) belong to none."""
    groups: list[list[int]] = [[] for _ in words]
    spans = word_spans(words)
    for p, ((s, e), seq) in enumerate(zip(offsets, sequence_ids)):
        if seq != 0:
            continue
        for w, (ws, we) in enumerate(spans):
            if (s < we and e > ws) or (s == e and ws <= s < we):  # an empty span: a lone 'Ġ' before the word
                groups[w].append(p)
                break
    return groups


def word_attention(att: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
    """(..., T, T) piece attention -> (..., W, W) word attention: mean over the pieces of the word
    attending, sum over the pieces of the word attended to. A word with no pieces gets zeros."""
    T, W = att.shape[-1], len(groups)
    mean_from = att.new_zeros(W, T)  # on att's device and in its dtype
    sum_to = att.new_zeros(T, W)
    for w, g in enumerate(groups):
        if g:
            mean_from[w, g] = 1.0 / len(g)
            sum_to[g, w] = 1.0
    return mean_from @ att @ sum_to


def sentence_pairs(n_words: int, subject_verb: list, long_range: list) -> dict[str, list[tuple[int, int]]]:
    """Every direction of RELATIONS as (from word, to word) pairs for one annotated sentence
    (subject–verb pairs fewer than SV_MIN_GAP words apart left out)."""
    sv = [(int(s), int(v)) for s, v in subject_verb]
    lr = [(max(int(a), int(b)), min(int(a), int(b))) for a, b in long_range]
    for i, j in sv + lr:
        if not (0 <= i < n_words and 0 <= j < n_words) or i == j:
            raise ValueError(f"word pair ({i}, {j}) is not two different words of a {n_words}-word sentence")
    sv = [(s, v) for s, v in sv if abs(s - v) >= SV_MIN_GAP]
    return {"previous word": [(i, i - 1) for i in range(1, n_words)],
            "next word": [(i, i + 1) for i in range(n_words - 1)],
            "verb → subject": [(v, s) for s, v in sv], "subject → verb": sv,
            "later → earlier": lr, "earlier → later": [(j, i) for i, j in lr]}


def head_scores(items: Iterable[tuple[torch.Tensor, list[list[int]], dict]]) -> dict[str, dict]:
    """Per direction, over all sentences: mean attention (L, A), top-1 share (L, A), the number of
    pairs and `chance`, what a head spreading attention evenly over all T pieces would score.
    `items`: (attentions (L, A, T, T), word groups, sentence_pairs(...)) per sentence."""
    acc: dict[str, dict] = {}
    for att, groups, pairs in items:
        wa = word_attention(att.double(), groups)  # (L, A, W, W)
        T = att.shape[-1]
        for direction, ps in pairs.items():
            ps = [(i, j) for i, j in ps if groups[i] and groups[j]]  # a word the model never saw: skipped
            a = acc.setdefault(direction, {"sum": 0.0, "top1": 0.0, "n": 0, "chance": 0.0})
            for i, j in ps:
                row = wa[..., i, :]  # (L, A, W)
                a["sum"] = a["sum"] + row[..., j]
                a["top1"] = a["top1"] + (row.argmax(-1) == j).double()
                a["n"] += 1
                a["chance"] += len(groups[j]) / T
    out = {}
    for direction, a in acc.items():
        n = max(a["n"], 1)
        zero = isinstance(a["sum"], float)
        out[direction] = {"mean": None if zero else (a["sum"] / n).float(),
                          "top1": None if zero else (a["top1"] / n).float(),
                          "n": a["n"], "chance": a["chance"] / n}
    return out


def rankings(scores: dict[str, dict], top: int = 5) -> dict[str, list[dict]]:
    """Per relation, heads by their better direction's mean attention, best first (layers and heads
    counted from 1), and the (L, A) grid of those best scores under "grid"."""
    out = {}
    for relation, dirs in RELATIONS.items():
        have = [d for d in dirs if scores.get(d, {}).get("mean") is not None]
        if not have:
            continue
        stack = torch.stack([scores[d]["mean"] for d in have])  # (D, L, A)
        best, which = stack.max(0)
        L, A = best.shape
        order = best.flatten().argsort(descending=True)[:top].tolist()
        rows = []
        for k in order:
            layer, head = divmod(k, A)
            d = have[int(which[layer, head])]
            rows.append({"relation": relation, "layer": layer + 1, "head": head + 1, "direction": d,
                         "score": float(best[layer, head]), "top1": float(scores[d]["top1"][layer, head]),
                         "chance": scores[d]["chance"], "pairs": scores[d]["n"]})
        out[relation] = {"top": rows, "grid": best, "direction": [[have[int(x)] for x in r] for r in which]}
    return out


def pair_grid(att: torch.Tensor, x: int, y: int) -> torch.Tensor:
    """(L, A): attention from piece x to piece y in every layer and head."""
    T = att.shape[-1]
    if not (0 <= x < T and 0 <= y < T):
        raise ValueError(f"tokens {x} and {y}: this text has tokens 0 to {T - 1}")
    return att[..., x, y]


@torch.no_grad()
def run_set(model, tok, sentences: list[dict]) -> dict[str, dict]:
    """`head_scores` of the model on annotated sentences ({"words", "subject_verb", "long_range"})."""
    items = []
    for s in sentences:
        words = s["words"]
        enc = tok.encode(" ".join(words))
        att, _ = forward(model, enc.ids, enc.token_type_ids)  # (L, A, T, T)
        items.append((att, align(words, enc.offsets, enc.sequence_ids),
                      sentence_pairs(len(words), s["subject_verb"], s["long_range"])))
    return head_scores(items)
