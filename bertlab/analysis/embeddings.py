"""Contextual embeddings: how one word's vector changes with its sentence, layer by layer. One
batched forward pass, plain lists out; the 2-D map is an exact, sign-fixed PCA by SVD (deterministic)."""
from __future__ import annotations

import itertools
from types import SimpleNamespace
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import family
from ..model import device_of
from . import words

MAX_SENTENCES = 8
POOLINGS = ("cls", "mean", "max")


@dataclass
class States:
    """One forward pass: hidden (L+1, B, T, H) in float64, layer 0 = the embedding output."""
    sentences: list[str]
    tokens: list[list[str]]  # per sentence, with [CLS]/[SEP], no padding
    special: list[list[int]]  # 1 for [CLS]/[SEP]
    hidden: torch.Tensor
    truncated: list[bool]
    full_ids: list[list[int]]  # the untruncated pieces, to tell "missing" from "cut off"
    ids: list[list[int]]
    offsets: list[list[tuple[int, int]]]  # each token's characters in its sentence

    @property
    def num_layers(self) -> int:
        return self.hidden.size(0) - 1


def check_sentences(sentences) -> list[str]:
    """Between 2 and MAX_SENTENCES non-blank strings."""
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)):
        raise TypeError(f"sentences must be a list of strings, got {type(sentences).__name__}")
    for s in sentences:
        if not isinstance(s, str):
            raise TypeError(f"every sentence must be a str, got {type(s).__name__}")
    out = [s.strip() for s in sentences if s.strip()]
    if len(out) < 2:
        raise ValueError("give at least 2 sentences, one per line")
    if len(out) > MAX_SENTENCES:
        raise ValueError(f"{len(out)} sentences: at most {MAX_SENTENCES} at once")
    return out


def short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@torch.no_grad()
def hidden_states(model, tok, sentences) -> States:
    """Encode each sentence alone, cut to the model's length; one encoder pass (BertForPreTraining or BertModel)."""
    sentences = check_sentences(sentences)
    encoder = family.encoder_of(model)
    limit = min(tok.model_max_length, encoder.config.max_tokens)
    encs = [tok.encode(s, max_length=limit) for s in sentences]
    for i, e in enumerate(encs, 1):
        if all(e.special_tokens_mask):
            raise ValueError(f"sentence {i} ({short(sentences[i - 1])!r}) has no tokens left after "
                             "tokenisation (only control or invisible characters?)")
    batch = tok.encode_batch(sentences, max_length=limit)  # the same encodings, padded into tensors
    device = device_of(encoder)  # the tokenizer pads into CPU tensors
    out = encoder(batch["input_ids"].to(device), batch["token_type_ids"].to(device),
                  batch["attention_mask"].to(device), output_hidden_states=True)
    hidden = torch.stack(out.hidden_states).double().cpu()  # (L+1, B, T, H)
    full = [tok.encode(s, max_length=10**9).ids[1:-1] for s in sentences]
    return States(sentences, [e.tokens for e in encs], [e.special_tokens_mask for e in encs], hidden,
                  [e.truncated for e in encs], full, [e.ids for e in encs], [e.offsets for e in encs])


def word_positions(tok, states: States, word: str) -> tuple[list[list[int]], list[str]]:
    """The WordPiece positions of `word`'s first whole-word occurrence in every sentence, and notes."""
    if not isinstance(word, str):
        raise TypeError(f"the word must be a str, got {type(word).__name__}")
    if not word.strip():
        raise ValueError("the word is empty: type the word to follow through the sentences")
    target = tok.encode(word.strip(), max_length=10**9).ids[1:-1]
    if not target:
        raise ValueError(f"the word {word!r} has no tokens after tokenisation")
    if len(target) > 16:
        raise ValueError(f"the word is {len(target)} pieces long: give one word (or a short phrase)")
    positions, notes, missing, cut = [], [], [], []
    for i, sentence in enumerate(states.sentences):
        enc = SimpleNamespace(offsets=states.offsets[i], special_tokens_mask=states.special[i])
        hits, in_text = words.find(tok, sentence, word, enc)
        if not hits:
            (cut if in_text else missing).append(i + 1)
            continue
        if len(hits) > 1:
            notes.append(f"sentence {i + 1} has {word.strip()!r} {len(hits)} times; the first is used")
        positions.append(hits[0])
    if missing:
        where = " nor ".join(f"sentence {i} ({short(states.sentences[i - 1])!r})" for i in missing)
        raise ValueError(f"the word {word.strip()!r} is not in {where}")
    if cut:
        where = ", ".join(str(i) for i in cut)
        raise ValueError(f"the word {word.strip()!r} in sentence {where} lies beyond the model's "
                         f"{len(states.tokens[cut[0] - 1])}-token limit: shorten the sentence")
    return positions, notes


def word_similarity(tok, states: States, word: str) -> dict:
    """Cosine similarity of the word's vector (mean of its pieces) between every pair of
    sentences, at every layer (0 = embedding output). Sentence numbers are 1-based."""
    positions, notes = word_positions(tok, states, word)
    vecs = torch.stack([states.hidden[:, i, pos].mean(1) for i, pos in enumerate(positions)], 1)  # (L+1, B, H)
    pairs = [{"a": a + 1, "b": b + 1,
              "similarity": F.cosine_similarity(vecs[:, a], vecs[:, b], dim=-1).clamp(-1, 1).tolist()}
             for a, b in itertools.combinations(range(vecs.size(1)), 2)]
    mean = torch.tensor([p["similarity"] for p in pairs]).mean(0).tolist()
    return {"word": word.strip(), "layers": list(range(states.num_layers + 1)),
            "positions": positions, "pieces": [[states.tokens[i][p] for p in pos] for i, pos in enumerate(positions)],
            "pairs": pairs, "mean_similarity": mean, "notes": notes}


def check_layer(layer, num_layers: int) -> int:
    """0..L; negative counts from the top (-1 = last layer)."""
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"layer must be an integer, got {layer!r}")
    if not -(num_layers + 1) <= layer <= num_layers:
        raise ValueError(f"layer must be from 0 to {num_layers} (this model has {num_layers} layers), got {layer}")
    return layer % (num_layers + 1)


def pool(states: States, layer: int, how: str = "mean") -> torch.Tensor:
    """(B, H) sentence vectors at `layer`: [CLS]'s, or the mean / max over the other real tokens."""
    if how not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {how!r}")
    h = states.hidden[check_layer(layer, states.num_layers)]  # (B, T, H)
    if how == "cls":
        return h[:, 0]
    rows = [h[i, [t for t, s in enumerate(special) if not s]] for i, special in enumerate(states.special)]
    return torch.stack([x.mean(0) if how == "mean" else x.max(0).values for x in rows])


def cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """(B, H) -> (B, B) cosine similarities: exactly symmetric with ones on the diagonal."""
    v = F.normalize(vectors.double(), dim=-1)
    s = (v @ v.T).clamp(-1, 1)
    s = (s + s.T) / 2
    s.fill_diagonal_(1.0)
    return s


def pca_2d(x: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """Project (N, H) onto its first two principal axes -> (N, 2) and the variance share of each.
    Exact SVD of the centred data; each axis is signed so its largest loading is positive."""
    x = x.double()
    xc = x - x.mean(0, keepdim=True)
    _, s, vh = torch.linalg.svd(xc, full_matrices=False)
    k = min(2, vh.size(0))
    vh = vh[:k]
    flip = torch.sign(vh.gather(1, vh.abs().argmax(1, keepdim=True)))
    vh = vh * torch.where(flip == 0, torch.ones_like(flip), flip)
    coords = x.new_zeros(x.size(0), 2)
    coords[:, :k] = xc @ vh.T
    total = float((s ** 2).sum())
    ratio = [float(s[i] ** 2 / total) if total > 0 and i < k else 0.0 for i in range(2)]
    return coords, ratio


def token_map(states: States, layer: int, include_special: bool = False,
              targets: list[list[int]] | None = None) -> dict:
    """Every token vector of every sentence at `layer`, projected to 2-D by PCA."""
    layer = check_layer(layer, states.num_layers)
    rows, vecs = [], []
    for i, toks in enumerate(states.tokens):
        for t, piece in enumerate(toks):
            if states.special[i][t] and not include_special:
                continue
            rows.append({"sentence": i + 1, "position": t, "token": piece,
                         "target": bool(targets and t in targets[i])})
            vecs.append(states.hidden[layer, i, t])
    coords, ratio = pca_2d(torch.stack(vecs))
    for r, (x, y) in zip(rows, coords.tolist()):
        r["x"], r["y"] = x, y
    return {"layer": layer, "points": rows, "explained_variance": ratio}


def analyze(model, tok, sentences, word: str | None = None, layer: int = -1, pooling: str = "mean",
            include_special: bool = False) -> dict:
    """The whole Embeddings view as one JSON-able dict: word similarities, sentence matrix, PCA map."""
    states = hidden_states(model, tok, sentences)
    layer = check_layer(layer, states.num_layers)
    result = {"sentences": states.sentences, "num_layers": states.num_layers,
              "tokens": states.tokens, "notes": []}
    cut = [i + 1 for i, t in enumerate(states.truncated) if t]
    if cut:
        result["notes"].append(f"sentence {', '.join(map(str, cut))} cut to the model's "
                               f"{max(len(t) for t in states.tokens)}-token limit")
    targets = None
    if word is not None and (not isinstance(word, str) or word.strip()):
        result["word"] = word_similarity(tok, states, word)
        result["notes"] += result["word"].pop("notes")
        targets = result["word"]["positions"]
    result["matrix"] = {"layer": layer, "pooling": pooling,
                        "values": cosine_matrix(pool(states, layer, pooling)).tolist()}
    result["pca"] = token_map(states, layer, include_special, targets)
    return result
