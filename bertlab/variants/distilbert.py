"""DistilBERT (Sanh et al. 2019): BERT distilled into half the layers, with no token types, no pooler
and no next-sentence head. The block is BERT's post-LN layer under other names (q_lin, sa_layer_norm,
ffn.lin1, ...); names copy Hugging Face's modeling_distilbert.py so checkpoints load key for key.

Two quirks that parity depends on: transformers hard-codes every LayerNorm's eps to 1e-12 (it never
reads layer_norm_eps), and there is no dropout on the attention output, only after the feed-forward.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..config import BertConfig
from ..model import (ACT, BertOutput, BertSelfAttention, encoder_inputs, init_weights, mask_bias,
                     pretraining_heads, run_layer)

LN_EPS = 1e-12  # what transformers' DistilBERT uses everywhere, whatever the config says
MODEL_TYPE = "distilbert"  # its record's name (family.py): the distillation job's student


def _ln(c: BertConfig) -> nn.LayerNorm:
    return nn.LayerNorm(c.hidden_size, eps=LN_EPS)


class Embeddings(nn.Module):
    """Word + position vectors; no token-type table (segments are not a DistilBERT input)."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.LayerNorm = _ln(c)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids, prompt=None, past: int = 0):  # (B, T)
        """`prompt` and `past`: prompt and prefix tuning's, as in bertlab.model.BertEmbeddings."""
        x = self.word_embeddings(input_ids)
        if prompt is not None:
            x = torch.cat([prompt.to(x.dtype).expand(x.size(0), -1, -1), x], dim=1)  # (B, P + T, H)
        pos = torch.arange(past, past + x.size(1), device=input_ids.device)  # (T,)
        x = x + self.position_embeddings(pos)  # (B, T, H)
        return self.dropout(self.LayerNorm(x))


class MultiHeadSelfAttention(nn.Module):
    """q_lin/k_lin/v_lin, BERT's scaled dot-product attention, then out_lin (no dropout after it)."""
    attend = BertSelfAttention.attend  # the same math as BERT's, on DistilBERT's module names

    def __init__(self, c: BertConfig):
        super().__init__()
        self.n_head, self.head_dim = c.num_attention_heads, c.head_dim
        self.q_lin = nn.Linear(c.hidden_size, c.hidden_size)
        self.k_lin = nn.Linear(c.hidden_size, c.hidden_size)
        self.v_lin = nn.Linear(c.hidden_size, c.hidden_size)
        self.out_lin = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)  # on the attention probabilities

    def forward(self, x, bias, need_weights: bool, prefix=None):  # x (B, T, H); bias (B, 1, T, T) or None
        y, probs = self.attend(self.q_lin(x), self.k_lin(x), self.v_lin(x), bias, need_weights, prefix)
        return self.out_lin(y), probs  # (B, T, H); (B, A, T, T) or None


class FFN(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.lin1 = nn.Linear(c.hidden_size, c.intermediate_size)
        self.lin2 = nn.Linear(c.intermediate_size, c.hidden_size)
        self.act = ACT[c.hidden_act]
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x):  # (B, T, H)
        return self.dropout(self.lin2(self.act(self.lin1(x))))  # (B, T, H)


class TransformerBlock(nn.Module):
    """Post-LN, as BERT: attention, add, LayerNorm; feed-forward, add, LayerNorm."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = MultiHeadSelfAttention(c)
        self.sa_layer_norm = _ln(c)
        self.ffn = FFN(c)
        self.output_layer_norm = _ln(c)

    def forward(self, x, bias, need_weights, prefix=None):
        y, probs = self.attention(x, bias, need_weights, prefix)
        x = self.sa_layer_norm(y + x)
        return self.output_layer_norm(self.ffn(x) + x), probs


class Transformer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(TransformerBlock(c) for _ in range(c.num_hidden_layers))
        self.gradient_checkpointing = False  # bertlab.model.set_gradient_checkpointing


def check_config(c: BertConfig) -> None:
    if c.model_type != "distilbert":
        raise ValueError(f"DistilBERT classes need model_type 'distilbert', got {c.model_type!r}")
    if c.layer_norm_eps != LN_EPS:
        raise ValueError(f"DistilBERT's LayerNorms use eps {LN_EPS:g} (transformers ignores layer_norm_eps), "
                         f"got layer_norm_eps={c.layer_norm_eps!r}: leave it at {LN_EPS:g}")


class DistilBertModel(nn.Module):
    """The encoder alone; keys as transformers' DistilBertModel. token_type_ids are accepted (the common
    signature) and ignored; pooler_output is None."""

    def __init__(self, config: BertConfig):
        super().__init__()
        check_config(config)
        self.config = config
        self.embeddings = Embeddings(config)
        self.transformer = Transformer(config)
        self.virtual = None  # a hook adding virtual tokens to the inputs (bertlab.methods.virtual)
        self.apply(lambda m: init_weights(m, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_attentions=False, output_hidden_states=False, causal=False) -> BertOutput:
        _, attention_mask, prompt, prefix, past = encoder_inputs(  # no token types
            self, input_ids, token_type_ids, attention_mask, causal)
        x = self.embeddings(input_ids, prompt, past)  # (B, T, H)
        bias = mask_bias(attention_mask, x.dtype, causal)  # (B, 1, T, T) or None
        hidden, attns = [x], []
        for i, block in enumerate(self.transformer.layer):
            x, probs = run_layer(self.transformer, block, x, bias, output_attentions,
                                 None if prefix is None else prefix[i])
            hidden.append(x)
            attns.append(probs)
        return BertOutput(last_hidden_state=x,
                          hidden_states=tuple(hidden) if output_hidden_states else None,
                          attentions=tuple(attns) if output_attentions else None)

    def attention_projections(self, layer: int):
        """(pre-norm, query, key, value) of the layer from 1; DistilBERT is post-LN: no pre-norm."""
        att = self.transformer.layer[layer - 1].attention
        return nn.Identity(), att.q_lin, att.k_lin, att.v_lin


class DistilBertForMaskedLM(nn.Module):
    """Encoder + masked-LM head (keys as transformers' DistilBertForMaskedLM): dense, activation,
    LayerNorm, then the projection to the vocabulary, tied to the word embeddings, with its own bias.
    DistilBERT was distilled with masked-LM alone: there is no sentence-level head."""
    base_model_prefix = "distilbert"
    tied_keys = ("vocab_projector.weight",)
    head_names = {"vocab_transform.": "masked-LM head", "vocab_layer_norm.": "masked-LM head",
                  "vocab_projector.": "masked-LM head"}

    def __init__(self, config: BertConfig):
        super().__init__()
        check_config(config)
        self.config = config
        self.distilbert = DistilBertModel(config)  # registered first: its word embeddings own the tied tensor
        self.vocab_transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT[config.hidden_act]
        self.vocab_layer_norm = _ln(config)
        self.vocab_projector = nn.Linear(config.hidden_size, config.vocab_size)
        for m in (self.vocab_transform, self.vocab_layer_norm, self.vocab_projector):
            m.apply(lambda mod: init_weights(mod, config))
        self.tie_weights()

    def tie_weights(self):
        self.vocab_projector.weight = self.distilbert.embeddings.word_embeddings.weight

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H): the masked-LM head."""
        h = self.vocab_layer_norm(self.activation(self.vocab_transform(h)))  # (..., H)
        return self.vocab_projector(h)  # (..., V)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """As BertForPreTraining.forward; `sparse_mlm` with `labels` scores only the labelled positions.
        A next_sentence_label is refused: DistilBERT has no head to predict it."""
        if next_sentence_label is not None:
            raise ValueError("DistilBERT has no next-sentence head: train it with masked-LM only")
        out = self.distilbert(input_ids, token_type_ids, attention_mask, output_attentions,
                              output_hidden_states, causal)
        return pretraining_heads(out, self.token_logits, self.config.vocab_size, labels, sparse_mlm)


# config.json names the same numbers differently: ours -> theirs (family.Member.config_json)
HF_NAMES = {"hidden_size": "dim", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
            "intermediate_size": "hidden_dim", "hidden_act": "activation", "hidden_dropout_prob": "dropout",
            "attention_probs_dropout_prob": "attention_dropout"}


def to_config_json(d: dict) -> dict:
    """Our config fields under DistilBERT's names, with the two switches transformers reads."""
    return {HF_NAMES.get(k, k): v for k, v in d.items()} | {"sinusoidal_pos_embds": False, "tie_weights_": True}


def from_config_json(d: dict) -> dict:
    """A DistilBERT config.json with our names added beside its own."""
    if d.get("sinusoidal_pos_embds"):
        raise ValueError("DistilBERT with sinusoidal position embeddings is not supported")
    return {**d, **{ours: d[theirs] for ours, theirs in HF_NAMES.items() if theirs in d}}
