"""Architecture → "Every variant at its presets": parameters, fp32 memory and FLOPs for every family
member (family.MEMBERS) at every size its record names, side by side. Pure arithmetic
(bertlab.analysis.sizing, which tests check against transformers' own models), so it answers at once."""
from __future__ import annotations

import math

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from ....analysis import sizing
from ....config import MODEL_TYPES, preset, preset_names
from ....family import MEMBERS, NAMES
from ..shared import common
from ..shared.common import away_from_neighbours
from ....variants.deberta import relative_window

EXPLAIN = """**The variants table.** Every family member at every preset, counted by the same formulas.
*Parameters* is what is stored; *fp32 weights* is 4 bytes each; *fp32 inference* adds the working
memory of one sequence; *fp32 training* adds gradients, AdamW's two moments and the activations of one
sequence; *FLOPs* is the arithmetic of one forward pass. In the chart, points at one height do the same
arithmetic: **ALBERT**'s sit far left of BERT's (its layers share one set of weights: fewer parameters,
the same FLOPs); **DistilBERT**-base does half BERT-base's FLOPs (6 layers, not 12); **RoBERTa** is
BERT plus a 50k-word vocabulary (more parameters, the same FLOPs); **ELECTRA**'s generators are the
small models trained beside its discriminators; **DeBERTa-v3**-base is BERT-base's shape with a
{vocab}-word vocabulary and one table of relative positions: {params} parameters, and its positions
cost {extra:+.0%} FLOPs at 128 tokens as transformers computes them (every layer projects all {rows} position
vectors; bertlab's own layers project only the {reached} that 128 tokens reach)."""

SCOPES = ["encoder (as published)", "with pre-training heads"]
FAMILY_COLOURS = {n: m.colour for n, m in MEMBERS.items()}  # each member's record
HEADERS = ["family", "preset", "layers", "hidden", "E", "heads", "vocab", "parameters",
           "fp32 weights", "fp32 inference", "fp32 training", "FLOPs"]
MAX_LEN = 512  # every preset reads 512 tokens


def _architecture(family: str, name: str, heads: bool) -> str:
    """ELECTRA's generators are masked-LM models, not discriminators."""
    own = MEMBERS[family]
    if own.generator and name.endswith("-generator"):
        return own.generator.split(":")[1] if heads else own.encoder_class
    return sizing.architecture_of(preset(name, model_type=family), heads=heads)


def variant_rows(seq_len: int = 128, heads: bool = False) -> list[dict]:
    """One dict per (family, preset): its shape and exact figures (parameters, bytes, FLOPs) for
    one sequence of `seq_len` tokens: inference and training (AdamW) in fp32, forward FLOPs."""
    rows = []
    for family in MODEL_TYPES:
        for name in preset_names(family):
            c = preset(name, model_type=family)
            arch = _architecture(family, name, heads)
            T = min(seq_len, c.max_position_embeddings - c.position_offset)
            rows.append({
                "family": family, "preset": name, "architecture": arch, "layers": c.num_hidden_layers,
                "hidden": c.hidden_size, "embedding": c.embedding_dim, "heads": c.num_attention_heads,
                "intermediate": c.intermediate_size, "vocab": c.vocab_size, "seq_len": T,
                "parameters": sizing.param_counts(c, architecture=arch)["total"],
                "fp32_weights": sizing.memory(c, 1, T, "fp32", architecture=arch)["weights"],
                "fp32_inference": sizing.memory(c, 1, T, "fp32", architecture=arch)["total"],
                "fp32_training": sizing.memory(c, 1, T, "fp32", training=True, optimizer="adamw",
                                               architecture=arch)["total"],
                "flops": sizing.flops(c, T, architecture=arch)["total"]})
    return rows


def table(rows: list[dict]) -> pd.DataFrame:
    h = sizing.humanize
    return pd.DataFrame([[NAMES[r["family"]], r["preset"], r["layers"], r["hidden"],
                          r["embedding"] if r["embedding"] != r["hidden"] else "", r["heads"], f"{r['vocab']:,}", h(r["parameters"]), h(r["fp32_weights"], "B"),
                          h(r["fp32_inference"], "B"), h(r["fp32_training"], "B"), h(r["flops"], "FLOPs")]
                         for r in rows], columns=HEADERS)


def figure(rows: list[dict], seq_len: int) -> go.Figure:
    """Parameters across, FLOPs up (both log): points on one height do the same work."""
    fig = go.Figure()
    # each label away from its nearest neighbour, as drawn (log axes): BERT's and RoBERTa's sizes nearly meet
    where = dict(zip(map(id, rows), away_from_neighbours([(math.log10(r["parameters"]), math.log10(r["flops"]))
                                                          for r in rows])))
    def span(key):  # the axis's range, with room around the points for their labels
        return min(r[key] for r in rows) / 1.5, max(r[key] for r in rows) * 1.5

    for family in MODEL_TYPES:
        mine = [r for r in rows if r["family"] == family]
        fig.add_scatter(
            x=[r["parameters"] for r in mine], y=[r["flops"] for r in mine], mode="markers+text",
            name=NAMES[family], text=[r["preset"] for r in mine], textposition=[where[id(r)] for r in mine],
            textfont={"size": 9, "color": FAMILY_COLOURS[family]},
            marker={"size": 9, "color": FAMILY_COLOURS[family]},
            customdata=[[r["preset"], sizing.humanize(r["parameters"]), sizing.humanize(r["flops"], "FLOPs"),
                         sizing.humanize(r["fp32_training"], "B")] for r in mine],
            hovertemplate=f"<b>{NAMES[family]} %{{customdata[0]}}</b><br>%{{customdata[1]}} parameters<br>"
                          "%{customdata[2]} forward<br>fp32 training %{customdata[3]}<extra></extra>")
    fig.update_layout(
        title={"text": f"Parameters against forward FLOPs<br><sub>one sequence of {seq_len} tokens</sub>",
               "font": {"size": 15}},
        height=460, margin=dict(l=60, r=10, t=60, b=10), plot_bgcolor="white",
        xaxis={"type": "log", "title": "parameters", "gridcolor": "#e5e7eb", **common.log_ticks(*span("parameters"), common.si),
               "range": [math.log10(v) for v in span("parameters")]},  # a label at the right edge was cut on a phone
        yaxis={"type": "log", "title": "FLOPs", "gridcolor": "#e5e7eb", **common.log_ticks(*span("flops"), common.si)},
        legend={"orientation": "h", "y": -0.2, "x": 0})
    return fig


def deberta_base(T: int = 128) -> dict:
    """The explanation's DeBERTa-v3-base figures, from the same formulas as the table."""
    deb = preset("base", model_type="deberta-v2")
    f = sizing.flops(deb, T, heads=False)["total"] / sizing.flops(sizing.as_bert(deb), T, heads=False)["total"]
    S = deb.position_buckets  # v3: 2S rows, bucketed
    lo, hi = relative_window(T, S, deb.max_position_embeddings, S)
    return {"vocab": f"{deb.vocab_size // 1000}k", "params": sizing.humanize(sizing.param_counts(deb, heads=False)
            ["encoder_total"]), "extra": f - 1, "rows": 2 * S, "reached": hi - lo}


def variants(seq_len=128, scope: str = SCOPES[0]):
    """The API: (table, chart, JSON) of every family member at every preset."""
    T = common.whole_number(seq_len, "sequence length", lo=1, hi=MAX_LEN)
    if scope not in SCOPES:
        raise common.user_error(f"Count must be one of: {', '.join(SCOPES)}; got {scope!r}.")
    rows = variant_rows(T, heads=scope == SCOPES[1])
    return table(rows), figure(rows, T), {"seq_len": T, "scope": scope, "variants": rows}


def build() -> None:
    """The section, under the tab's published-models table."""
    gr.Markdown("### Every variant at its presets")
    with common.form(EXPLAIN.format(**deberta_base())):
        with gr.Row():
            scope = gr.Radio(SCOPES, value=SCOPES[0], label="Count", min_width=220)
            length = gr.Slider(8, MAX_LEN, value=128, step=8, label="Tokens per sequence", min_width=220)
        ex = gr.Examples([[128, SCOPES[0]], [512, SCOPES[1]]], [length, scope],  # here: on a phone, near
                         example_labels=["128 tokens, encoders", "512 tokens, with heads"], label="Examples")
        go_btn = gr.Button("Compare the variants")
    plot = gr.Plot(label="Parameters against FLOPs", elem_id="arch-variants-plot")
    out = gr.Dataframe(headers=HEADERS, interactive=False, wrap=False, label="Every variant (FFN = 4 × hidden)",
                       elem_id="arch-variants-table", max_height=1200)
    with gr.Accordion("JSON (exact parameters, bytes and FLOPs)", open=False):
        raw = gr.JSON()
    common.wire(variants, [length, scope], [out, plot, raw], go_btn, "variants",
                [length.release, scope.input], ex)
