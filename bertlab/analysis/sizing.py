"""How big is a BERT? Parameters, memory and FLOPs by plain arithmetic on a BertConfig: no torch, so
the app sizes any config at once; tests/test_sizing.py checks every formula against real models."""
from __future__ import annotations

import math

from ..config import BertConfig

MLM_FRACTION = 0.15  # BERT masks 15 % of tokens; only those need vocabulary logits
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# Optimizer state in bytes per parameter, all fp32: AdamW keeps two moments; SGD a momentum buffer.
OPTIMIZER_BYTES = {"adamw": 8, "adam": 8, "sgd": 4, "none": 0}
# A dropout mask is a bool tensor on CUDA (1 byte). PyTorch's CPU dropout keeps a full-width
# float mask instead, so on CPU the real figure is a little higher.
MASK_BYTES = 1
STATS_BYTES = 4  # LayerNorm keeps mean and 1/std per token in fp32


def _linear(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _layer_norm(h: int) -> int:
    return 2 * h  # gain and bias


# ---- parameters ---------------------------------------------------------------------------------
def embedding_params(c: BertConfig) -> dict[str, int]:
    """The embedding block's pieces: the word table dominates small models."""
    H = c.hidden_size
    return {"word": c.vocab_size * H, "position": c.max_position_embeddings * H,
            "token_type": c.type_vocab_size * H, "LayerNorm": _layer_norm(H)}


def layer_params(c: BertConfig) -> dict[str, int]:
    """One encoder layer; all layers have the same shapes, so the encoder is L times this."""
    H, I = c.hidden_size, c.intermediate_size
    attention = 3 * _linear(H, H) + _linear(H, H) + _layer_norm(H)  # Q, K, V, output dense, LN
    feed_forward = _linear(H, I) + _linear(I, H) + _layer_norm(H)  # intermediate, output, LN
    return {"attention": attention, "feed_forward": feed_forward, "total": attention + feed_forward}


def param_counts(c: BertConfig, heads: bool = True) -> dict[str, int]:
    """Parameters by component. `encoder_total` is BertModel (with pooler); `total` adds the
    pre-training heads (0 when heads=False). The MLM decoder weight is the word-embedding table
    (tied), so the MLM head adds only its transform and the per-word output bias."""
    H, L = c.hidden_size, c.num_hidden_layers
    layer = layer_params(c)
    d = {"embeddings": sum(embedding_params(c).values()),
         "attention": L * layer["attention"],
         "feed_forward": L * layer["feed_forward"],
         "pooler": _linear(H, H),
         "mlm_head": _linear(H, H) + _layer_norm(H) + c.vocab_size if heads else 0,
         "nsp_head": _linear(H, 2) if heads else 0}
    d["encoder_total"] = d["embeddings"] + d["attention"] + d["feed_forward"] + d["pooler"]
    d["total"] = d["encoder_total"] + d["mlm_head"] + d["nsp_head"]
    return d


# ---- memory -------------------------------------------------------------------------------------
def _check(dtype: str, optimizer: str = "adamw") -> None:
    for what, value, known in (("dtype", dtype, DTYPE_BYTES), ("optimizer", optimizer, OPTIMIZER_BYTES)):
        if value not in known:
            raise ValueError(f"{what} must be one of {', '.join(known)}, got {value!r}")


def _mlm_positions(batch_size: int, seq_len: int, sparse_mlm: bool) -> int:
    n = batch_size * seq_len
    return math.ceil(MLM_FRACTION * n) if sparse_mlm else n


def activation_bytes(c: BertConfig, batch_size: int = 1, seq_len: int = 128, dtype: str = "fp32",
                     heads: bool = True, sparse_mlm: bool = False,
                     mask_bytes: int = MASK_BYTES) -> dict[str, int]:
    """Bytes autograd saves for backward in one training forward of post-LN BERT.

    With B batch, T length, H hidden, I intermediate, A heads, e bytes per element, each layer saves
      8·B·T·H·e  its input (Q, K, V read it), q, k, v, the context (output dense reads it),
                 LN1's input, LN1's output (the FFN reads it), LN2's input
      2·B·T·I·e  GELU's input and output (the second FFN matmul reads it); ReLU needs only one
      2·B·A·T·T·e  softmax output (its own backward) and its dropped-out copy (probs·V reads it)
    plus dropout masks (B·A·T·T + 2·B·T·H, `mask_bytes` each) and LayerNorm statistics.
    A layer's output is the next layer's input, so it is counted once. Assumes eager attention (flash
    keeps no B·A·T·T tensor); under autocast softmax and LayerNorm stay fp32, so half figures are low.
    """
    _check(dtype)
    B, T, H, I, A = batch_size, seq_len, c.hidden_size, c.intermediate_size, c.num_attention_heads
    e, BT, att = DTYPE_BYTES[dtype], batch_size * seq_len, batch_size * A * seq_len * seq_len
    p_att, p_hid = c.attention_probs_dropout_prob > 0, c.hidden_dropout_prob > 0
    n_act = 1 if c.hidden_act == "relu" else 2
    per_layer = ((8 * BT * H + n_act * BT * I + (1 + p_att) * att) * e
                 + (p_att * att + p_hid * 2 * BT * H) * mask_bytes + 2 * 2 * BT * STATS_BYTES)
    # embeddings: LN input, dropout mask, LN stats, the int64 ids the lookups keep
    embeddings = BT * H * e + p_hid * BT * H * mask_bytes + 2 * BT * STATS_BYTES + (2 * BT + T) * 8
    # the last hidden state (pooler and MLM head read it) and the pooler's tanh output
    head = (BT * H + B * H) * e
    if heads:
        M = _mlm_positions(B, T, sparse_mlm)
        # transform: GELU input, LN input, decoder input (+ the gathered rows when sparse);
        # log-softmax over V in fp32, LN stats, int64 targets
        head += ((n_act + 1 + sparse_mlm) * M * H) * e + M * c.vocab_size * 4 + 2 * M * STATS_BYTES + M * 8
    layers = c.num_hidden_layers * per_layer
    return {"embeddings": embeddings, "per_layer": per_layer, "layers": layers, "heads": head,
            "total": embeddings + layers + head}


def memory(c: BertConfig, batch_size: int = 1, seq_len: int = 128, dtype: str = "fp32",
           training: bool = False, optimizer: str = "adamw", heads: bool = True,
           sparse_mlm: bool = False) -> dict[str, int]:
    """Memory in bytes; `total` sums every entry but `activations_per_layer`. Training with bf16/fp16
    keeps fp32 weights, gradients and optimizer states, plus autocast's half copy of the weights and
    half-width activations (`activation_bytes`). Inference keeps the weights and one layer's (or the
    logits') working set. Allocator overhead is not counted: expect real peaks 10-30 % higher."""
    _check(dtype, optimizer)
    P, e = param_counts(c, heads)["total"], DTYPE_BYTES[dtype]
    B, T, H, I, A = batch_size, seq_len, c.hidden_size, c.intermediate_size, c.num_attention_heads
    BT = B * T
    logits = _mlm_positions(B, T, sparse_mlm) * c.vocab_size * e if heads else 0
    if training:
        acts = activation_bytes(c, B, T, dtype, heads, sparse_mlm)
        d = {"weights": 4 * P, "gradients": 4 * P, "optimizer": OPTIMIZER_BYTES[optimizer] * P,
             "weight_copies": e * P if e < 4 else 0, "activations": acts["total"],
             "activations_per_layer": acts["per_layer"], "logits": logits}
    else:
        attention_phase = 4 * BT * H + 2 * B * A * T * T  # x, q, k, v, scores, probs
        ffn_phase = BT * H + 2 * BT * I  # input, intermediate, activation output
        per_layer = max(attention_phase, ffn_phase) * e
        d = {"weights": e * P, "activations": max(per_layer, logits + BT * H * e),
             "activations_per_layer": per_layer}
    d["total"] = sum(v for k, v in d.items() if k != "activations_per_layer")
    return d


# ---- FLOPs --------------------------------------------------------------------------------------
def flops(c: BertConfig, seq_len: int = 128, training: bool = False, heads: bool = True) -> dict[str, int]:
    """Forward FLOPs for one sequence, matmuls only (2 per multiply-add; the rest is under 1 %), 3x
    when training (backward: gradients for inputs and weights). `total` has vocabulary logits at every
    position; `total_sparse` only at the 15 % masked ones (`mlm_head_sparse`)."""
    T, H, I, V, L = seq_len, c.hidden_size, c.intermediate_size, c.vocab_size, c.num_hidden_layers
    mlm = 2 * T * H * H + 2 * T * H * V if heads else 0  # transform dense + tied decoder
    d = {"embeddings": 0,
         "qkv": L * 2 * T * H * 3 * H,
         "attention_scores": L * 2 * T * T * H,  # Q·Kᵀ over all heads
         "attention_values": L * 2 * T * T * H,  # probs·V
         "attention_output": L * 2 * T * H * H,
         "feed_forward": L * 2 * 2 * T * H * I,
         "pooler": 2 * H * H,  # the [CLS] token only
         "mlm_head": mlm,
         "nsp_head": 2 * H * 2 if heads else 0}
    d["total"] = sum(d.values())
    d["mlm_head_sparse"] = round(MLM_FRACTION * mlm)
    d["total_sparse"] = d["total"] - mlm + d["mlm_head_sparse"]
    return {k: v * (3 if training else 1) for k, v in d.items()}


def humanize(n: float, unit: str = "") -> str:
    """Short figures for tables: 109482240 -> "109.5M"; with a unit, SI prefixes (powers of 1000)
    and a space: humanize(1.2e9, "B") -> "1.2 GB"."""
    prefixes = ("", "k", "M", "G", "T", "P") if unit else ("", "K", "M", "B", "T")
    x, i = float(n), 0
    while abs(x) >= 999.95 and i < len(prefixes) - 1:
        x, i = x / 1000, i + 1
    s = f"{x:.0f}" if i == 0 else f"{x:.1f}"
    return f"{s} {prefixes[i]}{unit}" if unit else s + prefixes[i]


# ---- well-known models --------------------------------------------------------------------------
# Encoder sizes as published (no pre-training heads). `config` holds the BertConfig fields that
# differ from BertConfig's defaults, which are BERT-base's (12 layers, 768 hidden, 12 heads).
KNOWN_MODELS: dict[str, dict] = {
    "BERT-base": {"family": "bert", "published": 110_000_000, "source": "Devlin et al. 2019", "config": {}},
    "BERT-large": {"family": "bert", "published": 340_000_000, "source": "Devlin et al. 2019",
                   "config": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16,
                                  intermediate_size=4096)},
    "RoBERTa-base": {"family": "bert", "published": 125_000_000, "source": "Liu et al. 2019",
                     "config": dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1)},
    "DistilBERT": {"family": "distilbert", "published": 66_000_000, "source": "Sanh et al. 2019",
                   "config": dict(num_hidden_layers=6)},
    "ALBERT-base": {"family": "albert", "published": 12_000_000, "source": "Lan et al. 2020",
                    "embedding_size": 128, "config": dict(vocab_size=30000)},
}


def known_model_params(name: str) -> int:
    """Encoder parameters of a KNOWN_MODELS entry, computed from its architecture."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(KNOWN_MODELS)}")
    m = KNOWN_MODELS[name]
    c = BertConfig(**m["config"])
    H = c.hidden_size
    if m["family"] == "distilbert":  # BERT's layer stack without token-type embeddings and without a pooler
        return param_counts(c, heads=False)["encoder_total"] - embedding_params(c)["token_type"] - _linear(H, H)
    if m["family"] == "albert":
        # ALBERT embeds in a small E-dim space, projects E -> H once, and reuses one layer's weights
        # in all L layers: so the count does not grow with depth.
        E = m["embedding_size"]
        embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * E + _layer_norm(E)
        return embeddings + _linear(E, H) + layer_params(c)["total"] + _linear(H, H)
    return param_counts(c, heads=False)["encoder_total"]
