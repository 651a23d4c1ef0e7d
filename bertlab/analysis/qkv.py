"""One head's attention worked out by hand, for teaching: the query and key vectors of real tokens,
their dot products scaled by 1/√d, the softmax, and the weighted sum of the value vectors.

The vectors are the model's own: the chosen layer's input (a hidden state the model returns, through
the layer's pre-LN where it has one) goes through its query/key/value projections. No hook: the
model is shared by concurrent requests, so nothing may be caught on the module. The arithmetic is redone in float64, so the weights can
be checked against the probabilities the model itself returns (`output_attentions`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .. import family
from ..model import device_of


@dataclass(frozen=True)
class HeadMath:
    """Everything for one query token in one head; layer and head count from 1, positions from 0."""
    layer: int
    head: int
    query: int
    d_head: int
    q: torch.Tensor  # (d,) the query token's query vector
    k: torch.Tensor  # (T, d) every token's key vector
    v: torch.Tensor  # (T, d) every token's value vector
    dots: torch.Tensor  # (T,) q · k_j
    scores: torch.Tensor  # (T,) q · k_j / √d
    weights: torch.Tensor  # (T,) softmax of the scores
    output: torch.Tensor  # (d,) Σ_j weights_j v_j: what this head hands on for the query token
    model_weights: torch.Tensor  # (T,) the model's own attention row, to compare


@torch.no_grad()
def head_math(model, ids: list[int], token_type_ids: list[int], layer: int, head: int, query: int) -> HeadMath:
    """Q·K → softmax → ·V for token `query` in `head` of `layer` (both from 1) of one sequence."""
    L, A = model.config.num_hidden_layers * model.config.inner_group_num, model.config.num_attention_heads
    if not (1 <= layer <= L and 1 <= head <= A and 0 <= query < len(ids)):
        raise ValueError(f"layer {layer}, head {head}, token {query}: out of range "
                         f"({L} layers, {A} heads, {len(ids)} tokens)")
    if model.config.inner_group_num > 1:
        raise ValueError("this ALBERT runs several layers per step, whose inputs the model does not return: "
                         "the worked example needs a model with inner_group_num = 1")
    ln, *projections = family.attention_projections(model, layer)
    dev = device_of(model)
    out = model(torch.tensor([ids], device=dev), torch.tensor([token_type_ids], device=dev), output_attentions=True,
                output_hidden_states=True)
    x = ln(out.hidden_states[layer - 1][0])  # (T, H): what this layer's attention reads
    d = model.config.head_dim
    cols = slice((head - 1) * d, head * d)  # this head's slice of the projections
    q, k, v = (proj(x)[:, cols].double() for proj in projections)  # (T, d) each
    qi = q[query]  # (d,)
    dots = k @ qi  # (T,)
    scores = dots / math.sqrt(d)
    weights = torch.softmax(scores, dim=-1)  # (T,)
    model_weights = out.attentions[layer - 1][0, head - 1, query].double().cpu()  # (T,)
    return HeadMath(layer=layer, head=head, query=query, d_head=d, q=qi.cpu(), k=k.cpu(), v=v.cpu(),
                    dots=dots.cpu(), scores=scores.cpu(), weights=weights.cpu(), output=(weights @ v).cpu(),
                    model_weights=model_weights)
