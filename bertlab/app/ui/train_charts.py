"""Plotly charts of training runs, drawn from their metrics.jsonl (shared by the training tabs).

Each run gets one colour; the split gets the line style (train solid, held-out dashed), so several
runs overlay on one chart and still read apart.
"""
from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...train.runs import read_metrics

COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"]
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


def _panel(fig, runs, row, col, lines, legend_done) -> bool:
    """Add one panel: `lines` = [(split, key, label, dash)]; a run's first trace carries the legend.
    False when it had nothing to draw."""
    drawn = False
    for i, (name, rows) in enumerate(runs.items()):
        color = COLORS[i % len(COLORS)]
        for split, key, label, dash in lines:
            x, y = _series(rows, split, key)
            if not x:
                continue
            drawn = True
            show = (name, label) not in legend_done
            legend_done.add((name, label))
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers" if split == "eval" else "lines",
                                     line=dict(color=color, dash=dash, width=2), marker=dict(size=5),
                                     name=f"{name}: {label}" if len(runs) > 1 else label,
                                     legendgroup=f"{name}{label}", showlegend=show,
                                     hovertemplate=f"{name} · {label}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"),
                          row=row, col=col)
    return drawn


PRETRAIN_PANELS = [
    ("Loss", [("train", "loss", "train loss", "solid"), ("eval", "mlm_loss", "held-out MLM loss", "dash")]),
    ("Masked-token accuracy", [("train", "mlm_acc", "train MLM acc.", "solid"),
                               ("eval", "mlm_acc", "held-out MLM acc.", "dash"),
                               ("eval", "unigram_acc", "unigram guess", "dot")]),
    ("Next-sentence accuracy", [("train", "nsp_acc", "train pair acc.", "solid"),
                                ("eval", "nsp_acc", "held-out pair acc.", "dash")]),
    ("Attention to neighbours", [("eval", "attn_prev", "mass on previous token", "dash"),
                                 ("eval", "attn_next", "mass on next token", "dot")]),
    ("Learning rate", [("train", "lr", "learning rate", "solid")]),
    ("Tokens per second", [("train", "tokens_per_s", "tokens/s", "solid")]),
]
FINETUNE_PANELS = [
    ("Loss", [("train", "loss", "train loss", "solid"), ("eval", "loss", "validation loss", "dash")]),
    ("Accuracy", [("train", "acc", "train acc.", "solid"), ("eval", "accuracy", "validation acc.", "dash"),
                  ("eval", "macro_f1", "validation macro-F1", "dot")]),
]


def runs_figure(runs: dict[str, list[dict]], panels, cols: int, height: int, title: str = "") -> go.Figure:
    rows_n = (len(panels) + cols - 1) // cols
    fig = make_subplots(rows=rows_n, cols=cols, subplot_titles=[p[0] for p in panels],
                        vertical_spacing=0.16 if rows_n > 1 else 0.1, horizontal_spacing=0.07)
    done: set = set()
    any_rows = any(len(r) for r in runs.values())
    for i, (_, lines) in enumerate(panels):
        if not _panel(fig, runs, i // cols + 1, i % cols + 1, lines, done) and any_rows:
            held_out = all(split == "eval" for split, *_ in lines)
            ax = "" if i == 0 else str(i + 1)
            fig.add_annotation(text="appears at the first evaluation" if held_out else "not measured in this run",
                               showarrow=False, xref=f"x{ax} domain", yref=f"y{ax} domain", x=0.5, y=0.5,
                               font=dict(size=12, color="#6b7280"))
    fig.update_xaxes(title_text="step", title_standoff=2)
    fig.update_layout(height=height, margin=dict(l=40, r=10, t=60, b=40), legend=dict(orientation="h", y=-0.12),
                      title=dict(text=title, font_size=15), uirevision="keep")  # keep the zoom across updates
    if not any_rows:
        fig.add_annotation(text="No measurements yet: start a run, or pick one to watch.", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5, font=dict(size=15, color="#6b7280"))
    return fig


def pretrain_figure(runs: dict[str, list[dict]]) -> go.Figure:
    return runs_figure(runs, PRETRAIN_PANELS, cols=3, height=620, title="Pre-training curves")


def finetune_figure(runs: dict[str, list[dict]]) -> go.Figure:
    return runs_figure(runs, FINETUNE_PANELS, cols=2, height=380, title="Fine-tuning curves")


def confusion_figure(conf: dict | None) -> go.Figure:
    """Rows: the true label, columns: the prediction; each cell also shows its share of the row."""
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
    fig.update_layout(height=min(size, 800), margin=dict(l=60, r=10, t=50, b=50),
                      title=dict(text=f"Confusion matrix (validation, accuracy {conf.get('accuracy', 0):.1%})",
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
