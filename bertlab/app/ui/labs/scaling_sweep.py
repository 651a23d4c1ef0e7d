"""The Scaling tab's sweep (`python -m bertlab scaling` from the page): the same pre-training recipe at
several model sizes (or one size, several token budgets), then held-out loss against size on
log-log axes with the fitted power law and Kaplan's slope beside it, and the run curves against
FLOPs with the compute frontier. A sweep is one background job (ScalingSpec is a run kind): closing
the page does not stop it, and each chart grows as each run finishes."""
from __future__ import annotations

import contextlib
import math
import numbers
import time

import gradio as gr
import numpy as np
import plotly.graph_objects as go

from ....analysis import scaling_fit
from ....analysis.sizing import param_counts
from ....train import runs, scaling
from ....train.runs import Run
from ....train.specs import ScalingSpec
from ...jobs import check_name
from ...limits import limits
from ..shared import common
from ..shared.common import log_ticks, si, user_error
from ..training import jobs_ui
from ..training.train_charts import empty_figure

EXPLAIN = """**Measure a scaling law yourself.** Train the same recipe (masked words only, the same movie
reviews, seed and held-out sentences) at several model sizes for the same number of tokens, then
plot the held-out loss against the number of weights outside the embeddings (Kaplan's N) on log-log
axes. If loss falls as a power law, L(N) = a·N^-α + c, the points lie on a curve that straightens
as c is taken away; α says how fast more weights pay.

- **Kaplan et al. 2020** found α ≈ 0.076 for GPT-style models far larger than these, trained to
  near convergence on much more text. Here every model sees only a few million tokens, so the
  larger ones are far from done and the measured α differs: compare the slopes, not the numbers.
- **The right chart** shows each run's held-out loss as it trained, against the FLOPs spent
  (≈ 6·N·D). The thick line, the *compute frontier*, marks for each budget which size was best:
  small models win at small budgets, larger ones overtake them.
- **The first example** grows depth and width together (64 wide per layer, 1×64 up to 4×256, the
  `mini` model), so only the size changes, not the shape, and gives each 4M tokens: enough for every
  size to get past guessing the commonest words. Too few tokens, or shallow and deep models mixed,
  scatter the points.
- **Data instead of size:** tick one size and several token budgets to fit L(D) (Kaplan: α ≈ 0.095).

Sizes are *layers × hidden width* (heads of 64 dimensions)."""

SIZES = ("1x32", "2x32", "1x64", "2x64", "4x64", "2x128", "4x128", "3x192", "4x256")  # the largest is `mini`
TOKENS = (("250k", 2.5e5), ("500k", 5e5), ("1M", 1e6), ("2M", 2e6), ("4M", 4e6))  # per run
MAX_RUNS = 6  # runs a sweep from the web may have
BASE: dict = {}  # ScalingSpec fields the form does not show (corpus, recipe): the spec's defaults
EXAMPLES = [[["1x64", "2x128", "3x192", "4x256"], ["4M"]], [["2x64"], ["250k", "500k", "1M", "2M"]]]
KAPLAN = "#9ca3af"


def form_spec(sizes, tokens) -> ScalingSpec:
    """The form as a ScalingSpec within this server's caps: offered sizes and budgets only, at most
    MAX_RUNS runs, the server's threads for a job."""
    sizes, tokens = list(sizes or []), list(tokens or [])
    bad = [s for s in sizes if s not in SIZES] + [t for t in tokens if t not in dict(TOKENS)]
    if bad:
        raise ValueError(f"{str(bad[0])!r:.40} is not offered here: choose sizes from {', '.join(SIZES)} and "
                         f"token budgets from {', '.join(k for k, _ in TOKENS)}")
    if not sizes or not tokens:
        raise ValueError("tick at least one size and one token budget")
    if len(sizes) * len(tokens) > MAX_RUNS:
        raise ValueError(f"a sweep here has at most {MAX_RUNS} runs: tick several sizes with one token budget, or "
                         f"one size with several budgets")
    order = {s: i for i, s in enumerate(SIZES)}
    toks = sorted(dict(TOKENS)[t] for t in tokens)
    lim = limits()
    spec = ScalingSpec(**{**BASE, "sizes": tuple(sorted(sizes, key=order.get)), "tokens": tuple(toks),
                          "threads": lim.job_threads})
    for name, shape, t in scaling.points(spec):  # the server's own caps hold for each run, too
        rs = scaling.run_spec(spec, shape, t)
        if rs.steps > lim.max_steps:
            raise ValueError(f"{name} would train {rs.steps:,} steps; this server trains at most {lim.max_steps:,} "
                             f"(BERTLAB_MAX_STEPS): pick a smaller token budget")
        if (n := param_counts(scaling.config_of(rs))["total"]) > lim.max_params:
            raise ValueError(f"{name} has {n:,} parameters; this server trains at most {lim.max_params:,} "
                             f"(BERTLAB_MAX_PARAMS): pick smaller sizes")
    return spec


def estimate_md(sizes, tokens) -> str:
    """What the sweep will take, said before it starts (or why it cannot start)."""
    try:
        spec = form_spec(sizes, tokens)
    except (ValueError, TypeError) as e:
        return f"⚠️ {e}"
    n, s = len(scaling.points(spec)), scaling.estimate_s(spec)
    what = (f"{n} sizes × {scaling.tokens_label(spec.tokens[0])} tokens each" if spec.mode == "size" else
            f"size {spec.sizes[0]} × {n} token budgets")
    return (f"**About {max(1, round(s / 60))} minutes** on this server ({what}; estimated from the FLOPs of each "
            f"run and this CPU's measured speed, longer while other jobs share it).")


def sweep_spec(name: str | None) -> ScalingSpec | None:
    with contextlib.suppress(ValueError, OSError):
        spec = Run(jobs_ui.run_dir(name)).spec() if name else None
        return spec if isinstance(spec, ScalingSpec) else None
    return None


def live_curves(d, spec: ScalingSpec, parts: list[dict]) -> dict[str, list[dict]]:
    """Each run's curve: a finished run's from its part, a training one's read from its metrics as it grows."""
    done = {p["name"]: p["curve"] for p in parts}
    curves = {}
    for name, shape, t in scaling.points(spec):
        if name in done:
            curves[name] = done[name]
        elif (d / "runs" / name / "metrics.jsonl").exists():
            rs = scaling.run_spec(spec, shape, t)
            curves[name] = scaling.read_curve(d / "runs" / name, scaling.flops_per_token(rs),
                                              rs.batch_size * rs.max_len)
    return {k: v for k, v in curves.items() if v}


def _log_axes(fig: go.Figure, x: str, title: str) -> go.Figure:
    def span(axis: str) -> list[float]:
        vals = [float(v) for t in fig.data if getattr(t, axis) is not None for v in getattr(t, axis)
                if isinstance(v, numbers.Real) and v > 0]
        return [min(vals), max(vals)] if vals else [1.0, 1.0]
    fig.update_xaxes(type="log", title=x, **log_ticks(*span("x"), si))  # every tick in full, none a bare "2"
    fig.update_yaxes(type="log", title="held-out MLM loss (nats)", **log_ticks(*span("y"), lambda v: f"{v:g}"))
    fig.update_layout(height=380, margin={"l": 60, "r": 20, "t": 50, "b": 50}, title={"text": title, "font": {"size": 14}},
                      legend={"orientation": "h", "y": -0.25, "font": {"size": 11}})
    return fig


def law_figure(res: dict | None) -> go.Figure:
    """Final held-out loss against N (or D), the fitted laws, and a line of Kaplan's slope through the points."""
    rows = (res or {}).get("rows") or []
    if not rows:
        return empty_figure("No finished run yet: the points appear as each size finishes.", 200)
    key = res["x"]
    xs, ys = [r[key] for r in rows], [r["loss"] for r in rows]
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers+text", text=[r["name"].split("-")[0] for r in rows],
                               textposition=["top right"] * (len(rows) - 1) + ["top left"], name="runs",
                               marker={"size": 11, "color": "#d62728"}))
    grid = np.logspace(math.log10(min(xs)) - 0.1, math.log10(max(xs)) + 0.1, 60)
    fits = res.get("fit") or {}
    for kind, color, dash in (("offset", "#1f77b4", None), ("power", "#ff7f0e", "dot")):
        if kind in fits:
            f = fits[kind]
            lo, hi = f["alpha_ci"]
            label = (f"fit a·x^-α{' + c' if kind == 'offset' else ''}: α {f['alpha']:.3f} "
                     f"[{lo:.2f}, {hi:.2f}], R² {f['r2']:.3f}")
            fig.add_trace(go.Scatter(x=grid, y=scaling_fit.predict(f, grid), mode="lines", name=label,
                                     line={"color": color, "dash": dash}))
    if len(rows) >= 2:
        kx, ky = scaling_fit.kaplan_line(xs, ys, res["kaplan_alpha"])
        fig.add_trace(go.Scatter(x=kx, y=ky, mode="lines", name=f"Kaplan's slope α = {res['kaplan_alpha']}",
                                 line={"color": KAPLAN, "dash": "dash"}))
    x_title = "non-embedding parameters N" if key == "non_embedding" else "training tokens D"
    return _log_axes(fig, x_title, f"Held-out loss against {'size' if key == 'non_embedding' else 'data'}")


def curves_figure(curves: dict[str, list[dict]], frontier: list[dict]) -> go.Figure:
    """Each run's held-out loss against the FLOPs it had spent; the compute frontier on top."""
    if not curves:
        return empty_figure("No curve yet: each run's held-out loss appears as it trains.", 200)
    fig = go.Figure()
    for name, pts in curves.items():
        fig.add_trace(go.Scatter(x=[p["flops"] for p in pts], y=[p["loss"] for p in pts], mode="lines+markers",
                                 name=name.split("-")[0] if len({n.split("-")[0] for n in curves}) == len(curves)
                                 else name, marker={"size": 5}))
    if frontier:
        fig.add_trace(go.Scatter(x=[f["flops"] for f in frontier], y=[f["loss"] for f in frontier], mode="lines",
                                 name="compute frontier (best run at each FLOP budget)",
                                 text=[f["best"] for f in frontier], hovertemplate="%{text}: %{y:.3f}",
                                 line={"color": "black", "width": 5, "dash": "dot"}, opacity=0.5))
    return _log_axes(fig, "training FLOPs (size model, ≈ 6·N·D)", "Run curves and the compute frontier")


def fit_md(res: dict | None) -> str:
    fits = (res or {}).get("fit") or {}
    if not fits:
        n = len((res or {}).get("rows") or [])
        return f"*The fit appears once 3 runs have finished ({n} so far).*" if res else ""
    k = res["kaplan_alpha"]
    lines = []
    for kind, what in (("offset", "with an irreducible loss c"), ("power", "Kaplan's form, c = 0")):
        if kind in fits:
            f = fits[kind]
            lo, hi = f["alpha_ci"]
            lines.append(f"- **α = {f['alpha']:.3f}** (95 % interval {lo:.3f} to {hi:.3f}) {what}; R² = {f['r2']:.3f}"
                         + (f"; c = {f['c']:.2f} nats" if kind == "offset" else ""))
    return (f"**Fit** of L = a·x^-α + c to the final held-out losses, beside Kaplan's α = {k}:\n\n" + "\n".join(lines)
            + "\n\nWith few points the interval is wide: each point is one run, and three numbers are fitted.")


def with_progress(st: dict | None, name: str | None) -> dict | None:
    """The job's status with the sweep's own progress (runs done of all) and time left: a sweep has no
    step count of its own for the job manager to read."""
    if not st or not name or st.get("state") == "queued":
        return st
    own = runs.read_status(jobs_ui.run_dir(name))
    live = jobs_ui.is_live(st)
    return {**st, "progress": 1.0 if st.get("state") == "finished" else own.get("progress") or 0.0,
            "eta_s": own.get("eta_s") if live else None,
            "elapsed": (time.time() if live else own.get("updated") or time.time()) - own["started"]
            if own.get("started") else None}


def view(name, overlay, owner):
    """Status, the two charts, the fit, the table and the log; the timer ticks while the sweep is live."""
    name = name if jobs_ui.valid(name) else None
    st, spec = jobs_ui.status(name), sweep_spec(name)
    res, curves = None, {}
    if spec is not None:
        d = jobs_ui.run_dir(name)
        _, parts = scaling.current(d)
        res = scaling.results(spec, parts) if parts else {"rows": [], "x": "", "fit": {}}
        curves = live_curves(d, spec, parts)
        res["frontier"] = scaling_fit.frontier({n: [(p["flops"], p["loss"]) for p in c] for n, c in curves.items()})
    table = scaling.table_md(res) if res and res.get("rows") else ""
    return (jobs_ui.status_html(with_progress(st, name), owner), law_figure(res), curves_figure(curves, (res or {}).get("frontier") or []),
            fit_md(res if res and res.get("rows") else None), table, (st or {}).get("log_tail", ""),
            gr.Timer(active=jobs_ui.is_live(st)))


def start(owner, name, sizes, tokens):
    """Check the form and start the sweep (or queue it)."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("scale"))
        jobs_ui.launch(owner, name, form_spec(sizes, tokens))
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("scaling"), value=name), *view(name, [], owner))


def _act(what: str):
    def act(owner, name, overlay):
        if not jobs_ui.valid(name):
            raise user_error(f"No sweep selected: pick the sweep to {what} under 'Sweep'.")
        try:
            getattr(jobs_ui.manager(), what)(name, jobs_ui.visitor(owner))
        except (ValueError, PermissionError, OSError) as e:
            raise jobs_ui.owner_error(e) from None
        return view(name, overlay, owner)
    return act


def build() -> None:
    """The sweep section (it trains its own models: the picked model is not used)."""
    owner, opened = jobs_ui.session()
    gr.Markdown("## Fit your own scaling law")
    with common.form(EXPLAIN) as side:
        sizes = gr.CheckboxGroup(list(SIZES), value=EXAMPLES[0][0], label="Model sizes (layers × hidden)",
                                 elem_id="sweep-sizes")
        tokens = gr.CheckboxGroup([k for k, _ in TOKENS], value=EXAMPLES[0][1], label="Training tokens per run",
                                  elem_id="sweep-tokens", info="several sizes with one budget, or one size with several")
        name = gr.Textbox(label="Sweep name", placeholder="blank: scale-<date>-<time>", max_length=64)
        estimate = gr.Markdown(elem_id="sweep-estimate")
        controls = jobs_ui.Controls("scaling", delete=False, link=False, start="Start sweep", ids="sweep",
                                    api="scaling_sweep")
    common.examples(side, EXAMPLES, [sizes, tokens], label="Examples: click one, then Start",
                    example_labels=["5 sizes × 1M tokens", "data: 2x64 × 4 budgets"])
    status = gr.HTML(elem_id="sweep-status")
    with gr.Row(elem_id="sweep-plots"):
        law = gr.Plot(law_figure(None), show_label=False, min_width=320, elem_id="sweep-plot-law")
        curves = gr.Plot(curves_figure({}, []), show_label=False, min_width=320, elem_id="sweep-plot-flops")
    fit = gr.Markdown(elem_id="sweep-fit")
    table = gr.Markdown(elem_id="sweep-table")
    watch, overlay, log, timer = jobs_ui.run_watcher("Sweep", "sweep-run", log_lines=8)

    form = [sizes, tokens]
    outs = [status, law, curves, fit, table, log, timer]
    gr.on([c.change for c in form], estimate_md, form, estimate, api_name=False, show_progress="hidden")
    controls.start.click(start, [owner, name, *form], [watch, *outs], api_name="scaling_sweep_start",
                         concurrency_limit=1)
    controls.wire(owner, watch, overlay, outs, view, _act("stop"), _act("resume"))
    jobs_ui.wire_run_view("scaling", (owner, opened), watch, overlay, timer, view, outs)
    common.on_open(estimate_md, form, estimate)
