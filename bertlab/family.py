"""The BERT family in one place: which of our classes computes a config, and the few things every
member's model exposes in the same way (its encoder, its attention projections), so that loading,
saving and every view work for all of them. Model code stays in one plain file per member."""
from __future__ import annotations

import importlib

from .config import BertConfig

# model_type -> our class, named as Hugging Face's fullest pre-training class of that member.
CLASSES = {
    "bert": "bertlab.model:BertForPreTraining",
    "albert": "bertlab.variants.albert:AlbertForPreTraining",
    "electra": "bertlab.variants.electra:ElectraForPreTraining",  # the discriminator
    "distilbert": "bertlab.variants.distilbert:DistilBertForMaskedLM",
    "roberta": "bertlab.variants.roberta:RobertaForMaskedLM",
}
ELECTRA_GENERATOR = "bertlab.variants.electra:ElectraForMaskedLM"
NAMES = {"bert": "BERT", "albert": "ALBERT", "electra": "ELECTRA", "distilbert": "DistilBERT", "roberta": "RoBERTa"}


def _load(where: str) -> type:
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def model_class(config: BertConfig, architectures=()) -> type:
    """Our class for a config.json: by model_type, and for ELECTRA by its architecture (a *ForMaskedLM
    folder is a generator; anything else, the bare ElectraModel included, a discriminator)."""
    if config.model_type == "electra" and any(str(a).endswith("ForMaskedLM") for a in architectures or ()):
        return _load(ELECTRA_GENERATOR)
    return _load(CLASSES[config.model_type])


def build(config: BertConfig, architectures=()):
    return model_class(config, architectures)(config)


def encoder_of(model):
    """The bare encoder (BertModel, AlbertModel, ...) of a full model; an encoder is its own."""
    return getattr(model, getattr(model, "base_model_prefix", ""), model)


def attention_projections(model, layer: int):
    """(pre-norm, query, key, value) modules of attention layer `layer`, counted from 1."""
    return encoder_of(model).attention_projections(layer)


def has_mlm_head(model) -> bool:
    return callable(getattr(model, "token_logits", None))


def family_name(config: BertConfig) -> str:
    return NAMES[config.model_type] + (" (pre-LN)" if config.pre_ln else "")
