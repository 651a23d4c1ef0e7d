"""Static against contextual vectors. The input-embedding table gives a word one row whatever its
sentence (what Word2Vec and GloVe give); every layer above gives it a vector made from its sentence
(what ELMo and BERT give). One forward pass: the word's rows, their nearest rows in the table, and the
word's vectors in each sentence at each layer with their nearest words among the sentences."""
from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from .. import family
from ..tokenizer import special_token_ids
from . import embeddings as E

NEIGHBOURS = 5


def table(model) -> torch.Tensor:
    """The input word-embedding table (V, E) in float64: row i is piece i's vector in every sentence."""
    return family.encoder_of(model).embeddings.word_embeddings.weight.detach().double().cpu()


def nearest_rows(tok, weights: torch.Tensor, vector: torch.Tensor, k: int = NEIGHBOURS, leave_out=()) -> list[dict]:
    """The k rows of `weights` nearest `vector` by cosine, among ordinary pieces only: no special
    token, no [unusedN] placeholder, none of the ids in `leave_out` (the word's own pieces)."""
    ids = special_token_ids(tok).random  # (n,) every ordinary id
    ids = ids[~torch.isin(ids, torch.tensor(sorted(leave_out), dtype=torch.long))]
    sims = F.normalize(weights[ids], dim=-1) @ F.normalize(vector.double(), dim=0)  # (n,)
    top = sims.topk(min(k, ids.numel()))
    return [{"token": tok.id_to_token(int(ids[j])), "id": int(ids[j]), "cosine": float(c)}
            for c, j in zip(top.values.tolist(), top.indices.tolist())]


def _words(tok, model, states: E.States) -> list[list[tuple[list[int], str]]]:
    """Per sentence, its words as (piece positions, text): a word's pieces share a word id."""
    limit = min(tok.model_max_length, family.encoder_of(model).config.max_tokens)  # as E.hidden_states cuts
    out = []
    for s, sentence in enumerate(states.sentences):
        e = tok.encode(sentence, max_length=limit)
        groups: dict = {}
        for t, w in enumerate(e.word_ids):
            if w is not None and not states.special[s][t]:
                groups.setdefault(w, []).append(t)
        out.append([(p, sentence[states.offsets[s][p[0]][0]:states.offsets[s][p[-1]][1]]) for p in groups.values()])
    return out


def static_vs_contextual(model, tok, word: str, sentences, k: int = NEIGHBOURS) -> dict:
    """`word` in each sentence: its static vector (the mean of its pieces' table rows, before position
    and segment are added) and the cosine of those between sentences; then its contextual vector (the
    mean of its pieces' hidden states) at layers 0..L, their cosines, and each one's k nearest words
    among all the sentences' other words (a word = the mean of its pieces; punctuation left out).
    Sentence numbers from 1."""
    states = E.hidden_states(model, tok, sentences)
    ctx = E.word_similarity(tok, states, word)
    positions = ctx["positions"]
    ids = [[states.ids[s][p] for p in pos] for s, pos in enumerate(positions)]
    specials = special_token_ids(tok).all
    for s, row in enumerate(ids):
        named = [states.tokens[s][p] for p, i in zip(positions[s], row) if i in specials]
        if named:
            raise ValueError(f"the word {word.strip()!r} is read as {' '.join(named)} in sentence {s + 1}: "
                             "the table has no row of its own for it; try another word")
    weights = table(model)
    rows = torch.stack([weights[r].mean(0) for r in ids])  # (B, E) the word's static vector in each sentence
    pairs = []
    for a, b in itertools.combinations(range(len(ids)), 2):
        same = bool(torch.equal(rows[a], rows[b]))  # then the cosine is 1 exactly (float division says 1 - 1e-16)
        cos = 1.0 if same else float(F.cosine_similarity(rows[a], rows[b], dim=0).clamp(-1, 1))
        pairs.append({"a": a + 1, "b": b + 1, "cosine": cos, "identical": same})
    spellings = list(dict.fromkeys(tuple(r) for r in ids))  # one unless a tokenizer spells it by its place
    static = [{"pieces": [tok.id_to_token(i) for i in sp],
               "neighbours": nearest_rows(tok, weights, weights[list(sp)].mean(0), k, set(sp))} for sp in spellings]
    words = _words(tok, model, states)
    cands = [(s, p, text) for s, ws in enumerate(words) for p, text in ws  # punctuation left out: no sense to it
             if not set(p) & set(positions[s]) and any(ch.isalnum() for ch in text)]
    if not cands:
        raise ValueError("the sentences have no other word to compare the word with: write longer sentences")
    neighbours = []
    for layer in range(states.num_layers + 1):
        h = states.hidden[layer]  # (B, T, H)
        others = F.normalize(torch.stack([h[s, p].mean(0) for s, p, _ in cands]), dim=-1)  # (N, H)
        per = []
        for s, pos in enumerate(positions):
            sims = others @ F.normalize(h[s, pos].mean(0), dim=0)  # (N,)
            top = sims.topk(min(k, len(cands)))
            per.append([{"word": cands[j][2], "sentence": cands[j][0] + 1, "cosine": float(c)}
                        for c, j in zip(top.values.tolist(), top.indices.tolist())])
        neighbours.append(per)
    return {"word": ctx["word"], "sentences": states.sentences, "num_layers": states.num_layers,
            "positions": positions, "pieces": ctx["pieces"], "table": list(weights.shape),
            "static": {"identical": all(p["identical"] for p in pairs), "pairs": pairs, "spellings": static},
            "layers": ctx["layers"], "pairs": ctx["pairs"], "neighbours": neighbours, "notes": ctx["notes"]}
