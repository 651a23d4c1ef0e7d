"""Where a word is: the position table a model learnt beside the Transformer paper's fixed sinusoidal one,
and what attention does without either (shuffle the words and nothing but the order of the outputs changes)."""
from __future__ import annotations

import contextlib
import random

import torch
import torch.nn.functional as F

from .. import family
from ..model import device_of, position_tables, sinusoidal_table


def similarity(table: torch.Tensor) -> torch.Tensor:
    """(P, P) cosine similarities of every pair of rows of a (P, H) position table."""
    v = F.normalize(table.float(), dim=-1)
    return (v @ v.T).clamp(-1, 1)


def by_distance(sim: torch.Tensor) -> list[float]:
    """Mean similarity of all pairs k positions apart, for k = 0..P-1."""
    return [float(sim.diagonal(k).mean()) for k in range(sim.size(0))]


def tables(model) -> dict:
    """The model's own position table and a sinusoidal one of the same shape; `fixed` says whether the
    model's table is that sinusoidal one (a run pre-trained with positions = sinusoidal)."""
    learned = family.encoder_of(model).embeddings.position_embeddings.weight.detach().float().cpu()  # (P, H)
    sines = sinusoidal_table(*learned.shape)
    scale = float((learned * sines).sum() / (sines * sines).sum())  # a sinusoidal table of any size counts
    fixed = scale > 0 and bool(torch.allclose(learned, scale * sines, atol=1e-6 * max(1.0, scale)))
    return {"learned": learned, "sinusoidal": sines, "fixed": fixed}


@contextlib.contextmanager
def positions_off(model):
    """Zero every position table for the time of the block (weights restored exactly afterwards): the
    model then sees each word's vector and segment, and nothing that says where the word is."""
    saved = [t.weight.detach().clone() for t in position_tables(model)]
    try:
        with torch.no_grad():
            for t in position_tables(model):
                t.weight.zero_()
        yield model
    finally:
        with torch.no_grad():
            for t, w in zip(position_tables(model), saved):
                t.weight.copy_(w)


def shuffled_order(n: int, seed: int) -> list[int]:
    """A seeded permutation of range(n) that moves something (the identity would show nothing)."""
    order = list(range(n))
    if n < 2:
        return order
    rng = random.Random(seed)
    while order == list(range(n)):
        rng.shuffle(order)
    return order


@torch.no_grad()
def shuffle_test(model, tok, text: str, seed: int = 0) -> dict:
    """Run `text` and a shuffle of its words (special tokens stay in place), with the position tables as
    they are and with them zeroed. Attention without positions is permutation-equivariant: each word's
    last-layer vector is the same wherever the word stands, so [CLS] cannot tell "the man bit the dog"
    from "the dog bit the man". For each word: the cosine between its vectors in the two orders."""
    text = " ".join(text.split())
    if not text:
        raise ValueError("write a sentence to shuffle")
    enc = tok.encode(text)
    ids = list(enc.ids)
    if len(ids) > model.config.max_tokens:
        raise ValueError(f"{len(ids)} tokens: this model reads at most {model.config.max_tokens}; shorten it")
    words = [i for i, t in enumerate(ids) if t not in tok.special_ids]
    if len(set(ids[i] for i in words)) < 2:
        raise ValueError("write two or more different words: a shuffle of one word changes nothing")
    order = shuffled_order(len(words), seed)
    while [ids[words[j]] for j in order] == [ids[i] for i in words]:  # repeated words: shuffle to another text
        seed += 1
        order = shuffled_order(len(words), seed)
    perm = list(range(len(ids)))  # new position -> old position
    for slot, j in zip(words, order):
        perm[slot] = words[j]
    shuffled = [ids[p] for p in perm]
    where = {old: new for new, old in enumerate(perm)}  # old position -> where that token went
    dev = device_of(model)
    types = torch.tensor([enc.token_type_ids], device=dev)

    def last(x: list[int]) -> torch.Tensor:  # (T, H) the last layer's vectors
        return model(torch.tensor([x], device=dev), types).last_hidden_state[0].float().cpu()

    on = (last(ids), last(shuffled))
    with positions_off(model):
        off = (last(ids), last(shuffled))
    back = torch.tensor([where[i] for i in range(len(ids))])  # each original token's row in the shuffle

    def cos(pair) -> list[float]:
        return F.cosine_similarity(pair[0], pair[1][back], dim=-1).tolist()

    on_cos, off_cos = cos(on), cos(off)
    rows = [{"position": i, "token": tok.id_to_token(t), "moved_to": where[i],
             "with_positions": on_cos[i], "without_positions": off_cos[i]} for i, t in enumerate(ids)]
    return {"tokens": [tok.id_to_token(t) for t in ids], "shuffled": [tok.id_to_token(t) for t in shuffled],
            "shuffled_text": tok.decode(shuffled), "rows": rows,
            "max_diff_without": float((off[0] - off[1][back]).abs().max()),
            "max_diff_with": float((on[0] - on[1][back]).abs().max()),
            "cls_with": on_cos[0], "cls_without": off_cos[0]}
