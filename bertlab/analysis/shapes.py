"""Encoder, decoder, encoder-decoder: BERT's parameters and forward FLOPs beside GPT-2's (decoder only)
and T5's (an encoder and a decoder), by plain arithmetic on their configs, in one layout of parts so the
three read side by side. tests/test_shapes.py checks every part against transformers' own classes
(built on the meta device) and the FLOPs against torch's FLOP counter.

FLOPs are forward, matmuls only: 2 per weight a token passes through (a tied output layer is a matmul
too, though its weights are the word table's) plus attention's scores and mixing, which grow with the
length. Dense kernels compute a decoder's whole T×T score matrix and mask half of it; so do we."""
from __future__ import annotations

from ..config import BertConfig
from .sizing import embedding_params, flops, known_config

# The parts every shape is counted in. "positions": GPT-2's and BERT's learned position table, T5's
# relative-position buckets (one small table per stack, read by its first layer); "head": BERT's pooler,
# T5 v1.1's untied output layer (a tied one adds no weights); LayerNorms sit in "norms".
PARTS = ("embeddings", "positions", "attention", "cross_attention", "feed_forward", "norms", "head")
MAX_LEN = 512  # the longest input BERT reads (GPT-2 reads 1024; T5's relative positions have no limit)


def _linear(n_in: int, n_out: int) -> int:  # sizing's own are private to it (tests/test_layers.py)
    return n_in * n_out + n_out


def _layer_norm(h: int) -> int:
    return 2 * h  # gain and bias (T5's scale-only norms count d each, inline)


def _count(**parts) -> dict:
    d = {k: parts.get(k, 0) for k in PARTS}
    d["total"] = sum(d.values())
    return d


# ---- GPT-2: decoder only ---------------------------------------------------------------------------
GPT2_VOCAB, GPT2_POSITIONS = 50_257, 1024  # byte-level BPE's words; the context


def gpt2_params(n_layer: int, n_embd: int, n_head: int, vocab: int = GPT2_VOCAB,
                n_positions: int = GPT2_POSITIONS) -> dict:
    """GPT2LMHeadModel: learned positions, pre-LN (two LayerNorms a layer and a final one), a 4× MLP,
    biases everywhere, and the output layer tied to the word table (no weights of its own)."""
    d = n_embd
    if d % n_head:
        raise ValueError(f"n_embd ({d}) must be divisible by n_head ({n_head})")
    return _count(embeddings=vocab * d, positions=n_positions * d,
                  attention=n_layer * (_linear(d, 3 * d) + _linear(d, d)),  # c_attn (Q, K, V), c_proj
                  feed_forward=n_layer * (_linear(d, 4 * d) + _linear(4 * d, d)),
                  norms=(2 * n_layer + 1) * _layer_norm(d))


def gpt2_flops(n_layer: int, n_embd: int, n_head: int, vocab: int = GPT2_VOCAB, seq_len: int = GPT2_POSITIONS) -> dict:
    """Forward FLOPs per token, averaged over a `seq_len`-token sequence: logits at every position."""
    d = n_embd
    matmul = 2 * (n_layer * (3 * d * d + d * d + 8 * d * d) + d * vocab)  # layers, then the tied head
    attention = n_layer * 4 * seq_len * d  # Q·Kᵀ and probs·V: 2·T·d each, per token
    return {"matmul": matmul, "attention": attention, "total": matmul + attention, "tokens": seq_len}


# ---- T5: encoder-decoder ---------------------------------------------------------------------------
def t5_params(d_model: int, d_ff: int, num_layers: int, num_heads: int, d_kv: int = 64,
              num_decoder_layers: int | None = None, vocab: int = 32_128, buckets: int = 32,
              tied: bool = True, gated: bool = False) -> dict:
    """T5ForConditionalGeneration. No biases; LayerNorms scale only (RMS, one weight per feature); one
    word table both stacks and (tied, T5 v1.0) the output layer share; T5 v1.1 unties the output layer
    (tied=False) and gates its feed-forward (gated=True: two input matrices). Each decoder layer
    attends to itself and then to the encoder's output (cross-attention), with a norm before each."""
    d, inner, L = d_model, num_heads * d_kv, num_layers
    Ld = L if num_decoder_layers is None else num_decoder_layers
    attention = 4 * d * inner  # q, k, v, o
    ffn = (3 if gated else 2) * d * d_ff
    return _count(embeddings=vocab * d, positions=2 * buckets * num_heads,  # one table per stack
                  attention=(L + Ld) * attention, cross_attention=Ld * attention,
                  feed_forward=(L + Ld) * ffn, norms=(2 * L + 1 + 3 * Ld + 1) * d,
                  head=0 if tied else d * vocab)


def t5_flops(d_model: int, d_ff: int, num_layers: int, num_heads: int, d_kv: int = 64,
             num_decoder_layers: int | None = None, vocab: int = 32_128, gated: bool = False,
             source: int = 512, target: int = 128) -> dict:
    """Forward FLOPs of one pair (a `source`-token input, a `target`-token output), per token of the two.
    The encoder reads the source once; each decoder layer projects the encoder's output to keys and
    values once (per source token), and every target token gets logits."""
    d, inner, L = d_model, num_heads * d_kv, num_layers
    Ld = L if num_decoder_layers is None else num_decoder_layers
    S, T, ffn = source, target, (3 if gated else 2) * d * d_ff
    matmul = 2 * (S * L * (4 * d * inner + ffn)  # encoder
                  + T * Ld * (4 * d * inner + 2 * d * inner + ffn)  # decoder: self, cross q and o, FFN
                  + S * Ld * 2 * d * inner  # cross-attention's keys and values of the source
                  + T * d * vocab)  # logits
    attention = L * 4 * S * S * inner + Ld * (4 * T * T * inner + 4 * T * S * inner)  # self; cross (T×S)
    n = S + T
    return {"matmul": matmul / n, "attention": attention / n, "total": (matmul + attention) / n, "tokens": n,
            "source": S, "target": T}


# ---- BERT, in the same parts ---------------------------------------------------------------------------
def bert_params(c: BertConfig) -> dict:
    """A BertModel (the encoder its published size counts, pooler in "head") in PARTS."""
    H, I, L, e = c.hidden_size, c.intermediate_size, c.num_hidden_layers, embedding_params(c)
    return _count(embeddings=e["word"] + e["token_type"], positions=e["position"],
                  attention=L * 4 * _linear(H, H), feed_forward=L * (_linear(H, I) + _linear(I, H)),
                  norms=e["LayerNorm"] + L * 2 * _layer_norm(H), head=_linear(H, H))


def bert_flops(c: BertConfig, seq_len: int = 512) -> dict:
    """sizing.flops of the encoder, per token of one `seq_len` sequence (no vocabulary logits)."""
    f = flops(c, seq_len, heads=False)
    attention = f["attention_scores"] + f["attention_values"]
    return {"matmul": (f["total"] - attention) / seq_len, "attention": attention / seq_len,
            "total": f["total"] / seq_len, "tokens": seq_len}


# ---- the published models --------------------------------------------------------------------------
GPT2 = {"GPT-2 small": (12, 768, 12), "GPT-2 medium": (24, 1024, 16), "GPT-2 large": (36, 1280, 20),
        "GPT-2 XL": (48, 1600, 25)}  # n_layer, n_embd, n_head
# T5 v1.0 (the paper's models, t5-small/base/large): tied output layer, ReLU feed-forward, d_kv 64
T5 = {"T5-small": (512, 2048, 6, 8), "T5-base": (768, 3072, 12, 12), "T5-large": (1024, 4096, 24, 16)}
# name -> (kind, published sizes as (figure, where it was said))
MODELS: dict[str, tuple[str, tuple]] = {
    "BERT-base": ("encoder", ((110e6, "Devlin et al. 2019, the paper"),)),
    "BERT-large": ("encoder", ((340e6, "Devlin et al. 2019, the paper"),)),
    **{name: ("decoder", ((paper, "Radford et al. 2019, table 2"), (released, "OpenAI's released checkpoints")))
       for name, paper, released in zip(GPT2, (117e6, 345e6, 762e6, 1542e6), (124e6, 355e6, 774e6, 1558e6))},
    **{name: ("encoder-decoder", ((n, "Raffel et al. 2020, section 3.7"),)) for name, n in zip(T5, (60e6, 220e6, 770e6))},
}
# GPT-1's vocabulary and context (openai-gpt): the paper's GPT-2 sizes are what GPT-2's layers hold with these
GPT1 = {"vocab": 40_478, "n_positions": 512}


def shape_of(name: str, seq_len: int = 512, target: int = 128) -> dict:
    """One published model: its kind, shape, parameters by part, forward FLOPs per token (BERT at `seq_len`,
    GPT-2 at `seq_len`, T5 on a `seq_len`-token source and a `target`-token output) and published sizes."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    kind, published = MODELS[name]
    if name in GPT2:
        L, d, h = GPT2[name]
        p, f, shape = gpt2_params(L, d, h), gpt2_flops(L, d, h, seq_len=seq_len), (L, 0, d, h)
    elif name in T5:
        d, ff, L, h = T5[name]
        p, f, shape = t5_params(d, ff, L, h), t5_flops(d, ff, L, h, source=seq_len, target=target), (L, L, d, h)
    else:
        c = known_config(name)
        p, f = bert_params(c), bert_flops(c, seq_len)
        shape = (c.num_hidden_layers, 0, c.hidden_size, c.num_attention_heads)
    return {"name": name, "kind": kind, "encoder_layers": shape[0] if kind != "decoder" else 0,
            "decoder_layers": shape[0] if kind == "decoder" else shape[1], "width": shape[2], "heads": shape[3],
            "params": p, "flops_per_token": f,
            "published": [{"params": int(n), "source": src, "diff": (p["total"] - n) / n} for n, src in published]}


def gpt2_gap() -> dict:
    """Why GPT-2's paper and its released weights disagree, in numbers: each size's layers counted with GPT-1's
    vocabulary and positions (GPT1) against the paper's figure, and with GPT-2's own (the released count)."""
    rows = {name: {"paper": int(MODELS[name][1][0][0]), "released": gpt2_params(*shape)["total"],
                   "with_gpt1_tables": gpt2_params(*shape, **GPT1)["total"]} for name, shape in GPT2.items()}
    worst = max(abs(r["with_gpt1_tables"] - r["paper"]) / r["paper"] for r in rows.values())
    return {"models": rows, "worst": worst, **GPT1}


def shapes(seq_len: int = 512, target: int = 128) -> list[dict]:
    """Every published model of MODELS, in its order."""
    for what, v in (("seq_len", seq_len), ("target", target)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{what} must be a whole number of at least 1, got {v!r}")
    if seq_len > MAX_LEN:
        raise ValueError(f"BERT reads at most {MAX_LEN} tokens: seq_len must be at most {MAX_LEN}, got {seq_len}")
    return [shape_of(name, seq_len, target) for name in MODELS]


# ---- T5's objective: span corruption ---------------------------------------------------------------
NOISE, MEAN_SPAN = 0.15, 3.0  # T5 hides 15 % of the tokens, in spans of 3 on average (Raffel et al. 2020)


def sentinel(i: int) -> str:
    return f"<extra_id_{i}>"  # T5's i-th placeholder (the last 100 ids of its vocabulary)


def corrupt(words: list[str], spans: list[tuple[int, int]]) -> tuple[str, str]:
    """(input, target) of span corruption: each (start, length) span of `words` becomes one sentinel in the
    input, and the target lists each sentinel followed by the words it hid, closed by one more sentinel."""
    hidden, out, tgt, i = sorted(spans), [], [], 0
    for k, (start, n) in enumerate(hidden):
        if start < i or n < 1 or start + n > len(words):
            raise ValueError(f"spans must be in the text, of length at least 1, and not overlap: {spans!r}")
        out += words[i:start] + [sentinel(k)]
        tgt += [sentinel(k)] + words[start:start + n]
        i = start + n
    return " ".join(out + words[i:]), " ".join(tgt + [sentinel(len(hidden))])


def span_lengths(raw: int, noise: float = NOISE, mean_span: float = MEAN_SPAN) -> dict:
    """Lengths of one corrupted `raw`-token text (as T5's code counts them, an end token on each side):
    round(noise·raw) tokens hidden in round(hidden / mean_span) spans."""
    hidden = max(1, round(noise * raw))
    spans = max(1, round(hidden / mean_span))
    return {"raw": raw, "hidden": hidden, "spans": spans, "inputs": raw - hidden + spans + 1,
            "targets": hidden + spans + 1}


def pretraining_pair(inputs: int = 512) -> dict:
    """The longest text whose corrupted input fits `inputs` tokens, and the target it makes: T5's pre-training
    lengths (a 512-token input)."""
    raw = inputs
    while span_lengths(raw + 1)["inputs"] <= inputs:
        raw += 1
    return span_lengths(raw)
