"""What differs between the family members' classifiers (heads.py holds what they share).

Each member's Hugging Face classes put the encoder under its own name (`bert`, `albert`, `electra`,
`roberta`, `distilbert`: base_model_prefix) and read a sequence's label in their own way:

  BERT, ALBERT   pooled [CLS] (dense + tanh, the encoder's pooler) -> dropout -> classifier
  ELECTRA        token 0 -> dropout -> classifier.dense -> gelu -> dropout -> classifier.out_proj
  RoBERTa        the same with tanh (no pooler: HF builds RobertaModel without one)
  DistilBERT     token 0 -> pre_classifier -> ReLU -> dropout (seq_classif_dropout) -> classifier

Token heads are the same everywhere: every last hidden state -> dropout -> classifier. The dropout
before a head defaults, as in transformers, to the hidden dropout (BERT, ELECTRA, RoBERTa,
DistilBERT's token head), to ALBERT's classifier_dropout_prob default 0.1, or to DistilBERT's
seq_classif_dropout default 0.2; config.json carries it under the member's own key.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import BertConfig
from .model import BertModel, init_weights
from .variants.albert import AlbertModel
from .variants.distilbert import DistilBertModel
from .variants.electra import ElectraModel
from .variants.roberta import RobertaModel


@dataclass(frozen=True)
class Member:
    name: str  # class-name stem: Bert, Albert, ...
    prefix: str  # the encoder's attribute and key prefix (HF's base_model_prefix)
    pooled: bool  # the sequence head reads the encoder's pooler
    dropout_key: str | None  # config.json key of the head's dropout (None: not saved)


MEMBERS = {
    "bert": Member("Bert", "bert", True, "classifier_dropout"),
    "albert": Member("Albert", "albert", True, "classifier_dropout_prob"),
    "electra": Member("Electra", "electra", False, "classifier_dropout"),
    "roberta": Member("Roberta", "roberta", False, "classifier_dropout"),
    "distilbert": Member("DistilBert", "distilbert", False, "seq_classif_dropout"),
}
# LoRA targets are BERT's attribute names; the members that name their linear layers otherwise.
LORA_NAMES = {
    "distilbert": {"query": ("q_lin",), "key": ("k_lin",), "value": ("v_lin",), "dense": ("out_lin", "lin1", "lin2")},
    "albert": {"dense": ("dense", "ffn", "ffn_output")},  # attention output, feed-forward in and out
}
ALBERT_LAYERWISE = ("ALBERT shares its layer weights across depths (every layer runs the same weights), so "
                    "layer-wise learning rates and gradual unfreezing have no layers to tell apart: fine-tune "
                    "ALBERT without layer decay and without gradual unfreezing")


def encoder(config: BertConfig, pooler: bool) -> nn.Module:
    """The bare encoder a classifier sits on: with a pooler only where the HF class has one."""
    kind = config.model_type
    if kind == "bert":
        return BertModel(config, add_pooling_layer=pooler)
    if kind == "albert":
        model = AlbertModel(config)
        if not pooler:  # HF's AlbertForTokenClassification has none; ours then computes tanh([CLS]), unused
            model.pooler = nn.Identity()
        return model
    if kind == "roberta":
        return RobertaModel(config, add_pooling_layer=False)
    return {"electra": ElectraModel, "distilbert": DistilBertModel}[kind](config)


class ClassificationHead(nn.Module):
    """ELECTRA's and RoBERTa's sequence head (`classifier.dense`, `classifier.out_proj`) on token 0."""

    def __init__(self, c: BertConfig, num_labels: int, dropout: float, activation: nn.Module):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(c.hidden_size, num_labels)
        self.activation = activation

    def forward(self, h):  # (B, T, H)
        x = self.dense(self.dropout(h[:, 0]))  # (B, H)
        return self.out_proj(self.dropout(self.activation(x)))  # (B, C)


def head_dropout(config: BertConfig, per_token: bool, given: float | None) -> float:
    """The dropout before the head: `given`, else what transformers uses by default."""
    if given is not None:
        return given
    if config.model_type == "albert":
        return 0.1
    if config.model_type == "distilbert" and not per_token:
        return 0.2
    return config.hidden_dropout_prob


def add_head(model: nn.Module, config: BertConfig, num_labels: int, per_token: bool, dropout: float) -> None:
    """Give `model` its member's head modules, under HF's attribute names."""
    kind, H = config.model_type, config.hidden_size
    if per_token or MEMBERS[kind].pooled:
        model.dropout, model.classifier = nn.Dropout(dropout), nn.Linear(H, num_labels)
    elif kind == "distilbert":
        model.pre_classifier, model.classifier = nn.Linear(H, H), nn.Linear(H, num_labels)
        model.dropout = nn.Dropout(dropout)
    else:
        model.classifier = ClassificationHead(config, num_labels, dropout,
                                              nn.GELU() if kind == "electra" else nn.Tanh())  # HF: exact gelu
    for name in ("pre_classifier", "classifier"):
        if hasattr(model, name):
            getattr(model, name).apply(lambda m: init_weights(m, config))


def head_logits(model: nn.Module, out, per_token: bool) -> torch.Tensor:
    """(B, T, C) per token or (B, C) per sequence from the encoder's output."""
    kind = model.config.model_type
    if per_token:
        return model.classifier(model.dropout(out.last_hidden_state))
    if MEMBERS[kind].pooled:
        return model.classifier(model.dropout(out.pooler_output))
    if kind == "distilbert":
        x = F.relu(model.pre_classifier(out.last_hidden_state[:, 0]))  # (B, H)
        return model.classifier(model.dropout(x))
    return model.classifier(out.last_hidden_state)


def dropout_config(config: BertConfig, per_token: bool, given: float | None) -> dict:
    """The head's dropout as the member's config.json says it (ALBERT and DistilBERT write the value
    they use, since transformers' defaults differ; DistilBERT's token head always uses `dropout`)."""
    kind = config.model_type
    if kind == "distilbert":
        return {} if per_token else {"seq_classif_dropout": head_dropout(config, False, given)}
    if kind == "albert":
        return {"classifier_dropout_prob": head_dropout(config, per_token, given)}
    return {"classifier_dropout": given}


def dropout_from_config(raw: dict, model_type: str, per_token: bool) -> float | None:
    """The `classifier_dropout` a saved config.json implies (None: the member's default)."""
    if model_type == "distilbert" and per_token:
        return None
    return raw.get(MEMBERS[model_type].dropout_key)


def lora_names(model_type: str, targets: tuple[str, ...]) -> set[str]:
    """BERT-named LoRA targets (query, key, value, dense) as this member names those layers."""
    names = LORA_NAMES.get(model_type, {})
    return {n for t in targets for n in names.get(t, (t,))}
