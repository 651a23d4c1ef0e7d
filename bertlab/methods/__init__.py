"""Parameter-efficient fine-tuning: what a method trains, and how its result is saved and loaded.

  full      every weight                    frozen    the head only
  bitfit    the encoder's biases + head     lora      low-rank changes to chosen linear layers + head
  ia3       per-channel scales + head       prefix    learned keys and values per layer + head
  prompt    learned input vectors + head    adapter   Houlsby bottlenecks + LayerNorms + head

Each method is one record (registry.py). `apply_method` freezes and wraps a classifier in place as
the record says; `save_finetuned` and `load_finetuned` (saving.py) write and read what its `saves`
names: a plain transformers folder, peft's adapter folder (merged into a plain one, with the adapter
beside, where the method merges), or a plain folder with Houlsby adapters beside.
"""
from __future__ import annotations

import torch.nn as nn

from ..family import encoder_of
from .adapters import AdaptedLinear, add_adapters, has_adapters
from .lowrank import (
    IA3Linear,
    LoRAEmbedding,
    LoRALinear,
    add_bitfit,
    add_ia3,
    add_lora,
    has_lora,
    merge,
    merge_lora,
    merged_state_dict,
)
from .registry import NAMES, REGISTRY, method
from .saving import load_finetuned, merged_copy, save_finetuned
from .virtual import add_prefix, add_prompt

__all__ = ["METHODS", "MERGEABLE", "apply_method", "save_finetuned", "load_finetuned", "merged_copy",
           "LoRALinear", "LoRAEmbedding", "IA3Linear", "AdaptedLinear", "add_lora", "add_ia3", "add_bitfit", "add_prefix",
           "add_prompt", "add_adapters", "has_lora", "has_adapters", "merge", "merge_lora", "merged_state_dict"]

METHODS = NAMES  # each method's facts: registry.py
MERGEABLE = tuple(m.name for m in REGISTRY.values() if m.mergeable)
PEFT_METHODS = tuple(m.name for m in REGISTRY.values() if m.saves == "peft")  # saved in peft's format


def apply_method(model: nn.Module, spec) -> list[str]:
    """Freeze what `spec.method` leaves alone and wrap what it adds (in place); returns the names of
    the modules or tensors it adds or unfreezes in the encoder ([] for full and frozen)."""
    added = _apply(model, spec)
    if getattr(spec, "train_pooler", False) and method(spec.method).reads("train_pooler"):
        added += train_pooler(model)
    return added


def train_pooler(model: nn.Module) -> list[str]:
    """Unfreeze the encoder's pooler (BERT, ALBERT): the sentence head reads [CLS] through it, and a
    pooler pre-trained for next-sentence prediction is a poor fit for a new task if it stays frozen."""
    pooler = getattr(encoder_of(model), "pooler", None)
    params = list(pooler.parameters()) if isinstance(pooler, nn.Module) else []
    if not params or getattr(model, "kind", "sequence") != "sequence":
        raise ValueError("train_pooler: this model's head has no pooler to train (only BERT's and ALBERT's "
                         "sentence heads read [CLS] through one)")
    for p in params:
        p.requires_grad_(True)
    return [f"{model.base_model_prefix}.pooler"]


def _apply(model: nn.Module, spec) -> list[str]:
    return method(spec.method).apply(model, spec)
