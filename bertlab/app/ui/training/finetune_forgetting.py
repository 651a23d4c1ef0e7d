"""The Fine-tune tab's "What fine-tuning forgot" section (issue 32, item 4): the masked-word accuracy
each shown run kept, against the model it started from (train/evaluate.py's mlm_left), as a chart."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from ....cache import LRU
from ....train.evaluate import mlm_left, starting_point
from ..shared.common import PERCENT_AXIS, user_error
from . import jobs_ui
from .finetune_compare import finished_runs, spec_of
from .finetune_form import METHOD_LABELS
from .train_charts import empty_figure

EXPLAIN = """**What fine-tuning forgot.** Fine-tuning only asks for the task, so the weights may drift away
from what pre-training taught them (*catastrophic forgetting*). Here each run's encoder is put back
under the **masked-word head it started with** and scored on the same held-out masked text: the
share of masked words it still guesses, against the starting model's. A frozen encoder keeps all of
it; a large learning rate can erase it in a few hundred steps. Measure the run you watch and the runs
you overlay (a comparison: all its runs): try full fine-tuning at two learning rates, LoRA and frozen."""
MAX_RUNS = 8  # runs measured in one click (each a model load and 256 masked sequences)
_starts = LRU(2)  # starting model -> (model, its fixed masked batches, its accuracy)
_rows = LRU(64)  # (run folder, its model's stamp) -> the run's row


def _start(source: str, batches: int, batch_size: int):
    return _starts.get_or_make((source, batches, batch_size), lambda: starting_point(source, batches, batch_size))


def _stamp(d) -> tuple:
    f = d / "model" / "config.json"
    g = d / "model" / "adapter_config.json"
    return tuple(p.stat().st_mtime_ns for p in (f, g) if p.exists())


def runs_of(name, overlay) -> list:
    """The folders to measure: the watched run (a comparison's finished runs), then the overlaid ones
    (jobs_ui.shown_runs' order, each once); a name that is not a run name is said, not skipped."""
    overlay = overlay if isinstance(overlay, (list, tuple)) else []  # an API caller may send anything
    bad = [n for n in [name, *overlay] if n and isinstance(n, str) and not jobs_ui.valid(n)]
    if bad:
        raise user_error(f"bad run name {bad[0]!r}")
    out = []
    for n in jobs_ui.shown_runs(name, overlay):
        d = jobs_ui.run_dir(n)
        out += [(f"{n}/{sub}", d / sub) for _, sub in finished_runs(n)] if spec_of(d) is not None else [(n, d)]
    return out


def label_of(row: dict, n: int) -> str:
    """A bar's short name (the method and its learning rate; the run's own name is in its hover)."""
    return f"{n}. {row['method']}" + (f" · lr {row['lr']:g}" if row.get("lr") else "")


def figure(rows: list[dict], names: list[str]) -> go.Figure:
    """A bar per run (masked words it still guesses, the share kept inside it), the starting model's
    accuracy as a dashed line."""
    fig = go.Figure(go.Bar(
        x=[label_of(r, i) for i, r in enumerate(rows, 1)], y=[r["after"] for r in rows], customdata=names,
        marker_color=["#9aa5b1" if r["untouched"] else "#1f77b4" for r in rows],
        text=[f"{r['left']:.0%} kept" for r in rows], textposition="inside", insidetextanchor="end",
        hovertemplate="%{customdata}<br>%{y:.1%} of masked words guessed<extra></extra>"))
    befores = sorted({round(r["before"], 6) for r in rows})
    for b in befores:
        fig.add_hline(y=b, line_dash="dash", line_color="#d62728", annotation_text=f"before fine-tuning: {b:.1%}",
                      annotation_position="top right")
    fig.update_layout(height=320, margin=dict(l=50, r=10, t=20, b=10), showlegend=False,
                      yaxis=dict(title="masked words guessed", range=[0, max(befores + [r["after"] for r in rows]) * 1.3],
                                 tickformat=PERCENT_AXIS), xaxis=dict(automargin=True))
    return fig


def measure(name, overlay):
    """The chart and a line per run: masked-word accuracy before and after, and the share kept."""
    picked = runs_of(name, overlay)
    if not picked:
        raise user_error("Pick a run to watch first (or overlay some): each needs a saved model.")
    if len(picked) > MAX_RUNS:
        raise user_error(f"{len(picked)} runs: measure at most {MAX_RUNS} at a time (overlay fewer).")
    rows = []
    try:
        for label, d in picked:
            key = (str(d), _stamp(d))
            rows.append(_rows.get_or_make(key, lambda d=d: mlm_left([d], start=_start)[0]))
    except (ValueError, OSError) as e:
        raise user_error(e) from None
    lines = [f"{i}. **{label}** ({METHOD_LABELS.get(r['method'], r['method'])}"
             + (f", lr {r['lr']:g}" if r.get("lr") else "") + f"): {r['before']:.1%} → {r['after']:.1%} of masked "
             f"words, **{r['left']:.0%} kept**" + (" (its own modules do the task; every pre-trained weight is kept)"
                                                  if r["untouched"] else "")
             for i, ((label, _), r) in enumerate(zip(picked, rows), 1)]
    return figure(rows, [label for label, _ in picked]), "\n".join(lines)


def build(watch: gr.Dropdown, overlay: gr.Dropdown) -> None:
    with gr.Accordion("What fine-tuning forgot (masked-word skill kept)", open=False, elem_id="finetune-forgetting"):
        gr.Markdown(EXPLAIN)
        button = gr.Button("Measure the watched and overlaid runs", elem_id="finetune-forgetting-go")
        plot = gr.Plot(empty_figure("Pick a finished run, then measure."), show_label=False,
                       elem_id="finetune-forgetting-plot")
        said = gr.Markdown(elem_id="finetune-forgetting-said")
    button.click(measure, [watch, overlay], [plot, said], api_name="finetune_forgetting", concurrency_limit=2)
