"""Fine-tune the picked model on a labelled task with one of eight methods, and compare the methods
on the same data and seeds (finetune_compare.py); try the result on your own text (finetune_try.py)."""
from __future__ import annotations

import gradio as gr

from ....train.finetune import CONFUSION_FILE
from ....train.runs import Run
from ....train.specs import FinetuneSpec
from ...jobs import check_name
from ..shared import common, forms, links
from ..shared.common import user_error
from . import finetune_compare, finetune_forgetting, finetune_rates, finetune_try, jobs_ui
from .finetune_form import (  # noqa: F401  (the form's names, as tests and the API know them)
    DEFAULT_METHOD,
    INIT_LABELS,
    METHOD_LABELS,
    OPTION_BOXES,
    PARAMS_INPUTS,
    POOLING_LABELS,
    PROBLEM_LABELS,
    SERVER,
    TARGET_LABELS,
    TASKS,
    form_spec,
    method_fields,
    method_note,
    params_md,
    spec_from,
)
from .train_charts import confusion_figure, empty_figure, finetune_figure, metrics, read_json

EXPLAIN = """**Fine-tuning** puts a small new layer (the *head*) on top of a pre-trained BERT and trains
on a labelled task: one label per text (sentiment), per word (part of speech), per pair of texts,
a number, several labels, or the answer's span in a passage.

**Full** fine-tuning changes every weight. The other seven are *parameter-efficient*: BERT's weights
stay as they are and a few new or chosen ones learn, from about a tenth of a percent to a few percent
of the model, so each task keeps only a small file.

**Compare methods** trains each picked method on the same data and seeds, one after another, and
shows one table (parameters trained, score, time, memory, size saved), the score against the share
of parameters trained, and the learning curves overlaid. Validation data is held out, never trained on."""

SUMMARY_HEADERS = ["run", "method", "parameters trained", "validation score by epoch", "macro-F1", "time"]
SCORES = ("accuracy", "exact_match", "pearson", "micro_f1", "f1")  # a run's headline, whichever its task has


def _score(row: dict) -> str:
    k = next((k for k in SCORES if isinstance(row.get(k), (int, float))), None)
    return "" if k is None else f"{row[k]:.1%}" if k in ("accuracy", "exact_match") else f"{row[k]:.3f}"


def summary_rows(names: list[str], states: dict[str, dict | None] | None = None) -> list[list]:
    """One row per shown run: method, trained parameters, the score after each epoch, time. A run
    without a validation yet says where it is (queued, starting, running) instead."""
    rows = []
    for n in names:
        d, st = jobs_ui.run_dir(n), (states or {}).get(n) or {}
        spec, conf = {**(Run(d).spec_dict() or {}), **Run(d).facts()}, read_json(d / CONFUSION_FILE) or {}
        evals = [r for r in metrics(d) if r.get("split") == "eval"]
        per_epoch = " → ".join(s for s in map(_score, evals) if s)
        trained = spec.get("trainable_params")
        rows.append([n, METHOD_LABELS.get(spec.get("method") or st.get("method"), "?"),
                     f"{trained:,} ({trained / spec['total_params']:.1%})" if trained else "",
                     per_epoch or (f"{st['state']}…" if jobs_ui.is_live(st) else "–"),
                     f"{conf['macro_f1']:.3f}" if "macro_f1" in conf else "",
                     f"{evals[-1]['time']:.0f} s" if evals else ""])
    return rows


def _confusion(run_dir, whose: str = "") -> gr.Plot:
    conf = read_json(run_dir / CONFUSION_FILE) if run_dir else None
    if conf and conf.get("confusion"):
        return confusion_figure(conf, whose)
    return empty_figure("The confusion matrix appears<br>after the first validation (tasks with labels).", height=160)


def view(name, overlay, owner):
    """Status, curves, confusion matrix, summary, log, the timer, and the comparison's chart. The timer
    ticks while any shown run is queued or training, so a comparison is followed until it ends."""
    name = name if jobs_ui.valid(name) else None
    if name and finetune_compare.is_compare(name):
        html, curves, table, chart, best, live = finetune_compare.view(name, owner)
        log = (jobs_ui.status(name) or {}).get("log_tail", "")
        whose = f"{best.name.replace('-seed', ' seed ')}, the best" if best else ""
        return (html, curves, _confusion(best, whose), table, log, gr.Timer(active=live),
                gr.Plot(value=chart, visible=True))
    shown = jobs_ui.shown_runs(name, overlay)
    states = {n: jobs_ui.status(n) for n in shown}
    runs = {n: metrics(jobs_ui.run_dir(n)) for n in shown}
    table = gr.Dataframe(value=summary_rows(shown, states) or [["", "", "", "", "", ""]], headers=SUMMARY_HEADERS)
    curves = finetune_figure(runs) if any(runs.values()) else empty_figure(
        "No measurements yet:<br>" + ("the first points appear a few seconds after training starts." if shown
                                      else "start a run, or pick one to watch."))
    return (jobs_ui.runs_status_html(list(states.values()), owner), curves,
            _confusion(jobs_ui.run_dir(name) if name else None), table, (states.get(name) or {}).get("log_tail", ""),
            gr.Timer(active=any(map(jobs_ui.is_live, states.values()))), gr.Plot(visible=False))


def start(owner, name, overlay=None, **form):
    """Start (or queue) one fine-tuning run of the form. The form comes by field name, as the API sends
    it: `/finetune_start` takes a FinetuneSpec's fields (method=, epochs=, lora_rank=, ...), `model` (the
    picker's choice), `task` (a TASKS key) and `upload`."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("finetune"))
        jobs_ui.launch(owner, name, form_spec(**form))
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("finetune"), value=name), gr.Dropdown(value=[]),
            *view(name, [], owner))


def compare(owner, name, overlay=None, methods=tuple(METHOD_LABELS), seeds=1, **form):
    """The picked methods on the same task, data and seeds: one job (finetune_compare); the form's
    method is not used, its learning rate only when set."""
    try:
        name = finetune_compare.start(owner, name, form, methods, seeds)
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("finetune"), value=name), gr.update(value=[]),
            *view(name, [], owner))


def stop(owner, name, overlay):
    if not name:
        raise user_error("No run selected.")
    try:
        for n in [name] + [o for o in overlay or [] if (jobs_ui.status(o) or {}).get("owner") == owner]:
            if jobs_ui.is_live(jobs_ui.status(n)):
                jobs_ui.manager().stop(n, jobs_ui.visitor(owner))
    except (ValueError, PermissionError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def try_it(name, text, pair=None, question=None, sub=None):
    """The watched run's saved model (for a comparison: the picked run's) on the visitor's text."""
    return finetune_try.try_it(name, sub, text, pair, question)


def try_again(name, text, pair=None, question=None, sub=None):
    return finetune_try.again(name, sub, text, pair, question)


def build(picker: gr.Dropdown) -> None:
    owner, opened = jobs_ui.session()
    form = forms.Form(FinetuneSpec, "finetune")
    form.add("model", picker)
    with common.form(EXPLAIN):
        gr.Markdown("Starts from the **model picked at the top** (the shipped one, a run trained here, a "
                    "folder or a Hugging Face id).")
        with gr.Row():
            task = form("task", gr.Dropdown, help=False, choices=list(TASKS.items()), value="sentiment", scale=3,
                        min_width=220)
            name = gr.Textbox(label="Run name", placeholder="blank: finetune-<date>-<time>", max_length=56,
                              scale=2, min_width=160)
        with gr.Row():
            method = form("method", gr.Radio, help=False, choices=[(v, k) for k, v in METHOD_LABELS.items()],
                          scale=4, min_width=260)
            epochs = form("epochs", help=False, scale=1, min_width=90)
        note = gr.Markdown(method_note(DEFAULT_METHOD), elem_id="finetune-method-note")
        # the methods' own options, one box per OPTION_BOXES entry and in its order (method_fields shows them)
        with gr.Group(visible=False, elem_id="finetune-lora") as lora_box:
            with gr.Row():
                form("lora_rank", help=False, maximum=256, min_width=100)
                form("lora_alpha", help=False, minimum=0.1, min_width=100)
                form("lora_dropout", help=False, maximum=0.9, step=0.05, min_width=100)
            form("lora_targets", gr.CheckboxGroup, help=False, choices=[(v, k) for k, v in TARGET_LABELS.items()])
        with gr.Group(visible=False, elem_id="finetune-virtual") as tokens_box:
            form("virtual_tokens", help=False)
        with gr.Group(visible=False, elem_id="finetune-adapter") as adapter_box:
            form("adapter_size", help=False, maximum=4096)
        unfreeze = form("gradual_unfreeze", help=False, elem_id="finetune-unfreeze")
        with gr.Accordion("Your own data and the task (pairs, problem, pooling)", open=False):
            with gr.Row():
                form.add("upload", gr.File(
                    label="Labelled file (.csv/.tsv/.json/.jsonl, CoNLL .conll/.txt, SQuAD .json)",
                    file_types=[".csv", ".tsv", ".json", ".jsonl", ".conll", ".txt"], elem_id="finetune-upload",
                    min_width=220))
                with gr.Column(min_width=160):
                    form("text_column", help=False)
                    form("label_column", help=False)
                    form("pair_column", help=False, placeholder="blank: one text per example")
            with gr.Row():
                form("problem", help=False, choices=[(v, k) for k, v in PROBLEM_LABELS.items()], min_width=180)
                form("pooling", help=False, choices=[(v, k) for k, v in POOLING_LABELS.items()], min_width=180)
        with gr.Accordion("More options", open=False):
            with gr.Row():
                form("lr", help=False, label="Learning rate (0 = method's default)", min_width=200)
                form("batch_size", help=False, maximum=512, min_width=110)
            # the slider's label shares its line with its number box: a row of its own
            form("layer_decay", gr.Slider, help=False, minimum=0.5, maximum=1.0, step=0.05, elem_id="finetune-decay")
            with gr.Row():
                form("max_examples", help=False, label="Use N examples (0 = all)", min_width=150)
                form("max_len", help=False, maximum=512, min_width=110)
            form.rest(hide=SERVER, init={"choices": [(v, k) for k, v in INIT_LABELS.items()]})
        params = gr.Markdown(elem_id="finetune-params")
        controls = jobs_ui.Controls("finetune", resume=False, between=lambda: (  # a comparison, after Start
            gr.Button("Compare methods", elem_id="finetune-compare", scale=2, min_width=170),
            gr.Number(1, label="Seeds", precision=0, minimum=1, maximum=finetune_compare.SEEDS[-1], min_width=70,
                      scale=0, elem_id="finetune-seeds")))
        compare_btn, seeds = controls.extra
        links.register("finetune", task=task, method=method, epochs=epochs, pooling=form.widgets["pooling"],
                       init=form.widgets["init"], lr=form.widgets["lr"])  # filled, never started, by a link
        with gr.Accordion("Methods to compare", open=False, elem_id="finetune-compare-options"):
            picked = gr.CheckboxGroup([(v, k) for k, v in METHOD_LABELS.items()], value=list(METHOD_LABELS),
                                      show_label=False, elem_id="finetune-compare-methods")
            plan = gr.Markdown(finetune_compare.estimate_note(list(METHOD_LABELS), 1, 2))
    status = gr.HTML(elem_id="finetune-status")
    chart = gr.Plot(elem_id="finetune-compare-plot", label="Score against parameters trained", visible=False)
    plot = gr.Plot(elem_id="finetune-plot", label="Curves")
    with gr.Row():  # under the curves: at 1280×900 a click on Start shows its status and curves unscrolled
        watch = gr.Dropdown([], label="Run", allow_custom_value=True, scale=2, elem_id="finetune-run", min_width=160)
        overlay = gr.Dropdown([], multiselect=True, allow_custom_value=True, label="Overlay other runs", scale=3,
                              elem_id="finetune-overlay", min_width=200)
    table = gr.Dataframe(headers=SUMMARY_HEADERS, interactive=False, wrap=False, elem_id="finetune-summary")
    with gr.Row():
        confusion = gr.Plot(elem_id="finetune-confusion", label="Confusion matrix", min_width=300)
        with gr.Column(min_width=260):
            gr.Markdown("**Try it** on your own text with the run's saved model.")
            sub = gr.Dropdown([], label="Which run of the comparison", visible=False, elem_id="finetune-try-run")
            text = gr.Textbox(label="Text (for question answering: the passage)",
                              value="a gripping , beautifully acted film .", max_length=5000)
            pair = gr.Textbox(label="Second text", visible=False, max_length=5000, elem_id="finetune-try-pair")
            question = gr.Textbox(label="Question", visible=False, max_length=1000, elem_id="finetune-try-question")
            try_btn = gr.Button("Classify", elem_id="finetune-try")
            label = gr.Label(num_top_classes=5, label="Prediction", visible=True, elem_id="finetune-label")
            tags = gr.HighlightedText(label="Predicted tags", visible=False, elem_id="finetune-tags")
    finetune_rates.build(watch, overlay)
    finetune_forgetting.build(watch, overlay)
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=10, max_lines=30, show_label=False, autoscroll=True)
    timer = gr.Timer(jobs_ui.TICK_S, active=False)

    outs = [status, plot, confusion, table, log, timer, chart]
    p_in = form.inputs(*PARAMS_INPUTS)
    gr.on([c.change for c in p_in.values()], params_md, None, params, inputs_kwargs=p_in, api_name=False,
          show_progress="hidden")
    boxes = [lora_box, tokens_box, adapter_box, unfreeze]  # OPTION_BOXES, in its order
    method.change(method_fields, method, [note, *boxes], api_name=False, show_progress="hidden")
    gr.on([picked.change, seeds.change, epochs.change], finetune_compare.estimate_note, [picked, seeds, epochs], plan,
          api_name=False, show_progress="hidden")
    controls.start.click(start, [owner, name, overlay], [watch, overlay, *outs], inputs_kwargs=form.inputs(),
                         api_name="finetune_start", concurrency_limit=1)
    compare_btn.click(compare, [owner, name, overlay, picked, seeds], [watch, overlay, *outs],
                      inputs_kwargs=form.inputs(), api_name="finetune_compare", concurrency_limit=1)
    controls.wire(owner, watch, overlay, outs, view, stop)
    try_in = [watch, text, pair, question, sub]
    try_btn.click(try_it, try_in, [label, tags], api_name="finetune_try")
    text.submit(try_it, try_in, [label, tags], api_name=False)
    watch.change(finetune_try.inputs_for, watch, [pair, question, sub], api_name=False, show_progress="hidden")
    # the model under the box changed: its own answer replaces the old one (and a stale Error badge)
    gr.on([watch.change, sub.change], try_again, try_in, [label, tags], api_name=False, show_progress="hidden")
    # a comparison's runs join the picker as they end (the timer ticks until the last one has)
    gr.on([sub.focus, timer.tick], finetune_try.refresh_runs, [watch, sub], sub, api_name=False,
          show_progress="hidden")
    jobs_ui.wire_run_view("finetune", (owner, opened), watch, overlay, timer, view, outs)
    common.on_open(params_md, None, params, inputs_kwargs=p_in)

