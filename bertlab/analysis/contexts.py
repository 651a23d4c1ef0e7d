"""Other contexts of a token (as in exBERT): the nearest neighbours of one token's vector among the
token vectors of a bounded set of sentences, at one layer. An index keeps every layer of one forward
pass as unit rows in float16, bounded in bytes: a big model indexes fewer sentences, not more memory."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import family
from ..model import device_of
from . import words

INDEX_BYTES = 48_000_000  # 18,000 tokens × 5 layers of a 256-wide model
MAX_LEN = 40  # sentences are cut to this many pieces (with [CLS]/[SEP])


@dataclass
class Index:
    """Every non-special token of `sentences`: vectors (L+1, N, H) unit rows in float16 (layer 0 =
    embedding output); token_ids, sentence, position, whole (N,): whole = not followed by a ## piece.
    offsets[s][p] is piece p's character span in sentences[s]."""
    sentences: list[str]
    offsets: list[list[tuple[int, int]]]
    pieces: list[list[str]]
    vectors: torch.Tensor
    token_ids: torch.Tensor
    sentence: torch.Tensor
    position: torch.Tensor
    whole: torch.Tensor

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.vectors, self.token_ids, self.sentence,
                                                           self.position, self.whole)) + 300 * len(self.sentences)


def _encoder(model):
    return family.encoder_of(model)


@torch.no_grad()
def hidden(model, tok, sentences: list[str], max_len: int = MAX_LEN):
    """(encodings, hidden (L+1, B, T, H) float32) for a batch of sentences, each alone."""
    enc = _encoder(model)
    limit = min(max_len, tok.model_max_length, enc.config.max_tokens)
    encs = [tok.encode(s, max_length=limit) for s in sentences]
    batch = tok.encode_batch(sentences, max_length=limit)
    device = device_of(enc)  # the tokenizer pads into CPU tensors
    out = enc(batch["input_ids"].to(device), batch["token_type_ids"].to(device),
              batch["attention_mask"].to(device), output_hidden_states=True)
    return encs, torch.stack(out.hidden_states).float().cpu()  # (L+1, B, T, H)


def build_index(model, tok, sentences: list[str], max_bytes: int = INDEX_BYTES, batch_size: int = 64) -> Index:
    """Index sentences in order until the vectors would pass `max_bytes` (float16: 2 bytes a number)."""
    c = _encoder(model).config
    budget = max(1, max_bytes // (2 * c.hidden_size * (c.num_hidden_layers + 1) + 11))  # tokens that fit
    kept, offs, pcs, vecs, meta, n = [], [], [], [], [], 0
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        encs, h = hidden(model, tok, chunk)
        for b, (text, e) in enumerate(zip(chunk, encs)):
            real = [t for t, s in enumerate(e.special_tokens_mask) if not s]
            if not real or n + len(real) > budget:
                continue
            s, toks = len(kept), e.tokens
            kept.append(text)
            offs.append(list(e.offsets))
            pcs.append(list(toks))
            vecs.append(F.normalize(h[:, b, real], dim=-1).half())  # (L+1, n, H)
            w = e.word_ids  # a piece ends its word where the next piece belongs to another word
            meta += [(e.ids[t], s, t, t + 1 >= len(toks) or w[t + 1] != w[t]) for t in real]
            n += len(real)
        if n >= budget:
            break
    if not vecs:
        raise ValueError("none of the sentences has a token to index")
    ids, sent, pos, whole = zip(*meta)
    return Index(kept, offs, pcs, torch.cat(vecs, 1), torch.tensor(ids, dtype=torch.int32),
                 torch.tensor(sent, dtype=torch.int32), torch.tensor(pos, dtype=torch.int16), torch.tensor(whole))


def find_token(tok, sentence: str, word: str, max_len: int = MAX_LEN) -> int:
    """The position of `word`'s first piece, as a whole word, in `sentence`; ValueError if absent."""
    target = tok.encode(word.strip(), max_length=10**9).tokens[1:-1]
    if not target:
        raise ValueError(f"the word {word!r} has no tokens after tokenisation")
    e = tok.encode(sentence, max_length=max_len)
    hits, _ = words.find(tok, sentence, word, e)
    if hits:
        return hits[0][0]
    raise ValueError(f"the word {word.strip()!r} is not in the sentence"
                     + (f" within its first {max_len} pieces" if e.truncated else ""))


def query_vector(model, tok, sentence: str, word: str, layer: int) -> tuple[torch.Tensor, int, str]:
    """(the vector (H,) of `word`'s first piece in `sentence` at `layer`, its token id, the piece)."""
    p = find_token(tok, sentence, word)
    encs, h = hidden(model, tok, [sentence])
    return h[layer, 0, p], encs[0].ids[p], encs[0].tokens[p]


def nearest(index: Index, query: torch.Tensor, layer: int, k: int = 10, token_id: int | None = None) -> list[dict]:
    """The k entries most cosine-similar to `query` (H,) at `layer`; only whole-word occurrences of
    `token_id` when given."""
    sims = index.vectors[layer].float() @ F.normalize(query.float(), dim=-1)  # (N,)
    rows = torch.arange(sims.numel(), device=sims.device)
    if token_id is not None:
        rows = rows[(index.token_ids == token_id) & index.whole]
        sims = sims[rows]
    top = sims.topk(min(k, sims.numel()))
    out = []
    for sim, r in zip(top.values.tolist(), rows[top.indices].tolist()):
        s, p = int(index.sentence[r]), int(index.position[r])
        out.append({"sentence": index.sentences[s], "position": p, "token": index.pieces[s][p],
                    "span": list(index.offsets[s][p]), "similarity": round(float(sim), 4)})
    return out
