"""Attention → "Q·K·V by hand": one head's attention for one query token, worked out with the numbers
(query and key vectors, dot products, the 1/√d scale, softmax, the weighted sum of value vectors)."""
from __future__ import annotations

import html
import math

import gradio as gr
import pandas as pd

from ....analysis import attention_views as av
from ....analysis import qkv
from ..shared.common import load_model, mistakes
from .attention_run import checked_run as _run

NOTE = """**How one head computes attention, with the numbers.** A layer gives every token a vector *x*.
The head turns it into three shorter vectors (length *d*, here *d* = hidden size ÷ heads) with three
learned matrices: a **query** q = x W<sub>Q</sub> + b<sub>Q</sub> (what this token is looking for), a
**key** k = x W<sub>K</sub> + b<sub>K</sub> (what it can be found by) and a **value**
v = x W<sub>V</sub> + b<sub>V</sub> (what it passes on).
1. **Score** every token *j*: the dot product q·k<sub>j</sub> (large when they point the same way),
   divided by √d so the numbers do not grow with *d*.
2. **Softmax** turns the scores into weights that are all positive and add up to 1:
   w<sub>j</sub> = e<sup>score<sub>j</sub></sup> / Σ e<sup>score</sup> (computed as e<sup>score − max</sup>,
   the same ratio without huge numbers). These are the attention weights
   of the maps (one row of the *One head* map, with [CLS]/[SEP] shown).
3. **Mix**: the head's output for the query token is Σ w<sub>j</sub> v<sub>j</sub>, a weighted average of
   the value vectors. (The heads' outputs are then joined and projected back to the hidden size.)

Pick the query token in its box; the layer and head are the ones picked above. Short sentences read best."""

DIMS = 6  # vector entries shown (of d)


def _vec(v, n: int = DIMS) -> str:
    """The first n entries, then '…' when there are more."""
    return "  ".join(f"{x:+.3f}" for x in v[:n].tolist()) + ("  …" if len(v) > n else "")


def query_choices(run) -> list[tuple[str, int]]:
    return [(label, i) for i, label in enumerate(av.unique_labels(run.tokens))]


def _query(run, query) -> int:
    """The picked query position where this text has it, else its first word piece."""
    ok = isinstance(query, (int, float)) and not isinstance(query, bool) and query == int(query) \
        and 0 <= query < len(run.tokens)
    return int(query) if ok else next((i for i, s in enumerate(run.special) if not s), 0)


def refresh(text: str, pair: str, layer, head, query, choice: str | None):
    """After a redraw: the new text's query choices (keeping the picked position where it exists) and
    the worked example for it."""
    run, _, _ = _run(text, pair, choice, layer, head)
    pos = _query(run, query)
    return (gr.Dropdown(choices=query_choices(run), value=pos), *worked(text, pair, layer, head, pos, choice))


def worked(text: str, pair: str, layer, head, query, choice: str | None):
    """The API: (steps as Markdown, scores table, values table, JSON)."""
    run, layer, head = _run(text, pair, choice, layer, head)
    model, _ = load_model(choice)
    with mistakes():
        m = qkv.head_math(model, run.ids, run.token_type_ids, layer, head, _query(run, query))
    labels = av.unique_labels(run.tokens)
    d, best = m.d_head, int(m.weights.argmax())
    steps = (
        f"**Layer {layer}, head {head}, query token {html.escape(labels[m.query])}** · d = {d} · √d = "
        f"{math.sqrt(d):.3f}\n\n"
        f"**q** (first {min(DIMS, d)} of {d} numbers): `{_vec(m.q)}`\n\n"
        f"1. Scores: q·k<sub>j</sub> ÷ {math.sqrt(d):.3f} for each of the {len(labels)} tokens (table).\n"
        f"2. Softmax: the largest weight, **{m.weights[best]:.3f}**, goes to {html.escape(labels[best])}; "
        f"the weights add up to {float(m.weights.sum()):.3f}. They equal the model's own attention to within "
        f"{float((m.weights - m.model_weights).abs().max()):.0e}.\n"
        f"3. Output Σ w<sub>j</sub> v<sub>j</sub> (first {min(DIMS, d)} of {d}): `{_vec(m.output)}`")
    scores = pd.DataFrame({"key token": labels, "q·k": m.dots.numpy().round(3),
                           f"÷ √{d}": m.scores.numpy().round(3),
                           "e^(score − max)": (m.scores - m.scores.max()).exp().numpy().round(4),
                           "softmax weight": m.weights.numpy().round(4),
                           "model's attention": m.model_weights.numpy().round(4),
                           f"k (first {min(DIMS, d)})": [_vec(k) for k in m.k]})
    values = pd.DataFrame({"token": labels + ["output = Σ"], "weight": list(m.weights.numpy().round(4)) + [1.0],
                           f"v (first {min(DIMS, d)})": [_vec(v) for v in m.v] + [""],
                           "weight × v": [_vec(w * v) for w, v in zip(m.weights, m.v)] + [_vec(m.output)]})
    data = {"layer": layer, "head": head, "query": m.query, "tokens": run.tokens, "d_head": d,
            "q": m.q.tolist(), "dots": m.dots.tolist(), "scores": m.scores.tolist(), "weights": m.weights.tolist(),
            "model_attention": m.model_weights.tolist(), "output": m.output.tolist()}
    return steps, scores, values, data


def build(text, pair, layer, head, picker):
    """The sub-tab's parts; returns (redraw fn, its inputs, its outputs) for the tab to run after each redraw."""
    with gr.Row():
        with gr.Column(scale=2):
            query = gr.Dropdown(label="Query token (the row worked out)", choices=[], elem_id="attn-math-query",
                                allow_custom_value=True)  # API callers give a position the page never offered
            steps = gr.Markdown(elem_id="attn-math-steps")
        with gr.Column(scale=3):
            gr.Markdown(NOTE)
    scores = gr.Dataframe(label="Steps 1–2: scores and softmax weights, one row per key token", interactive=False,
                          max_height=520, elem_id="attn-math-scores")
    values = gr.Dataframe(label="Step 3: the weighted sum of the value vectors", interactive=False,
                          max_height=520, elem_id="attn-math-values")
    with gr.Accordion("JSON (what the API returns)", open=False):
        raw = gr.JSON()
    inputs, outputs = [text, pair, layer, head, query, picker], [steps, scores, values, raw]
    gr.on([query.input, layer.release, head.release], worked, inputs, outputs, api_name="attention_qkv")
    return refresh, inputs, [query, *outputs]
