"""Attention → "Sparse patterns": Longformer's and BigBird's patterns drawn on this sentence's grid beside the
picked head's attention, how much of the model's attention each would keep, and the FLOPs they save at 512
and 4,096 tokens (where attention's T² starts to cost more than the rest of the layer)."""
from __future__ import annotations

import functools
import html

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....analysis import attention_views as av
from ....analysis import sparse as S
from ....analysis.sizing import humanize
from ....config import preset
from ..shared import forms
from ..shared.common import mistakes
from .attention_run import checked_run as _run

NOTE = """**Attention costs T² and long documents have many tokens.** Every token scores every other token:
at 512 tokens that is 262,144 pairs a head, at 4,096 tokens 16.8 million. *Sparse* models compute only
some pairs. **Longformer** keeps a sliding window (each token sees its neighbours) and a few *global*
tokens such as [CLS] that see and are seen by everything; **BigBird** adds a few *random* keys per token,
so that any two tokens are linked within a few layers. Left: the pairs the pattern computes on this
sentence (dark = computed). Right: the picked head's attention, with what the pattern would drop
greyed out. The share kept tells whether this model's heads already look mostly nearby. Below: what the
published settings save in the whole forward pass of BERT-base. At 512 tokens, attention's scores are a
small part of the work and little is saved; at 4,096 they are about half."""

GREY = "#d1d5db"
SHORT = {"full": "full", "local": "window", "longformer": "Longformer", "bigbird": "BigBird"}  # the table's names


FIELDS = ("text", "pair", "layer", "head", "kind", "window", "n_global", "n_random", "seed", "choice")


def analyse(**form):
    """(figure, summary, FLOPs table, JSON) for the picked pattern on this sentence's attention; the form
    (FIELDS) by name, as the API sends it."""
    with mistakes(ValueError, TypeError):
        forms.check_names(form, FIELDS)
        kind = form.get("kind") or "longformer"
        window, n_global, n_random, seed = (int(form.get(k) or 0) for k in ("window", "n_global", "n_random", "seed"))
    run, layer, head = _run(form.get("text"), form.get("pair"), form.get("choice"), form.get("layer"), form.get("head"))
    with mistakes(ValueError):
        keep = S.pattern(len(run.tokens), kind, window, n_global, n_random, seed)
    cover = S.coverage(run.attentions, keep)  # (L, A)
    a = run.attentions[layer - 1, head - 1]  # (T, T)
    labels = av.unique_labels(run.tokens)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=("computed", f"L{layer} H{head}, dropped in grey"))  # short: a phone's width
    fig.add_trace(go.Heatmap(z=keep.int().tolist(), x=labels, y=labels, colorscale=[[0, "#ffffff"], [1, "#1e3a8a"]],
                             zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
                             hovertemplate="%{y} → %{x}: %{z}<extra>1 = computed</extra>"), 1, 1)
    kept = a.masked_fill(~keep, float("nan"))
    dropped = a.masked_fill(keep, float("nan"))
    fig.add_trace(go.Heatmap(z=dropped.tolist(), x=labels, y=labels, colorscale=[[0, GREY], [1, GREY]], showscale=False,
                             xgap=1, ygap=1, hovertemplate="%{y} → %{x}: %{z:.3f}<extra>dropped</extra>"), 1, 2)
    fig.add_trace(go.Heatmap(z=kept.tolist(), x=labels, y=labels, colorscale="Oranges", zmin=0, zmax=1, xgap=1, ygap=1,
                             colorbar=dict(title="weight", thickness=10, len=0.8),
                             hovertemplate="%{y} → %{x}: %{z:.3f}<extra>kept</extra>"), 1, 2)
    for col in (1, 2):
        fig.update_yaxes(autorange="reversed", tickfont=dict(size=9), row=1, col=col)
        fig.update_xaxes(tickangle=-60, tickfont=dict(size=9), row=1, col=col)
    fig.update_layout(height=460, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white")
    fig.update_annotations(font_size=13)
    T = len(run.tokens)
    pairs = int(keep.sum())
    summary = (f"**{html.escape(S.PATTERNS[kind][0])}** computes {pairs} of {T}² = {T * T} pairs ({pairs / (T * T):.0%}). "
               f"It keeps **{float(cover[layer - 1, head - 1]):.0%}** of this head's attention, "
               f"{float(cover.mean()):.0%} on average over all {cover.numel()} heads "
               f"(least: {float(cover.min()):.0%}, layer {int(cover.argmin()) // cover.size(1) + 1} head "
               f"{int(cover.argmin()) % cover.size(1) + 1}).")
    return fig, summary, flops_rows(), {"tokens": run.tokens, "pattern": kind, "pairs": pairs,
                                        "coverage": cover.tolist(), "flops_bert_base": base_flops()}


@functools.lru_cache(maxsize=1)
def base_flops() -> list[dict]:
    """Each pattern at its published settings, at 512 and 4,096 tokens, for BERT-base (the shape these
    patterns were made for; the shipped model reads only 128 tokens). Computed once: ~1 s."""
    return S.flops_table(preset("base"))


def flops_rows() -> list[list]:
    return [[f"{r['tokens']:,}", SHORT[r["pattern"]], f"{r['saved']:.1%}",
             humanize(r["total_flops"], "FLOP").removesuffix("FLOP"), f"{r['pair_share']:.1%}"] for r in base_flops()]


def build(text, pair, layer, head, picker):
    """The sub-tab's parts; returns (redraw fn, its inputs, its outputs) for the tab to run after each redraw."""
    with gr.Row():
        with gr.Column(scale=2):
            kind = gr.Radio([(label, k) for k, (label, _) in S.PATTERNS.items()], value="longformer",
                            label="Pattern", elem_id="attn-sparse-kind")
            with gr.Row():
                window = gr.Slider(0, 8, value=2, step=1, label="Window (keys a side)", min_width=160)
                n_global = gr.Slider(0, 4, value=1, step=1, label="Global tokens", min_width=160)
                n_random = gr.Slider(0, 4, value=2, step=1, label="Random keys (BigBird)", min_width=160)
                seed = gr.Number(0, label="Random draw #", precision=0, minimum=0, maximum=10**6, min_width=120)
            said = gr.Markdown(elem_id="attn-sparse-said")
        with gr.Column(scale=3):
            gr.Markdown(NOTE)
    fig = gr.Plot(label="Sparse pattern and the head's attention")
    table = gr.Dataframe(headers=["T", "pattern", "saved", "FLOPs", "pairs"],  # what a phone shows first
                         interactive=False, elem_id="attn-sparse-flops",
                         label="BERT-base, one forward pass of T tokens, with the published settings (Longformer: "
                               "256 keys a side, [CLS] global; BigBird: 96 a side, 128 global, 192 random)")
    with gr.Accordion("JSON (what the API returns)", open=False):
        raw = gr.JSON()
    by_name = dict(zip(FIELDS, (text, pair, layer, head, kind, window, n_global, n_random, seed, picker)))
    outputs = [fig, said, table, raw]
    gr.on([kind.change, window.release, n_global.release, n_random.release, seed.change, layer.release,
           head.release], analyse, None, outputs, inputs_kwargs=by_name, api_name="sparse_attention")
    return analyse, by_name, outputs  # inputs by name: the tab passes them as inputs_kwargs
