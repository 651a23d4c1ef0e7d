"""Embeddings → Position embeddings: BERT learns one vector per position (not sines and cosines);
how alike are they? The cosine similarity of every pair of rows of the position table."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from plotly.subplots import make_subplots

from .... import family
from ..shared import common
from ..shared.common import load_model

EXPLAIN = """**Where is a word?** Attention alone cannot tell word order: BERT adds a learnt vector for
each position (0 = [CLS]) to every word's vector. Left: the cosine similarity of every pair of
position vectors, on a fixed −1..1 scale (blue alike, red opposite). A dark band along the diagonal
means *near positions have similar vectors*, so the model can tell "next to" from "far away"; stripes
parallel to it are patterns that repeat every few positions. Right: the same, averaged over all pairs
the same distance apart. A randomly initialised model shows only the diagonal and noise."""

TICKS = [-1.0, -0.5, 0.0, 0.5, 1.0]


@torch.no_grad()
def similarity(model) -> torch.Tensor:
    """(P, P) cosine similarities of the position embedding rows (P = max positions)."""
    w = family.encoder_of(model).embeddings.position_embeddings.weight.float()  # (P, H)
    v = F.normalize(w, dim=-1)
    return (v @ v.T).clamp(-1, 1)


def by_distance(sim: torch.Tensor) -> list[float]:
    """Mean similarity of all pairs k positions apart, for k = 0..P-1."""
    return [float(sim.diagonal(k).mean()) for k in range(sim.size(0))]


def show(choice):
    """(figure, summary, JSON) for the picked model."""
    model, _ = load_model(choice)
    sim = similarity(model)
    P = sim.size(0)
    dist = by_distance(sim)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.58, 0.42], horizontal_spacing=0.14,
                        subplot_titles=("position × position", "mean by distance"))
    fig.add_trace(go.Heatmap(z=sim.tolist(), colorscale="RdBu", zmin=-1, zmax=1, zmid=0,
                             colorbar=dict(title="cosine", tickvals=TICKS, ticktext=[f"{t:g}" for t in TICKS],
                                           x=0.5, len=0.9, thickness=12),
                             hovertemplate="positions %{y} and %{x}: %{z:.2f}<extra></extra>"), 1, 1)
    fig.add_trace(go.Scatter(x=list(range(P)), y=dist, mode="lines", line=dict(color="#2563eb", width=2),
                             name="mean", hovertemplate="%{x} apart: %{y:.2f}<extra></extra>"), 1, 2)
    fig.update_yaxes(autorange="reversed", title="position", row=1, col=1)
    fig.update_xaxes(title="position", row=1, col=1)
    fig.update_xaxes(title="distance (positions apart)", row=1, col=2)
    fig.update_yaxes(title="cosine", range=[-1, 1], row=1, col=2)
    fig.update_layout(height=420, showlegend=False, margin=dict(l=50, r=10, t=40, b=50))
    near = dist[1] if P > 1 else 1.0
    far = sum(dist[P // 2:]) / max(1, len(dist[P // 2:]))
    summary = (f"{P} position vectors of {model.config.hidden_size} numbers. Neighbours (1 apart) "
               f"average **{near:.2f}**; positions {P // 2} or more apart **{far:.2f}**.")
    return fig, summary, {"positions": P, "mean_by_distance": dist}


def build(model_box: gr.Textbox) -> None:
    with common.form(EXPLAIN):
        btn = gr.Button("Show the position embeddings", variant="primary")
        summary = gr.Markdown()
        plot = gr.Plot(label="Similarity of position vectors")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="mean similarity by distance")
    common.wire(show, [model_box], [plot, summary, raw], btn, "positions", [model_box.change])
