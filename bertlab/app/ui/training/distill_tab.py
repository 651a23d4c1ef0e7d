"""Distil a BERT into a smaller DistilBERT from the page (DistilBERT's recipe, `python -m bertlab distill`):
the student's curves against the teacher's, and both models' guesses side by side while it learns.

A distillation is a background job like a pre-training (DistillSpec is a run kind): the job manager runs
it as `python -m bertlab run DIR`, so closing the page does not stop it and a reloaded page finds it again.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import gradio as gr

from ....analysis import sizing
from ....analysis.predict import fill_mask
from ....checkpoint import DEFAULT_MODEL_DIR, is_hub_id
from ....config import BertConfig
from ....family import family_name
from ....variants.distilbert import MODEL_TYPE as STUDENT
from ....train.distill import check_teacher, teacher_layers
from ....train import speed
from ....train.runs import Run, read_status
from ....train.specs import DistillSpec
from ...jobs import check_name
from ...limits import limits
from ..shared import common, forms, links, models
from ..shared.common import user_error
from . import jobs_ui
from .train_charts import empty_figure, metrics, runs_figure

EXPLAIN = """**Distillation: a small model learns from a big one.** A trained BERT, the *teacher*, reads the
same masked sentences as a smaller *student* (a DistilBERT), and the student learns to answer as the
teacher does. Not only the one right word: the teacher's whole spread of guesses ("great 40 %, good
25 %, fine 10 % …") says far more per example than the single hidden word.

The student's loss mixes three parts, weighted **5 : 2 : 1** as in DistilBERT:
- **Soft targets (5)**: how far the student's guesses are from the teacher's (a KL divergence), both
  softened by a **temperature** T. At T = 2 the teacher's second and third choices weigh more than
  at T = 1; the loss is multiplied by T² so its pull keeps its size whatever T is.
- **Masked words (2)**: the usual masked-LM loss on the true hidden words.
- **Hidden states (1)**: the cosine distance between the two models' last-layer vectors, so the
  student's vectors point where the teacher's do.

The student keeps the teacher's width with fewer layers, and starts as a copy of **every other
teacher layer** (layers 1, 3, 5, … for half, counted from 1 as the form counts them): it begins close
to the teacher rather than from random weights, so it has much less to learn.

DistilBERT (Sanh et al., 2019) distilled 12-layer BERT-base into 6 layers: **40 % fewer parameters
and 60 % faster**, keeping **97 %** of BERT's score on the GLUE benchmark. In a small model like the
shipped one the word table is a bigger share of the parameters, so halving the layers saves less.

**Watch** the held-out KL fall, the student's masked-word accuracy approach the teacher's (grey),
and the *agreement* rise: how often the student's top guess is the teacher's."""

BASE = dict(batch_size=32, max_len=32)  # DistillSpec fields the form does not show (a test makes them tiny)
WEIGHTS = ("temperature", "alpha_kl", "alpha_mlm", "alpha_cos")  # the advanced fields, DistillSpec's own
RATE_SHARE = 0.75  # of one thread's matmul rate a distillation step sustains (bench/ESTIMATES.md)
START_S = 5.0  # starting the job, at speed.py's reference machine
# (split, key, label, colour, marker): the teacher grey, the student blue, their agreement orange
PANELS = [
    ("Soft-target KL to the teacher (lower: closer)",
     [("train", "kl", "training batches", "#93c5fd", "circle"),
      ("eval", "kl_loss", "held-out", "#1d4ed8", "diamond")]),
    ("Masked-word accuracy (held out)",
     [("eval", "teacher_acc", "teacher", "#6b7280", "x"),
      ("eval", "student_acc", "student", "#2563eb", "diamond"),
      ("eval", "agreement", "student's top guess = teacher's", "#ea580c", "square")]),
]
EMPTY_TABLE = [["The teacher's and the student's guesses appear at the first evaluation.", "", ""]]
HEADERS = ["sentence", "teacher's top 3", "student's top 3"]


# ---- the form -----------------------------------------------------------------------------------------

def teacher_choices(owner) -> list[str]:
    """The shipped model, then this visitor's finished BERT pre-training runs, newest first."""
    found = []
    with contextlib.suppress(ValueError):
        mine = set(jobs_ui.manager().owned(jobs_ui.visitor(owner)))
        for name in (n for n in jobs_ui.runs_of("pretrain") if n in mine):
            folder = jobs_ui.finished_model(name)
            if folder is None or read_status(jobs_ui.run_dir(name)).get("state") != "finished":
                continue
            with contextlib.suppress(OSError, ValueError):
                c = BertConfig.from_json_file(folder / "config.json")
                if c.model_type == "bert" and not c.pre_ln:
                    found.append(f"run: {name}")
    return [models.DEFAULT, *found]


def default_layers(teacher):
    """Half the picked teacher's layers (DistilBERT's choice); nothing changes for a teacher that cannot be one."""
    try:
        return gr.update(value=max(1, teacher_config(teacher).num_hidden_layers // 2))
    except ValueError:
        return gr.update()


def teacher_config(choice) -> BertConfig:
    """The picked teacher's config; ValueError with a plain reason when it cannot be one."""
    model, _ = models.get(choice)
    c = model.config
    if c.model_type != "bert":
        raise ValueError(f"only a BERT can be the teacher here: {choice or models.DEFAULT} is a {family_name(c)} "
                         f"model. DistilBERT's recipe copies a BERT's layers into the student; pick the shipped "
                         f"model or one of your BERT pre-training runs")
    if c.pre_ln:
        raise ValueError(f"{choice} is a pre-LN BERT; DistilBERT's blocks put LayerNorm after each part "
                         f"(post-LN), so its layers do not carry over: pick a post-LN BERT")
    check_teacher(model)  # the backend's own rule (e.g. a fine-tuned classifier is no teacher either)
    if c.num_hidden_layers < 2:
        raise ValueError(f"{choice} has one layer: a student needs fewer layers than its teacher")
    return c


def student_layers(layers, c: BertConfig) -> int:
    n = c.num_hidden_layers
    if isinstance(layers, bool) or not isinstance(layers, (int, float)) or not float(layers).is_integer():
        raise ValueError(f"student layers must be a whole number from 1 to {n - 1}, got {layers!r:.40}")
    if not 1 <= layers <= n - 1:
        raise ValueError(f"the student needs from 1 to {n - 1} layers (fewer than the teacher's {n}), got "
                         f"{int(layers)}")
    return int(layers)


def check_steps(steps) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or not float(steps).is_integer() or steps < 1:
        raise ValueError(f"steps must be a whole number from 1, got {steps!r:.40}")
    if steps > (cap := limits().max_steps):
        raise ValueError(f"{int(steps):,} steps is over this server's cap of {cap:,} (BERTLAB_MAX_STEPS)")
    return int(steps)


def student_config(c: BertConfig, layers: int) -> BertConfig:
    return c.replace(model_type=STUDENT, num_hidden_layers=layers)


def data_docs(steps: int) -> int | None:
    """Documents to read: about one pass for the run (~14 examples a review), at least 2,000; all past 25,000."""
    n = max(2000, 3 * steps)
    return None if n >= 25_000 else n


def schedule(steps: int) -> dict:
    """The Trainer's settings for a run of `steps`: ~10 evaluations, the first at steps 10, 25, 50, 100."""
    return dict(log_every=max(1, steps // 100), eval_every=max(10, steps // 10), eval_early=100,
                save_every=max(50, steps // 4))


def estimate_s(c: BertConfig, layers: int, steps: int, threads: int, eval_batches: int = 8,
               machine: float | None = None) -> float:
    """Seconds the run will take here: training FLOPs (teacher forward, student forward and backward, full
    vocabulary logits at every position), evaluations (both models, twice), at the share of this machine's
    measured matmul rate (speed.py) a distillation sustains; and starting and reading the data."""
    T, B, sc = BASE["max_len"], BASE["batch_size"], student_config(c, layers)
    teacher_fwd, student_fwd = sizing.flops(c, T)["total"], sizing.flops(sc, T)["total"]
    s = schedule(steps)
    n_evals = speed.evaluations(steps, s["eval_every"], s["eval_early"])
    work = steps * B * (teacher_fwd + 3 * student_fwd) + n_evals * eval_batches * B * 2 * (teacher_fwd + student_fwd)
    one = machine or speed.rate()
    slow = speed.factor(machine=one)
    return work / (RATE_SHARE * one * max(1, threads) ** speed.THREADS_EXP) + slow * (START_S + (data_docs(steps) or 25_000) / 700)


def plan_md(teacher, layers, steps) -> str:
    """The student's size against the teacher's, and how long the run will take (or why it cannot start)."""
    try:
        c = teacher_config(teacher)
        n, steps = student_layers(layers, c), check_steps(steps)
    except ValueError as e:
        return f"⚠️ {user_error(e).message}"
    s, t = sizing.param_counts(student_config(c, n))["total"], sizing.param_counts(c)["total"]
    speed = sizing.flops(student_config(c, n), 128)["total"] / sizing.flops(c, 128)["total"]
    cap = limits().max_params
    warn = f" ⚠️ over this server's cap of {sizing.humanize(cap)} parameters." if s > cap else ""
    mins = estimate_s(c, n, steps, limits().job_threads) / 60
    took = f"{max(1, round(mins))} min" if mins < 90 else f"{mins / 60:.1f} hours"
    picks = ", ".join(str(i + 1) for i in teacher_layers(c.num_hidden_layers, n))  # counted from 1, as the app does
    return (f"Student: **{sizing.humanize(s)} parameters** against the teacher's {sizing.humanize(t)} "
            f"(**{1 - s / t:.0%} fewer**); a sentence takes {speed:.0%} of the teacher's computations. It starts "
            f"from teacher layer{'s' * (n > 1)} {picks} of 1–{c.num_hidden_layers}.{warn}  \n"
            f"About **{took}** for {steps:,} steps here (longer while other runs share the CPU).")


def form_spec(teacher=None, layers=None, steps=300, **weights) -> DistillSpec:
    """The form (fields by name: the teacher, the student's layers, the steps, and the temperature and
    loss weights, DistillSpec's own) as a DistillSpec, checked here so that a mistake shows at once, not
    in a log."""
    lim, teacher = limits(), teacher or models.DEFAULT
    forms.check_names(weights, WEIGHTS, "the form's advanced part")
    c = teacher_config(teacher)
    n, steps = student_layers(layers, c), check_steps(steps)
    if (s := sizing.param_counts(student_config(c, n))["total"]) > lim.max_params:
        raise ValueError(f"this student has {s:,} parameters; this server trains at most {lim.max_params:,} "
                         f"(BERTLAB_MAX_PARAMS): choose fewer layers")
    folder = models.resolve(teacher)
    # the job reads the shipped model by name and a hub model by its id; a run or a folder by its path
    hub = is_hub_id(teacher) and not teacher.startswith("run: ") and not Path(teacher).expanduser().exists()
    where = "default" if folder == DEFAULT_MODEL_DIR else teacher.strip() if hub else str(folder)
    return DistillSpec(**{**BASE, **schedule(steps)}, teacher=where, layers=n, steps=steps, **weights,
                       max_docs=data_docs(steps), threads=lim.job_threads)


# ---- what a run shows ---------------------------------------------------------------------------------

def teacher_pick(spec_teacher: str | None) -> str:
    """The picker value for a run's teacher (its spec holds "default", a path or a hub id)."""
    if not spec_teacher or spec_teacher == "default" or Path(spec_teacher) == DEFAULT_MODEL_DIR:
        return models.DEFAULT
    p, root = Path(spec_teacher), jobs_ui.manager().root
    if p.is_absolute() and p.is_relative_to(root) and p != root:
        return f"run: {p.relative_to(root).parts[0]}"
    return spec_teacher


def side_by_side(run_dir: str | Path) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) from the newest complete line of probes.jsonl: each sentence with the teacher's
    and the student's top three guesses."""
    last = None
    with contextlib.suppress(OSError):
        for line in (Path(run_dir) / "probes.jsonl").read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):  # a line being written right now
                r = json.loads(line)
                if isinstance(r, dict) and isinstance(r.get("guesses"), dict):
                    last = r
    if last is None:
        return HEADERS, []
    rows = [[s, " / ".join(g.get("teacher") or []), " / ".join(g.get("student") or [])]
            for s, g in last["guesses"].items() if isinstance(g, dict)]
    return [HEADERS[0], HEADERS[1], f"student's top 3 (step {last.get('step', '?')})"], rows


def figures(runs: dict[str, list[dict]]) -> list:
    """The KL figure and the accuracy figure (runs: name -> metric rows); before any row only a note."""
    if not any(runs.values()):
        return [empty_figure("No measurements yet:<br>" + ("the first points appear a few seconds after it starts."
                                                           if runs else "start a distillation, or pick one to watch."))]
    figs = [runs_figure(runs, [p], cols=1, height=360) for p in PANELS]
    for f in figs:  # a legend of two or three series: less room under the panel than runs_figure keeps for five
        f.update_layout(margin_b=95, legend_y=-0.2)
    figs[1].update_yaxes(tickformat=common.PERCENT_AXIS)
    return figs


def charts(runs: dict) -> list:
    figs = figures(runs)
    return [gr.Plot(f, visible=True) for f in figs] + [gr.Plot(visible=False)] * (2 - len(figs))


def run_md(name: str | None) -> str:
    spec = Run(jobs_ui.run_dir(name)).spec() if name else None
    if not isinstance(spec, DistillSpec):
        return ""
    facts = Run(jobs_ui.run_dir(name)).facts()
    picks = facts.get("teacher_layers")
    who = teacher_pick(spec.teacher)
    who = who if not Path(who).is_absolute() else Path(who).name
    return (f"**{name}**: teacher *{who}* → a student of **{facts.get('layers', spec.layers)} layers**"
            + (f", started from teacher layers {', '.join(str(i + 1) for i in picks)}" if picks else "")
            + f"; T = {spec.temperature:g}, weights {spec.alpha_kl:g} : {spec.alpha_mlm:g} : {spec.alpha_cos:g}."
            + against_the_paper_md(facts.get("measured")))


def against_the_paper_md(m) -> str:
    """DistilBERT's three claims beside what this run measured (train/distill.py writes them as it ends)."""
    if not isinstance(m, dict) or not m.get("student_ms"):
        return ""
    b = m.get("batch") or ["?", "?"]
    kept = (f" and keeps **{m['kept']:.0%}** of the teacher's masked-word accuracy (the paper: 97 % of BERT's "
            f"GLUE score)") if isinstance(m.get("kept"), (int, float)) else ""
    return (f"\n\n**Against DistilBERT's paper** (40 % fewer parameters, 60 % faster): this student has "
            f"**{m['fewer_params']:.0%} fewer** parameters ({m['student_params']:,} against {m['teacher_params']:,}), "
            f"runs **{m['teacher_ms'] / m['student_ms']:.2f}× as fast** here (a forward of {b[0]} × {b[1]} tokens: "
            f"{m['student_ms']:.1f} ms against {m['teacher_ms']:.1f} ms, median of 7; the paper's 60 % is 1.60×)"
            + kept + ".")


def view(name, overlay, owner):
    """Status, the two charts, the run's line, both models' guesses, the log; the timer runs while live."""
    name = name if jobs_ui.valid(name) else None
    shown = jobs_ui.shown_runs(name, overlay)
    states = {n: jobs_ui.status(n) for n in shown}
    headers, rows = side_by_side(jobs_ui.run_dir(name)) if name else (HEADERS, [])
    table = gr.Dataframe(value=rows or EMPTY_TABLE, headers=headers)
    return (jobs_ui.runs_status_html(list(states.values()), owner),
            *charts({n: metrics(jobs_ui.run_dir(n)) for n in shown}), run_md(name), table,
            (states.get(name) or {}).get("log_tail", ""), gr.Timer(active=any(map(jobs_ui.is_live, states.values()))))


# ---- buttons ----------------------------------------------------------------------------------------------

def start(owner, name, overlay=None, **form):
    """Check the form (by field name: teacher, layers, steps, temperature, alpha_kl, alpha_mlm, alpha_cos)
    and start the distillation (or queue it). The overlay stays as it is: setting it here too would fire
    its change event, whose view could read the run picker before it holds the new run."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("distill"))
        jobs_ui.launch(owner, name, form_spec(**form))
    except (ValueError, TypeError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("distill"), value=name), *view(name, overlay, owner))


def stop(owner, name, overlay):
    if not jobs_ui.valid(name):
        raise user_error("No run selected: pick one of your distillations under 'Run'.")
    try:
        jobs_ui.manager().stop(name, jobs_ui.visitor(owner))
    except (ValueError, PermissionError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def resume(owner, name, steps, overlay):
    """Go on from the run's newest checkpoint, to the form's steps (more than it had, to train longer)."""
    if not jobs_ui.valid(name):
        raise user_error("No run selected: pick the distillation to resume under 'Run'.")
    try:
        jobs_ui.manager().resume(name, jobs_ui.visitor(owner), {"steps": check_steps(steps)})
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def _guesses(results: list[list[dict]]) -> list[list[str]]:
    return [[f"{c['token_str']} ({c['score']:.0%})" for c in cands] for cands in results]


def try_it(name, text):
    """The run's teacher and its finished student fill the visitor's [MASK]s: rows of rank | teacher | student."""
    if not jobs_ui.valid(name):
        raise user_error("Pick a distillation under 'Run' first (or start one).")
    spec = Run(jobs_ui.run_dir(name)).spec()
    if not isinstance(spec, DistillSpec):
        raise user_error(f"{name} is not a distillation run.")
    if jobs_ui.finished_model(name) is None:
        raise user_error(f"The student of {name} is saved when the run finishes or is stopped: try again then.")
    text = common.check_text(text, "sentence")
    teacher, tok_t = common.load_model(teacher_pick(spec.teacher), "the teacher: ")
    student, tok_s = common.load_model(f"run: {name}", "the student: ")
    with common.mistakes():
        t, s = _guesses(fill_mask(teacher, tok_t, text, top_k=5)), _guesses(fill_mask(student, tok_s, text, top_k=5))
    rows = [[f"[MASK] {i + 1} · #{k + 1}" if len(t) > 1 else f"#{k + 1}", a, b]
            for i, (ts, ss) in enumerate(zip(t, s)) for k, (a, b) in enumerate(zip(ts, ss))]
    return gr.Dataframe(value=rows, headers=["guess", "teacher", "student"])


def build(picker: gr.Dropdown) -> None:
    """The tab (the teacher has a picker of its own: only BERTs can teach; `picker` is not used)."""
    owner, opened = jobs_ui.session()
    c0 = BertConfig.from_json_file(DEFAULT_MODEL_DIR / "config.json")
    with common.form(EXPLAIN):
        with gr.Row():
            teacher = gr.Dropdown([models.DEFAULT], value=models.DEFAULT, label="Teacher (a BERT)", min_width=240,
                                  allow_custom_value=True, elem_id="distill-teacher", scale=3,
                                  info="the shipped model or one of your finished BERT pre-training runs")
            name = gr.Textbox(label="Run name", placeholder="blank: distill-<date>-<time>", max_length=64,
                              min_width=200, scale=2)
        with gr.Row():
            layers = gr.Number(c0.num_hidden_layers // 2, label="Student layers", precision=0, minimum=1,
                               min_width=140, info="fewer than the teacher's", elem_id="distill-layers")
            steps = gr.Number(300, label="Steps", precision=0, minimum=1, min_width=140, elem_id="distill-steps",
                              info=f"{BASE['batch_size']} sentences of {BASE['max_len']} tokens each")
        with gr.Accordion("Advanced: temperature and the three weights", open=False, elem_id="distill-advanced"):
            weights = forms.Form(DistillSpec, "distill")
            with gr.Row():
                temperature = weights("temperature", help=False, minimum=0.1, maximum=20, min_width=100)
                for k in WEIGHTS[1:]:
                    weights(k, help=False, min_width=100)
        plan = gr.Markdown(elem_id="distill-plan")
        controls = jobs_ui.Controls("distill")
        links.register("distill", layers=layers, steps=steps, temperature=temperature)  # filled, never started
    status = gr.HTML(elem_id="distill-status")
    with gr.Row(elem_id="distill-plots"):  # side by side on a laptop, stacked on a phone
        plots = [gr.Plot(empty_figure("No measurements yet: start a distillation, or pick one to watch."),
                         show_label=False, min_width=320, elem_id=f"distill-plot-{k}", visible=k == "kl")
                 for k in ("kl", "acc")]
    line = gr.Markdown(elem_id="distill-run-line")
    table = gr.Dataframe(value=EMPTY_TABLE, headers=HEADERS, interactive=False, wrap=True, elem_id="distill-guesses",
                         column_widths=["40%", "30%", "30%"],  # every column within a phone's width
                         label="The same sentences: the teacher's and the student's top guesses (newest evaluation)")
    with gr.Row():
        watch = gr.Dropdown([], label="Run", allow_custom_value=True, scale=2, elem_id="distill-run", min_width=160,
                            info="the distillation shown (yours or anyone's)")
        overlay = gr.Dropdown([], multiselect=True, allow_custom_value=True, label="Compare with other distillations",
                              scale=3, elem_id="distill-overlay", min_width=200)
    with gr.Group():
        text = gr.Textbox("the acting was [MASK] and the story was [MASK] .", max_length=2000, elem_id="distill-text",
                          label="Try your own sentence with [MASK]: the teacher and the finished student")
        try_btn = gr.Button("Fill in with both", elem_id="distill-try")
    tried = gr.Dataframe(headers=["guess", "teacher", "student"], interactive=False, wrap=True, elem_id="distill-tried",
                         column_widths=["26%", "37%", "37%"])
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=10, max_lines=30, show_label=False, autoscroll=True)
    timer = gr.Timer(jobs_ui.TICK_S, active=False)

    form = {"teacher": teacher, "layers": layers, "steps": steps, **weights.widgets}
    outs = [status, *plots, line, table, log, timer]
    gr.on([c.change for c in (teacher, layers, steps)], plan_md, [teacher, layers, steps], plan, api_name=False,
          show_progress="hidden")
    teacher.focus(lambda o: gr.Dropdown(choices=teacher_choices(o)), owner, teacher, api_name=False)
    teacher.input(default_layers, teacher, layers, api_name=False)
    controls.start.click(start, [owner, name, overlay], [watch, *outs], inputs_kwargs=form, api_name="distill_start",
                         concurrency_limit=1, show_progress="hidden")
    controls.wire(owner, watch, overlay, outs, view, stop, resume, [steps])
    try_btn.click(try_it, [watch, text], tried, api_name="distill_try")
    text.submit(try_it, [watch, text], tried, api_name=False)
    jobs_ui.wire_run_view("distill", (owner, opened), watch, overlay, timer, view, outs)
    common.on_open(lambda o: gr.Dropdown(choices=teacher_choices(o)), owner, teacher, after=opened)
    common.on_open(plan_md, [teacher, layers, steps], plan)
