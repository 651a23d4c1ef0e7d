"""Fine-tune the picked model on a labelled task, and compare frozen, full and LoRA side by side."""
from __future__ import annotations

import gradio as gr

from ...analysis.predict import classify
from ...cache import LRU
from ...checkpoint import count_params, resolve_folder, weights_stamp
from ...config import BertConfig
from ...data.tasks import load_task, task_kind
from ...heads import load_classifier
from ...tokenizer import WordPieceTokenizer
from ...train.finetune import METHODS, trainable_estimate
from ...train.runs import Run
from ...train.specs import FinetuneSpec
from ..jobs import check_name
from ..limits import check_upload, limits
from . import common, jobs_ui, models
from .common import user_error
from .train_charts import (
    confusion_figure,
    empty_figure,
    finetune_figure,
    metrics,
    read_json,
)

EXPLAIN = """**Fine-tuning** puts a small new layer (the *head*) on top of a pre-trained BERT and trains
on a labelled task: one label per text (sentiment) or per word (part of speech).

- **Full**: every weight may change. Usually the best score, but each task needs a full copy.
- **Frozen**: BERT stays as it is, only the head learns. It shows what the pre-trained vectors
  already hold — a weak pre-trained model scores low here.
- **LoRA**: BERT stays frozen but gets small low-rank updates (rank *r*) beside its attention
  weights — a few percent of the parameters, often close to full fine-tuning.

**Compare** runs all three on the same data and seed and overlays their curves: which learns
faster, which ends better. Validation data is held out, never trained on."""

TASKS = {"Sentiment: Rotten Tomatoes sentences (shipped)": "sentiment",
         "Part of speech: the same sentences, silver tags (shipped)": "pos",
         "Upload: a CSV/JSONL of texts and labels": "upload-csv",
         "Upload: a CoNLL file (word and tag per line)": "upload-conll"}
METHOD_LABELS = {"full": "Full fine-tuning", "frozen": "Frozen encoder (head only)", "lora": "LoRA"}
LABEL_TO_METHOD = {v: k for k, v in METHOD_LABELS.items()}
POS_LABELS = 45  # the Penn Treebank tag set, for the size estimate before the data is read
_classifiers = LRU(4)  # run folder -> (stamp of its weights, model, tokenizer)


def _kind_of(task: str) -> str:
    t = TASKS.get(task, task)
    if t == "upload-conll":
        return "token"
    if t == "upload-csv":
        return "sequence"
    return task_kind(t)


def spec_from(method, lora_rank, lora_alpha, layer_decay, unfreeze, lr) -> FinetuneSpec:
    return FinetuneSpec(method=LABEL_TO_METHOD.get(method, method), lora_rank=int(lora_rank or 0),
                        lora_alpha=float(lora_alpha or 0), layer_decay=float(layer_decay),
                        gradual_unfreeze=bool(unfreeze), lr=float(lr) if lr else None)


def params_md(choice, task, method, lora_rank, lora_alpha, layer_decay, unfreeze, lr) -> str:
    try:
        model, _ = models.get(choice)
        spec = spec_from(method, lora_rank, lora_alpha, layer_decay, unfreeze, lr)
        kind = _kind_of(task)
        n_labels = POS_LABELS if kind == "token" else 2
        trainable, total = trainable_estimate(model.config, kind, n_labels, spec)
    except (ValueError, TypeError) as e:
        return f"⚠️ {e}"
    return (f"**{METHOD_LABELS[spec.method]}** trains **{trainable:,}** of {total:,} parameters "
            f"(**{trainable / total:.2%}**) at learning rate {spec.lr:g}"
            + (" (this method's default)" if not lr else "") + ".")


FORM = ("choice", "task", "upload", "text_column", "label_column", "method", "epochs", "lr", "lora_rank",
        "lora_alpha", "layer_decay", "unfreeze", "max_examples", "max_len", "batch")


def form_spec(choice, task, upload, text_column, label_column, method, epochs, lr, lora_rank, lora_alpha,
              layer_decay, unfreeze, max_examples, max_len, batch) -> FinetuneSpec:
    """The form as a FinetuneSpec; an uploaded file is staged privately and read once, so a bad one
    is said here rather than in a log."""
    lim = limits()
    spec = spec_from(method, lora_rank, lora_alpha, layer_decay, unfreeze, lr).replace(
        epochs=epochs, batch_size=batch, max_len=max_len, text_column=text_column or "text",
        label_column=label_column or "label", threads=lim.job_threads, seed=0, max_examples=max_examples or None,
        model="default" if choice in (None, "", models.DEFAULT) else str(models.resolve(choice)))
    if spec.epochs > lim.max_epochs:
        raise ValueError(f"{spec.epochs} epochs is over this server's cap of {lim.max_epochs} (BERTLAB_MAX_EPOCHS)")
    config = BertConfig.from_json_file(resolve_folder(None if spec.model == "default" else spec.model) / "config.json")
    if (n := count_params(config)) > lim.max_params:
        raise ValueError(f"this model has {n:,} parameters; this server fine-tunes at most {lim.max_params:,} "
                         f"(BERTLAB_MAX_PARAMS)")
    t = TASKS.get(task) or (task if task in TASKS.values() else None)  # never a path of the server
    if t is None:
        raise ValueError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    if t.startswith("upload"):
        src = check_upload(upload, "labelled file")
        spec = spec.replace(task=str(jobs_ui.stage_upload(src)))
        try:
            tok = WordPieceTokenizer.from_pretrained(resolve_folder(None if spec.model == "default" else spec.model))
            with jobs_ui.upload_named(src, spec.task):
                load_task(spec.task, tok, spec.max_len, text_column=spec.text_column, label_column=spec.label_column)
        except BaseException:
            jobs_ui.discard_staged(spec)
            raise
        return spec
    return spec.replace(task=t)


def summary_rows(names: list[str], states: dict[str, dict | None] | None = None) -> list[list]:
    """One row per shown run: method, trained parameters, accuracy after each epoch, time. A run
    without a validation yet says where it is (queued, starting, running) instead."""
    rows = []
    for n in names:
        d, st = jobs_ui.run_dir(n), (states or {}).get(n) or {}
        spec, conf = {**(Run(d).spec_dict() or {}), **Run(d).facts()}, read_json(d / "confusion.json") or {}
        evals = [r for r in metrics(d) if r.get("split") == "eval"]
        per_epoch = " → ".join(f"{r['accuracy']:.1%}" for r in evals)
        trained = spec.get("trainable_params")
        rows.append([n, METHOD_LABELS.get(spec.get("method") or st.get("method"), "?"),
                     f"{trained:,} ({trained / spec['total_params']:.1%})" if trained else "",
                     per_epoch or (f"{st['state']}…" if jobs_ui.is_live(st) else "–"),
                     f"{conf['macro_f1']:.3f}" if "macro_f1" in conf else "",
                     f"{evals[-1]['time']:.0f} s" if evals else ""])
    return rows


SUMMARY_HEADERS = ["run", "method", "parameters trained", "validation accuracy by epoch", "macro-F1", "time"]


def view(name, overlay, owner):
    """Status, curves, confusion matrix, summary, log, and the timer: it ticks while any shown run
    is queued or training, so a comparison is followed until its last run ends."""
    name = name if jobs_ui.valid(name) else None
    shown = jobs_ui.shown_runs(name, overlay)
    states = {n: jobs_ui.status(n) for n in shown}
    runs = {n: metrics(jobs_ui.run_dir(n)) for n in shown}
    conf = read_json(jobs_ui.run_dir(name) / "confusion.json") if name else None
    table = gr.Dataframe(value=summary_rows(shown, states) or [["", "", "", "", "", ""]], headers=SUMMARY_HEADERS)
    curves = finetune_figure(runs) if any(runs.values()) else empty_figure(
        "No measurements yet:<br>" + ("the first points appear a few seconds after training starts." if shown
                                      else "start a run, or pick one to watch."))
    matrix = confusion_figure(conf) if conf and conf.get("confusion") else empty_figure(
        "The confusion matrix appears<br>after the first validation.", height=160)
    return (jobs_ui.runs_status_html(list(states.values()), owner), curves, matrix, table,
            (states.get(name) or {}).get("log_tail", ""), gr.Timer(active=any(map(jobs_ui.is_live, states.values()))))


def _start(owner, name, form, group=None):
    jobs_ui.launch(owner, name, form_spec(*form), group)


def start(owner, name, choice, task, upload, text_column, label_column, method, epochs, lr, lora_rank, lora_alpha,
          layer_decay, unfreeze, max_examples, max_len, batch, overlay):
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("finetune"))
        _start(owner, name, [choice, task, upload, text_column, label_column, method, epochs, lr, lora_rank,
                             lora_alpha, layer_decay, unfreeze, max_examples, max_len, batch])
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("finetune"), value=name), gr.Dropdown(value=[]),
            *view(name, [], owner))


def compare(owner, name, choice, task, upload, text_column, label_column, method, epochs, lr, lora_rank, lora_alpha,
            layer_decay, unfreeze, max_examples, max_len, batch, overlay):
    """The same task, data and seed three times: frozen, full and LoRA (queued one after another),
    each at its own default learning rate; `method` and `lr` of the form are not used."""
    f = dict(choice=choice, task=task, upload=upload, text_column=text_column, label_column=label_column,
             epochs=epochs, lora_rank=lora_rank, lora_alpha=lora_alpha, layer_decay=layer_decay,
             max_examples=max_examples, max_len=max_len, batch=batch, lr=0)
    try:
        base = (name or "").strip() or jobs_ui.default_name("compare")
        names = [check_name(f"{base[:56]}-{m}") for m in METHODS]
        if taken := [n for n in names if jobs_ui.run_dir(n).exists()]:
            raise ValueError(f"run {taken[0]} exists: pick another name for the comparison")
        for n, m in zip(names, METHODS):
            _start(owner, n, [{**f, "method": METHOD_LABELS[m], "unfreeze": bool(unfreeze) and m == "full"}[k]
                              for k in FORM], group=names)
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("finetune"), value=names[0]),
            gr.update(choices=jobs_ui.runs_of("finetune"), value=names[1:]), *view(names[0], names[1:], owner))


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


def try_it(name, text):
    """The run's saved classifier on the visitor's own text."""
    if not name:
        raise user_error("Pick a fine-tuned run first.")
    if not jobs_ui.valid(name):
        raise user_error(f"bad run name {name!r}")
    folder = jobs_ui.finished_model(name)
    if folder is None:
        raise user_error(f"Run {name} has no saved model yet: it appears when the run finishes or is stopped.")
    stamp = weights_stamp(folder)
    try:
        hit = _classifiers.get(str(folder))
        if hit is None or hit[0] != stamp:
            hit = (stamp, *load_classifier(folder))
            _classifiers.put(str(folder), hit)
        res = classify(hit[1], hit[2], text if isinstance(text, str) else "")
    except ValueError as e:
        raise user_error(e) from None
    if "labels" in res:
        return gr.Label(value=res["labels"], visible=True), gr.HighlightedText(visible=False)
    return gr.Label(visible=False), gr.HighlightedText(value=[(w, t) for w, t, _ in res["words"]], visible=True)


def build(picker: gr.Dropdown) -> None:
    owner, opened = jobs_ui.session()
    with common.form(EXPLAIN):
        gr.Markdown("Starts from the **model picked at the top** (the shipped one, a run trained here, a "
                    "folder or a Hugging Face id).")
        with gr.Row():
            task = gr.Dropdown(list(TASKS), value=next(iter(TASKS)), label="Task", scale=3, min_width=220)
            name = gr.Textbox(label="Run name", placeholder="blank: finetune-<date>-<time>", max_length=56,
                              scale=2, min_width=160)
        with gr.Row():
            method = gr.Radio(list(METHOD_LABELS.values()), value=METHOD_LABELS["full"], label="Method", scale=4,
                              min_width=260)
            epochs = gr.Number(2, label="Epochs", precision=0, minimum=1, scale=1, min_width=90)
        with gr.Accordion("Your own data", open=False):
            with gr.Row():
                upload = gr.File(label="Labelled file (.csv/.tsv/.json/.jsonl, or CoNLL .conll/.txt)",
                                 file_types=[".csv", ".tsv", ".json", ".jsonl", ".conll", ".txt"],
                                 elem_id="finetune-upload", min_width=220)
                with gr.Column(min_width=160):
                    text_column = gr.Textbox("text", label="Text column", max_length=100)
                    label_column = gr.Textbox("label", label="Label column", max_length=100)
        with gr.Accordion("More options", open=False):
            with gr.Row():
                lr = gr.Number(0, label="Learning rate (0 = method's default)", minimum=0, min_width=200)
                lora_rank = gr.Number(8, label="LoRA rank r", precision=0, minimum=1, maximum=256, min_width=110)
                lora_alpha = gr.Number(16, label="LoRA alpha", minimum=0.1, min_width=110)
            # the slider's label shares its line with its number box: a row of its own
            layer_decay = gr.Slider(0.5, 1.0, 1.0, step=0.05, label="Layer-wise LR decay (1 = off)",
                                    elem_id="finetune-decay")
            unfreeze = gr.Checkbox(False, label="Gradual unfreezing (full only)")
            with gr.Row():
                max_examples = gr.Number(0, label="Use N examples (0 = all)", precision=0, minimum=0, min_width=150)
                max_len = gr.Number(64, label="Tokens per text", precision=0, minimum=4, maximum=512, min_width=110)
                batch = gr.Number(32, label="Batch size", precision=0, minimum=1, maximum=512, min_width=110)
        params = gr.Markdown(elem_id="finetune-params")
        with gr.Row():
            start_btn = gr.Button("Start", variant="primary", elem_id="finetune-start", min_width=80)
            compare_btn = gr.Button("Compare frozen / full / LoRA", elem_id="finetune-compare", scale=2,
                                    min_width=240)
            stop_btn = gr.Button("Stop", variant="stop", elem_id="finetune-stop", min_width=80)
            delete_btn = gr.Button("Delete", elem_id="finetune-delete", min_width=80)
    status = gr.HTML(elem_id="finetune-status")
    plot = gr.Plot(elem_id="finetune-plot", label="Curves")
    with gr.Row():  # under the curves: at 1280×900 a click on Start shows its status and curves unscrolled
        watch = gr.Dropdown([], label="Run", allow_custom_value=True, scale=2, elem_id="finetune-run", min_width=160)
        overlay = gr.Dropdown([], multiselect=True, allow_custom_value=True, label="Overlay other runs", scale=3,
                              elem_id="finetune-overlay", min_width=200)
    table = gr.Dataframe(headers=SUMMARY_HEADERS, interactive=False, wrap=False, elem_id="finetune-summary")
    with gr.Row():
        confusion = gr.Plot(elem_id="finetune-confusion", label="Confusion matrix", min_width=300)
        with gr.Column(min_width=260):
            gr.Markdown("**Try it** on your own sentence with the run's saved model.")
            text = gr.Textbox(label="Text", value="a gripping , beautifully acted film .", max_length=2000)
            try_btn = gr.Button("Classify", elem_id="finetune-try")
            label = gr.Label(num_top_classes=5, label="Prediction", visible=True, elem_id="finetune-label")
            tags = gr.HighlightedText(label="Predicted tags", visible=False)
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=10, max_lines=30, show_label=False, autoscroll=True)
    timer = gr.Timer(jobs_ui.TICK_S, active=False)

    form = [picker, task, upload, text_column, label_column, method, epochs, lr, lora_rank, lora_alpha,
            layer_decay, unfreeze, max_examples, max_len, batch]
    outs = [status, plot, confusion, table, log, timer]
    p_in = [picker, task, method, lora_rank, lora_alpha, layer_decay, unfreeze, lr]
    gr.on([c.change for c in p_in], params_md, p_in, params, api_name=False, show_progress="hidden")
    start_btn.click(start, [owner, name, *form, overlay], [watch, overlay, *outs], api_name="finetune_start",
                    concurrency_limit=1)
    compare_btn.click(compare, [owner, name, *form, overlay], [watch, overlay, *outs], api_name="finetune_compare",
                      concurrency_limit=1)
    stop_btn.click(stop, [owner, watch, overlay], outs, api_name="finetune_stop", show_progress="minimal")
    delete_btn.click(jobs_ui.delete, [owner, watch, gr.State("finetune")], [watch, overlay], api_name="finetune_delete",
                     show_progress="minimal").then(view, [watch, overlay, owner], outs, api_name=False)
    try_btn.click(try_it, [watch, text], [label, tags], api_name="finetune_try")
    text.submit(try_it, [watch, text], [label, tags], api_name=False)
    jobs_ui.wire_run_view("finetune", opened, owner, watch, overlay, timer, view, outs)
    gr.context.Context.root_block.load(params_md, p_in, params, api_name=False, show_progress="hidden")

