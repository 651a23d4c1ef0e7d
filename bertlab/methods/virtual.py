"""Prompt tuning and prefix tuning: learned virtual tokens in front of the text, the encoder frozen.

Prompt tuning (Lester et al. 2021) learns P input vectors, put before the text's token vectors: they
get segment 0 and positions 0..P-1 like any token, and the text moves P positions on. So does the
token a sentence head reads: position 0 is now the first virtual token (peft hands BERT the prompt
as inputs_embeds, and BERT's pooler reads position 0), which is trained to serve as that summary.
Prefix tuning (Li & Liang 2021) learns, for every layer, P keys and P values that every token may
attend to; no vectors are added to the sequence, so hidden states and heads keep their length. As
transformers treats a prefix as a cache of P earlier tokens, the text's positions start at P (as in
Li & Liang's GPT-2, where the prefix holds the first positions). Both are what peft 0.21 computes
with transformers 5.23 (tests/test_methods_peft.py), and the vectors are peft's tensors as they are:
the prompt (P, E) and the prefix (P, 2L · H) (peft's PrefixTuningConfig without a projection; per
layer l the keys at 2l and the values at 2l + 1). `virtual_inputs`, the encoder's hook, feeds them in.

Prompt tuning lengthens the sequence by P, so per-token heads (tagging, QA) would see P extra
positions: they take prefix tuning instead. ALBERT and DistilBERT take both here, though their
transformers classes take no cache, so peft cannot run prefix tuning on them.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..family import MEMBERS, encoder_of
from ..model import check_length
from .lowrank import freeze_encoder


def _check(encoder: nn.Module, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"virtual tokens must be a positive integer, got {n!r}")
    c = encoder.config
    if why := MEMBERS[c.model_type].no_virtual:
        raise ValueError(f"prompt and prefix tuning do not work on {MEMBERS[c.model_type].label}: {why}; "
                         f"choose another method")
    if n + 2 > c.max_tokens:
        raise ValueError(f"{n} virtual tokens leave no room for text in this model's {c.max_tokens} positions")
    if getattr(encoder, "prompt", None) is not None or getattr(encoder, "prefix", None) is not None:
        raise ValueError("this model has virtual tokens already")


def virtual_inputs(encoder, input_ids, attention_mask):
    """The encoder's `virtual` hook (model.encoder_inputs calls it): its prompt (P, E) or None; its
    prefix's (keys, values) per layer, each (B, A, P, d), or None; the attention mask with P ones before
    the text (the virtual tokens are always seen, as peft does); and the positions the prefix takes."""
    prompt, prefix = getattr(encoder, "prompt", None), getattr(encoder, "prefix", None)
    n = (prompt if prompt is not None else prefix).size(0)
    check_length(input_ids, encoder.config, n)
    mask = torch.cat([attention_mask.new_ones(attention_mask.size(0), n), attention_mask], dim=1)  # (B, P + T)
    if prefix is None:
        return prompt, None, mask, 0
    c = encoder.config  # peft's layout: (P, 2L * H) -> per layer l keys at 2l, values at 2l + 1
    kv = prefix.view(n, -1, c.num_attention_heads, c.head_dim).permute(1, 2, 0, 3)  # (2L, A, P, d)
    B = input_ids.size(0)
    layers = [(kv[2 * i].expand(B, -1, -1, -1), kv[2 * i + 1].expand(B, -1, -1, -1)) for i in range(kv.size(0) // 2)]
    return None, layers, mask, n


def attach(encoder: nn.Module, name: str, vectors: nn.Parameter) -> None:
    """Give the encoder its virtual tokens: `prompt` or `prefix` (its state-dict key) and the hook that
    feeds them in."""
    setattr(encoder, name, vectors)
    encoder.virtual = virtual_inputs


def attention_maps(config) -> int:
    """Attention computations per forward, each with its own prefix (ALBERT: steps × inner layers)."""
    shared = "inner_group_num" in MEMBERS[config.model_type].only  # a step runs a group of inner layers
    return config.num_hidden_layers * (config.inner_group_num if shared else 1)


def add_prompt(model: nn.Module, num_tokens: int = 20, per_token: bool = False) -> list[str]:
    """Freeze the encoder and give it `num_tokens` learned input vectors of the embedding width E,
    drawn as nn.Embedding draws them (N(0, 1): peft's random init). Returns ["<prefix>.prompt"]."""
    encoder = encoder_of(model)
    if per_token:
        raise ValueError("prompt tuning lengthens the sequence by its virtual tokens, so a per-token head "
                         "(tagging, QA) would see positions that are not text: use prefix tuning or LoRA")
    _check(encoder, num_tokens)
    freeze_encoder(model)
    w = next(encoder.parameters())
    attach(encoder, "prompt", nn.Parameter(torch.empty(num_tokens, encoder.config.embedding_dim, device=w.device,
                                                       dtype=w.dtype)))
    if w.device.type != "meta":
        nn.init.normal_(encoder.prompt)
    return [model.base_model_prefix + ".prompt"]


def add_prefix(model: nn.Module, num_tokens: int = 20) -> list[str]:
    """Freeze the encoder and give every attention layer `num_tokens` learned keys and values: one
    (P, 2L · H) tensor drawn N(0, 1), as peft's PrefixEncoder (an nn.Embedding) starts."""
    encoder = encoder_of(model)
    _check(encoder, num_tokens)
    freeze_encoder(model)
    c, w = encoder.config, next(encoder.parameters())
    attach(encoder, "prefix", nn.Parameter(torch.empty(num_tokens, 2 * attention_maps(c) * c.hidden_size,
                                                       device=w.device, dtype=w.dtype)))
    if w.device.type != "meta":
        nn.init.normal_(encoder.prefix)
    return [model.base_model_prefix + ".prefix"]
