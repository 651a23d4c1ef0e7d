"""The Fine-tune tab's form: tasks, the eight methods with a plain word on each and the fields each
needs, and the form read into a FinetuneSpec (checked against this server's caps)."""
from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import gradio as gr

from ....checkpoint import count_params, resolve_folder
from ....config import BertConfig
from ....data.tasks import load_task, task_kind
from ....heads_family import layers_pooled
from ....methods.registry import DEFAULT as DEFAULT_METHOD
from ....methods.registry import REGISTRY, reads
from ....tokenizer import SubwordTokenizer
from ....train.finetune import trainable_estimate
from ....train.specs import FinetuneSpec
from ... import traffic
from ...limits import check_upload, limits
from ..shared import forms, models
from . import jobs_ui

EXAMPLES_DIR = Path(__file__).resolve().parents[4] / "examples"
# examples/ (README there): a file for every other head, with the settings it needs
EXAMPLES = {"example-pairs": ("same_sentiment.csv", dict(pair_column="text_b", max_len=96)),
            "example-regression": ("polarity.csv", dict(problem="regression")),
            "example-multi": ("aspects.jsonl", dict(problem="multi")),
            "example-qa": ("movie_qa.json", dict(problem="qa", max_len=128)),
            # 300 sentences: a fifth held out (60), so one held-out sentence moves the score by under 2 points
            "example-sarcasm": ("sarcasm.csv", dict(val_frac=0.2))}
TASKS = {"Sentiment: Rotten Tomatoes (shipped)": "sentiment",
         "Part of speech: silver tags (shipped)": "pos",
         **{label: key for label, key in (
             ("Example: pairs, same sentiment?", "example-pairs"),
             ("Example: regression, polarity", "example-regression"),
             ("Example: multi-label, aspects", "example-multi"),
             ("Example: question answering", "example-qa"),
             ("Example: sarcasm (written for bertlab)", "example-sarcasm"))
            if (EXAMPLES_DIR / EXAMPLES[key][0]).is_file()},
         "Upload: a CSV/JSONL of texts and labels": "upload-csv",
         "Upload: a CoNLL file (word and tag per line)": "upload-conll",
         "Upload: a SQuAD-format JSON (questions and answers)": "upload-qa"}
METHOD_LABELS = {n: m.label for n, m in REGISTRY.items()}  # methods/registry.py
LABEL_TO_METHOD = {v: k for k, v in METHOD_LABELS.items()}
METHOD_NOTES = {n: m.note for n, m in REGISTRY.items()}
TARGET_LABELS = {"query": "query", "key": "key", "value": "value", "attention_output": "attention output",
                 "ffn": "feed-forward", "embeddings": "word embeddings", "dense": "every dense layer"}
PROBLEM_LABELS = {"auto": "auto (from the task)", "single": "one label per text", "multi": "several labels per text",
                  "regression": "a number (regression)", "qa": "extractive QA (SQuAD)"}
POOLING_LABELS = {"auto": "auto (the model's own)", "pooler": "pooler ([CLS] + dense + tanh)", "cls": "[CLS] vector",
                  "mean": "mean of the tokens", "max": "max over the tokens",
                  "last4": "last 4 layers' [CLS], side by side"}
INIT_LABELS = {"pretrained": "its pre-trained weights", "random": "random weights"}
# the options box: the methods' own fields (each record's `options`) in the boxes the tab lays out, in its
# order; a box shows while the picked method reads one of its fields
OPTION_BOXES = (("lora_rank", "lora_alpha", "lora_dropout", "lora_targets"), ("virtual_tokens",), ("adapter_size",),
                ("gradual_unfreeze",))
POS_LABELS = 45  # the Penn Treebank tag set, for the size estimate before the data is read


def _key(labels: dict, value, default: str) -> str:
    """A choice's key from its label (the form) or the key itself (an API caller)."""
    if value in (None, ""):
        return default
    return value if value in labels else next((k for k, v in labels.items() if v == value), value)


def method_of(label) -> str:
    return _key(METHOD_LABELS, label, DEFAULT_METHOD)


def method_note(label) -> str:
    m = method_of(label)
    return f"**{METHOD_LABELS.get(m, m)}.** {METHOD_NOTES.get(m, '')}"


def method_fields(label) -> tuple:
    """(note, then one update per OPTION_BOXES box): each box shown only for the methods that read its fields."""
    m = method_of(label)
    return (method_note(label), *(gr.update(visible=any(reads(m, f) for f in box)) for box in OPTION_BOXES))


def task_key(task) -> str | None:
    """The task a form value names: a TASKS label or value; never a path of the server."""
    return TASKS.get(task) or (task if task in TASKS.values() else None)


def kind_of(task, problem="auto") -> str:
    t = task_key(task) or "sentiment"
    if t in EXAMPLES:
        return "qa" if t == "example-qa" else "sequence"
    if t == "upload-qa" or _key(PROBLEM_LABELS, problem, "auto") == "qa":
        return "qa"
    if t == "upload-conll":
        return "token"
    if t == "upload-csv":
        return "sequence"
    return task_kind(t)


# Spec fields the server sets, never a visitor.
SERVER = ("device", "threads", "log_every")


def spec_fields(form: dict) -> dict:
    """The form's spec fields by name: none of the server's; a choice given by its label (an older API
    caller) read as its key; gradual unfreezing only with the methods that read it (its box is hidden
    for the others); the task and the model (the picker at the top of the page) are read by form_spec."""
    v = forms.spec_fields(FinetuneSpec, form, exclude=(*SERVER, "task", "model"))
    v["method"] = method_of(v.get("method"))
    if "lora_targets" in v:
        v["lora_targets"] = tuple(_key(TARGET_LABELS, t, t) for t in v["lora_targets"] or ())
    for name, labels, default in (("problem", PROBLEM_LABELS, "auto"), ("pooling", POOLING_LABELS, "auto"),
                                  ("init", INIT_LABELS, "pretrained")):
        if name in v:
            v[name] = _key(labels, v[name], default)
    v["gradual_unfreeze"] = bool(v.get("gradual_unfreeze")) and reads(v["method"], "gradual_unfreeze")
    return v


def spec_from(**form) -> FinetuneSpec:
    """The form's fine-tuning settings as a spec (the task and model at their defaults)."""
    return FinetuneSpec(**spec_fields(form))


PARAMS_INPUTS = ("model", "task", "method", "lora_rank", "lora_alpha", "lora_dropout", "lora_targets", "layer_decay",
                 "gradual_unfreeze", "lr", "virtual_tokens", "adapter_size", "problem", "pooling", "train_pooler",
                 "init", "val_frac", "seed")


def params_md(**form) -> str:
    try:
        model, tok = models.get(form.get("model"))
        spec = spec_from(**form)
        kind = kind_of(form.get("task"), spec.problem)
        n_labels = POS_LABELS if kind == "token" else 2
        trainable, total = trainable_estimate(model.config, kind, n_labels, spec)
        data = data_md(form.get("task"), spec, tok)
    except (ValueError, TypeError, NotImplementedError) as e:
        return f"⚠️ {e}"
    return (f"**{METHOD_LABELS[spec.method]}** trains **{trainable:,}** of {total:,} parameters "
            f"(**{trainable / total:.2%}**) at learning rate {spec.lr:g}"
            + (" (this method's default)" if not form.get("lr") else "") + "." + pooling_md(model.config, kind, spec)
            + (" **From random weights:** the same model and training with nothing learnt before, the baseline "
               "that measures what pre-training is worth (overlay it on a pre-trained run's curves)."
               if spec.init == "random" else "") + data)


def data_md(task, spec: FinetuneSpec, tok) -> str:
    """What a shipped example's labels and held-out split hold, said before a run: the line to beat."""
    t = task_key(task)
    if t not in EXAMPLES or kind_of(t) != "sequence" or EXAMPLES[t][1].get("problem"):
        return ""
    d = example_split(t, spec.val_frac, spec.seed, tok)
    counts = lambda c: " · ".join(f"{n} {name}" for name, n in c.items())  # noqa: E731
    se = 100 * (0.25 / d["held"]) ** 0.5
    return (f"\n\n**The data** (`examples/{EXAMPLES[t][0]}`): {d['texts']} examples, {counts(d['counts'])}. "
            f"A run holds out **{d['held']}** of them (validation share {d['val_frac']:g}, seed {d['seed']}): "
            f"{counts(d['held_counts'])}, so always answering *{d['majority_label']}* scores "
            f"**{100 * d['majority']:.1f} %** on them, the line to beat. On {d['held']} texts one standard error of "
            f"an accuracy near 50 % is {se:.1f} points.")


def example_task(t: str, spec: FinetuneSpec) -> FinetuneSpec:
    """The spec on example task `t`: its file, and its own settings where the form left them at their defaults."""
    name, own = EXAMPLES[t]
    keep = dict(pair_column=spec.pair_column or own.get("pair_column"),
                problem=own.get("problem", spec.problem) if spec.problem == "auto" else spec.problem,
                max_len=max(spec.max_len, own.get("max_len", 0)),
                val_frac=own.get("val_frac", spec.val_frac) if spec.val_frac == FinetuneSpec.val_frac
                else spec.val_frac)
    return spec.replace(task=str(EXAMPLES_DIR / name), **keep)


def example_split(t: str, val_frac: float = FinetuneSpec.val_frac, seed: int = FinetuneSpec.seed, tok=None) -> dict:
    """An example task's labels and the texts a run holds out, split by load_task itself (so the form, the
    lesson's question and the run agree); `val_frac` at the form's default means the example's own."""
    spec = example_task(t, FinetuneSpec(val_frac=val_frac, seed=seed))
    if tok is None:
        tok = models.get(models.DEFAULT)[1]
    path = Path(spec.task)
    return dict(_split(str(path), path.stat().st_mtime_ns, spec.val_frac, spec.seed, spec.pair_column, tok))


@functools.lru_cache(maxsize=16)
def _split(path: str, stamp: int, val_frac: float, seed: int, pair_column, tok) -> tuple:
    data = load_task(path, tok, 8, pair_column=pair_column, val_frac=val_frac, seed=seed)
    everything = Counter(data.labels[e.label] for e in [*data.train, *data.val])
    held = Counter(data.labels[e.label] for e in data.val)
    label, n = max(held.items(), key=lambda kv: (kv[1], kv[0]))
    return tuple(dict(texts=len(data.train) + len(data.val), held=len(data.val), val_frac=val_frac, seed=seed,
                      counts={k: everything[k] for k in data.labels}, held_counts={k: held[k] for k in data.labels},
                      majority_label=label, majority=n / len(data.val), held_texts=tuple(data.val_texts)).items())


def pooling_md(config, kind: str, spec: FinetuneSpec) -> str:
    """What the head reads when it is not the family's own vector: said under the form, live."""
    if kind != "sequence" or spec.pooling != "last4":
        return ""
    n, H = layers_pooled(config, "last4"), config.hidden_size
    return (f" The head reads the [CLS] vector of the last {n} layers side by side: {n} × {H} = {n * H:,} "
            f"numbers instead of {H:,}, so the lower layers' view of the sentence reaches it directly. (BERT's "
            f"paper joined the last four layers for every token, not for [CLS]: frozen, they found CoNLL-2003 "
            f"names at 96.1 F1 against 96.4 fine-tuned. For a sentence, bench/FINETUNE.md has the mean of the "
            f"tokens ahead of this on the shipped model.)")


def form_spec(**form) -> FinetuneSpec:
    """The form (fields by name, as the API sends them; `model` the picker's choice) as a FinetuneSpec;
    an uploaded file is staged privately and read once, so a bad one is said here rather than in a log."""
    lim = limits()
    choice = form.get("model")
    spec = spec_from(**form).replace(
        threads=lim.job_threads, model="default" if choice in (None, "", models.DEFAULT) else str(models.resolve(choice)))
    if spec.epochs > lim.max_epochs:
        raise ValueError(f"{spec.epochs} epochs is over this server's cap of {lim.max_epochs} (BERTLAB_MAX_EPOCHS)")
    config = BertConfig.from_json_file(resolve_folder(None if spec.model == "default" else spec.model) / "config.json")
    if (n := count_params(config)) > lim.max_params:
        raise ValueError(f"this model has {n:,} parameters; this server fine-tunes at most {lim.max_params:,} "
                         f"(BERTLAB_MAX_PARAMS)")
    task = form.get("task") or "sentiment"
    t = task_key(task)
    if t is None:
        raise ValueError(f"unknown task {str(task)[:80]!r}: choose one of {', '.join(TASKS.values())}")
    if t.startswith("upload"):
        traffic.check_owner(form.get("upload"))  # another visitor's upload is not this page's to use
        src = check_upload(form.get("upload"), "labelled file")
        spec = spec.replace(task=str(jobs_ui.stage_upload(src)), problem="qa" if t == "upload-qa" else spec.problem)
        try:
            tok = SubwordTokenizer.from_pretrained(resolve_folder(None if spec.model == "default" else spec.model))
            with jobs_ui.upload_named(src, spec.task):  # its columns and labels, said now; on a sample of
                # rows: the whole file is the job's to encode (a 45 MB CSV took the web server to 4.6 GB)
                load_task(spec.task, tok, spec.max_len, **task_options(spec), max_examples=CHECK_ROWS)
        except BaseException:
            jobs_ui.discard_staged(spec)
            raise
        return spec
    if t in EXAMPLES:  # the example's own settings, where the form left them at their defaults
        return example_task(t, spec)
    return spec.replace(task=t)


CHECK_ROWS = 2000  # rows (questions, for QA) of an upload the form encodes to check it


def task_options(spec: FinetuneSpec) -> dict:
    """load_task's keywords from a spec: the columns, and the pair column and problem where given."""
    kw = dict(text_column=spec.text_column, label_column=spec.label_column)
    if spec.pair_column:
        kw["pair_column"] = spec.pair_column
    if spec.problem != "auto":
        kw["problem"] = spec.problem
    return kw
