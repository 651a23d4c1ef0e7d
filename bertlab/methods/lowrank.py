"""LoRA, IA3 and BitFit: methods that change the frozen weights by a little, where they already are.

LoRA (Hu et al. 2021) learns a low-rank change to a frozen weight: W' = W + (alpha / r) · B A with
A (r × in) and B (out × r). B starts at zero, so training starts from exactly the pre-trained model.
IA3 (Liu et al. 2022) learns one scale per channel, a vector starting at 1, in four places a layer
as peft's IA3Config puts it on BERT (IA3_TARGETS): it scales the outputs of the keys and the values,
and the inputs of the attention's output layer and the feed-forward's output layer. That last input
is the feed-forward's inner activations; the paper scales three places (keys, values and those inner
activations), peft adds the attention's output layer. Both fold into the weights (`merge`), after
which the model is a plain classifier again (no extra cost at all).
BitFit (Ben Zaken et al. 2022) trains the encoder's biases alone (LayerNorm's included).

Targets are named by what they are (query, key, value, attention_output, ffn, embeddings) and found
by each member's module path inside a layer (TARGETS): BERT's `output.dense` is the feed-forward's
output while `attention.output.dense` is the attention's, so a bare name would not do. `embeddings`
puts LoRA on the word table (peft's LoRA Embedding layer): on a small model, updating the word
vectors is most of what full fine-tuning gains over the frozen encoder (bench/FINETUNE.md).
"""
from __future__ import annotations

import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..family import MEMBERS, encoder_of
from ..heads import freeze_encoder

# Each member's module paths inside one layer (after its index), per target, and IA3's paths (-> does it
# scale the layer's input?): the family's records (family.MEMBERS).
TARGETS = {n: m.lora for n, m in MEMBERS.items()}
IA3_TARGETS = {n: m.ia3 for n, m in MEMBERS.items()}


def in_layer(path: str) -> str:
    """A module's path inside its layer: what follows the last `.<index>.` (the whole path if none)."""
    parts = re.split(r"\.\d+\.", path)
    return parts[-1]


def target_paths(encoder: nn.Module, targets) -> list[str]:
    """The encoder's nn.Linear (and, for `embeddings`, nn.Embedding) modules that `targets` name, as paths
    from the encoder, in module order."""
    if isinstance(targets, str):
        targets = (targets,)
    table = TARGETS[encoder.config.model_type]
    bad = [t for t in targets if t not in table]
    if bad:
        raise ValueError(f"unknown target {', '.join(bad)}: choose from {', '.join(table)}")
    want = {p for t in targets for p in table[t]}
    return [n for n, m in encoder.named_modules() if type(m) in (nn.Linear, nn.Embedding) and in_layer(n) in want]


def replace_module(root: nn.Module, path: str, new: nn.Module) -> None:
    owner, _, name = path.rpartition(".")
    setattr(root.get_submodule(owner) if owner else root, name, new)


def encoder_prefix(model: nn.Module) -> str:
    return model.base_model_prefix + "." if encoder_of(model) is not model else ""


# ---- LoRA ------------------------------------------------------------------------------------------

def _check_rank_alpha(rank, alpha) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank must be a positive integer, got {rank!r}")
    if not alpha > 0:
        raise ValueError(f"LoRA alpha must be positive, got {alpha!r}")


class LoRALinear(nn.Module):
    """y = x Wᵀ + b + (alpha/r) · dropout(x) Aᵀ Bᵀ, with W and b frozen and only A and B trained."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16, dropout: float = 0.0):
        super().__init__()
        _check_rank_alpha(rank, alpha)
        if rank > min(base.in_features, base.out_features):
            raise ValueError(f"LoRA rank {rank} exceeds the layer's size ({base.out_features} x {base.in_features})")
        self.base, self.rank, self.alpha, self.scaling = base, rank, alpha, alpha / rank
        self.in_features, self.out_features = base.in_features, base.out_features
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()  # no tensors: keys unchanged
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))
        if w.device.type != "meta":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear and PEFT do

    def delta(self) -> torch.Tensor:
        return (self.lora_B @ self.lora_A) * self.scaling  # (out, in)

    @property
    def weight(self) -> torch.Tensor:
        """The effective weight W + (alpha/r) B A (gradients reach A and B)."""
        return self.base.weight + self.delta()

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(self.lora_dropout(x), self.lora_A), self.lora_B) * self.scaling

    def merged(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight, bias) with the change folded in."""
        return self.base.weight + self.delta().to(self.base.weight.dtype), self.base.bias

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, rank={self.rank}, alpha={self.alpha}"


class LoRAEmbedding(nn.Module):
    """The word table with a low-rank change, as peft's LoRA Embedding layer: row i of W + (alpha/r) ·
    (B A)ᵀ, with A (r × V) starting at zero and B (H × r) random, so training starts from the base model.
    A looked-up row of Aᵀ is r numbers per token; dropout does not apply (as in peft)."""

    def __init__(self, base: nn.Embedding, rank: int = 8, alpha: float = 16):
        super().__init__()
        _check_rank_alpha(rank, alpha)
        self.base, self.rank, self.alpha, self.scaling = base, rank, alpha, alpha / rank
        self.num_embeddings, self.embedding_dim, self.padding_idx = (base.num_embeddings, base.embedding_dim,
                                                                     base.padding_idx)
        base.weight.requires_grad_(False)
        w = base.weight
        self.lora_embedding_A = nn.Parameter(torch.zeros(rank, base.num_embeddings, device=w.device, dtype=w.dtype))
        self.lora_embedding_B = nn.Parameter(torch.empty(base.embedding_dim, rank, device=w.device, dtype=w.dtype))
        if w.device.type != "meta":
            nn.init.normal_(self.lora_embedding_B)  # as peft does

    def delta(self) -> torch.Tensor:
        return (self.lora_embedding_B @ self.lora_embedding_A).T * self.scaling  # (V, H)

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight + self.delta()

    def forward(self, ids):
        low = F.embedding(ids, self.lora_embedding_A.T, padding_idx=self.padding_idx)  # (B, T, r)
        return self.base(ids) + (low @ self.lora_embedding_B.T) * self.scaling  # (B, T, H)

    def merged(self) -> tuple[torch.Tensor, None]:
        return self.base.weight + self.delta().to(self.base.weight.dtype), None

    def extra_repr(self) -> str:
        return f"{self.num_embeddings} x {self.embedding_dim}, rank={self.rank}, alpha={self.alpha}"


def add_lora(model: nn.Module, rank: int = 8, alpha: float = 16, targets=("query", "value"),
             dropout: float = 0.0) -> list[str]:
    """Freeze the encoder (`model.bert`, `model.electra`, ...; or the model itself if it is one) and wrap
    the layers `targets` name (query, key, value, attention_output, ffn, embeddings; dense: every dense
    layer, as older runs had it) with LoRA. The head stays trainable. Returns the wrapped modules' names."""
    encoder = encoder_of(model)
    paths = target_paths(encoder, targets)
    if not paths:
        raise ValueError(f"no layers named {', '.join(targets)} in the encoder to wrap with LoRA")
    freeze_encoder(model)
    for path in paths:
        m = encoder.get_submodule(path)
        replace_module(encoder, path, LoRAEmbedding(m, rank, alpha) if isinstance(m, nn.Embedding)
                 else LoRALinear(m, rank, alpha, dropout))
    return [encoder_prefix(model) + p for p in paths]


LORA = (LoRALinear, LoRAEmbedding)


def has_lora(model: nn.Module) -> bool:
    return any(isinstance(m, LORA) for m in model.modules())


# ---- IA3 -------------------------------------------------------------------------------------------

class IA3Linear(nn.Module):
    """y = (x Wᵀ + b) ⊙ l, or with `scale_input` (the feed-forward's) y = (x ⊙ l) Wᵀ + b; l starts at 1.
    `ia3_l` is a vector (out or in), so weight decay (matrices only) leaves it alone; peft's files
    hold it as (out, 1) or (1, in) (`peft_shape`)."""

    def __init__(self, base: nn.Linear, scale_input: bool):
        super().__init__()
        self.base, self.scale_input = base, scale_input
        for p in base.parameters():
            p.requires_grad_(False)
        n = base.in_features if scale_input else base.out_features
        self.ia3_l = nn.Parameter(torch.ones(n, device=base.weight.device, dtype=base.weight.dtype))

    @property
    def peft_shape(self) -> tuple[int, int]:
        return (1, self.ia3_l.numel()) if self.scale_input else (self.ia3_l.numel(), 1)

    @property
    def weight(self) -> torch.Tensor:
        return self.merged()[0]

    @property
    def bias(self) -> torch.Tensor | None:
        return self.merged()[1]

    def forward(self, x):
        return self.base(x * self.ia3_l) if self.scale_input else self.base(x) * self.ia3_l

    def merged(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        w, b = self.base.weight, self.base.bias
        if self.scale_input:  # (x ⊙ l) Wᵀ = x (W diag l)ᵀ: scale W's columns; the bias is untouched
            return w * self.ia3_l, b
        return w * self.ia3_l[:, None], None if b is None else b * self.ia3_l  # scale W's rows and b

    def extra_repr(self) -> str:
        return f"scales the {'input' if self.scale_input else 'output'}"


def add_ia3(model: nn.Module, paths: dict[str, bool] | None = None) -> list[str]:
    """Freeze the encoder and put IA3's scales on keys, values and the attention's and the feed-forward's
    output layers (peft's IA3Config for BERT), or on `paths` ({path in the encoder: scales input?}).
    Returns the wrapped modules' names."""
    encoder = encoder_of(model)
    if paths is None:
        table = IA3_TARGETS[encoder.config.model_type]
        paths = {n: table[in_layer(n)] for n, m in encoder.named_modules()
                 if type(m) is nn.Linear and in_layer(n) in table and "pooler" not in n}
    freeze_encoder(model)
    for path, scale_input in paths.items():
        replace_module(encoder, path, IA3Linear(encoder.get_submodule(path), scale_input))
    return [encoder_prefix(model) + p for p in paths]


# ---- BitFit ----------------------------------------------------------------------------------------

def add_bitfit(model: nn.Module) -> list[str]:
    """Train the encoder's biases (LayerNorm's too) and the head; returns the trained bias names."""
    freeze_encoder(model)
    names = []
    for n, p in encoder_of(model).named_parameters():
        if n.endswith(".bias"):
            p.requires_grad_(True)
            names.append(encoder_prefix(model) + n)
    return names


# ---- merging ---------------------------------------------------------------------------------------

MERGEABLE = (LoRALinear, LoRAEmbedding, IA3Linear)


def merge(model: nn.Module) -> nn.Module:
    """Fold every LoRA and IA3 module into its base Linear and put that back: a plain model (in place)."""
    for name, m in list(model.named_modules()):
        if isinstance(m, MERGEABLE):
            w, b = m.merged()
            with torch.no_grad():
                m.base.weight.copy_(w)
                if b is not None:
                    m.base.bias.copy_(b)
            replace_module(model, name, m.base)
    return model


merge_lora = merge  # the name older code and tests know


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict `merge(model)` would have, without changing `model`."""
    wrapped = {name: m for name, m in model.named_modules() if isinstance(m, MERGEABLE)}
    merged = {name: m.merged() for name, m in wrapped.items()}
    sd = {}
    for k, v in model.state_dict().items():
        mod, _, leaf = k.rpartition(".")
        if mod in wrapped:  # lora_A, lora_B, lora_embedding_A/B, ia3_l
            continue
        owner = mod.removesuffix(".base") if mod.endswith(".base") else None
        if owner in wrapped:  # the wrapped Linear's weight and bias go back under its own name
            k = f"{owner}.{leaf}"
            v = merged[owner][0 if leaf == "weight" else 1].detach().clone()
        sd[k] = v
    return sd
