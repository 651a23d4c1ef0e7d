"""The race (`python -m bertlab race` from the page): several pre-training recipes, each given the same
minutes of this CPU, then each fine-tuned on one task, into one table; live curves while it runs.

A race is one background job (RaceSpec is a run kind): the job manager runs it as `python -m bertlab
run DIR`, so closing the page does not stop it and a reloaded page finds it again.
"""
from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import gradio as gr

from .... import family
from ....cache import LRU
from ....tokenizer import SubwordTokenizer
from ....train.electra import generator_config
from ....train.pretrain import model_config
from ....train.race import estimate_minutes, table_md
from ....train.speed import flops_per_step
from ....train.runs import Run
from ....data.masking import taught_per_example
from ....train.specs import RECIPES, PretrainSpec, RaceSpec
from ...jobs import check_name
from ...limits import limits
from ..shared import common, links
from ..shared.common import user_error
from . import jobs_ui
from .train_charts import metrics, race_figures, read_json

EXPLAIN_TEXT = """**The race: which way of pre-training learns most from the same computer time?** Every recipe
gets the same minutes of this CPU, the same text (movie reviews) and the same model shape. Then each
is fine-tuned on the same task (sentiment of a sentence), and the table compares them.

- **What it measures.** While they train: the share of hidden words each model guesses right on
  text it never trained on, against minutes and against the estimated number of computations
  (FLOPs). At the end: the fine-tuned accuracy — what pre-training is for — and how fast each model runs.
- **ELECTRA.** BERT learns only from the 15 % of words it hides. ELECTRA lets a small *generator*
  swap some words for plausible stand-ins, and the main model (the *discriminator*) judges every
  word: original or replaced? It learns from all positions, so at equal compute Clark et al. (2020)
  found ELECTRA-Small at 79.9 on GLUE against 75.1 for BERT-Small. Its masked-word accuracy in the
  chart is its small generator's; judge it by its replaced-word AUC and by fine-tuning.
  {taught}
- **Static vs dynamic masking (RoBERTa).** Original BERT chose each example's hidden words once,
  before training, so every pass over the data hid the same words (*static*). RoBERTa draws new
  hidden words each time an example comes round (*dynamic*, the default here): race *mlm* against *static*.
- **ALBERT.** Every layer uses one shared set of weights: far fewer parameters, about the same
  computing per step. Race *albert* against *albert-unshared* to see what sharing costs.
- **Your own loss.** A recipe named *loss-…* is BERT trained with another loss function, one
  registered in `bertlab/train/objectives.py` (write one there and it appears here). *loss-all-tokens*
  asks every word to be predicted, not only the hidden 15 %: the others only need copying. All are
  judged on the same hidden words.

A few minutes is a tiny budget: a gap of a point or two can be luck. More fine-tune seeds show the spread."""


def taught_note(length: int = RaceSpec.max_len, rate: float = PretrainSpec.mask_rate) -> str:
    """How many more positions teach ELECTRA's discriminator than BERT's masked-word loss, counted on
    draws of the masking pre-training uses, for the race's own example length."""
    n = taught_per_example(length, rate)
    return (f"How many positions teach? In the race's examples of {length} tokens, BERT's masked-word "
            f"loss (rate {rate:.0%}) learns from {n:.1f} of them on average (counted on 2,000 draws of its "
            f"masking; [CLS] and [SEP] are never picked); ELECTRA's discriminator learns from all {length}: "
            f"**{length / n:.1f}× as many** (1 / {rate:.0%} = {1 / rate:.1f}× on long examples).")


EXPLAIN = EXPLAIN_TEXT.format(taught=taught_note())

MINUTES = (3, 5, 10, 20)  # minutes of pre-training per recipe the form offers
SEEDS = (1, 2, 3)
BASE: dict = {}  # RaceSpec fields the form does not show (corpus, task, shape): the spec's defaults
LABELS = {name: f"{name}: {label}" for name, (label, _) in RECIPES.items()}  # as the table names them
_flops = LRU(64)  # a recipe's run folder -> its training FLOPs per step (fixed once its data exist)


def recipe_names(recipes) -> tuple[str, ...]:
    """Recipe names from the form's values (names, or labels from an API caller)."""
    names = []
    for r in recipes or []:
        n = r if r in RECIPES else next((k for k, v in LABELS.items() if v == r), None)
        if n is None:
            raise ValueError(f"unknown recipe {r!r:.60}: choose from {', '.join(RECIPES)}")
        names.append(n)
    return tuple(dict.fromkeys(names))


def form_spec(recipes, minutes, side_by_side, seeds) -> RaceSpec:
    """The form as a RaceSpec, checked here (and against this server's caps) so a mistake shows at once."""
    names = recipe_names(recipes)
    if len(names) < 2:
        raise ValueError("pick at least two recipes to race")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float, str)):
        raise ValueError(f"minutes per recipe must be one of {', '.join(map(str, MINUTES))}, got {minutes!r:.40}")
    try:
        minutes = float(minutes)
    except ValueError:
        raise ValueError(f"minutes per recipe must be one of {', '.join(map(str, MINUTES))}, got {minutes!r:.40}") \
            from None
    if minutes not in MINUTES:
        raise ValueError(f"minutes per recipe must be one of {', '.join(map(str, MINUTES))}, got {minutes:g}")
    if isinstance(seeds, bool) or not isinstance(seeds, (int, float)) or seeds not in SEEDS:
        raise ValueError(f"fine-tune seeds must be one of {', '.join(map(str, SEEDS))}, got {seeds!r:.40}")
    threads = limits().job_threads
    if side_by_side and len(names) > threads:  # never more threads than the server lends a job
        why = "side by side trains each recipe on a CPU thread of its own, and this server gives a training job"
        raise ValueError(f"{why} only one thread (BERTLAB_JOB_THREADS): untick 'side by side' to train the recipes "
                         f"one after another" if threads == 1 else
                         f"{why} {threads} threads (BERTLAB_JOB_THREADS): race at most {threads} recipes side by "
                         f"side, or untick 'side by side' to train them one after another with all {threads}")
    return RaceSpec(**{**BASE, "recipes": names, "minutes": minutes, "side_by_side": bool(side_by_side),
                       "seeds": int(seeds), "threads": threads})


def estimate_md(recipes, minutes, side_by_side, seeds) -> str:
    """What the race will take, said before it starts (or why it cannot start)."""
    try:
        spec = form_spec(recipes, minutes, side_by_side, seeds)
    except (ValueError, TypeError) as e:
        return f"⚠️ {e}"
    n, total = len(spec.recipes), estimate_minutes(spec)
    train = spec.minutes * (1 if spec.side_by_side else n)
    how = (f"{n} recipes side by side, one CPU thread each" if spec.side_by_side else
           f"{n} recipes × {spec.minutes:g} min, one after another")
    return (f"**About {max(1, round(total))} minutes**: {train:g} min of pre-training ({how}), then about "
            f"{max(1, round(total - train))} min of timing trials, setup and fine-tuning {n} models on {spec.task} "
            f"({spec.seeds} seed{'s' if spec.seeds > 1 else ''} each).")


def recipe_flops(race_dir: Path, name: str) -> float | None:
    """Training FLOPs per step of one recipe of a race: its finished part says; before that they are
    computed as the race does, from the run's spec and the vocabulary its data hold (None before)."""
    part = read_json(race_dir / "parts" / f"{name}.json") or {}
    if part.get("flops_per_step"):
        return part["flops_per_step"]
    run = race_dir / "runs" / name
    if (hit := _flops.get(str(run))) is not None:
        return hit
    try:
        spec = Run(run).spec()
        if spec is None or spec.KIND != "pretrain" or not (run / "data").is_dir():
            return None
        config = model_config(spec, SubwordTokenizer.from_pretrained(run / "data"))
    except (OSError, ValueError, KeyError):  # data being written right now: the next tick
        return None
    gen = generator_config(config, spec.generator_size) if family.trains_generator(spec.arch) else None
    return _flops.put(str(run), flops_per_step(spec, config, gen))


def race_spec(name: str | None) -> RaceSpec | None:
    """The race's own spec; None for a queued race, another kind of run, or a spec.json that does not read."""
    with contextlib.suppress(ValueError, OSError):
        spec = Run(jobs_ui.run_dir(name)).spec() if name else None
        return spec if isinstance(spec, RaceSpec) else None
    return None


def with_progress(st: dict | None, spec: RaceSpec | None) -> dict | None:
    """The job's status with time run, progress and time left measured against the race's estimate:
    a race has no step count of its own."""
    if not st or spec is None or not st.get("started"):
        return st
    est, live = estimate_minutes(spec) * 60, jobs_ui.is_live(st)
    elapsed = max(0.0, (time.time() if live else st.get("updated") or time.time()) - st["started"])
    left = est - elapsed if live and est - elapsed > 30 else None
    return {**st, "elapsed": elapsed, "eta_s": left,
            "progress": 1.0 if st.get("state") == "finished" else min(0.99, elapsed / est)}


def noise_points(row: dict, seeds: int) -> tuple[float, str]:
    """How far a recipe's fine-tuned accuracy may move by luck, in points, and what says so: the seeds'
    spread (with several seeds), and at least the held-out set's own sampling error (1.96 standard
    errors of an accuracy measured on its n examples)."""
    p, n = row["finetune_mean"], row.get("val_examples")
    sampling = 196 * math.sqrt(max(p * (1 - p), 1e-6) / n) if n else 0.0
    spread = row.get("finetune_spread", 0.0) * 100 if seeds > 1 else 0.0
    if spread >= sampling:
        return spread, "the seeds' spread"
    return sampling, f"the sampling error of {n:,} held-out examples"


def reading_md(res: dict | None) -> str:
    """One line that reads the finished table: who fine-tuned best, by how much, and whether that is luck.
    A verdict needs evidence: "no winner" when the best sits within its noise of the line to beat (a race
    that learned nothing named a winner at 48.7 %, under a coin toss) or of the runner-up."""
    rows = sorted((res or {}).get("rows") or [], key=lambda r: r["finetune_mean"], reverse=True)
    if len(rows) < 2:
        return ""
    best, second, task, seeds = rows[0], rows[1], res.get("task", "the task"), res.get("seeds", 1)
    gap = (best["finetune_mean"] - second["finetune_mean"]) * 100
    (nb, why), (ns, _) = noise_points(best, seeds), noise_points(second, seeds)
    noise = max(nb, ns)
    line = best.get("line_to_beat")
    if line is not None and (best["finetune_mean"] - line) * 100 <= nb:
        return (f"**No winner:** no recipe fine-tunes clearly above the line to beat. Always answering the "
                f"commonest label scores {line:.1%} on {task}; the best, **{best['recipe']}**, scores "
                f"{best['finetune_mean']:.1%}, within its noise (±{nb:.1f} points, {why}). The models have not "
                f"learned enough yet to compare: race for more minutes.")
    if noise == 0:  # one seed, and no held-out size recorded (an older race)
        return (f"**Reading:** after the same minutes of pre-training, **{best['recipe']}** fine-tunes best on "
                f"{task} ({best['finetune_mean']:.1%}) and leads {second['recipe']} by {gap:.1f} points; with one "
                f"seed each, a gap of a point or two may be luck (race again with more seeds).")
    if gap <= noise:
        return (f"**No winner:** **{best['recipe']}** ({best['finetune_mean']:.1%}) and {second['recipe']} "
                f"({second['finetune_mean']:.1%}) fine-tune on {task} within their noise of each other: a gap of "
                f"{gap:.1f} points against ±{noise:.1f} ({why}). Race again with more seeds or more minutes.")
    return (f"**Reading:** after the same minutes of pre-training, **{best['recipe']}** fine-tunes best on "
            f"{task} ({best['finetune_mean']:.1%}) and leads {second['recipe']} by {gap:.1f} points, more than "
            f"the noise (±{noise:.1f} points, {why})"
            + (f"; the line to beat is {line:.1%}." if line is not None else "."))


def table_cells(md: str) -> tuple[list[str], list[list[str]], str]:
    """(headers, rows, the note under it) of the race's Markdown table: a table that scrolls sideways on
    a phone, in the very words the command line prints."""
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in md.splitlines() if ln.startswith("|")]
    cells = [r for r in cells if not all(c and set(c) <= set("-:") for c in r)]  # not the |---| line
    note = "\n".join(ln for ln in md.splitlines() if not ln.startswith("|")).strip()
    return cells[0], cells[1:], note


def table_or_progress(d: Path | None, spec: RaceSpec | None, st: dict | None) -> tuple[gr.Dataframe, str]:
    """The finished race's table and its note, else no table and what is done so far."""
    res = read_json(d / "results.json") if d else None
    if res and res.get("rows"):
        headers, rows, note = table_cells(table_md(res))
        rows = [[r[0].split(":")[0], *r[1:]] for r in rows]  # the recipe's name, as the charts and form say it
        return gr.Dataframe(value=rows, headers=headers, visible=True), note
    if spec is None:
        return gr.Dataframe(visible=False), ""
    done = [p for n in spec.recipes if (p := read_json(d / "parts" / f"{n}.json"))]
    so_far = "".join(f"\n- **{p['recipe']}** pre-trained: {p['steps']:,} steps in {p['minutes']:.1f} min, "
                     f"held-out masked-token accuracy {p['mlm_acc']:.1%}" for p in done
                     if isinstance(p.get("mlm_acc"), (int, float)))
    when = "when the race has finished" if jobs_ui.is_live(st) else "once the race is resumed and finishes"
    return gr.Dataframe(visible=False), f"*The table appears {when}: every recipe pre-trained, then fine-tuned.*{so_far}"


def view(name, overlay, owner):
    """Status, the two charts, the table and its note (or what is done so far), its reading, the log; the timer
    ticks while the race is queued or running. `overlay` is not used: a race is one job."""
    name = name if jobs_ui.valid(name) else None
    st, spec = jobs_ui.status(name), race_spec(name)
    d = jobs_ui.run_dir(name) if name else None
    recipes = spec.recipes if spec else ()
    figs = race_figures({n: metrics(d / "runs" / n) for n in recipes}, {n: recipe_flops(d, n) for n in recipes}) \
        if name else race_figures({})
    return (jobs_ui.status_html(with_progress(st, spec), owner), *figs, *table_or_progress(d, spec, st),
            reading_md(read_json(d / "results.json")) if d else "", (st or {}).get("log_tail", ""),
            gr.Timer(active=jobs_ui.is_live(st)))


def start(owner, name, recipes, minutes, side_by_side, seeds):
    """Check the form and start the race (or queue it)."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("race"))
        jobs_ui.launch(owner, name, form_spec(recipes, minutes, side_by_side, seeds))
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("race"), value=name), *view(name, [], owner))


def stop(owner, name, overlay):
    if not jobs_ui.valid(name):
        raise user_error("No race selected: pick one under 'Race'.")
    try:
        jobs_ui.manager().stop(name, jobs_ui.visitor(owner))  # the race watches its folder's STOP file
    except (ValueError, PermissionError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def resume(owner, name, overlay):
    """Go on with a stopped race: it keeps every recipe and fine-tune it finished."""
    if not jobs_ui.valid(name):
        raise user_error("No race selected: pick the race to resume under 'Race'.")
    try:
        jobs_ui.manager().resume(name, jobs_ui.visitor(owner))
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def build(picker: gr.Dropdown) -> None:
    """The tab (the race trains its own models from scratch: the picked model is not used)."""
    owner, opened = jobs_ui.session()
    with common.form(EXPLAIN):
        recipes = gr.CheckboxGroup([(label, n) for n, label in LABELS.items()], value=list(RaceSpec().recipes),
                                   label="Recipes", elem_id="race-recipes")
        with gr.Row():
            minutes = gr.Radio(list(MINUTES), value=MINUTES[0], label="Minutes of pre-training per recipe",
                               min_width=220, elem_id="race-minutes")
            seeds = gr.Radio(list(SEEDS), value=SEEDS[0], label="Fine-tune seeds per recipe", min_width=160,
                             elem_id="race-seeds")
        with gr.Row():
            threads = limits().job_threads
            with gr.Column(min_width=280):  # a checkbox alone keeps no min_width: squeezed on a phone
                side = gr.Checkbox(False, label="Side by side: every recipe at once, one CPU thread each",
                                   elem_id="race-side", info=f"this server lends a race {threads} threads, so at most "
                                   f"{threads} recipes at once" if threads > 1 else
                                   "this server lends a race one thread: one recipe after another")
            name = gr.Textbox(label="Race name", placeholder="blank: race-<date>-<time>", max_length=64,
                              min_width=200)
        estimate = gr.Markdown(elem_id="race-estimate")
        controls = jobs_ui.Controls("race")
        links.register("race", minutes=minutes, seeds=seeds, recipes=recipes)  # filled, never started, by a link
    status = gr.HTML(elem_id="race-status")
    with gr.Row(elem_id="race-plots"):  # side by side on a laptop, stacked on a phone
        first = race_figures({})[0]
        plots = [gr.Plot(first, show_label=False, min_width=320, elem_id=f"race-plot-{k}") for k in ("minutes", "flops")]
    table = gr.Dataframe(interactive=False, wrap=True, visible=False, elem_id="race-table", show_label=False)
    note = gr.Markdown(elem_id="race-note")
    reading = gr.Markdown(elem_id="race-reading")
    watch, overlay, log, timer = jobs_ui.run_watcher("Race", "race-run", log_lines=10)

    form = [recipes, minutes, side, seeds]
    outs = [status, *plots, table, note, reading, log, timer]
    gr.on([c.change for c in form], estimate_md, form, estimate, api_name=False, show_progress="hidden")
    controls.start.click(start, [owner, name, *form], [watch, *outs], api_name="race_start", concurrency_limit=1)
    controls.wire(owner, watch, overlay, outs, view, stop, resume)
    jobs_ui.wire_run_view("race", (owner, opened), watch, overlay, timer, view, outs)
    common.on_open(estimate_md, form, estimate)
