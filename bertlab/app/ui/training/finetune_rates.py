"""The Fine-tune tab's "Runs by learning rate or labelled examples" section (issue 32, items 12 and 9): the
watched and overlaid runs (a comparison: all its runs) placed by their learning rate, with BERT-base's
published range beside this small model's default, or by the labelled examples they trained on (a
learning curve, pre-trained and random weights apart); a line per method. Read from the runs' spec.json,
facts and metrics, so it costs nothing to draw."""
from __future__ import annotations

import math
from pathlib import PurePosixPath

import gradio as gr
import plotly.graph_objects as go

from ....methods.registry import REGISTRY
from ....train.runs import Run
from ..shared.common import PERCENT_AXIS, log_ticks, user_error
from .finetune_forgetting import runs_of
from .finetune_form import METHOD_LABELS
from .train_charts import empty_figure, method_style, metrics

BERT_RANGE = (2e-5, 5e-5)  # Devlin et al. 2019, A.3: the fine-tuning rates BERT-base and -large were tried at
FULL_LR = REGISTRY["full"].lr
EXPLAIN = f"""**Learning rate against score.** BERT's paper fine-tuned BERT-base at **2e-5 to 5e-5** (the
shaded band). This model is 20 times smaller, and full fine-tuning's default here is **{FULL_LR:g}**, ten
times the band, tuned on this model (bench/FINETUNE.md). A narrow model's weights are small and its
layers few: one step must move each weight further to change what it computes, and a short run has few
steps to do it in; a wide one changes a lot with little, and a large rate throws away what pre-training
taught (see *What fine-tuning forgot*). Train the same method at three or four rates (*More options*:
Learning rate), overlay them, and chart them here: the score rises to a peak and falls off a cliff.

**By labelled examples** the same chart is a learning curve: train on 50, 200, 1,000 and all the
sentences (*More options*: Labelled examples to train on), from the model's weights and from random
weights, and see how many labels pre-training saves. A run that starts from another model (say a
pre-training run that adapted the shipped model to the task, *TAPT*) is a dotted line of its own: the
gap between it and the shipped model's line is what the adaptation bought."""
AXES = ("learning rate", "labelled examples")
SCORES = (("accuracy", "accuracy"), ("exact_match", "exact match"), ("pearson", "Pearson r"),
          ("micro_f1", "micro-F1"), ("f1", "F1"))


def point(d) -> dict | None:
    """{method, init, start, lr, examples, score, metric} of a run with a held-out evaluation, else None."""
    spec = Run(d).spec_dict() or {}
    if spec.get("kind") != "finetune" or not isinstance(spec.get("lr"), (int, float)):
        return None
    n = Run(d).facts().get("train_examples")
    evals = [r for r in metrics(d) if r.get("split") == "eval"]
    for key, label in SCORES:
        if evals and isinstance(evals[-1].get(key), (int, float)):
            return {"method": spec.get("method", "full"), "init": spec.get("init", "pretrained"),
                    "start": start_name(spec.get("model")),
                    "lr": float(spec["lr"]), "examples": n if isinstance(n, int) and n > 0 else None,
                    "score": evals[-1][key], "metric": label}
    return None


def start_name(model) -> str:
    """The model a run started from, as a chart may say it: "shipped", a run's or hub id's last name
    (a run folder's path on this server is never shown)."""
    if model in (None, "", "default"):
        return "shipped"
    p = PurePosixPath(str(model).replace("\\", "/").rstrip("/"))
    return (p.parent.name if p.name == "model" else p.name)[:40] or "shipped"


def _guides(fig: go.Figure) -> None:
    """BERT-base's band and full's default on the learning-rate axis."""
    lo, hi = BERT_RANGE
    fig.add_vrect(x0=lo, x1=hi, fillcolor="#2ca02c", opacity=0.15, line_width=0)
    fig.add_vline(x=FULL_LR, line_dash="dot", line_color="#7f7f7f")
    # an annotation on a log axis is placed at log10 of its value (a shape at the value itself)
    for x, text, anchor in ((lo, "BERT-base", "top"), (FULL_LR, "full's default here", "bottom")):
        fig.add_annotation(x=math.log10(x), xref="x", y=1 if anchor == "top" else 0, yref="y domain",
                           yanchor=anchor, xanchor="left", text=text, showarrow=False)


def figure(points: list[dict], names: list[str], by: str = AXES[0]) -> go.Figure:
    """Score against the learning rate or the labelled examples (log axis), a line per method (and, by
    examples, per start: random weights dashed); by learning rate, BERT-base's band shaded."""
    fig = go.Figure()
    key = "lr" if by == AXES[0] else "examples"
    if key == "lr":
        _guides(fig)
    series = dict.fromkeys((p["method"], p["init"] if key == "examples" else None, p["start"]) for p in points)
    starts = {p["start"] for p in points}
    for method, init, start in series:
        mine = sorted((p[key], p["score"], n) for p, n in zip(points, names)
                      if p["method"] == method and (init is None or p["init"] == init) and p["start"] == start)
        colour, marker = method_style(method)
        name = METHOD_LABELS.get(method, method) + (", random weights" if init == "random" else "") + (
            f", from {start}" if len(starts) > 1 else "")
        fig.add_trace(go.Scatter(x=[x for x, _, _ in mine], y=[y for _, y, _ in mine], customdata=[n for *_, n in mine],
                                 mode="lines+markers", name=name,
                                 line=dict(color=colour, dash="dash" if init == "random" else
                                           "dot" if start != "shipped" else "solid"),
                                 marker=dict(color=colour, symbol=marker, size=10),
                                 hovertemplate="%{customdata}<br>" + ("lr %{x:.1e}" if key == "lr" else "%{x:,} examples")
                                 + ": %{y:.1%}<extra></extra>"))
    xs = [p[key] for p in points] + (list(BERT_RANGE) + [FULL_LR] if key == "lr" else [])
    metric = points[0]["metric"] if len({p["metric"] for p in points}) == 1 else "held-out score"
    fig.update_layout(height=340, margin=dict(l=50, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.25),
                      xaxis=dict(type="log", title=by, exponentformat="e" if key == "lr" else "none",
                                 range=[math.log10(min(xs)) - 0.3, math.log10(max(xs)) + 0.3],
                                 **log_ticks(min(xs) / 2, max(xs) * 2,
                                                    (lambda v: f"{v:.0e}") if key == "lr" else (lambda v: f"{v:,.0f}"))),
                      yaxis=dict(title=metric, tickformat=PERCENT_AXIS if metric != "Pearson r" else None))
    return fig


def chart(name, overlay, by=AXES[0]):
    """The chart, and a line saying how many runs it placed and which it could not."""
    by = by if by in AXES else AXES[0]
    picked = runs_of(name, overlay)
    if not picked:
        raise user_error("Pick a run to watch first (or overlay some): each is placed by its learning rate "
                         "or the labelled examples it trained on.")
    key = "lr" if by == AXES[0] else "examples"
    got = [(label, point(d)) for label, d in picked]
    placed = [(label, p) for label, p in got if p is not None and p[key] is not None]
    if not placed:
        return empty_figure("No run with a held-out score yet:<br>each gets one after its first epoch."), ""
    missing = [label for label, p in got if p is None or p[key] is None]
    said = f"{len(placed)} run{'s' if len(placed) > 1 else ''} placed by {by}" + (
        f"; not yet scored: {', '.join(missing)}" if missing else "") + "."
    return figure([p for _, p in placed], [label for label, _ in placed], by), said


def build(watch: gr.Dropdown, overlay: gr.Dropdown) -> None:
    with gr.Accordion("Runs by learning rate or labelled examples", open=False, elem_id="finetune-rates"):
        gr.Markdown(EXPLAIN)
        with gr.Row():
            by = gr.Radio(list(AXES), value=AXES[0], label="Place the runs by", elem_id="finetune-rates-by",
                          min_width=200)
            button = gr.Button("Chart the watched and overlaid runs", elem_id="finetune-rates-go", min_width=200)
        plot = gr.Plot(empty_figure("Pick runs, then chart them."), show_label=False, elem_id="finetune-rates-plot")
        said = gr.Markdown(elem_id="finetune-rates-said")
    gr.on([button.click, by.input], chart, [watch, overlay, by], [plot, said], api_name="finetune_rates")
