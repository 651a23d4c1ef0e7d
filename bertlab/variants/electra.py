"""ELECTRA (Clark et al. 2020): a small masked-LM generator fills in masked tokens, and a discriminator
learns to tell, at every position, whether the token is the original or a replacement.

The encoder is BERT's (bertlab.model.BertEncoder, same checkpoint keys under `electra.encoder.`);
what differs is around it: token vectors of width E (config.embedding_dim), projected to H by
`embeddings_project` only when E != H, no pooler, and the two heads. Parameter names are Hugging
Face's ElectraModel / ElectraForPreTraining / ElectraForMaskedLM keys.
"""
from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from ..config import BertConfig
from ..model import (
    ACT,
    BertEmbeddings,
    BertEncoder,
    BertModel,
    BertOutput,
    encoder_inputs,
    init_weights,
    mask_bias,
    pretraining_heads,
)


class ElectraEmbeddings(BertEmbeddings):
    """BERT's embeddings (same forward) at width E, which may be smaller than H."""

    def __init__(self, c: BertConfig):
        nn.Module.__init__(self)
        E = c.embedding_dim
        self.word_embeddings = nn.Embedding(c.vocab_size, E, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)


class ElectraModel(nn.Module):
    """The encoder alone (HF's ElectraModel): embeddings (E), projection to H if E != H, BERT's layers."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = ElectraEmbeddings(config)
        if config.embedding_dim != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_dim, config.hidden_size)
        self.encoder = BertEncoder(config)
        self.virtual = None  # a hook adding virtual tokens to the inputs (bertlab.methods.virtual)
        self.apply(lambda m: init_weights(m, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_attentions=False, output_hidden_states=False, causal=False) -> BertOutput:
        token_type_ids, attention_mask, prompt, prefix, past = encoder_inputs(
            self, input_ids, token_type_ids, attention_mask, causal)
        x = self.embeddings(input_ids, token_type_ids, prompt, past)  # (B, T, E)
        if hasattr(self, "embeddings_project"):
            x = self.embeddings_project(x)  # (B, T, H)
        x, hidden, attns = self.encoder(x, mask_bias(attention_mask, x.dtype, causal), output_attentions, prefix)
        return BertOutput(
            last_hidden_state=x,
            pooler_output=None,  # ELECTRA has no pooler
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attns) if output_attentions else None,
        )

    attention_projections = BertModel.attention_projections  # same encoder, same modules


class ElectraDiscriminatorPredictions(nn.Module):
    """One hidden layer, then one logit per token: > 0 means "this token was replaced"."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.activation = ACT[c.hidden_act]
        self.dense_prediction = nn.Linear(c.hidden_size, 1)

    def forward(self, h):  # (B, T, H)
        return self.dense_prediction(self.activation(self.dense(h))).squeeze(-1)  # (B, T)


class ElectraGeneratorPredictions(nn.Module):
    """H -> E, gelu, LayerNorm: back to the width of the (tied) word embeddings."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.activation = ACT["gelu"]  # always gelu, whatever hidden_act says (as HF's)
        self.LayerNorm = nn.LayerNorm(c.embedding_dim, eps=c.layer_norm_eps)
        self.dense = nn.Linear(c.hidden_size, c.embedding_dim)

    def forward(self, h):  # (..., H)
        return self.LayerNorm(self.activation(self.dense(h)))  # (..., E)


def _no_next_sentence(name: str, next_sentence_label):
    if next_sentence_label is not None:
        raise ValueError(f"{name} has no next-sentence head: next_sentence_label cannot be used")


class ElectraForPreTraining(nn.Module):
    """The discriminator (HF's ElectraForPreTraining): encoder + replaced-token-detection head.
    It has no masked-LM head (token_logits is None); `labels` are 0/1 "replaced" flags per token."""
    base_model_prefix = "electra"
    tied_keys = ()
    head_names = {"discriminator_predictions.": "replaced-token head"}
    token_logits = None  # no vocabulary predictions: only "original or replaced?"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        self.discriminator_predictions.apply(lambda m: init_weights(m, config))

    def tie_weights(self):
        pass  # nothing is tied

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """loss: binary cross-entropy of rtd_logits against labels (0 original, 1 replaced), over
        the positions attention_mask keeps, as HF computes it. sparse_mlm has nothing to act on."""
        _no_next_sentence("ELECTRA's discriminator", next_sentence_label)
        out = getattr(self, self.base_model_prefix)(input_ids, token_type_ids, attention_mask, output_attentions,
                                                    output_hidden_states, causal)  # DeBERTa-v3's discriminator too
        out.rtd_logits = self.discriminator_predictions(out.last_hidden_state)  # (B, T)
        if labels is not None:
            logits, labels = out.rtd_logits.float(), labels.float()
            if attention_mask is not None:
                keep = attention_mask.eq(1)  # (B, T)
                logits, labels = logits[keep], labels[keep]  # (N,) each
            out.loss = F.binary_cross_entropy_with_logits(logits, labels)
        return out


class ElectraForMaskedLM(nn.Module):
    """The generator (HF's ElectraForMaskedLM): encoder + masked-LM head whose output layer is the
    word embeddings (E wide), with its own bias. Usually narrower than the discriminator."""
    base_model_prefix = "electra"
    tied_keys = ("generator_lm_head.weight",)
    head_names = {"generator_predictions.": "masked-LM head", "generator_lm_head.": "masked-LM head"}

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config)
        self.generator_predictions = ElectraGeneratorPredictions(config)
        self.generator_lm_head = nn.Linear(config.embedding_dim, config.vocab_size)  # weight tied below
        for m in (self.generator_predictions, self.generator_lm_head):
            m.apply(lambda m: init_weights(m, config))
        self.tie_weights()

    def tie_weights(self):
        self.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H)."""
        return self.generator_lm_head(self.generator_predictions(h))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """`sparse_mlm` with `labels`: logits only where labels != -100 (same loss, less work)."""
        _no_next_sentence("ELECTRA's generator", next_sentence_label)
        out = self.electra(input_ids, token_type_ids, attention_mask, output_attentions,
                           output_hidden_states, causal)
        return pretraining_heads(out, self.token_logits, self.config.vocab_size, labels, sparse_mlm)


def share_embeddings(generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining) -> None:
    """Make the generator use the discriminator's embeddings module (word, position and token-type
    tables and their LayerNorm: the whole `embeddings` scope ELECTRA's training shares), and tie its
    output layer to those word vectors. Both must have the same E, vocabulary and table sizes; the
    hidden sizes may differ (each model projects E to its own H)."""
    gen, disc = generator.electra.embeddings, discriminator.electra.embeddings
    mine = {k: tuple(v.shape) for k, v in gen.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in disc.state_dict().items()}
    if mine != theirs:
        diff = next(k for k in theirs if mine.get(k) != theirs[k])
        raise ValueError(f"cannot share embeddings: {diff} is {mine.get(diff)} in the generator but "
                         f"{theirs[diff]} in the discriminator (embedding_size, vocab_size, "
                         f"max_position_embeddings and type_vocab_size must agree)")
    generator.electra.embeddings = disc
    generator.tie_weights()
