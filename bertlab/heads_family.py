"""What differs between the family members' classifiers (heads.py holds what they share).

Each member's Hugging Face classes put the encoder under its own name (`bert`, `albert`, `electra`,
`roberta`, `distilbert`: base_model_prefix) and read a sequence's label in their own way:

  BERT, ALBERT   pooled [CLS] (dense + tanh, the encoder's pooler) -> dropout -> classifier
  ELECTRA        token 0 -> dropout -> classifier.dense -> gelu -> dropout -> classifier.out_proj
  RoBERTa        the same with tanh (no pooler: HF builds RobertaModel without one)
  DistilBERT     token 0 -> pre_classifier -> ReLU -> dropout (seq_classif_dropout) -> classifier
  DeBERTa        token 0 -> pooler.dense -> gelu -> dropout (cls_dropout) -> classifier (its ContextPooler)

A record says which (family.Member: pooled, seq_head, head_act, dropout_key).

Token heads are the same everywhere: every last hidden state -> dropout -> classifier. The dropout
before a head defaults, as in transformers, to the hidden dropout (BERT, ELECTRA, RoBERTa,
DistilBERT's token head), to ALBERT's classifier_dropout_prob default 0.1, or to DistilBERT's
seq_classif_dropout default 0.2; config.json carries it under the member's own key.

Question answering is the same everywhere too: every last hidden state -> qa_outputs Linear(H, 2) ->
start and end logits (DistilBERT puts its qa_dropout before it; the others no dropout, no pooler).

Pooling (sentence heads): `auto` and `pooler` are the member's own head above. `cls`, `mean` and `max`
pick the vector the head reads instead: token 0 itself, or the mean or max of the last hidden states
over the attended tokens. BERT and ALBERT then skip their pooler (dense + tanh, trained on [CLS] by
next-sentence or sentence-order prediction): the vector goes to dropout -> classifier. ELECTRA, RoBERTa
and DistilBERT keep their head's own dense layer (their head reads token 0, so for them `cls` is their
own head). `last4` concatenates token 0 of the last four layers (all of them on a shallower model):
BERT's best frozen features in its paper's feature-based NER (Devlin et al. 2019, table 7), a head that
reads 4H numbers, so its first layer (classifier, pre_classifier or classifier.dense) is 4H wide. Only
the choices no transformers class computes are recorded (`custom_pooling`); a last4 head does not fit
transformers' class, which refuses its weights' shape rather than pooling otherwise.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import family
from .config import BertConfig
from .model import init_weights

MEMBERS = family.MEMBERS  # each member's stem, pooler, classifier-dropout key: its record in family.py
POOLINGS = ("auto", "pooler", "cls", "mean", "max", "last4")
LAST = 4  # layers the last4 pooling concatenates
ALBERT_LAYERWISE = ("ALBERT shares its layer weights across depths (every layer runs the same weights), so "
                    "layer-wise learning rates and gradual unfreezing have no layers to tell apart: fine-tune "
                    "ALBERT without layer decay and without gradual unfreezing")


def encoder(config: BertConfig, pooler: bool) -> nn.Module:
    """The bare encoder a classifier sits on: with a pooler only where the HF class has one."""
    m = MEMBERS[config.model_type]
    if "pooler" in m.architectures[m.encoder_class]:  # BERT, ALBERT, RoBERTa (whose heads never read it)
        return family.bare_class(m.name)(config, add_pooling_layer=pooler)
    return family.bare_class(m.name)(config)  # ELECTRA, DistilBERT, DeBERTa: no pooler at all


HEAD_ACTS = {"gelu": nn.GELU, "tanh": nn.Tanh, "relu": nn.ReLU}  # a record's head_act (gelu: exact, as HF)


class ContextPooler(nn.Module):
    """DeBERTa's sequence head's first half (`pooler.dense`): token 0 -> dense -> act. Its own dropout
    (pooler_dropout) is 0 in every released config, so there is none."""

    def __init__(self, c: BertConfig, activation: nn.Module, width: int | None = None):
        super().__init__()
        self.dense = nn.Linear(width or c.hidden_size, c.hidden_size)
        self.activation = activation

    def forward(self, v):  # (B, H) or (B, 4H) last4
        return self.activation(self.dense(v))  # (B, H)


class ClassificationHead(nn.Module):
    """ELECTRA's and RoBERTa's sequence head (`classifier.dense`, `classifier.out_proj`) on token 0."""

    def __init__(self, c: BertConfig, num_labels: int, dropout: float, activation: nn.Module,
                 width: int | None = None):
        super().__init__()
        self.dense = nn.Linear(width or c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(c.hidden_size, num_labels)
        self.activation = activation

    def forward(self, v):  # (B, H): token 0 (as transformers), a mean / max pooled vector; (B, 4H) last4
        x = self.dense(self.dropout(v))  # (B, H)
        return self.out_proj(self.dropout(self.activation(x)))  # (B, C)


def head_dropout(config: BertConfig, per_token: bool, given: float | None) -> float:
    """The dropout before the head: `given`, else what transformers uses by default."""
    if given is not None:
        return given
    m = MEMBERS[config.model_type]
    if m.head_dropout is not None and not (per_token and m.qa_dropout_key):  # ALBERT's; DistilBERT's sequence head
        return m.head_dropout
    return config.hidden_dropout_prob


def layers_pooled(config: BertConfig, pooling: str) -> int:
    """How many layers' vectors the head reads side by side: last4's, else one."""
    return min(LAST, config.num_hidden_layers) if pooling == "last4" else 1


def add_head(model: nn.Module, config: BertConfig, num_labels: int, per_token: bool, dropout: float,
             pooling: str = "auto") -> None:
    """Give `model` its member's head modules, under HF's attribute names; the first reads
    layers_pooled x H numbers."""
    m, H = MEMBERS[config.model_type], config.hidden_size
    width = H * layers_pooled(config, pooling)
    if per_token or m.pooled:
        model.dropout, model.classifier = nn.Dropout(dropout), nn.Linear(width, num_labels)
    elif m.seq_head == "pre_classifier":
        model.pre_classifier, model.classifier = nn.Linear(width, H), nn.Linear(H, num_labels)
        model.dropout = nn.Dropout(dropout)
    elif m.seq_head == "pooler.dense":
        model.pooler, model.classifier = ContextPooler(config, HEAD_ACTS[m.head_act](), width), nn.Linear(H, num_labels)
        model.dropout = nn.Dropout(dropout)
    else:
        model.classifier = ClassificationHead(config, num_labels, dropout, HEAD_ACTS[m.head_act](), width)
    for name in ("pre_classifier", "pooler", "classifier"):
        if hasattr(model, name):
            getattr(model, name).apply(lambda m: init_weights(m, config))


def custom_pooling(model_type: str, pooling: str) -> str | None:
    """The pooling as bertlab computes it when no transformers class does (cls on BERT/ALBERT, mean,
    max), else None: the member's own head (auto, pooler, and cls where the head reads token 0)."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if pooling in ("auto", "pooler") or (pooling == "cls" and not MEMBERS[model_type].pooled):
        return None
    return pooling


def pool(h: torch.Tensor, attention_mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(B, H) from the last hidden states (B, T, H): token 0, or the mean / max over attended tokens."""
    if how == "cls":
        return h[:, 0]
    m = torch.ones(h.shape[:2], device=h.device) if attention_mask is None else attention_mask.to(h.device)
    if m.size(1) < h.size(1):  # virtual tokens put in front of the text (prompt tuning): attended
        m = torch.cat([m.new_ones(m.size(0), h.size(1) - m.size(1)), m], 1)
    m = m.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
    if how == "mean":
        return (h * m).sum(1) / m.sum(1).clamp(min=1)
    return h.masked_fill(m == 0, torch.finfo(h.dtype).min).max(1).values  # "max"


def head_logits(model: nn.Module, out, per_token: bool, attention_mask=None) -> torch.Tensor:
    """(B, T, C) per token or (B, C) per sequence from the encoder's output (model.pooling: module
    docstring)."""
    kind = model.config.model_type
    if per_token:
        return model.classifier(model.dropout(out.last_hidden_state))
    how = custom_pooling(kind, getattr(model, "pooling", "auto"))
    if how is None and MEMBERS[kind].pooled:
        return model.classifier(model.dropout(out.pooler_output))
    if how == "last4":  # token 0 of each of the last layers, side by side
        v = torch.cat([h[:, 0] for h in out.hidden_states[-layers_pooled(model.config, how):]], -1)  # (B, 4H)
    else:
        v = pool(out.last_hidden_state, attention_mask, how or "cls")  # (B, H)
    if MEMBERS[kind].pooled:  # cls / mean / max / last4 without the pooler
        return model.classifier(model.dropout(v))
    if MEMBERS[kind].seq_head == "pre_classifier":
        return model.classifier(model.dropout(F.relu(model.pre_classifier(v))))
    if MEMBERS[kind].seq_head == "pooler.dense":
        return model.classifier(model.dropout(model.pooler(v)))
    return model.classifier(v)


def add_qa_head(model: nn.Module, config: BertConfig, dropout: float | None) -> None:
    """qa_outputs: Linear(H, 2) on every token, as every member's <Member>ForQuestionAnswering;
    DistilBERT's qa_dropout before it."""
    if MEMBERS[config.model_type].qa_dropout_key:
        model.dropout = nn.Dropout(0.1 if dropout is None else dropout)
    model.qa_outputs = nn.Linear(config.hidden_size, 2)
    model.qa_outputs.apply(lambda m: init_weights(m, config))


def qa_logits(model: nn.Module, out) -> tuple[torch.Tensor, torch.Tensor]:
    """(start, end) logits, (B, T) each."""
    h = out.last_hidden_state
    if hasattr(model, "dropout"):
        h = model.dropout(h)
    start, end = model.qa_outputs(h).split(1, dim=-1)
    return start.squeeze(-1), end.squeeze(-1)


def qa_dropout_config(config: BertConfig, given: float | None) -> dict:
    """DistilBERT saves its qa_dropout (default 0.1); the others have none."""
    key = MEMBERS[config.model_type].qa_dropout_key
    return {key: 0.1 if given is None else given} if key else {}


def dropout_config(config: BertConfig, per_token: bool, given: float | None) -> dict:
    """The head's dropout as the member's config.json says it (ALBERT and DistilBERT write the value
    they use, since transformers' defaults differ; DistilBERT's token head always uses `dropout`)."""
    m = MEMBERS[config.model_type]
    if m.qa_dropout_key and per_token:  # DistilBERT's token head
        return {}
    if m.head_dropout is not None:  # ALBERT's classifier_dropout_prob, DistilBERT's seq_classif_dropout
        return {m.dropout_key: head_dropout(config, per_token, given)}
    return {m.dropout_key: given}  # classifier_dropout, DeBERTa's cls_dropout


def dropout_from_config(raw: dict, model_type: str, per_token: bool) -> float | None:
    """The `classifier_dropout` a saved config.json implies (None: the member's default)."""
    if MEMBERS[model_type].qa_dropout_key and per_token:  # DistilBERT's per-token heads have their own
        return None
    return raw.get(MEMBERS[model_type].dropout_key)
