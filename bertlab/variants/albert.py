"""ALBERT (Lan et al. 2019): BERT with far fewer parameters, by two tricks.

1. Factorised embeddings: token vectors of width E (config.embedding_dim, small), mapped to the
   hidden width H by one linear layer (`encoder.embedding_hidden_mapping_in`) before the first layer.
2. Cross-layer sharing: only `num_hidden_groups` (G) groups of layer weights exist, and the L steps
   of the encoder reuse them in turn: step i runs group i // (L // G). Each group holds
   `inner_group_num` layers run one after another, so one step may be several layers deep.
   With G = 1 (ALBERT's released models) every step runs the same weights: more layers add compute,
   not parameters.

Pre-training adds sentence-order prediction (SOP: were the two segments swapped?) in place of BERT's
next-sentence prediction; its logits come out as `nsp_logits`. Parameter names are Hugging Face's
AlbertModel / AlbertForPreTraining / AlbertForMaskedLM keys.

Counting, as transformers 4.x does: `hidden_states` has L+1 entries (the embeddings mapped to H, then
the output of each step), `attentions` L * inner_group_num (every layer run, in order). (transformers
5.x also records a hidden state after each inner layer, L * inner_group_num + 1 entries: the same
tensors when inner_group_num is 1, else ours are every inner_group_num-th of theirs.)
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import BertConfig
from ..model import (
    ACT,
    BertEmbeddings,
    BertOutput,
    BertSelfAttention,
    encoder_inputs,
    init_weights,
    mask_bias,
    pretraining_heads,
    run_layer,
)


class AlbertEmbeddings(BertEmbeddings):
    """BERT's embeddings (same forward) at width E, usually much smaller than H."""

    def __init__(self, c: BertConfig):
        nn.Module.__init__(self)
        E = c.embedding_dim
        self.word_embeddings = nn.Embedding(c.vocab_size, E, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)


class AlbertAttention(BertSelfAttention):
    """BERT's self-attention (query, key, value, same softmax) with its output projection and
    post-LN in the same module, as ALBERT's keys have them: attention.{dense, LayerNorm}."""

    def __init__(self, c: BertConfig):
        super().__init__(c)
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.output_dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x, bias, need_weights: bool, prefix=None):  # x (B, T, H)
        y, probs = super().forward(x, bias, need_weights, prefix)  # (B, T, H); (B, A, T, T) or None
        return self.LayerNorm(x + self.output_dropout(self.dense(y))), probs


class AlbertLayer(nn.Module):
    """Attention, then the feed-forward block (ffn -> act -> ffn_output), residual, LayerNorm."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.full_layer_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.attention = AlbertAttention(c)
        self.ffn = nn.Linear(c.hidden_size, c.intermediate_size)
        self.ffn_output = nn.Linear(c.intermediate_size, c.hidden_size)
        self.activation = ACT[c.hidden_act]
        self.dropout = nn.Dropout(c.hidden_dropout_prob)  # as the original; transformers leaves it out

    def forward(self, x, bias, need_weights: bool, prefix=None):
        a, probs = self.attention(x, bias, need_weights, prefix)  # (B, T, H)
        h = self.ffn_output(self.activation(self.ffn(a)))  # (B, T, I) -> (B, T, H)
        return self.full_layer_layer_norm(self.dropout(h) + a), probs


class AlbertLayerGroup(nn.Module):
    """One shared weight set: inner_group_num layers, run in order at every step that uses it."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(c) for _ in range(c.inner_group_num))

    def forward(self, x, bias, need_weights: bool, prefix=None):
        """`prefix`: one (keys, values) per inner layer, or None."""
        attns = []
        for i, layer in enumerate(self.albert_layers):
            x, probs = layer(x, bias, need_weights, None if prefix is None else prefix[i])
            attns.append(probs)
        return x, attns


class AlbertTransformer(nn.Module):
    """E -> H, then L steps over G shared groups (HF's AlbertTransformer, keys `encoder.`)."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.config = c
        self.embedding_hidden_mapping_in = nn.Linear(c.embedding_dim, c.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(c) for _ in range(c.num_hidden_groups))
        self.gradient_checkpointing = False  # bertlab.model.set_gradient_checkpointing: a step at a time

    def group_of(self, step: int) -> AlbertLayerGroup:
        """The shared weights step `step` (from 0) runs."""
        c = self.config
        return self.albert_layer_groups[step // (c.num_hidden_layers // c.num_hidden_groups)]

    def forward(self, x, bias, output_attentions: bool, prefix=None):
        """(last hidden state, L+1 hidden states, L * inner_group_num attention maps or Nones) from
        the embeddings x (B, T, E). `prefix`: one (keys, values) per attention map (its own for every
        step, though the weights are shared), or None."""
        x = self.embedding_hidden_mapping_in(x)  # (B, T, H)
        hidden, attns = [x], []
        n = self.config.inner_group_num
        for step in range(self.config.num_hidden_layers):
            kv = None if prefix is None else prefix[step * n:(step + 1) * n]
            x, probs = run_layer(self, self.group_of(step), x, bias, output_attentions, kv)
            hidden.append(x)
            attns.extend(probs)
        return x, hidden, attns

    def attention(self, layer: int) -> AlbertAttention:
        """The attention module that computes attention map `layer` (from 1, in the order of
        `attentions`: step by step, and within a step the group's inner layers in turn)."""
        c = self.config
        n = c.num_hidden_layers * c.inner_group_num
        if not 1 <= layer <= n:
            raise ValueError(f"attention layer {layer} out of range: this ALBERT computes {n} attention maps")
        step, inner = divmod(layer - 1, c.inner_group_num)
        return self.group_of(step).albert_layers[inner].attention


class AlbertModel(nn.Module):
    """The encoder alone; its state-dict keys are those of Hugging Face's AlbertModel."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)  # tanh after it, as BERT's
        self.virtual = None  # a hook adding virtual tokens to the inputs (bertlab.methods.virtual)
        self.apply(lambda m: init_weights(m, config))
        if not add_pooling_layer:  # HF's AlbertForTokenClassification has none; then tanh([CLS]), unused
            self.pooler = nn.Identity()  # made and initialised first all the same: the same random stream

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_attentions=False, output_hidden_states=False, causal=False) -> BertOutput:
        token_type_ids, attention_mask, prompt, prefix, past = encoder_inputs(
            self, input_ids, token_type_ids, attention_mask, causal)
        e = self.embeddings(input_ids, token_type_ids, prompt, past)  # (B, T, E)
        x, hidden, attns = self.encoder(e, mask_bias(attention_mask, e.dtype, causal), output_attentions, prefix)
        return BertOutput(
            last_hidden_state=x,  # (B, T, H)
            pooler_output=torch.tanh(self.pooler(x[:, 0])),  # (B, H) from [CLS]
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attns) if output_attentions else None,
        )

    def attention_projections(self, layer: int):
        """(pre-norm, query, key, value) behind attention map `layer` (from 1): the shared layer's
        own modules, so the same ones come back for every step that runs that layer. With
        inner_group_num > 1 the maps are counted as `attentions` orders them (step, then inner layer);
        hidden_states[layer - 1] is that layer's input only when inner_group_num is 1."""
        att = self.encoder.attention(layer)
        return nn.Identity(), att.query, att.key, att.value  # post-LN: nothing before the projections


class AlbertMLMHead(nn.Module):
    """H -> E, activation, LayerNorm, then the (tied) word embeddings and a bias: (..., V)."""

    def __init__(self, c: BertConfig):
        super().__init__()
        E = c.embedding_dim
        self.LayerNorm = nn.LayerNorm(E, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.dense = nn.Linear(c.hidden_size, E)
        # HF's decoder carries a bias aliasing `bias` (key predictions.decoder.bias, a tied key):
        # here it has none and `bias` joins the GEMM, as in BERT's head.
        self.decoder = nn.Linear(E, c.vocab_size, bias=False)  # weight tied to the word embeddings
        self.activation = ACT[c.hidden_act]

    def forward(self, h):  # (..., H)
        h = self.LayerNorm(self.activation(self.dense(h)))  # (..., E)
        return F.linear(h, self.decoder.weight, self.bias)  # (..., V)


class AlbertSOPHead(nn.Module):
    """Sentence order from the pooled [CLS]: 0 = segments in their order, 1 = swapped."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.dropout = nn.Dropout(c.hidden_dropout_prob)  # HF's classifier_dropout_prob is not in our config
        self.classifier = nn.Linear(c.hidden_size, 2)

    def forward(self, pooled):  # (B, H)
        return self.classifier(self.dropout(pooled))  # (B, 2)


class AlbertForPreTraining(nn.Module):
    """Encoder + masked-LM head + sentence-order head; keys match HF's AlbertForPreTraining (and its
    AlbertForMaskedLM, which lacks the pooler and the SOP head). Same surface as BertForPreTraining."""
    base_model_prefix = "albert"
    tied_keys = ("predictions.decoder.weight", "predictions.decoder.bias")
    head_names = {"albert.pooler.": "pooler", "predictions.": "masked-LM head",
                  "sop_classifier.": "sentence-order head"}

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)
        for head in (self.predictions, self.sop_classifier):
            head.apply(lambda m: init_weights(m, config))
        self.tie_weights()

    def tie_weights(self):
        self.predictions.decoder.weight = self.albert.embeddings.word_embeddings.weight

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H): the masked-LM head."""
        return self.predictions(h)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """`next_sentence_label` is the sentence-order label (HF's sentence_order_label). `sparse_mlm`
        with `labels`: vocabulary logits only where labels != -100 (same loss, far less work)."""
        out = self.albert(input_ids, token_type_ids, attention_mask, output_attentions,
                          output_hidden_states, causal)
        return pretraining_heads(out, self.predictions, self.config.vocab_size, labels, sparse_mlm,
                                 self.sop_classifier, next_sentence_label)
