"""BERT from scratch, readable in one sitting.

Module and parameter names copy Hugging Face's modeling_bert.py, so a checkpoint converts by
renaming prefixes at most, and every number can be checked against `transformers`. Plain on
purpose: CPU inference speed-ups (fused QKV, pre-packed weights) are opt-in, in `fast.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .config import BertConfig

ACT = {
    "gelu": nn.GELU(),  # exact erf form, as in the original BERT
    "gelu_new": nn.GELU(approximate="tanh"),
    "gelu_pytorch_tanh": nn.GELU(approximate="tanh"),
    "relu": nn.ReLU(),
}


@dataclass
class BertOutput:
    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    mlm_logits: torch.Tensor | None = None  # (B, T, V), or (N, V) at the N labelled positions when sparse
    nsp_logits: torch.Tensor | None = None  # (B, 2): next sentence (BERT) or sentence order (ALBERT)
    rtd_logits: torch.Tensor | None = None  # (B, T): ELECTRA's discriminator, > 0 means "replaced"
    last_hidden_state: torch.Tensor | None = None  # (B, T, H)
    pooler_output: torch.Tensor | None = None  # (B, H)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L+1 of (B, T, H): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # L of (B, A, T, T)


class BertEmbeddings(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = _post_ln(c)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, prompt=None, past: int = 0):  # (B, T) each
        """`prompt` (P, E): prompt tuning's vectors, put before the text as P more tokens of segment 0;
        `past`: prefix tuning's virtual tokens, which take the first positions (as transformers numbers
        tokens after a cache). bertlab.methods.virtual sets both; plain fine-tuning has neither."""
        x = self.word_embeddings(input_ids)
        if prompt is not None:
            x = torch.cat([prompt.to(x.dtype).expand(x.size(0), -1, -1), x], dim=1)  # (B, P + T, E)
            token_type_ids = F.pad(token_type_ids, (prompt.size(0), 0))
        pos = torch.arange(past, past + x.size(1), device=input_ids.device)  # (T,)
        x = x + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)  # broadcast over B
        return self.dropout(self.LayerNorm(x))  # (B, T, H)


def sinusoidal_table(positions: int, dim: int) -> torch.Tensor:
    """(P, dim) the Transformer paper's fixed positions: column 2j holds sin(p / 10000^(2j/dim)), column
    2j+1 the cosine at the same frequency. Nothing is learnt; each position is a point on `dim`/2 clocks
    of wavelengths 2π to 10000·2π, so any shift is the same rotation wherever it starts."""
    p = torch.arange(positions, dtype=torch.float64)[:, None]  # (P, 1)
    j = torch.arange(dim, dtype=torch.float64)[None, :]  # (1, dim)
    angle = p / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor") / dim)  # (P, dim)
    return torch.where(j % 2 == 0, angle.sin(), angle.cos()).float()


def position_tables(model: nn.Module) -> list[nn.Embedding]:
    """Every position table in a model (ELECTRA's pair has two: generator and discriminator)."""
    return [m.position_embeddings for m in model.modules() if isinstance(getattr(m, "position_embeddings", None),
                                                                        nn.Embedding)]


@torch.no_grad()
def fix_sinusoidal_positions(model: nn.Module, fill: bool = True, scale: float | None = None) -> nn.Module:
    """Pre-training with fixed sinusoidal positions: fill each position table with sinusoidal_table
    (fill=False on a resume, whose checkpoint holds them already) and stop it learning. The table stays
    an ordinary weight, so the saved model is a plain checkpoint transformers loads as it is.
    `scale` (default: initializer_range·√2) brings the sines to the size of BERT's freshly drawn word
    vectors (std 0.02; a sine's is 1/√2): at full size they are ~35× larger and drown the words, which
    the Transformer avoided by multiplying its word vectors by √H instead."""
    scale = model.config.initializer_range * 2 ** 0.5 if scale is None else scale
    for table in position_tables(model):
        if fill:
            table.weight.copy_(scale * sinusoidal_table(*table.weight.shape))
        table.weight.requires_grad_(False)
    return model


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.n_head, self.head_dim = c.num_attention_heads, c.head_dim
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def forward(self, x, bias, need_weights: bool, prefix=None):  # x (B, T, H); bias (B, 1, T, T) or None
        return self.attend(self.query(x), self.key(x), self.value(x), bias, need_weights, prefix)

    def attend(self, q, k, v, bias, need_weights: bool, prefix=None):
        """Attention from projected q, k, v (B, T, H) each; its own method so that fast.py can feed it
        one fused projection. `prefix`: prefix tuning's (keys, values), (B, A, P, d) each, put before
        the text's (the bias then covers P + T keys)."""
        B, T, H = q.shape
        split = lambda t: t.reshape(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, A, T, d)
        q, k, v = split(q), split(k), split(v)
        if prefix is not None:
            k, v = torch.cat([prefix[0].to(k.dtype), k], dim=2), torch.cat([prefix[1].to(v.dtype), v], dim=2)
        if need_weights:  # explicit softmax: the probabilities are what the attention views show
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, A, T, T)
            probs = F.softmax(scores if bias is None else scores + bias, dim=-1)
            y = self.dropout(probs) @ v  # (B, A, T, d)
        else:  # fused kernel, same numbers
            mask = None if bias is None else bias.to(q.dtype)
            p = self.dropout.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, A, T, d)
            probs = None
        return y.transpose(1, 2).reshape(B, T, H), probs  # (B, T, H); (B, A, T, P + T) or None


def _post_ln(c: BertConfig) -> nn.Module:
    """BERT's LayerNorm after each residual add; pre-LN models normalise before each block instead."""
    return nn.Identity() if c.pre_ln else nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)


def _pre_ln(c: BertConfig) -> nn.Module:
    """MegatronBert's `ln`: a LayerNorm before a block (or after the last layer) in pre-LN models only."""
    return nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps) if c.pre_ln else nn.Identity()


class BertSelfOutput(nn.Module):
    """Project, dropout, add the residual, then LayerNorm (post-LN, as in the paper)."""

    def __init__(self, c: BertConfig, d_in: int):
        super().__init__()
        self.dense = nn.Linear(d_in, c.hidden_size)
        self.LayerNorm = _post_ln(c)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, h, residual):  # h (B, T, d_in), residual (B, T, H)
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.ln = _pre_ln(c)
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c, c.hidden_size)

    def forward(self, x, bias, need_weights, prefix=None):
        y, probs = self.self(self.ln(x), bias, need_weights, prefix)
        return self.output(y, x), probs


class BertIntermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.act = ACT[c.hidden_act]

    def forward(self, x):
        return self.act(self.dense(x))  # (B, T, I)


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = BertAttention(c)
        self.ln = _pre_ln(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertSelfOutput(c, c.intermediate_size)  # HF's BertOutput has the same shape

    def forward(self, x, bias, need_weights, prefix=None):
        x, probs = self.attention(x, bias, need_weights, prefix)
        return self.output(self.intermediate(self.ln(x)), x), probs


def device_of(module: nn.Module) -> torch.device:
    """Where a model's weights live: every input an analysis or evaluator builds goes there."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def run_layer(stack: nn.Module, layer: nn.Module, *args):
    """layer(*args); under activation checkpointing (`stack.gradient_checkpointing`, training with
    gradients) only the layer's inputs are kept and backward runs it again: the same numbers for
    about a third more compute and one layer's activations instead of all of them."""
    if stack.gradient_checkpointing and stack.training and torch.is_grad_enabled():
        return checkpoint(layer, *args, use_reentrant=False)  # keeps the RNG state: same dropout
    return layer(*args)


def set_gradient_checkpointing(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch activation checkpointing on (or off) in every layer stack of `model` (any family member,
    a classifier, ELECTRA's generator + discriminator pair)."""
    stacks = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
    if not stacks:
        raise ValueError(f"{type(model).__name__} has no layer stack to checkpoint")
    for m in stacks:
        m.gradient_checkpointing = on
    return model


class BertEncoder(nn.Module):
    """The layer stack; RoBERTa and ELECTRA use it as is (their checkpoint keys are BERT's)."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c.num_hidden_layers))
        self.ln = _pre_ln(c)  # pre-LN: the residual stream is normalised once, at the end
        self.gradient_checkpointing = False  # set_gradient_checkpointing

    def forward(self, x, bias, output_attentions: bool, prefix=None):
        """(last hidden state, L+1 hidden states, L attention maps or Nones) from x (B, T, H);
        `prefix`: one (keys, values) per layer, or None."""
        hidden, attns = [x], []
        for i, layer in enumerate(self.layer):
            x, probs = run_layer(self, layer, x, bias, output_attentions, None if prefix is None else prefix[i])
            hidden.append(x)
            attns.append(probs)
        x = hidden[-1] = self.ln(x)  # pre-LN, as MegatronBert: the last hidden state is normalised
        return x, hidden, attns

    def attention(self, layer: int):
        """(pre-norm, self-attention) of layer `layer` (from 1)."""
        att = self.layer[layer - 1].attention
        return att.ln, att.self


class BertPooler(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))  # (B, H) from [CLS]


def attention_bias(attention_mask, T: int, dtype, causal: bool = False):
    """Additive (B, 1, T, T) bias: 0 where a query may look, the dtype's minimum where it may not."""
    allowed = attention_mask[:, None, None, :].bool()  # (B, 1, 1, T) over keys
    if causal:  # "left context only": what a GPT-style model would see
        allowed = allowed & torch.ones(T, T, dtype=torch.bool, device=allowed.device).tril()
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)


def mask_bias(attention_mask, dtype, causal: bool = False):
    """None when nothing is masked (lets SDPA pick its fastest kernel), else attention_bias. Off the CPU the
    bias is built either way: asking would make the CPU wait for the GPU at every forward (same numbers)."""
    if not causal and attention_mask.device.type == "cpu" and bool(attention_mask.all()):
        return None
    return attention_bias(attention_mask, attention_mask.size(1), dtype, causal)  # (B, 1, T, T)


def check_length(input_ids, c: BertConfig, virtual: int = 0):
    T = input_ids.size(1) + c.position_offset + virtual
    if T > c.max_position_embeddings:
        raise ValueError(f"sequence length {input_ids.size(1)} exceeds max_position_embeddings "
                         f"({c.max_position_embeddings}{f' less {c.position_offset} unused' if c.position_offset else ''}"
                         f"{f' less {virtual} virtual tokens' if virtual else ''})")


def encoder_inputs(encoder, input_ids, token_type_ids, attention_mask, causal: bool):
    """An encoder's inputs made whole: the length checked, token types and mask defaulted, then what its
    `virtual` hook adds (prompt / prefix tuning's, set by bertlab.methods.virtual): (token_type_ids,
    attention_mask, prompt, prefix, past). `prompt` (P, E) goes before the text's embeddings; `prefix`,
    one (keys, values) per layer, each (B, A, P, d), before each layer's own; `past`: the positions the
    prefix takes; the mask then covers them too."""
    check_length(input_ids, encoder.config)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if getattr(encoder, "virtual", None) is None:
        return token_type_ids, attention_mask, None, None, 0
    if causal:
        raise ValueError("left-context-only attention is for the plain model, not one with virtual tokens")
    prompt, prefix, attention_mask, past = encoder.virtual(encoder, input_ids, attention_mask)
    return token_type_ids, attention_mask, prompt, prefix, past


def pretraining_heads(out: BertOutput, token_logits, vocab_size: int, labels=None, sparse_mlm: bool = False,
                      pair_head=None, next_sentence_label=None) -> BertOutput:
    """The pre-training heads on an encoder's output and their losses, summed into out.loss. `sparse_mlm`
    with `labels`: vocabulary logits only where labels != -100 (same loss, far less work, since the H×V
    projection dominates small models). `pair_head` (next sentence or sentence order) reads the pooler."""
    h = out.last_hidden_state  # (B, T, H)
    if sparse_mlm and labels is not None:
        keep = labels.ne(-100)  # (B, T)
        h, labels = h[keep], labels[keep]  # (N, H), (N,)
    out.mlm_logits = token_logits(h)  # (B, T, V), or (N, V) when sparse
    if labels is not None:
        logits = out.mlm_logits.reshape(-1, vocab_size).float()
        out.mlm_loss = F.cross_entropy(logits, labels.reshape(-1), ignore_index=-100)
    if pair_head is not None:
        out.nsp_logits = pair_head(out.pooler_output)  # (B, 2)
        if next_sentence_label is not None:
            out.nsp_loss = F.cross_entropy(out.nsp_logits.float(), next_sentence_label.reshape(-1),
                                           ignore_index=-100)
    losses = [loss for loss in (out.mlm_loss, out.nsp_loss) if loss is not None]
    if losses:
        out.loss = losses[0] if len(losses) == 1 else sum(losses)  # one loss: that very tensor
    return out


class BertModel(nn.Module):
    """The encoder alone; its state-dict keys are those of Hugging Face's BertModel. A member that
    differs only in its embeddings (RoBERTa) names its own `Embeddings`."""
    Embeddings = BertEmbeddings

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = self.Embeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.virtual = None  # a hook adding virtual tokens to the inputs (bertlab.methods.virtual)
        self.apply(lambda m: init_weights(m, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_attentions=False, output_hidden_states=False, causal=False) -> BertOutput:
        causal = causal or self.config.is_decoder  # a causal BERT always reads left to right
        token_type_ids, attention_mask, prompt, prefix, past = encoder_inputs(
            self, input_ids, token_type_ids, attention_mask, causal)
        x = self.embeddings(input_ids, token_type_ids, prompt, past)  # (B, T, H); T grows by P with a prompt
        x, hidden, attns = self.encoder(x, mask_bias(attention_mask, x.dtype, causal), output_attentions, prefix)
        return BertOutput(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attns) if output_attentions else None,
        )

    def attention_projections(self, layer: int):
        """(pre-norm, query, key, value) of the layer from 1: each family member's encoder has this."""
        ln, sa = self.encoder.attention(layer)
        return ln, sa.query, sa.key, sa.value


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.act = ACT[c.hidden_act]
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, h):
        return self.LayerNorm(self.act(self.dense(h)))  # (..., H)


class BertLMPredictionHead(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(c)
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size, bias=False)  # weight tied to word embeddings
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def forward(self, h):
        return F.linear(self.transform(h), self.decoder.weight, self.bias)  # (..., V), bias in the GEMM


class BertPreTrainingHeads(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(c)
        self.seq_relationship = nn.Linear(c.hidden_size, 2)


class BertForPreTraining(nn.Module):
    """Encoder + masked-LM head + next-sentence head; keys match HF's BertForPreTraining.

    Every family member's model class has the same surface, which loading, saving and the views use:
    `base_model_prefix` (the encoder's attribute), `tied_keys` (state-dict aliases of other tensors),
    `head_names` (key prefixes of parts a checkpoint may lack, by their name), `tie_weights()`,
    `token_logits(h)` and this forward's signature and output."""
    base_model_prefix = "bert"
    tied_keys = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
    head_names = {"bert.pooler.": "pooler", "cls.predictions.": "masked-LM head",
                  "cls.seq_relationship.": "next-sentence head"}

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.cls.apply(lambda m: init_weights(m, config))
        self.tie_weights()

    def tie_weights(self):
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H): the masked-LM head."""
        return self.cls.predictions(h)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """`sparse_mlm` with `labels`: vocabulary logits only where labels != -100 (pretraining_heads)."""
        out = self.bert(input_ids, token_type_ids, attention_mask, output_attentions,
                        output_hidden_states, causal)
        return pretraining_heads(out, self.cls.predictions, self.config.vocab_size, labels, sparse_mlm,
                                 self.cls.seq_relationship, next_sentence_label)


@torch.no_grad()
def init_weights(m: nn.Module, c: BertConfig):
    """BERT's initialisation: N(0, 0.02) weights, zero biases, identity LayerNorms."""
    if isinstance(m, (nn.Linear, nn.Embedding)):
        m.weight.normal_(0.0, c.initializer_range)
        if isinstance(m, nn.Linear) and m.bias is not None:
            m.bias.zero_()
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight[m.padding_idx].zero_()
    elif isinstance(m, nn.LayerNorm):
        m.weight.fill_(1.0)
        m.bias.zero_()
    elif isinstance(m, BertLMPredictionHead):
        m.bias.zero_()
