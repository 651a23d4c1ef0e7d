"""Architecture: how big a BERT is, where its parameters live, and what it costs to run or train.

Pure arithmetic on a BertConfig (bertlab.analysis.sizing), so any size answers at once; only the
card about the picked model loads a model.
"""
from __future__ import annotations

import math

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...analysis import sizing
from ...config import PRESETS, BertConfig, preset
from . import common, models
from .common import MODEL_ERRORS, load_model, mistakes, wire

EXPLAIN = """**How big is a BERT?** A BERT is a stack of identical layers; four numbers fix its size:
the number of layers, the hidden width, the attention heads and the feed-forward width (usually
4 × hidden). Pick a preset or type your own: the charts count the parameters, the memory to run or
train it, and the arithmetic per sentence — note how attention's share grows with the length, since
every token looks at every other token."""

KNOWN_NOTE = """**Why the sizes differ.** *RoBERTa-base* is BERT-base with a 50k-word byte-level
vocabulary: the extra word vectors are the whole difference. *DistilBERT* keeps BERT-base's width
but only **6 layers** (and drops the token-type table and the pooler). *ALBERT-base* has BERT-base's
12 × 768 shape yet ~12M parameters: **factorised embeddings** (words live in 128 dimensions and are
projected up to 768, so 30k × 128 instead of 30k × 768) and **cross-layer sharing** (all 12 layers
reuse one layer's weights). ALBERT saves memory, not compute: it still runs 12 layers."""

# (label, BertConfig field, largest accepted value): caps keep typos like 1e30 from reaching the charts
FIELDS = [("Layers", "num_hidden_layers", 1024), ("Hidden size", "hidden_size", 65536),
          ("Attention heads", "num_attention_heads", 1024), ("Feed-forward size", "intermediate_size", 262144),
          ("Vocabulary", "vocab_size", 10_000_000), ("Max positions", "max_position_embeddings", 1_000_000)]
PARTS = [("embeddings", "Embeddings", "#1f77b4"), ("attention", "Attention", "#ff7f0e"),
         ("feed_forward", "Feed-forward", "#2ca02c"), ("pooler", "Pooler", "#9467bd"),
         ("mlm_head", "MLM head", "#d62728"), ("nsp_head", "NSP head", "#8c564b")]
MEM_PARTS = [("weights", "weights", "#1f77b4"), ("gradients", "gradients", "#ff7f0e"),
             ("optimizer", "AdamW state", "#2ca02c"), ("weight_copies", "bf16 weight copy", "#17becf"),
             ("activations", "activations", "#9467bd"), ("logits", "output logits", "#d62728")]
FLOP_PARTS = [(("qkv", "attention_output"), "Q, K, V and output projections", "#ff7f0e"),
              (("attention_scores", "attention_values"), "attention scores + mixing (∝ length²)", "#d62728"),
              (("feed_forward",), "feed-forward", "#2ca02c"),
              (("pooler", "mlm_head", "nsp_head"), "pooler + MLM/NSP heads", "#7f7f7f")]


CUSTOM = "custom"  # the preset box's value when the fields match no preset


def readable(x: float) -> str:
    """A number as a person reads it: 1,048,576 up to a trillion, then 1e+30 (not 31 digits)."""
    return f"{int(x):,}" if abs(x) < 1e12 else f"{x:.3g}"


def make_config(layers, hidden, heads, intermediate, vocab, max_positions) -> BertConfig:
    """A validated BertConfig from the form; ValueError names the field at fault."""
    kw = {}
    for (label, field, cap), v in zip(FIELDS, (layers, hidden, heads, intermediate, vocab, max_positions)):
        if v is None or (isinstance(v, str) and not v.strip()):
            raise ValueError(f"{field} ({label}) is empty: type a number")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{field} ({label}) must be a number, got {v!r}") from None
        if not math.isfinite(x) or x != int(x):
            raise ValueError(f"{field} ({label}) must be a whole number, got {v!r}")
        if x > cap:
            raise ValueError(f"{label} ({field}) must be at most {cap:,}, got {readable(x)}")
        kw[field] = int(x)
    return BertConfig(**kw)  # raises ValueError naming the field (e.g. hidden_size % heads)


def fill_preset(name: str):
    """The form values for a preset (intermediate = 4 × hidden; BERT's WordPiece vocabulary)."""
    if name == CUSTOM:  # chosen by hand: the fields stay as they are
        return [gr.skip()] * len(FIELDS)
    with mistakes(ValueError):
        return [getattr(preset(name), field) for _, field, _ in FIELDS]


def preset_of(*values) -> str:
    """The preset whose fields are `values`, else "custom": the preset box never names other numbers."""
    for name in PRESETS:
        if [getattr(preset(name), f) for _, f, _ in FIELDS] == list(values):
            return name
    return CUSTOM


def fill_picked(choice):
    """(preset box, form values) from the picked model's own config."""
    values = [getattr(load_model(choice)[0].config, field) for _, field, _ in FIELDS]
    return [preset_of(*values)] + values


def params_figure(p: dict) -> go.Figure:
    total = p["total"]
    names = [label for _, label, _ in PARTS][::-1]
    vals = [p[k] for k, _, _ in PARTS][::-1]
    fig = go.Figure(go.Bar(
        x=vals, y=names, orientation="h", marker_color=[c for _, _, c in PARTS][::-1],
        text=[f"{sizing.humanize(v)} ({100 * v / total:.1f} %)" for v in vals], textposition="auto",
        hovertemplate="%{y}: %{x:,} parameters<extra></extra>"))
    fig.update_layout(title=f"Parameters: {sizing.humanize(total)} in all ({total:,})", height=340,
                      xaxis=dict(title="parameters"), margin=dict(l=20, r=20, t=50, b=40))
    return fig


def memory_table(c: BertConfig, batch: int, seq_len: int) -> dict:
    return {mode: {dt: sizing.memory(c, batch, seq_len, dt, training=(mode == "training"), optimizer="adamw")
                   for dt in ("fp32", "bf16")} for mode in ("inference", "training")}


def memory_figure(mem: dict, batch: int, seq_len: int) -> go.Figure:
    bars = [(f"{mode}<br>{dt}", mem[mode][dt]) for mode in ("inference", "training") for dt in ("fp32", "bf16")]
    fig = go.Figure()
    for key, label, color in MEM_PARTS:
        fig.add_trace(go.Bar(name=label, x=[b for b, _ in bars], y=[d.get(key, 0) / 1e9 for _, d in bars],
                             marker_color=color, hovertemplate=f"{label}: %{{y:.3g}} GB<extra></extra>"))
    for b, d in bars:
        fig.add_annotation(x=b, y=d["total"] / 1e9, text=sizing.humanize(d["total"], "B"), showarrow=False,
                           yshift=10, font=dict(size=12))
    fig.update_layout(barmode="stack", height=440, yaxis=dict(title="GB (10⁹ bytes)"),
                      title=f"Memory for a batch of {batch} × {seq_len} tokens",
                      legend=dict(font=dict(size=11), orientation="h", y=-0.2), margin=dict(l=60, r=20, t=50, b=40))
    return fig


LONG = 8192  # the chart runs on past the model's limit to show where attention takes over


def lengths_for(max_positions: int, seq_len: int) -> list[int]:
    """Doubling lengths from 8 up to max(limit, LONG), plus the limit and the chosen length."""
    out, t = set(), 8
    while t < max(max_positions, LONG):
        out.add(t)
        t *= 2
    return sorted(out | {max(max_positions, LONG), max_positions, seq_len})


def flops_figure(c: BertConfig, seq_len: int) -> tuple[go.Figure, list[dict]]:
    Ts = lengths_for(c.max_position_embeddings, seq_len)
    rows = [sizing.flops(c, T) for T in Ts]
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=(  # stacked: readable on a phone
        "forward FLOPs for one sequence", "share of the work (attention grows with length²)"))
    fig.add_trace(go.Scatter(x=Ts, y=[r["total"] for r in rows], mode="lines+markers", name="total",
                             line=dict(color="black", width=3),
                             hovertemplate="length %{x}: %{y:.3s}FLOPs<extra></extra>"), 1, 1)
    share = 2, 1
    for keys, label, color in FLOP_PARTS:
        fig.add_trace(go.Scatter(x=Ts, y=[sum(r[k] for k in keys) for r in rows], name=label, mode="lines",
                                 stackgroup="share", groupnorm="percent", line=dict(color=color, width=0.5),
                                 hovertemplate=f"{label}<br>length %{{x}}: %{{y:.1f}} %<extra></extra>"), *share)
    fig.add_vline(x=seq_len, line_dash="dot", line_color="gray", row="all", col="all")
    if Ts[-1] > c.max_position_embeddings:
        fig.add_vrect(x0=c.max_position_embeddings, x1=Ts[-1], fillcolor="gray", opacity=0.18,
                      line_width=0, layer="above", row="all", col="all")
        fig.add_annotation(x=math.log10(c.max_position_embeddings), y=0.98, xref="x", yref="y domain",
                           showarrow=False, xanchor="left", yanchor="top", font=dict(size=11, color="dimgray"),
                           text=" longer than this<br> model can read")
    fig.update_xaxes(type="log", title="sequence length (tokens)", exponentformat="SI")
    fig.update_yaxes(type="log", title="FLOPs", exponentformat="SI", row=1, col=1)
    fig.update_yaxes(title="% of forward FLOPs", range=[0, 100], row=2, col=1)
    fig.update_layout(height=680, legend=dict(orientation="h", y=-0.12, font=dict(size=11)),
                      margin=dict(l=60, r=20, t=50, b=40))
    series = [{"length": T, "total": r["total"], "within_max_positions": T <= c.max_position_embeddings,
               "attention_share": (r["attention_scores"] + r["attention_values"]) / r["total"]}
              for T, r in zip(Ts, rows)]
    return fig, series


def known_rows(c: BertConfig) -> list[list]:
    rows = []
    for name, m in sizing.KNOWN_MODELS.items():
        k = BertConfig(**m["config"])
        n, pub = sizing.known_model_params(name), m["published"]
        rows.append([name, k.num_hidden_layers, k.hidden_size, k.num_attention_heads, f"{k.vocab_size:,}",
                     sizing.humanize(n), f"≈{pub / 1e6:.0f}M", f"{100 * (n - pub) / pub:+.1f} %"])
    enc = sizing.param_counts(c, heads=False)["encoder_total"]
    rows.append(["your config", c.num_hidden_layers, c.hidden_size, c.num_attention_heads, f"{c.vocab_size:,}",
                 sizing.humanize(enc), "", ""])
    return rows


KNOWN_HEADERS = ["model", "layers", "hidden", "heads", "vocab", "computed", "published", "diff"]


def picked_card(choice) -> tuple[str, dict]:
    """The picked model's own config and sizes; a loading error becomes a line, not a failure."""
    try:
        model, _ = models.get(choice)
        card = models.describe(choice)
    except MODEL_ERRORS as e:
        return f"**Picked model:** could not load it ({e})", {"error": str(e)}
    c = model.config
    counted = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    formula = sizing.param_counts(c)["total" if hasattr(model, "cls") else "encoder_total"]
    check = "✓ matches" if counted == formula else f"formula says {formula:,}"
    return (f"**Picked model:** {card}  \nparameters counted in its weights: {counted:,} ({check}) — "
            "press *Use the picked model* to size it above."), \
        {"config": c.to_dict(), "parameters_counted": counted, "parameters_formula": formula}


def compute(layers, hidden, heads, intermediate, vocab, max_positions, batch, seq_len, choice):
    """Everything the tab shows: (summary, params chart, memory chart, FLOPs chart, table, card, JSON)."""
    with mistakes(ValueError, TypeError, OverflowError):
        c = make_config(layers, hidden, heads, intermediate, vocab, max_positions)
        batch = max(1, int(batch or 1))
        seq_len = max(1, int(seq_len or 1))
    notes = []
    if seq_len > c.max_position_embeddings:
        notes.append(f"length {seq_len} is more than this model reads ({c.max_position_embeddings} "
                     f"positions): using {c.max_position_embeddings}")
        seq_len = c.max_position_embeddings
    p = sizing.param_counts(c)
    mem = memory_table(c, batch, seq_len)
    f = sizing.flops(c, seq_len)
    att = (f["attention_scores"] + f["attention_values"]) / f["total"]
    flops_fig, series = flops_figure(c, seq_len)
    card, picked = picked_card(choice)
    train = mem["training"]["bf16"]["total"]
    summary = (f"**{sizing.humanize(p['total'])} parameters** ({sizing.humanize(p['encoder_total'])} without the "
               f"pre-training heads) · one {seq_len}-token sentence costs **{sizing.humanize(f['total'], 'FLOPs')}** "
               f"forward, {100 * att:.1f} % of it attention scores · training batch {batch} in bf16 needs "
               f"≈**{sizing.humanize(train, 'B')}**")
    if notes:
        summary += "\n\n" + "\n".join(f"- {n}" for n in notes)
    data = {"config": c.to_dict(), "params": p, "memory": mem, "batch_size": batch, "seq_len": seq_len,
            "flops": f, "attention_share": att, "flops_vs_length": series,
            "known_models": {n: {"computed": sizing.known_model_params(n), "published": m["published"]}
                             for n, m in sizing.KNOWN_MODELS.items()},
            "picked_model": picked, "notes": notes}
    return (summary, params_figure(p), memory_figure(mem, batch, seq_len), flops_fig, known_rows(c), card, data)


def build(picker: gr.Textbox) -> None:
    start = fill_preset("base")
    with common.form(EXPLAIN):
        with gr.Row():
            name = gr.Dropdown(list(PRESETS) + [CUSTOM], value="base", label="Preset", scale=2, min_width=140)
            use_picked = gr.Button("Use the picked model", scale=1, min_width=140)
        with gr.Row():
            boxes = [gr.Number(v, label=label, min_width=110) for (label, _, _), v in zip(FIELDS, start)]
        with gr.Row():
            batch = gr.Slider(1, 256, value=32, step=1, label="Batch size", min_width=160)
            seq_len = gr.Slider(8, 4096, value=128, step=8, label="Sequence length (tokens)", min_width=160)
        go_btn = gr.Button("Size it", variant="primary")
        summary = gr.Markdown()
        params_plot = gr.Plot(label="Where the parameters are")
        picked = gr.Markdown()
    flops_plot = gr.Plot(label="Compute")
    with gr.Row():
        with gr.Column(scale=4, min_width=320):
            mem_plot = gr.Plot(label="Memory")
            gr.Markdown("*Training* = AdamW; *bf16* training is mixed precision (fp32 master weights).")
        with gr.Column(scale=5, min_width=320):
            table = gr.Dataframe(known_rows(preset("base")), headers=KNOWN_HEADERS, label="Well-known models",
                                 interactive=False, wrap=False)
            gr.Markdown("*computed*: encoder parameters from each model's config (no pre-training heads).\n\n"
                        + KNOWN_NOTE)
    with gr.Accordion("Numbers (JSON)", open=False):
        raw = gr.JSON(label="parameters, memory (bytes), FLOPs")
    inputs = boxes + [batch, seq_len, picker]
    outputs = [summary, params_plot, mem_plot, flops_plot, table, picked, raw]
    triggers = [b.submit for b in boxes] + [batch.release, seq_len.release, picker.change]
    wire(compute, inputs, outputs, go_btn, "architecture", triggers, show_progress="minimal")
    name.input(fill_preset, name, boxes, api_name=False).then(compute, inputs, outputs, api_name=False)
    use_picked.click(fill_picked, picker, [name] + boxes, api_name=False).then(compute, inputs, outputs, api_name=False)
    gr.on([b.input for b in boxes], preset_of, boxes, name, api_name=False, show_progress="hidden")
