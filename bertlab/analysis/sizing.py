"""How big is a BERT-family model? Parameters, memory and FLOPs by plain arithmetic on a BertConfig:
no torch, so the app sizes any config at once; tests/test_sizing.py checks every formula against
real models (ours and Hugging Face's, built on the meta device) and torch's FLOP counter.

Each member reads its own fields: ALBERT and ELECTRA embed in E dimensions and project E -> H;
ALBERT stores num_hidden_groups × inner_group_num layers but runs L × inner_group_num of them (so
it saves parameters, not compute); DistilBERT has no token types and no pooler; RoBERTa's position
table has 2 rows more than it reads. `architecture` names the Hugging Face class being sized."""
from __future__ import annotations

import dataclasses

import math

from .. import family
from ..config import FAMILY_PRESETS, BertConfig, preset

MLM_FRACTION = 0.15  # BERT masks 15 % of tokens; only those need vocabulary logits
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# Optimizer state in bytes per parameter, all fp32: AdamW keeps two moments; SGD a momentum buffer.
OPTIMIZER_BYTES = {"adamw": 8, "adam": 8, "sgd": 4, "none": 0}
# A dropout mask is a bool tensor on CUDA (1 byte). PyTorch's CPU dropout keeps a full-width
# float mask instead, so on CPU the real figure is a little higher.
MASK_BYTES = 1
STATS_BYTES = 4  # LayerNorm keeps mean and 1/std per token in fp32

# Hugging Face class -> (model_type, what it has beyond embeddings and layers). "nsp" is BERT's
# next-sentence head or ALBERT's sentence-order head (same shape, H -> 2); "rtd" is ELECTRA's
# replaced-token head (H -> H -> 1); "mlm" is a masked-LM head whose decoder is the word table.
ARCHITECTURES: dict[str, tuple[str, frozenset]] = {  # each member's record (family.MEMBERS)
    cls: (n, frozenset(parts)) for n, m in family.MEMBERS.items() for cls, parts in m.architectures.items()}
ENCODER = {n: m.encoder_class for n, m in family.MEMBERS.items()}
# The class bertlab builds for each member (family.CLASSES): what `heads=True` sizes.
PRETRAINING = {kind: where.split(":")[1] for kind, where in family.CLASSES.items()}


def _linear(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _layer_norm(h: int) -> int:
    return 2 * h  # gain and bias


def architecture_of(c: BertConfig, heads: bool = True, architecture: str | None = None) -> str:
    """The Hugging Face class being sized: `architecture` if given (checked against the config's
    model_type), else the member's pre-training class (heads) or its bare encoder."""
    if architecture is None:
        return (PRETRAINING if heads else ENCODER)[c.model_type]
    name = str(architecture).removeprefix("Megatron")  # a pre-LN BERT has BERT's shapes
    if name not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    if ARCHITECTURES[name][0] != c.model_type:
        raise ValueError(f"{name} is not a {c.model_type} class")
    return name


def _parts(c: BertConfig, heads: bool, architecture: str | None) -> frozenset:
    return ARCHITECTURES[architecture_of(c, heads, architecture)][1]


def has_projection(c: BertConfig) -> bool:
    """ALBERT always maps E -> H (even when E = H); ELECTRA only when E differs from H."""
    own = family.MEMBERS[c.model_type]  # a member's own E (its `only`) is what BERT's formulas count
    return own.always_projects or ("embedding_size" in own.only and c.embedding_dim != c.hidden_size)


def _grouped(c: BertConfig) -> bool:
    return "num_hidden_groups" in family.MEMBERS[c.model_type].only  # ALBERT's shared layer groups


def layers_stored(c: BertConfig) -> int:
    """Distinct layer weight sets: ALBERT's groups × layers per group, else one per layer."""
    return c.num_hidden_groups * c.inner_group_num if _grouped(c) else c.num_hidden_layers


def layers_run(c: BertConfig) -> int:
    """Layers computed per forward: each of ALBERT's L steps runs a whole group of inner_group_num."""
    return c.num_hidden_layers * _step(c)


def _step(c: BertConfig) -> int:
    """Layers one of the L steps runs (and recomputes under checkpointing): ALBERT's group, else one."""
    return c.inner_group_num if _grouped(c) else 1


def as_bert(c: BertConfig) -> BertConfig:
    """A plain BERT of the same shape (L, H, heads, FFN, vocabulary, positions): what a member saves.
    A member's own config fields (its record's config_class) are left behind; no token types become BERT's 2."""
    shared = {f.name: getattr(c, f.name) for f in dataclasses.fields(BertConfig)}
    return BertConfig(**shared | dict(model_type="bert", embedding_size=None, num_hidden_groups=1, inner_group_num=1,
                                      type_vocab_size=c.type_vocab_size or 2))


# ---- parameters ---------------------------------------------------------------------------------
def embedding_params(c: BertConfig) -> dict[str, int]:
    """The embedding block's pieces, at the token-vector width (E for ALBERT/ELECTRA, else H)."""
    W = c.embedding_dim
    return {"word": c.vocab_size * W, "position": c.max_position_embeddings * W,
            "token_type": c.type_vocab_size * W if family.MEMBERS[c.model_type].token_types else 0,
            "LayerNorm": _layer_norm(W)}


def layer_params(c: BertConfig) -> dict[str, int]:
    """One encoder layer; every member's layers have the same shapes (DistilBERT renames them)."""
    H, I = c.hidden_size, c.intermediate_size
    attention = 3 * _linear(H, H) + _linear(H, H) + _layer_norm(H)  # Q, K, V, output dense, LN
    feed_forward = _linear(H, I) + _linear(I, H) + _layer_norm(H)  # intermediate, output, LN
    return {"attention": attention, "feed_forward": feed_forward, "total": attention + feed_forward}


def param_counts(c: BertConfig, heads: bool = True, architecture: str | None = None) -> dict[str, int]:
    """Parameters by component of the class `architecture_of` names; the parts sum to `total`.
    `encoder_total` is the bare encoder (XModel, with its pooler where it has one: BERT, ALBERT,
    RoBERTa). The MLM decoder weight is the word table (tied), so an MLM head adds its transform
    (H -> E for ALBERT and ELECTRA's generator, else H -> H) and one output bias per word."""
    parts = _parts(c, heads, architecture)
    H, W, n = c.hidden_size, c.embedding_dim, layers_stored(c)
    layer = layer_params(c)
    d = {"embeddings": sum(embedding_params(c).values()),
         "projection": _linear(W, H) if has_projection(c) else 0,
         "attention": n * layer["attention"],
         "feed_forward": n * layer["feed_forward"],
         "pooler": _linear(H, H) if "pooler" in parts else 0,
         "mlm_head": _linear(H, W) + _layer_norm(W) + c.vocab_size if "mlm" in parts else 0,
         "nsp_head": _linear(H, 2) if "nsp" in parts else 0,
         "rtd_head": _linear(H, H) + _linear(H, 1) if "rtd" in parts else 0}
    for k, v in family.own_sizing(c)[0].items():
        d[k] += v
    total = sum(d.values())
    core = d["embeddings"] + d["projection"] + d["attention"] + d["feed_forward"]
    d["encoder_total"] = core + (_linear(H, H) if "pooler" in ARCHITECTURES[ENCODER[c.model_type]][1] else 0)
    d["total"] = total
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
                     heads: bool = True, sparse_mlm: bool = False, mask_bytes: int = MASK_BYTES,
                     architecture: str | None = None, fused_attention: bool = False,
                     checkpointing: bool = False) -> dict[str, int]:
    """Bytes autograd saves for backward in one training forward (post-LN), `batch_size` being the
    micro-batch (what one forward sees: with gradient accumulation, not the effective batch).

    With B batch, T length, H hidden, I intermediate, A heads, e bytes per element, each layer saves
      8·B·T·H·e  its input (Q, K, V read it), q, k, v, the context (output dense reads it),
                 LN1's input, LN1's output (the FFN reads it), LN2's input
      2·B·T·I·e  GELU's input and output (the second FFN matmul reads it); ReLU needs only one
      2·B·A·T·T·e  softmax output (its own backward) and its dropped-out copy (probs·V reads it)
    plus dropout masks (B·A·T·T + 2·B·T·H, `mask_bytes` each; ALBERT and DistilBERT drop out one
    B·T·H less) and LayerNorm statistics, once per
    layer RUN: ALBERT's shared layers save all of this L times though they store one weight set.
    A layer's output is the next layer's input, so it is counted once. `fused_attention`: SDPA's fused
    kernel (bertlab's model in training) keeps a log-sum-exp per query (B·A·T fp32) instead of the two
    B·A·T·T maps; on CPU it falls back to the explicit softmax when attention dropout is on. Assumes
    a fused GELU (transformers' Python gelu_new keeps several tensors more); under autocast softmax
    and LayerNorm stay fp32, so half figures are low.
    `checkpointing`: each layer run keeps only its input (B·T·H·e; ALBERT's a step of inner layers)
    and backward recomputes one at a time, so `layers` is L·B·T·H·e + one step's full activations.
    """
    _check(dtype)
    parts = _parts(c, heads, architecture)
    B, T, H, I, A, W = batch_size, seq_len, c.hidden_size, c.intermediate_size, c.num_attention_heads, c.embedding_dim
    e, BT, att = DTYPE_BYTES[dtype], batch_size * seq_len, batch_size * A * seq_len * seq_len
    p_att, p_hid = c.attention_probs_dropout_prob > 0, c.hidden_dropout_prob > 0
    n_act = 1 if c.hidden_act == "relu" else 2
    n_drop = family.MEMBERS[c.model_type].hidden_dropouts  # ALBERT, DistilBERT: none after FFN / attention output
    maps = B * A * T * STATS_BYTES if fused_attention else (1 + p_att) * att * e + p_att * att * mask_bytes
    per_layer = ((8 * BT * H + n_act * BT * I) * e + maps + p_hid * n_drop * BT * H * mask_bytes
                 + 2 * 2 * BT * STATS_BYTES)
    # embeddings: LN input, dropout mask, LN stats, the int64 ids the lookups keep; the E -> H
    # projection keeps its E-wide input
    ids = (2 * BT + T) if family.MEMBERS[c.model_type].token_types else (BT + T)
    embeddings = (BT * W * e + p_hid * BT * W * mask_bytes + 2 * BT * STATS_BYTES + ids * 8
                  + (BT * W * e if has_projection(c) else 0))
    # the last hidden state, when a pooler or head reads it; the pooler's tanh output
    head = BT * H * e if parts else 0
    head += B * H * e if "pooler" in parts else 0
    if "mlm" in parts:
        M = _mlm_positions(B, T, sparse_mlm)
        # transform to width W: GELU input, LN input, decoder input (+ the gathered H-wide rows when
        # sparse); log-softmax over V in fp32, LN stats, int64 targets
        head += ((n_act + 1) * M * W + sparse_mlm * M * H) * e + M * c.vocab_size * 4 + 2 * M * STATS_BYTES + M * 8
    if "rtd" in parts:  # dense H -> H, GELU, H -> 1; the loss keeps fp32 logits and float labels
        head += n_act * BT * H * e + 2 * BT * 4
    layers = layers_run(c) * per_layer
    if checkpointing:  # the inputs of L steps, and one step (inner_group_num layers) recomputed
        step = _step(c)
        layers = c.num_hidden_layers * BT * H * e + step * per_layer
    return {"embeddings": embeddings, "per_layer": per_layer, "layers": layers, "heads": head,
            "total": embeddings + layers + head}


def training_phases(c: BertConfig, batch_size: int = 1, seq_len: int = 128, dtype: str = "fp32",
                    optimizer: str = "adamw", heads: bool = True, sparse_mlm: bool = False,
                    architecture: str | None = None, checkpointing: bool = False, accum: int = 1,
                    fused_attention: bool | None = None, mask_bytes: int = MASK_BYTES) -> dict[str, dict]:
    """What one optimizer step holds at the moments that can be its peak, each a dict of live bytes:
    "head" (backward's start: every saved activation plus the fp32 gradients of the log-probabilities
    and of the logits), "top layer" and "bottom layer" (backward through a layer: the activations
    not yet used, the layer's activation gradients, the parameter gradients made so far; under
    `checkpointing` the layer inputs and the one layer being recomputed), "optimizer" (every
    gradient, AdamW's scratch). Gradients are made during backward (the Trainer sets them to None
    after each step), except under accumulation (`accum` > 1), where the earlier micro-batches'
    gradients are there all along; `batch_size` is the micro-batch. `fused_attention` None: as
    bertlab's model on CPU, fused SDPA unless attention dropout is on."""
    _check(dtype, optimizer)
    parts, counts = _parts(c, heads, architecture), param_counts(c, heads, architecture)
    P, e, W = counts["total"], DTYPE_BYTES[dtype], c.embedding_dim
    BT, H, I, V = batch_size * seq_len, c.hidden_size, c.intermediate_size, c.vocab_size
    fused_attention = c.attention_probs_dropout_prob == 0 if fused_attention is None else fused_attention
    acts = activation_bytes(c, batch_size, seq_len, dtype, heads, sparse_mlm, mask_bytes, architecture,
                            fused_attention, checkpointing)
    base = {"weights": 4 * P, "weight_copies": e * P if e < 4 else 0, "optimizer": OPTIMIZER_BYTES[optimizer] * P}
    G, held = 4 * P, 4 * P if accum > 1 else 0
    M = _mlm_positions(batch_size, seq_len, sparse_mlm) if "mlm" in parts else 0
    # the head's and (a tied decoder) the word table's gradients come first; then a layer's at a time
    g_head = 4 * (sum(counts[k] for k in ("pooler", "mlm_head", "nsp_head", "rtd_head")) + (V * W if M else 0))
    g_layer, stored = 4 * layer_params(c)["total"], layers_stored(c)
    step = _step(c)  # layers run (and recomputed) per step
    L = c.num_hidden_layers
    recomputed = step * acts["per_layer"] if checkpointing else 0  # not yet: backward has not reached a layer
    phases = {"head": {**base, "gradients": held, "activations": acts["total"] - recomputed, "logits": M * V * (4 + 4),
                       "temporaries": 0}}
    for name, left in (("top layer", L), ("bottom layer", 1)):  # linear in between: the ends bound it
        fresh = min(G, g_head + min((L - left) * step, stored) * g_layer)
        if accum > 1:  # added to .grad at once, but for weights used twice: autograd sums their uses first
            fresh = (4 * V * W if M else 0) + (fresh - g_head if layers_run(c) > stored else 0)
        grads = held + fresh
        kept = left * BT * H * e + step * acts["per_layer"] if checkpointing else left * step * acts["per_layer"]
        phases[name] = {**base, "gradients": grads, "activations": acts["embeddings"] + kept, "logits": 0,
                        "temporaries": BT * max(H, I) * e}  # an FFN gradient beside the saved GELU input
    biggest = 4 * max(V * W, H * I)
    phases["optimizer"] = {**base, "gradients": G, "activations": 0, "logits": 0, "temporaries": 2 * biggest}
    for d in phases.values():
        d["total"] = sum(d.values())
        d["activations_per_layer"] = acts["per_layer"]  # not live at once: a figure to compare, left out of total
    return phases


def memory(c: BertConfig, batch_size: int = 1, seq_len: int = 128, dtype: str = "fp32",
           training: bool = False, optimizer: str = "adamw", heads: bool = True,
           sparse_mlm: bool = False, architecture: str | None = None, checkpointing: bool = False,
           accum: int = 1, fused_attention: bool | None = None, mask_bytes: int = MASK_BYTES) -> dict[str, int]:
    """Memory in bytes; `total` sums every entry but `activations_per_layer`. Inference keeps the
    weights and one layer's (or the logits') working set. Training: `total` is the step's peak, the
    largest of `training_phases`, and the entries are what is live then; so `gradients` may be less
    than all of them (at the head's backward none exist yet) and `activations` are those not yet
    used. `batch_size` is the micro-batch: activations grow with what one forward sees, not with the
    batch × `accum` an optimizer step averages over. bf16/fp16 training keeps fp32 weights, gradients
    and optimizer state, plus autocast's half weight copies and half-width activations (rougher).
    fp32 peaks match profiled CPU steps within 2 % (bench/SCALING.md, analysis.memory_measure);
    allocator overhead and fragmentation are not counted."""
    _check(dtype, optimizer)
    if training:
        phases = training_phases(c, batch_size, seq_len, dtype, optimizer, heads, sparse_mlm, architecture,
                                 checkpointing, accum, fused_attention, mask_bytes)
        return dict(max(phases.values(), key=lambda d: d["total"]))
    parts = _parts(c, heads, architecture)
    P, e = param_counts(c, heads, architecture)["total"], DTYPE_BYTES[dtype]
    B, T, H, I, A = batch_size, seq_len, c.hidden_size, c.intermediate_size, c.num_attention_heads
    BT = B * T
    logits = (_mlm_positions(B, T, sparse_mlm) * c.vocab_size if "mlm" in parts else 0) * e
    logits += BT * e if "rtd" in parts else 0
    attention_phase = 4 * BT * H + 2 * B * A * T * T  # x, q, k, v, scores, probs
    ffn_phase = BT * H + 2 * BT * I  # input, intermediate, activation output
    per_layer = max(attention_phase, ffn_phase) * e
    d = {"weights": e * P, "activations": max(per_layer, logits + BT * H * e), "activations_per_layer": per_layer}
    d["total"] = sum(v for k, v in d.items() if k != "activations_per_layer")
    return d


# The guides' figure (guide 004, the textbook chapter): BERT-base trained at 32 × 512 in fp32 with AdamW
# takes about 13.8 GB, of which about 12 GB are activations and 1.76 GB weights, gradients and moments.
GUIDE_BASE_TRAINING = {"batch_size": 32, "seq_len": 512, "total": 13.8e9, "activations": 12e9, "fixed": 1.76e9}


def memory_assumptions(c: BertConfig, batch_size: int = 32, seq_len: int = 512) -> dict[str, int]:
    """The fp32 AdamW training peak under each assumption that moves it, so that two published figures
    can be told apart. "cpu": the step bertlab trains and measures on a CPU (masked-LM logits at the
    masked 15 % only; with attention dropout, PyTorch's CPU attention keeps the T × T maps, and its
    dropout masks are floats); "gpu": the same step on a GPU, whose fused attention keeps no maps (bool
    masks); "all_logits": the vocabulary logits at every position, maps kept (what `info` and the
    Architecture tab assume); "bf16": autocast, maps kept. `attention_maps`: those maps' bytes over all
    layers (fp32 probabilities, their dropped-out copy, a bool mask); `fixed`: weights, gradients, AdamW."""
    def peak(**kw):
        return memory(c, batch_size, seq_len, training=True, **kw)["total"]
    p = c.attention_probs_dropout_prob > 0
    maps = batch_size * c.num_attention_heads * seq_len ** 2 * layers_run(c) * ((1 + p) * 4 + p * MASK_BYTES)
    return {"cpu": peak(sparse_mlm=True, mask_bytes=4), "gpu": peak(sparse_mlm=True, fused_attention=True),
            "all_logits": peak(), "bf16": peak(sparse_mlm=True, dtype="bf16", fused_attention=False),
            "attention_maps": maps, "fixed": (4 + 4 + OPTIMIZER_BYTES["adamw"]) * param_counts(c)["total"]}


# ---- FLOPs --------------------------------------------------------------------------------------
def flops(c: BertConfig, seq_len: int = 128, training: bool = False, heads: bool = True,
          architecture: str | None = None) -> dict[str, int]:
    """Forward FLOPs for one sequence, matmuls only (2 per multiply-add; the rest is under 1 %), 3x
    when training (backward: gradients for inputs and weights). Every layer RUN counts: ALBERT's
    shared layers cost as much as BERT's. `total` has vocabulary logits at every position;
    `total_sparse` only at the 15 % masked ones (`mlm_head_sparse`)."""
    parts = _parts(c, heads, architecture)
    T, H, I, V, W, L = seq_len, c.hidden_size, c.intermediate_size, c.vocab_size, c.embedding_dim, layers_run(c)
    mlm = 2 * T * H * W + 2 * T * W * V if "mlm" in parts else 0  # transform dense + tied decoder
    d = {"embeddings": 0,
         "projection": 2 * T * W * H if has_projection(c) else 0,
         "qkv": L * 2 * T * H * 3 * H,
         "attention_scores": L * 2 * T * T * H,  # Q·Kᵀ over all heads
         "attention_values": L * 2 * T * T * H,  # probs·V
         "attention_output": L * 2 * T * H * H,
         "feed_forward": L * 2 * 2 * T * H * I,
         "pooler": 2 * H * H if "pooler" in parts else 0,  # the [CLS] token only
         "mlm_head": mlm,
         "nsp_head": 2 * H * 2 if "nsp" in parts else 0,
         "rtd_head": 2 * T * H * H + 2 * T * H if "rtd" in parts else 0}
    for k, v in family.own_sizing(c, T)[1].items():
        d[k] += v
    d["total"] = sum(d.values())
    d["mlm_head_sparse"] = round(MLM_FRACTION * mlm)
    d["total_sparse"] = d["total"] - mlm + d["mlm_head_sparse"]
    return {k: v * (3 if training else 1) for k, v in d.items()}


# ---- DeBERTa's disentangled attention ---------------------------------------------------------------
# Two released configs, BERT-base's shape otherwise (12 layers of 768, feed-forward 3,072): the vocabulary,
# k (a layer tells relative distances up to k apart: 2k position vectors, one table all layers share) and
# whether positions get projections of their own (v1) or reuse the content's query and key (v3,
# share_att_key, which also normalises the table). Neither has a token-type table or absolute positions.
DEBERTA: dict[str, dict] = {
    "DeBERTa-base": dict(vocab_size=50_265, k=512, own_projections=True, source="microsoft/deberta-base"),
    "DeBERTa-v3-base": dict(vocab_size=128_100, k=256, own_projections=False, source="microsoft/deberta-v3-base",
                            published=(86_000_000, 98_000_000)),  # He et al. 2023: the layers; the word table
}


def disentangled_flops(layers: int, hidden: int, tokens: int, span: int) -> int:
    """Forward FLOPs DeBERTa adds to BERT's attention: each layer projects the 2·span relative-position
    vectors to keys and to queries (2 x 2·2span·H²), then scores content against position and position
    against content (2 x 2·T·2span·H). v1's span is min(T, k), v3's its k buckets."""
    return layers * (8 * span * hidden * hidden + 8 * tokens * span * hidden)


def deberta(name: str, tokens: int = 512) -> dict:
    """A DeBERTa's parameters (its bare encoder, as transformers' DebertaModel / DebertaV2Model holds them)
    and the forward FLOPs its attention adds at `tokens`, beside a BERT of the same shape and vocabulary."""
    if name not in DEBERTA:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(DEBERTA)}")
    d = DEBERTA[name]
    k, own = d["k"], d["own_projections"]
    bert = preset("base", vocab_size=d["vocab_size"], max_position_embeddings=max(512, tokens))
    L, H = bert.num_hidden_layers, bert.hidden_size
    layer = layer_params(bert)["total"] - (H if own else 0)  # v1's content projection has no key bias
    per_layer = _linear(H, H, bias=False) + _linear(H, H) if own else 0  # v1: pos_proj and pos_q_proj
    table = 2 * k * H + (0 if own else _layer_norm(H))  # v3 normalises it
    embeddings = d["vocab_size"] * H + _layer_norm(H)  # words and their LayerNorm
    extra = disentangled_flops(L, H, tokens, min(tokens, k) if own else k)
    layers = L * (layer + per_layer) + table
    return {"name": name, "source": d["source"], "k": k, "num_layers": L, "embeddings": embeddings,
            "layers": layers, "table": table, "projections": L * per_layer, "total": embeddings + layers,
            "published": d.get("published"), "bert_flops": flops(bert, tokens, heads=False)["total"],
            "extra_flops": extra}


# ---- mixture of experts ---------------------------------------------------------------------------
def expert_params(H: int, I: int, experts: int, bias: bool = True) -> int:
    """One mixture-of-experts feed-forward layer: `experts` copies of the H -> I -> H feed-forward and a
    router (H -> experts, no bias, as Switch Transformer's). BERT's own feed-forward has biases."""
    ffn = H * I + I * H + ((I + H) if bias else 0)
    return experts * ffn + H * experts


def moe(c: BertConfig, experts: int, top_k: int = 1, every: int = 1, seq_len: int = 128) -> dict:
    """The config with a mixture of `experts` feed-forwards in every `every`-th layer (Switch Transformer:
    every other layer, top-1; GShard: top-2), each token sent to `top_k` of them. Parameters grow with the
    experts; the compute of a token only with top_k. Counts the encoder (no pre-training heads)."""
    for name, v, lo in (("experts", experts, 1), ("top_k", top_k, 1), ("every", every, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name} must be a whole number of at least {lo}, got {v!r}")
    if top_k > experts:
        raise ValueError(f"each token goes to top_k of the experts: top_k ({top_k}) cannot exceed experts ({experts})")
    H, I = c.hidden_size, c.intermediate_size
    if experts == 1:  # one expert is the dense layer: nothing to route
        every = 10**9
    n = layers_stored(c) // every  # layers whose feed-forward becomes a mixture (the every-th, every-2nd...)
    runs = layers_run(c) // every
    dense = param_counts(c, heads=False)["encoder_total"]
    one = expert_params(H, I, 1) - H  # one feed-forward, no router
    f = flops(c, seq_len, heads=False)
    ffn_flops = 2 * 2 * H * I  # per token, one feed-forward (two matmuls)
    per_token = f["total"] / seq_len
    return {"experts": experts, "top_k": top_k, "every": every, "moe_layers": n,
            "dense_params": dense, "params": dense + n * (expert_params(H, I, experts) - one),
            "active_params": dense + n * ((top_k - 1) * one + H * experts),
            "dense_flops_per_token": per_token,
            "flops_per_token": per_token + runs * ((top_k - 1) * ffn_flops + 2 * H * experts)}


# ---- ELECTRA's generator ------------------------------------------------------------------------
GENERATORS = {"small": "small-generator", "base": "base-generator", "large": "large-generator"}


def electra_generator(c: BertConfig, fraction: float | None = None) -> BertConfig:
    """The generator trained beside discriminator `c`. With `fraction`: hidden size, heads and FFN
    times it (the paper: 1/4 for small and large, 1/3 for base). Without: the released generator
    when `c` has a published discriminator's shape, else 1/4. It reads c's embeddings (shared), so
    it embeds at c's width E and has its own E -> H projection."""
    if not family.MEMBERS[c.model_type].generator:
        raise ValueError(f"only {family.say(m for m in family.RECORDS if m.generator)} trains a generator, "
                         f"not {c.model_type}")
    shape = (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size, c.embedding_dim)
    if fraction is None:
        for disc, gen in GENERATORS.items():
            p = preset(disc, model_type=c.model_type)
            if shape == (p.num_hidden_layers, p.hidden_size, p.num_attention_heads, p.intermediate_size,
                         p.embedding_dim):
                g = FAMILY_PRESETS[c.model_type][gen]
                return c.replace(**{k: g[k] for k in ("hidden_size", "num_attention_heads", "intermediate_size")},
                                 embedding_size=c.embedding_dim)
        fraction = 0.25
    if not 0 < fraction <= 1:
        raise ValueError(f"the generator's fraction must be in (0, 1], got {fraction!r}")
    H, A, I = (max(1, round(x * fraction)) for x in shape[1:4])
    if H % A:
        raise ValueError(f"a {fraction:g} generator of hidden size {H} cannot split into {A} heads")
    return c.replace(hidden_size=H, num_attention_heads=A, intermediate_size=I, embedding_size=c.embedding_dim)


def electra_pair(c: BertConfig, generator: BertConfig | None = None, seq_len: int = 128) -> dict:
    """ELECTRA's pre-training pair: discriminator `c` (ElectraForPreTraining) and its generator
    (ElectraForMaskedLM, logits at the masked 15 % only), their token, position and type embeddings
    shared and counted once. FLOPs are per training sequence (forward + backward of both)."""
    g = generator or electra_generator(c)
    if embedding_params(g) != embedding_params(c):
        raise ValueError("the generator must share the discriminator's embeddings (same E, V, positions, types)")
    disc = param_counts(c, architecture="ElectraForPreTraining")
    gen = param_counts(g, architecture="ElectraForMaskedLM")
    fd = flops(c, seq_len, training=True, architecture="ElectraForPreTraining")["total"]
    fg = flops(g, seq_len, training=True, architecture="ElectraForMaskedLM")["total_sparse"]
    return {"generator": {k: getattr(g, k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                     "intermediate_size", "embedding_size")},
            "discriminator_params": disc["total"], "generator_params": gen["total"],
            "shared_params": gen["embeddings"], "pair_params": disc["total"] + gen["total"] - gen["embeddings"],
            "discriminator_train_flops": fd, "generator_train_flops": fg, "pair_train_flops": fd + fg,
            "seq_len": seq_len}


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
# Encoder sizes as published (no pre-training heads), each computed from its preset in bertlab.config.
KNOWN_MODELS: dict[str, dict] = {name: {"family": m.name, "preset": size, "published": pub, "source": src}
                                 for m in family.RECORDS for name, (size, pub, src) in m.published.items()}


# Published sizes more than 5 % from their released config's count, and what is known of why.
KNOWN_GAPS: dict[str, str] = {
    "ALBERT-xxlarge": "the paper's table 1 says 235 M; the released config (H 4,096, feed-forward 16,384, "
                      "E 128, one shared layer) holds {computed}, pooler included, and so do the released fp32 "
                      "weights (about 890 MB). The paper does not say how it counted: no part of the model is "
                      "the {gap} between them (the pooler is {pooler}, the embeddings {embeddings})",
}


def known_gap(name: str) -> str | None:
    """Why a published size differs from its config's count by more than 5 %, with the counts filled in."""
    if name not in KNOWN_GAPS:
        return None
    p = param_counts(known_config(name), heads=False)
    return KNOWN_GAPS[name].format(computed=humanize(p["encoder_total"]), pooler=humanize(p["pooler"]),
                                   embeddings=humanize(p["embeddings"]),
                                   gap=humanize(KNOWN_MODELS[name]["published"] - p["encoder_total"]))


def known_config(name: str) -> BertConfig:
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(KNOWN_MODELS)}")
    m = KNOWN_MODELS[name]
    return preset(m["preset"], model_type=m["family"])


def known_model_params(name: str) -> int:
    """Encoder parameters of a KNOWN_MODELS entry (its bare XModel), computed from its config."""
    return param_counts(known_config(name), heads=False)["encoder_total"]
