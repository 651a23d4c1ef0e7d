"""DeBERTa-v2/v3 (He et al. 2020, 2021): BERT's post-LN layers with disentangled attention. A token's
content and its position are kept apart: besides content-to-content scores q_i·k_j, each head adds
content-to-position (c2p: q_i · K_r[δ(i, j)]) and position-to-content (p2c: k_j · Q_r[δ(i, j)]) scores
against one shared table of 2S relative-position vectors, δ = i - j clamped to [-S, S), or log-bucketed
beyond ±S/2 when `position_buckets` is set (v3: S = 256, 512 positions seen as exact up to ±128).
v3 drops absolute positions from the input (position_biased_input=False) and token types
(type_vocab_size=0), projects the relative table with the content's own query/key weights
(share_att_key) and normalises it (norm_rel_ebd="layer_norm").

Names are Hugging Face's DebertaV2Model / DebertaV2ForMaskedLM keys, so their state dicts load as they
are. Quirks that parity depends on: the scores are scaled by √(d·(1 + number of pos_att_type kinds))
even when relative_attention is off; a pad query attends to nothing, so its (unused) output is the mean
of all values; the embeddings are zeroed at pads; and `legacy` picks one of two masked-LM heads.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import BertConfig
from ..model import (ACT, BertIntermediate, BertOutput, BertSelfOutput, check_length, init_weights,
                     pretraining_heads, run_layer)
from .electra import ElectraDiscriminatorPredictions, ElectraForPreTraining

ACTS = ACT | {"tanh": nn.Tanh()}  # the convolution's default activation


@dataclass
class DebertaV2Config(BertConfig):
    """BertConfig plus DeBERTa's fields, Hugging Face's names and defaults (transformers keeps the last
    six as loose attributes). The "deberta-v2" record names it (family.Member.config_class), so
    BertConfig.from_dict and config.preset build it for that model_type."""
    type_vocab_size: int = 0  # no segment table: v3 sees pairs through [SEP] alone
    layer_norm_eps: float = 1e-7
    model_type: str = "deberta-v2"
    relative_attention: bool = False
    max_relative_positions: int = -1  # < 1: max_position_embeddings
    position_biased_input: bool = True  # add an absolute position table to the input (v3: False)
    pos_att_type: tuple = ()  # ("c2p", "p2c"), either, or neither; "p2c|c2p" as config.json may say
    legacy: bool = True  # transformers' masked-LM head layout: cls.predictions (True) or lm_predictions
    position_buckets: int = -1  # > 0: relative positions log-bucketed into that many per direction
    share_att_key: bool = False
    norm_rel_ebd: str = "none"  # or "layer_norm"
    conv_kernel_size: int = 0  # > 0: v2 xlarge's convolution beside the first layer
    conv_groups: int = 1
    conv_act: str = "tanh"

    def __post_init__(self):
        if isinstance(self.pos_att_type, str):
            self.pos_att_type = self.pos_att_type.lower().split("|")
        self.pos_att_type = tuple(k.strip() for k in self.pos_att_type or () if k.strip() not in ("", "none"))
        if self.model_type != "deberta-v2" or self.pre_ln:
            raise ValueError(f"DebertaV2Config is for model_type 'deberta-v2' (post-LN), got {self.model_type!r}")
        if set(self.pos_att_type) - {"c2p", "p2c"}:
            raise ValueError(f"pos_att_type may hold c2p and p2c, got {self.pos_att_type!r}")
        if self.norm_rel_ebd not in ("none", "layer_norm"):
            raise ValueError(f"norm_rel_ebd must be 'none' or 'layer_norm', got {self.norm_rel_ebd!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads")
        if self.hidden_act not in ACT or self.conv_act not in ACTS:
            raise ValueError(f"unsupported activation {self.hidden_act!r} / {self.conv_act!r}")
        if self.conv_kernel_size < 0 or self.conv_kernel_size % 2 == 0 < self.conv_kernel_size:
            raise ValueError(f"conv_kernel_size must be 0 (none) or odd, got {self.conv_kernel_size}")
        if not self.legacy and self.embedding_dim != self.hidden_size:
            raise ValueError("the non-legacy masked-LM head needs embedding_size == hidden_size")

    def to_hf_dict(self, architecture: str = "DebertaV2ForMaskedLM") -> dict:
        d = super().to_hf_dict(architecture) | {"pos_att_type": list(self.pos_att_type)}
        return d | ({"embedding_size": self.embedding_size} if self.embedding_size else {})

    @classmethod
    def from_dict(cls, d: dict) -> "DebertaV2Config":
        known = {f.name for f in fields(cls)} - {"pre_ln"}
        return cls(**{k: v for k, v in d.items() if k in known and v is not None})


def max_relative(c) -> int:
    return c.max_relative_positions if c.max_relative_positions >= 1 else c.max_position_embeddings


def span(c) -> int:
    """S: relative vectors per direction (the table has 2S rows): the buckets, else max_relative."""
    return c.position_buckets if c.position_buckets > 0 else max_relative(c)


def relative_positions(T: int, buckets: int, max_pos: int, device=None) -> torch.Tensor:
    """(T, T) δ = i - j, query i minus key j; with buckets > 0, |δ| ≤ buckets/2 stays exact and beyond
    it grows logarithmically, reaching buckets - 1 at |δ| = max_pos - 1."""
    i = torch.arange(T, device=device)
    rel = i[:, None] - i[None, :]  # (T, T)
    if buckets <= 0 or max_pos <= 0:
        return rel
    mid = buckets // 2
    far = torch.where(rel.abs() < mid, mid - 1, rel.abs())  # near ones never take the log branch
    log_rate = torch.log(torch.tensor((max_pos - 1) / mid))  # float32, as transformers rounds it
    log = torch.ceil(torch.log(far / mid) / log_rate * (mid - 1)) + mid
    return torch.where(far <= mid, rel, (log * rel.sign()).long())


@functools.lru_cache(maxsize=64)
def relative_window(T: int, buckets: int, max_pos: int, S: int) -> tuple[int, int]:
    """[lo, hi): the rows of the 2S-row table that T tokens reach (|δ| ≤ T - 1, bucketed, clamped to the
    table). transformers projects and scores all 2S rows; the rest are never gathered, so leaving them
    out changes no number and saves most of the position work on short texts."""
    far = int(relative_positions(T, buckets, max_pos)[T - 1, 0]) if T > 1 else 0  # the largest |δ|, bucketed
    return max(0, S - far), min(2 * S, S + far + 1)


class DebertaV2Embeddings(nn.Module):
    """Words (+ absolute positions, + token types, each only if configured), projected E -> H when they
    differ, LayerNorm, then zeroed at pads."""

    def __init__(self, c):
        super().__init__()
        E, H = c.embedding_dim, c.hidden_size
        self.word_embeddings = nn.Embedding(c.vocab_size, E, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, E) if c.position_biased_input else None
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, E) if c.type_vocab_size > 0 else None
        self.embed_proj = nn.Linear(E, H, bias=False) if E != H else None
        self.LayerNorm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, mask):  # (B, T) each
        x = self.word_embeddings(input_ids)  # (B, T, E)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(torch.arange(input_ids.size(1), device=input_ids.device))
        if self.token_type_embeddings is not None:
            tt = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.token_type_embeddings(tt)
        if self.embed_proj is not None:
            x = self.embed_proj(x)  # (B, T, H)
        return self.dropout(self.LayerNorm(x) * mask[..., None].to(x.dtype))


class DisentangledSelfAttention(nn.Module):
    """Content-to-content + c2p + p2c scores, each over √(d·n_kinds), one softmax, then the values."""

    def __init__(self, c):
        super().__init__()
        H = c.hidden_size
        self.n_head, self.head_dim = c.num_attention_heads, H // c.num_attention_heads
        self.query_proj = nn.Linear(H, H)
        self.key_proj = nn.Linear(H, H)
        self.value_proj = nn.Linear(H, H)
        self.kinds = [k for k in ("c2p", "p2c") if k in c.pos_att_type]
        self.relative, self.span = c.relative_attention, span(c)
        if self.relative:
            self.pos_dropout = nn.Dropout(c.hidden_dropout_prob)
            if not c.share_att_key:  # else the content projections project the positions too
                if "c2p" in self.kinds:
                    self.pos_key_proj = nn.Linear(H, H)
                if "p2c" in self.kinds:
                    self.pos_query_proj = nn.Linear(H, H)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def split(self, x):  # (B, T, H) -> (B, A, T, d)
        return x.reshape(x.size(0), x.size(1), self.n_head, self.head_dim).transpose(1, 2)

    def forward(self, x, allowed, rel_pos, rel_emb, need_weights: bool):
        """x (B, T, H); allowed (B, 1, T, T) bool; rel_pos: (c2p, p2c) rows of rel_emb, each (T, T);
        rel_emb (W, H): the rows of the normalised table that T tokens reach (relative_window)."""
        B, T, H = x.shape
        q, k, v = self.split(self.query_proj(x)), self.split(self.key_proj(x)), self.split(self.value_proj(x))
        scale = math.sqrt(self.head_dim * (1 + len(self.kinds)))  # counts the kinds even without positions
        scores = q @ (k.transpose(-1, -2) / scale)  # (B, A, T, T) content to content
        if self.relative and self.kinds:
            r = self.pos_dropout(rel_emb)[None]  # (1, W, H)
            rel, (c2p_rows, p2c_rows) = 0, (i.expand(B, self.n_head, T, T) for i in rel_pos)
            if "c2p" in self.kinds:  # query i against the vector of δ(i, j)
                pk = self.split(getattr(self, "pos_key_proj", self.key_proj)(r))  # (1, A, W, d)
                c2p = q @ pk.transpose(-1, -2)  # (B, A, T, W)
                rel = rel + torch.gather(c2p, -1, c2p_rows) / scale
            if "p2c" in self.kinds:  # key j against the same δ(i, j) = -δ(j, i): gathered per key, transposed
                pq = self.split(getattr(self, "pos_query_proj", self.query_proj)(r))  # (1, A, W, d)
                p2c = k @ pq.transpose(-1, -2)  # (B, A, T, W)
                rel = rel + torch.gather(p2c, -1, p2c_rows).transpose(-1, -2) / scale
            scores = scores + rel
        probs = F.softmax(scores.masked_fill(~allowed, torch.finfo(scores.dtype).min), dim=-1)  # (B, A, T, T)
        y = (self.dropout(probs) @ v).transpose(1, 2).reshape(B, T, H)  # (B, T, H)
        return y, probs if need_weights else None


class DebertaV2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = DisentangledSelfAttention(c)
        self.output = BertSelfOutput(c, c.hidden_size)  # dense, dropout, add, LayerNorm: BERT's keys

    def forward(self, x, *args):
        y, probs = self.self(x, *args)
        return self.output(y, x), probs


class DebertaV2Layer(nn.Module):
    """BERT's post-LN layer with disentangled attention; the feed-forward keys are BERT's."""

    def __init__(self, c):
        super().__init__()
        self.attention = DebertaV2Attention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertSelfOutput(c, c.intermediate_size)

    def forward(self, x, allowed, rel_pos, rel_emb, need_weights: bool):
        x, probs = self.attention(x, allowed, rel_pos, rel_emb, need_weights)
        return self.output(self.intermediate(x), x), probs


class ConvLayer(nn.Module):
    """DeBERTa-v2 xlarge/xxlarge: a 1-D convolution over the embeddings, added to the first layer's
    output before a LayerNorm: "to better learn the local dependency of input tokens" (its release notes)."""

    def __init__(self, c):
        super().__init__()
        k, H = c.conv_kernel_size, c.hidden_size
        self.conv = nn.Conv1d(H, H, k, padding=(k - 1) // 2, groups=c.conv_groups)
        self.LayerNorm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)
        self.act = ACTS[c.conv_act]

    def forward(self, x, y, mask):  # x the layer's input, y its output (B, T, H); mask (B, T)
        z = self.conv(x.transpose(1, 2)).transpose(1, 2)  # (B, T, H)
        z = self.act(self.dropout(z.masked_fill(~mask.bool()[..., None], 0)))
        return self.LayerNorm(y + z) * mask[..., None].to(y.dtype)


class DebertaV2Encoder(nn.Module):
    """The layers, the relative-position table they all share (`rel_embeddings`, 2S × H) and its LayerNorm."""

    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(DebertaV2Layer(c) for _ in range(c.num_hidden_layers))
        self.relative, self.buckets, self.max_relative = c.relative_attention, c.position_buckets, max_relative(c)
        if self.relative:
            self.rel_embeddings = nn.Embedding(2 * span(c), c.hidden_size)
        if c.norm_rel_ebd == "layer_norm":  # transformers builds it even without relative attention
            self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.conv = ConvLayer(c) if c.conv_kernel_size > 0 else None
        self.gradient_checkpointing = False  # bertlab.model.set_gradient_checkpointing

    def forward(self, x, mask, allowed, output_attentions: bool):
        """(last hidden state, L+1 hidden states, L attention maps or Nones) from x (B, T, H)."""
        rel_pos = rel_emb = None
        if self.relative:
            S = self.rel_embeddings.num_embeddings // 2
            lo, hi = relative_window(x.size(1), self.buckets, self.max_relative, S)
            delta = relative_positions(x.size(1), self.buckets, self.max_relative, x.device)  # (T, T)
            rel_pos = ((delta + S).clamp(0, 2 * S - 1) - lo, (S - delta).clamp(0, 2 * S - 1) - lo)  # c2p, p2c rows
            rel_emb = self.rel_embeddings.weight[lo:hi]  # (W, H): v3's 512 rows, 63 of them at 32 tokens
            if hasattr(self, "LayerNorm"):
                rel_emb = self.LayerNorm(rel_emb)  # row by row: the same on the rows used
        hidden, attns = [x], []
        for i, layer in enumerate(self.layer):
            y, probs = run_layer(self, layer, x, allowed, rel_pos, rel_emb, output_attentions)
            x = self.conv(x, y, mask) if i == 0 and self.conv is not None else y
            hidden.append(x)
            attns.append(probs)
        return x, hidden, attns


class DebertaV2Model(nn.Module):
    """The encoder alone; keys as transformers' DebertaV2Model. token_type_ids are read only when
    type_vocab_size > 0; pooler_output is None (DeBERTa's ContextPooler belongs to its classifiers)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = DebertaV2Embeddings(config)
        self.encoder = DebertaV2Encoder(config)
        self.virtual = None  # bertlab.methods.virtual's hook: not supported here (see forward)
        self.apply(lambda m: init_weights(m, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_attentions=False, output_hidden_states=False, causal=False) -> BertOutput:
        if self.virtual is not None:
            raise ValueError("prompt and prefix tuning are not implemented for DeBERTa's relative attention")
        if self.config.position_biased_input:  # relative positions alone have no length limit
            check_length(input_ids, self.config)
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask  # (B, T)
        x = self.embeddings(input_ids, token_type_ids, mask)  # (B, T, H)
        real = mask.bool()
        allowed = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T): query and key both real
        if causal:  # "left context only"
            allowed = allowed & torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()
        x, hidden, attns = self.encoder(x, mask, allowed, output_attentions)
        return BertOutput(last_hidden_state=x,
                          hidden_states=tuple(hidden) if output_hidden_states else None,
                          attentions=tuple(attns) if output_attentions else None)

    def attention_projections(self, layer: int):
        """(pre-norm, query, key, value) of the layer from 1; post-LN: no pre-norm."""
        att = self.encoder.layer[layer - 1].attention.self
        return nn.Identity(), att.query_proj, att.key_proj, att.value_proj


class LegacyLMPredictionHead(nn.Module):
    """legacy=True (`cls.predictions`): dense H -> E, act, LayerNorm, then the decoder, whose weight is
    the word embeddings and whose bias is `bias`. The original checkpoints have no such keys."""

    def __init__(self, c):
        super().__init__()
        E = c.embedding_dim
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.transform = nn.Module()
        self.transform.dense = nn.Linear(c.hidden_size, E)
        self.transform.act = ACT[c.hidden_act]
        self.transform.LayerNorm = nn.LayerNorm(E, eps=c.layer_norm_eps)
        self.decoder = nn.Linear(E, c.vocab_size)  # weight and bias tied by DebertaV2ForMaskedLM.tie_weights

    def forward(self, h):  # (..., H)
        t = self.transform
        return self.decoder(t.LayerNorm(t.act(t.dense(h))))  # (..., V)


class LMPredictionHead(nn.Module):
    """legacy=False (`lm_predictions.lm_head`, the original checkpoints' keys): dense H -> H, act,
    LayerNorm, then the word embeddings themselves as the output layer, plus `bias`."""

    def __init__(self, c):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.act = ACT[c.hidden_act]
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, h, words):  # (..., H), (V, H)
        return F.linear(self.LayerNorm(self.act(self.dense(h))), words, self.bias)  # (..., V)


class DebertaV2ForMaskedLM(nn.Module):
    """Encoder + masked-LM head, in the layout config.legacy selects (keys as transformers'
    DebertaV2ForMaskedLM either way). No sentence-level head: DeBERTa pre-trains with MLM (v2) or
    replaced-token detection (v3) alone."""
    base_model_prefix = "deberta"
    tied_keys = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")  # the legacy head's aliases
    head_names = {"cls.predictions.": "masked-LM head", "lm_predictions.": "masked-LM head"}

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.deberta = DebertaV2Model(config)  # registered first: its word embeddings own the tied tensor
        head = LegacyLMPredictionHead(config) if config.legacy else LMPredictionHead(config)
        head.apply(lambda m: init_weights(m, config))
        if config.legacy:
            self.cls = nn.ModuleDict({"predictions": head})
        else:
            self.lm_predictions = nn.ModuleDict({"lm_head": head})
        self.tie_weights()

    def tie_weights(self):
        if self.config.legacy:
            p = self.cls["predictions"]
            p.decoder.weight, p.decoder.bias = self.deberta.embeddings.word_embeddings.weight, p.bias

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H): the masked-LM head."""
        if self.config.legacy:
            return self.cls["predictions"](h)
        return self.lm_predictions["lm_head"](h, self.deberta.embeddings.word_embeddings.weight)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """As BertForPreTraining.forward; `sparse_mlm` with `labels` scores only the labelled positions."""
        if next_sentence_label is not None:
            raise ValueError("DeBERTa has no next-sentence head: train it with masked-LM only")
        out = self.deberta(input_ids, token_type_ids, attention_mask, output_attentions,
                           output_hidden_states, causal)
        return pretraining_heads(out, self.token_logits, self.config.vocab_size, labels, sparse_mlm)


def sizing(c, T: int = 128) -> tuple[dict, dict]:
    """What bertlab.analysis.sizing's BERT formulas miss for this config, by its parts: (parameters,
    forward FLOPs at T tokens, as transformers computes them). Absolute positions may be gone (negative);
    the relative table, its LayerNorm and any own position projections belong to attention; a
    convolution reads the embeddings. With shared keys both content projections also project the table."""
    H, W, L, S = c.hidden_size, c.embedding_dim, c.num_hidden_layers, span(c)
    kinds = [k for k in ("c2p", "p2c") if k in c.pos_att_type]
    projected = (2 if c.share_att_key else len(kinds)) if c.relative_attention else 0  # of the (2S, H) table
    own = 0 if c.share_att_key or not c.relative_attention else len(kinds)
    conv_w = H * (H // c.conv_groups) * c.conv_kernel_size
    params = {"embeddings": (0 if c.position_biased_input else -c.max_position_embeddings * W) + 2 * (H - W)
              + (conv_w + H + 2 * H if c.conv_kernel_size else 0),
              "projection": W * H if W != H else 0,
              "attention": L * own * (H * H + H) + (2 * S * H if c.relative_attention else 0)
              + (2 * H if c.norm_rel_ebd == "layer_norm" else 0)}
    flops = {"embeddings": 2 * T * conv_w if c.conv_kernel_size else 0,
             "projection": 2 * T * W * H if W != H else 0,
             "qkv": L * projected * 2 * 2 * S * H * H,
             "attention_scores": L * len(kinds) * 2 * T * 2 * S * H if c.relative_attention else 0}
    return params, flops


# ---- DeBERTa-v3's pre-training: replaced-token detection with gradient-disentangled embedding sharing ----

class DebertaV2ForReplacedTokenDetection(ElectraForPreTraining):
    """v3's discriminator (He et al. 2021): the encoder + ELECTRA's replaced-token head (dense, act, one
    logit a token), forward and loss as ELECTRA's. transformers has no such class: the saved folder
    loads there as DebertaV2Model (it drops `discriminator_predictions.*`, the head kept as ours)."""
    base_model_prefix = "deberta"

    def __init__(self, config):
        nn.Module.__init__(self)
        self.config = config
        self.deberta = DebertaV2Model(config)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        self.discriminator_predictions.apply(lambda m: init_weights(m, config))

    attention_projections = DebertaV2Model.attention_projections


class SharedWords(nn.Embedding):
    """GDES (DeBERTaV3 §3.2): the discriminator's word vectors are E_D = sg(E_G) + E_Δ. `weight` is E_Δ,
    zeros at first; E_G (the generator's table) is read detached, so only the generator's MLM loss
    moves it, and the discriminator's loss only E_Δ."""

    def __init__(self, words: nn.Embedding):
        super().__init__(*words.weight.shape, padding_idx=words.padding_idx)
        nn.init.zeros_(self.weight)
        self.shared = [words]  # a list, not a submodule: E_G stays the generator's alone in state dicts

    def forward(self, ids):  # (B, T) -> (B, T, E)
        return F.embedding(ids, self.shared[0].weight.detach() + self.weight, self.padding_idx)
