"""Houlsby adapters (Houlsby et al. 2019): a small bottleneck inside every layer, the rest frozen.

After the attention's output projection and after the feed-forward's, before the residual add and
its LayerNorm, each layer gets h -> h + up(gelu(down(h))) with down H -> m and up m -> H (m =
adapter_size). `up` starts at zero, so the model starts exactly as the base model; training moves
the adapters, the LayerNorms (as Houlsby et al. do) and the head. Here the adapter follows the
output projection itself (`AdaptedLinear` wraps that nn.Linear), before its dropout: one wrapper
reaches every member's layer (BERT's output.dense, ALBERT's ffn_output, DistilBERT's lin2, ...).

No library oracle exists beside transformers 5 (AdapterHub's `adapters` needs transformers 4), and
no transformers class loads these: saved models are bertlab folders (methods.save_finetuned).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..family import MEMBERS, encoder_of
from .lowrank import encoder_prefix, replace_module, freeze_encoder, in_layer

# per member: the output projections of attention and feed-forward, by their path inside a layer (its record)
ADAPTER_TARGETS = {n: m.adapters for n, m in MEMBERS.items()}


class Adapter(nn.Module):
    """h + up(gelu(down(h))): a residual bottleneck, the identity while `up` is zero."""

    def __init__(self, width: int, size: int, device=None, dtype=None):
        super().__init__()
        self.down = nn.Linear(width, size, device=device, dtype=dtype)
        self.up = nn.Linear(size, width, device=device, dtype=dtype)
        if self.up.weight.device.type != "meta":
            nn.init.normal_(self.down.weight, std=1e-2)  # Houlsby: near-identity, small normal weights
            nn.init.zeros_(self.down.bias)
            nn.init.zeros_(self.up.weight)
            nn.init.zeros_(self.up.bias)

    def forward(self, h):
        return h + self.up(F.gelu(self.down(h)))


class AdaptedLinear(nn.Module):
    """A frozen nn.Linear followed by an Adapter (keys `<name>.base.*` and `<name>.adapter.*`)."""

    def __init__(self, base: nn.Linear, size: int):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.adapter = Adapter(base.out_features, size, base.weight.device, base.weight.dtype)

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def forward(self, x):
        return self.adapter(self.base(x))


def add_adapters(model: nn.Module, size: int = 64) -> list[str]:
    """Freeze the encoder but its layers' LayerNorms, and put an adapter of bottleneck `size` after
    each layer's attention and feed-forward. Returns the adapted modules' names."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"adapter size must be a positive integer, got {size!r}")
    encoder = encoder_of(model)
    want = ADAPTER_TARGETS[encoder.config.model_type]
    paths = [n for n, m in encoder.named_modules() if type(m) is nn.Linear and in_layer(n) in want]
    freeze_encoder(model)
    for n, m in encoder.named_modules():  # the layers' LayerNorms train (not the embeddings')
        if isinstance(m, nn.LayerNorm) and "embeddings" not in n:
            m.requires_grad_(True)
    for path in paths:
        replace_module(encoder, path, AdaptedLinear(encoder.get_submodule(path), size))
    return [encoder_prefix(model) + p for p in paths]


def has_adapters(model: nn.Module) -> bool:
    return any(isinstance(m, AdaptedLinear) for m in model.modules())
