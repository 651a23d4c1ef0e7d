"""Plotly charts of training runs, drawn from their metrics.jsonl (shared by the training tabs).

Each series (train loss, held-out accuracy, ...) has its own colour and marker; each run its own dash
(the first solid), so several runs overlay on one chart and still read apart. Held-out series are
lines with a point at every evaluation.
"""
from __future__ import annotations

import contextlib
import html
import json
import math
import threading
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .... import family
from ....methods.registry import REGISTRY
from ....train.runs import read_metrics
from ..shared.common import PERCENT_AXIS

DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]  # one per overlaid run
_cache: dict[str, tuple[tuple, list[dict]]] = {}
_lock = threading.Lock()


def metrics(run_dir: str | Path) -> list[dict]:
    """The run's metric rows, re-read only when the file changed (timers poll this every second)."""
    path = Path(run_dir) / "metrics.jsonl"
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        return []
    with _lock:
        hit = _cache.get(str(path))
        if hit and hit[0] == stamp:
            return hit[1]
    rows = read_metrics(run_dir)[0]
    with _lock:
        _cache[str(path)] = (stamp, rows)
    return rows


def read_json(path: str | Path) -> dict | None:
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        return d if isinstance(d, dict) else None
    except (OSError, ValueError):
        return None


def _series(rows, split, key):
    pts = [(r["step"], r[key]) for r in rows if r.get("split") == split and isinstance(r.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _panel(fig, runs, row, col, lines) -> bool:
    """Add one panel: `lines` = [(split, key, label, colour, marker)]; the unigram baseline is always
    dotted. False when it had nothing to draw."""
    drawn = False
    for i, (name, rows) in enumerate(runs.items()):
        dash = DASHES[i % len(DASHES)]
        for split, key, label, color, symbol in lines:
            x, y = _series(rows, split, key)
            if not x:
                continue
            drawn = True
            held_out = split == "eval"  # a point at each evaluation; a train line's first points show too
            fig.add_trace(go.Scatter(
                x=x, y=y, mode="lines+markers" if held_out or len(x) < 3 else "lines",
                name=f"{name}: {label}" if len(runs) > 1 else label,
                line=dict(color=color, dash="dot" if key == "unigram_acc" else dash, width=2.5 if held_out else 2),
                marker=dict(symbol=symbol, size=8, color=color, line=dict(width=1, color="white")),
                hovertemplate=f"{name} · {label}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"), row=row, col=col)
    return drawn


# (split, key, label, colour, marker): a colour and a marker of its own for every series of a figure
PRETRAIN_PANELS = [
    # like with like: the masked words' loss on training batches and on held-out text (the total training
    # loss adds NSP's, or ELECTRA's 50 x replaced-token loss, and sat far above the held-out line)
    ("Loss", [("train", "mlm_loss", "train MLM loss", "#1f77b4", "circle"),
              ("eval", "mlm_loss", "held-out MLM loss", "#ff7f0e", "diamond")]),
    ("Masked-token accuracy", [("train", "mlm_acc", "train MLM acc.", "#2ca02c", "circle"),
                               ("eval", "mlm_acc", "held-out MLM acc.", "#d62728", "diamond"),
                               ("eval", "unigram_acc", "unigram guess", "#6b7280", "x")]),
    # the second objective: the pair task (NSP, SOP), or ELECTRA's replaced-token detection
    ("Pair task / replaced tokens", [("train", "nsp_acc", "train pair acc.", "#9467bd", "circle"),
                                     ("eval", "nsp_acc", "held-out pair acc.", "#8c564b", "diamond"),
                                     ("train", "rtd_acc", "train replaced-or-not acc.", "#7c3aed", "circle"),
                                     ("eval", "rtd_auc", "held-out replaced-token AUC", "#be123c", "diamond"),
                                     ("eval", "rtd_recall", "held-out replacements caught", "#f59e0b", "square")]),
    ("Attention to neighbours", [("eval", "attn_prev", "mass on previous token", "#e377c2", "triangle-left"),
                                 ("eval", "attn_next", "mass on next token", "#17becf", "triangle-right")]),
    ("Learning rate", [("train", "lr", "learning rate", "#bcbd22", "circle")]),
    ("Tokens per second", [("train", "tokens_per_s", "tokens/s", "#0f766e", "circle")]),
]
# The Pre-train tab draws these as three narrow figures side by side, stacked on a phone: what moves
# together sits together (accuracy leaves the unigram line as attention to neighbours rises).
PRETRAIN_GROUPS = [("Loss", [0, 4]), ("Guessing the masked words", [1, 3]), ("Second task and speed", [2, 5])]
FINETUNE_PANELS = [
    ("Loss", [("train", "loss", "train loss", "#1f77b4", "circle"),
              ("eval", "loss", "validation loss", "#ff7f0e", "diamond")]),
    ("Accuracy", [("train", "acc", "train acc.", "#2ca02c", "circle"),
                  ("eval", "accuracy", "validation acc.", "#d62728", "diamond"),
                  ("eval", "macro_f1", "validation macro-F1", "#9467bd", "square")]),
]
# the second panel of a task without one label per text (multi-label, regression, QA): its own scores
PROBLEM_PANELS = {
    "multi": ("Scores", [("eval", "micro_f1", "validation micro-F1", "#d62728", "diamond"),
                         ("eval", "macro_f1", "validation macro-F1", "#9467bd", "square"),
                         ("eval", "accuracy", "validation exact label sets", "#2ca02c", "circle")]),
    "regression": ("Correlation with the labels", [("eval", "pearson", "validation Pearson r", "#d62728", "diamond"),
                                                   ("eval", "spearman", "validation Spearman ρ", "#9467bd", "square")]),
    "qa": ("Answers", [("eval", "exact_match", "validation exact match", "#d62728", "diamond"),
                       ("eval", "f1", "validation F1", "#9467bd", "square")]),
}
NOTE = dict(showarrow=False, xref="paper", yref="paper", font=dict(size=12, color="#6b7280"))


def empty_figure(text: str, height: int = 140) -> go.Figure:
    """Only a note: no empty axes before there is anything to draw."""
    fig = go.Figure()
    fig.add_annotation(text=text, x=0.5, y=0.5, **{**NOTE, "font": dict(size=14, color="#6b7280")})
    fig.update_layout(height=height, xaxis_visible=False, yaxis_visible=False, margin=dict(l=10, r=10, t=10, b=10),
                      plot_bgcolor="rgba(0,0,0,0)")
    return fig


def runs_figure(runs: dict[str, list[dict]], panels, cols: int, height: int, title: str = "") -> go.Figure:
    if not any(len(r) for r in runs.values()):
        return empty_figure("No measurements yet: start a run, or pick one to watch." if not runs else
                            "No measurements yet: the first points appear a few seconds after training starts.")
    rows_n = (len(panels) + cols - 1) // cols
    fig = make_subplots(rows=rows_n, cols=cols, subplot_titles=[p[0] for p in panels],
                        vertical_spacing=0.16 if rows_n > 1 else 0.1, horizontal_spacing=0.07)
    for i, (_, lines) in enumerate(panels):
        row, col = i // cols + 1, i % cols + 1
        if not _panel(fig, runs, row, col, lines):  # a note in its own panel, placed on that panel's domain
            held_out = all(split == "eval" for split, *_ in lines)
            cell = fig.get_subplot(row, col)
            fig.add_annotation(text="appears at the first evaluation" if held_out else "not measured in this run",
                               x=sum(cell.xaxis.domain) / 2, y=sum(cell.yaxis.domain) / 2, **NOTE)
    # every panel counts steps from 0 on one scale: what happens at step 100 lines up (and zooms) across panels
    fig.update_xaxes(title_text="step", title_standoff=2, rangemode="tozero", matches="x")
    # The top margin keeps the first title clear of plotly's toolbar (always shown on a phone); a narrow
    # figure's bottom margin holds a legend of five series, so figures side by side keep equal panels.
    fig.update_layout(height=height, margin=dict(l=45, r=10, t=60 if title else 50, b=150 if cols == 1 else 40),
                      legend=dict(orientation="h", yanchor="top", y=-0.14 if rows_n == 1 else -0.08, x=0,
                                  font_size=12),
                      title=dict(text=title, font_size=15), uirevision="keep")  # keep the zoom across updates
    return fig


def pretrain_figure(runs: dict[str, list[dict]], panels=PRETRAIN_PANELS, cols: int = 3, height: int = 620,
                    title: str = "Pre-training curves") -> go.Figure:
    return runs_figure(runs, panels, cols=cols, height=height, title=title)


def pretrain_figures(runs: dict[str, list[dict]]) -> list[go.Figure]:
    """The Pre-train tab's three figures (PRETRAIN_GROUPS), each two panels high and narrow enough for a phone."""
    return [pretrain_figure(runs, [PRETRAIN_PANELS[k] for k in idx], cols=1, height=620, title="")
            for _, idx in PRETRAIN_GROUPS]


def finetune_figure(runs: dict[str, list[dict]]) -> go.Figure:
    """Loss, and the task's scores: accuracy for one label, else its problem's (PROBLEM_PANELS)."""
    keys = {k for rows in runs.values() for r in rows if r.get("split") == "eval" for k in r}
    problem = next((p for p, k in (("qa", "exact_match"), ("regression", "pearson"), ("multi", "micro_f1"))
                    if k in keys), None)
    panels = FINETUNE_PANELS if problem is None else [FINETUNE_PANELS[0], PROBLEM_PANELS[problem]]
    return runs_figure(runs, panels, cols=2, height=400, title="Fine-tuning curves")


def confusion_figure(conf: dict | None, whose: str = "") -> go.Figure:
    """Rows: the true label, columns: the prediction; each cell also shows its share of the row.
    `whose`: the run it belongs to, named in the title (a comparison shows its best run's)."""
    fig = go.Figure()
    if not conf or not conf.get("confusion"):
        fig.add_annotation(text="The confusion matrix appears after the first validation.", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5, font=dict(size=14, color="#6b7280"))
        fig.update_layout(height=320, xaxis_visible=False, yaxis_visible=False)
        return fig
    labels, m = conf["labels"], conf["confusion"]
    totals = [max(sum(r), 1) for r in m]
    text = [[f"{v}<br>{v / t:.0%}" for v in r] for r, t in zip(m, totals)] if len(labels) <= 12 else None
    fig.add_trace(go.Heatmap(z=[[v / t for v in r] for r, t in zip(m, totals)], x=labels, y=labels,
                             text=text, texttemplate="%{text}" if text else None, colorscale="Blues",
                             zmin=0, zmax=1, colorbar=dict(title="share of row", tickformat=".0%"),
                             customdata=m, hovertemplate="true %{y}, predicted %{x}: %{customdata}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="true label")
    fig.update_xaxes(title="predicted label", side="bottom")
    size = 320 + 14 * max(0, len(labels) - 4)
    # two short lines: one line ran past a phone's 350 px and the accuracy was cut off
    who = html.escape(whose if len(whose) <= 28 else whose[:27] + "…")
    fig.update_layout(height=min(size, 800), margin=dict(l=60, r=10, t=64, b=50),
                      title=dict(text=f"Confusion matrix (validation)<br><span style='font-size:12px'>"
                                      f"{who + ' · ' if who else ''}accuracy {conf.get('accuracy', 0):.1%}</span>",
                                 font_size=15))
    return fig


def probe_rows(run_dir: str | Path, last: int = 5) -> tuple[list[str], list[list[str]]]:
    """"Watch it learn": the fixed probe sentences' top guesses at the last few evaluations."""
    path = Path(run_dir) / "probes.jsonl"
    recs = []
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):  # a line being written right now
                r = json.loads(line)
                if isinstance(r, dict) and isinstance(r.get("top3"), dict):
                    recs.append(r)
    recs = recs[-last:]
    if not recs:
        return ["sentence"], []
    sentences = list(recs[-1]["top3"])
    header = ["sentence"] + [f"step {r['step']}" for r in recs]
    body = [[s] + [" / ".join(r["top3"].get(s, [])) for r in recs] for s in sentences]
    return header, body


# The race: a colour and a marker per recipe, the same in every chart and every race (Tableau 10).
RACE_STYLE = {"bert": ("#1f77b4", "circle"), "mlm": ("#2ca02c", "diamond"), "static": ("#ff7f0e", "x")}
RACE_STYLE |= {n: style for m in family.RECORDS for n, (_, _, style) in m.recipes.items() if style}  # the records'
_GENERATED = {n for m in family.RECORDS for n, (_, fields, _) in m.recipes.items()  # their MLM accuracy is a
              if m.pair(fields.get("objective"))}  # generator's: ELECTRA's, DeBERTa-v3's replaced-token detection
_MORE = ["#17becf", "#bcbd22", "#7f7f7f"]  # a recipe added later, before it gets a style of its own


def race_figures(runs: dict[str, list[dict]], flops_per_step: dict[str, float | None] | None = None) -> list[go.Figure]:
    """The race's two figures, one against minutes of training, one against estimated training FLOPs
    (step × the recipe's FLOPs per step; a recipe not yet sized is left out of it): held-out masked-token
    accuracy of every recipe and, under it when ELECTRA runs, its discriminator's replaced-token AUC.
    `runs`: recipe name -> its metric rows. ELECTRA's masked-token accuracy is its small generator's."""
    flops_per_step = flops_per_step or {}
    evals = {n: [r for r in rows if r.get("split") == "eval" and isinstance(r.get("step"), (int, float))]
             for n, rows in runs.items()}
    if not any(evals.values()):
        return [empty_figure("No measurements yet:<br>" + ("each recipe's first point appears at its first "
                             "evaluation." if runs else "start a race, or pick one to watch."), height=160)] * 2
    auc = any(isinstance(r.get("rtd_auc"), (int, float)) for rows in evals.values() for r in rows)
    rows_n = 2 if auc else 1  # the AUC panel only where ELECTRA measured one
    axes = [("minutes of training", "%{x:.2f} min",
             lambda r, n: r["time"] / 60 if isinstance(r.get("time"), (int, float)) else None),
            ("estimated training FLOPs (G = 10⁹, T = 10¹²)", "%{x:.3s} FLOPs",
             lambda r, n: r["step"] * flops_per_step[n] if flops_per_step.get(n) else None)]
    figs = []
    for title, x_hover, x_of in axes:
        fig = make_subplots(rows=rows_n, cols=1, vertical_spacing=0.2, subplot_titles=[
            "Held-out masked-token accuracy", "ELECTRA discriminator: replaced-token AUC"][:rows_n])
        for i, (name, rows) in enumerate(evals.items()):
            color, symbol = RACE_STYLE.get(name, (_MORE[i % len(_MORE)], "circle"))
            for row, key, label in ((1, "mlm_acc", name + (" (its generator)" if name in _GENERATED else "")),
                                    (2, "rtd_auc", f"{name}: replaced-token AUC")):
                pts = [(x_of(r, name), r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
                pts = [p for p in pts if p[0] is not None]
                if not pts or row > rows_n:
                    continue
                fig.add_trace(go.Scatter(
                    x=[p[0] for p in pts], y=[p[2] for p in pts], customdata=[p[1] for p in pts], mode="lines+markers",
                    name=label, legendgroup=name, showlegend=row == 1 or not any(
                        isinstance(r.get("mlm_acc"), (int, float)) for r in rows),
                    line=dict(color=color, width=2.5), marker=dict(symbol=symbol, size=8, color=color,
                                                                  line=dict(width=1, color="white")),
                    hovertemplate=f"{label}<br>step %{{customdata}}, {x_hover}: %{{y:.3f}}<extra></extra>"),
                    row=row, col=1)
        # the line every recipe must leave: always guessing the commonest token (its own data's, last measured)
        uni = [rows[-1]["unigram_acc"] for rows in evals.values()
               if rows and isinstance(rows[-1].get("unigram_acc"), (int, float))]
        if fig.data and uni:
            u = sum(uni) / len(uni)
            fig.add_hline(y=u, line=dict(color="#6b7280", dash="dot", width=1.5), row=1, col=1,
                          annotation_text=f"unigram guess {u:.1%}", annotation_position="bottom right")
        if not fig.data:  # only a note, no empty axes
            figs.append(empty_figure("The FLOPs of a recipe's step are known<br>once its data are prepared.",
                                     height=160))
            continue
        fig.update_xaxes(title_text=title, title_standoff=4, rangemode="tozero", matches="x",
                         exponentformat="SI" if "FLOPs" in title else "none")
        fig.update_yaxes(tickformat=PERCENT_AXIS, row=1, col=1)
        if rows_n > 1:
            fig.update_yaxes(tickformat=".2f", row=2, col=1)
        fig.update_annotations(font_size=14)  # the panel titles, within a phone's width
        # the top margin keeps the first title clear of plotly's toolbar (always shown on a phone)
        fig.update_layout(height=300 + 220 * rows_n, margin=dict(l=50, r=12, t=60, b=40),
                          legend=dict(orientation="h", yanchor="top", y=-0.14 if rows_n == 1 else -0.08, x=0,
                                      font_size=12, title_text=""),
                          uirevision="keep")
        figs.append(fig)
    return figs


# Fine-tuning methods: a colour and a marker per method, the same in every chart of the Fine-tune tab.
METHOD_STYLE = {n: m.style for n, m in REGISTRY.items()}  # methods/registry.py


def method_style(method: str) -> tuple[str, str]:
    return METHOD_STYLE.get(method, ("#8c564b", "circle"))


def compare_figure(rows: list[dict], metric: str, metric_label: str) -> go.Figure:
    """The comparison's one chart: each method's score (mean over seeds, the bar its spread) against
    the share of parameters it trains, on a log axis; the full fine-tune's score as a dotted line."""
    done = [r for r in rows if r.get(f"{metric}_mean") is not None and r.get("trainable_share")]
    if not done:
        return empty_figure("Each method's point appears<br>when its first run ends.", height=160)
    fig = go.Figure()
    percent = metric in ("accuracy", "exact_match")
    for r in done:
        color, symbol = method_style(r["method"])
        spread = r.get(f"{metric}_spread")
        fig.add_trace(go.Scatter(
            x=[100 * r["trainable_share"]], y=[r[f"{metric}_mean"]], mode="markers+text", name=r["method"],
            text=[r["method"]], textposition="top center", textfont=dict(color=color, size=12),
            marker=dict(color=color, symbol=symbol, size=13, line=dict(width=1, color="white")),
            error_y=dict(type="data", array=[spread], visible=True, color=color) if spread else None,
            hovertemplate=f"{r['method']}: %{{y:{'.1%' if percent else '.3f'}}} with %{{x:.3g}} % of the parameters "
                          f"trained ({r['trainable_params']:,})<extra></extra>"))
    full = next((r for r in done if r["method"] == "full"), None)
    if full is not None:
        fig.add_hline(y=full[f"{metric}_mean"], line=dict(color=method_style("full")[0], dash="dot", width=1))
    # room around the points for their names and bars: half a decade left and right, a tenth above and below
    xs = [math.log10(100 * r["trainable_share"]) for r in done]
    ys = [r[f"{metric}_mean"] + s * (r.get(f"{metric}_spread") or 0) for r in done for s in (-1, 1)]
    pad = max(0.05, 0.15 * (max(ys) - min(ys)))
    fig.update_xaxes(type="log", title_text="trainable parameters (% of the model, log scale)", ticksuffix=" %",
                     dtick=1, range=[min(xs) - 0.5, max(xs) + 0.5])
    fig.update_yaxes(title_text=metric_label, tickformat=PERCENT_AXIS if percent else ".2f",
                     range=[min(ys) - pad, max(ys) + 1.5 * pad])
    fig.update_layout(height=380, margin=dict(l=55, r=15, t=50, b=50), showlegend=False, uirevision="keep",
                      title=dict(text=f"{metric_label[:1].upper() + metric_label[1:]} against the share of "
                                      f"parameters trained", font_size=15))
    return fig


def compare_curves(runs: dict[tuple[str, int], list[dict]], metric: str, metric_label: str) -> go.Figure:
    """The comparison's learning curves overlaid, one colour per method (its first seed solid, the
    others thin): training loss, and the validation score at each evaluation."""
    if not any(runs.values()):
        return empty_figure("No measurements yet:<br>each run's curves appear as it trains.", height=160)
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Training loss", f"Validation {metric_label}"],
                        horizontal_spacing=0.1)
    first: dict[str, int] = {}
    for (method, seed), rows in runs.items():
        color, symbol = method_style(method)
        lead = first.setdefault(method, seed) == seed
        for col, split, key in ((1, "train", "loss"), (2, "eval", metric)):
            x, y = _series(rows, split, key)
            if not x:
                continue
            fig.add_trace(go.Scatter(
                x=x, y=y, mode="lines+markers" if split == "eval" else "lines", name=method, legendgroup=method,
                showlegend=lead and col == 1 or (lead and col == 2 and not _series(rows, "train", "loss")[0]),
                line=dict(color=color, width=2.5 if lead else 1), opacity=1 if lead else 0.5,
                marker=dict(symbol=symbol, size=8, color=color, line=dict(width=1, color="white")),
                hovertemplate=f"{method} seed {seed}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text="step", title_standoff=2, rangemode="tozero", matches="x")
    if metric in ("accuracy", "exact_match"):
        fig.update_yaxes(tickformat=PERCENT_AXIS, row=1, col=2)
    fig.update_layout(height=420, margin=dict(l=45, r=10, t=60, b=40), uirevision="keep",
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, font_size=12),
                      title=dict(text="Learning curves, one colour per method", font_size=15))
    return fig
