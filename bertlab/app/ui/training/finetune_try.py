"""The Fine-tune tab's try-it box: the watched run's saved model (or one run of a comparison) on the
visitor's own text, and a second text or a question where the task has one (analysis/classify.py,
as `python -m bertlab classify` says it)."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from ....analysis import classify
from ....cache import LRU
from ....train.runs import Run
from ...limits import app_device
from ..shared.common import user_error
from . import jobs_ui
from .finetune_compare import best_run, finished_runs, spec_of

_models = LRU(4)  # model folder -> (stamp of its files, model, tokenizer)
MODEL_FILES = ("config.json", "adapter_config.json")  # a full model folder, or a PEFT adapter


def model_folder(run_dir: Path) -> Path | None:
    d = run_dir / "model"
    return d if any((d / f).exists() for f in MODEL_FILES) else None


def _stamp(folder: Path) -> tuple:
    return tuple(sorted((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in folder.iterdir() if f.is_file()))


def _spec_of_run(run_dir: Path) -> dict:
    return Run(run_dir).spec_dict() or {}


def inputs_for(name):
    """(second text box, question box, comparison's run picker): shown where the watched run needs them."""
    if not jobs_ui.valid(name):
        return gr.update(visible=False), gr.update(visible=False), gr.update(visible=False, choices=[])
    d = jobs_ui.run_dir(name)
    spec = _spec_of_run(d)
    runs = finished_runs(name) if spec_of(d) is not None else []
    facts = Run(d / runs[0][1] if runs else d).facts()  # the data's own kind: a SQuAD file is QA on "auto" too
    qa = spec.get("problem") == "qa" or facts.get("kind") == "qa"
    pair = bool(spec.get("pair_column"))
    if spec_of(d) is not None:
        picker = gr.update(visible=True, choices=runs, value=best_run(name) or (runs[0][1] if runs else None))
    else:
        picker = gr.update(visible=False, choices=[], value=None)
    return gr.update(visible=pair), gr.update(visible=qa), picker


def refresh_runs(name, current):
    runs = finished_runs(name) if jobs_ui.valid(name) else []
    names = [r for _, r in runs]
    return gr.update(choices=runs, value=current if current in names else (best_run(name) or (names or [None])[0]))


def _load(folder: Path):
    """A fine-tuned model on the app's device (BERTLAB_DEVICE), cached until its folder changes."""
    stamp = _stamp(folder)

    def make():
        model, tok = classify.load(folder)
        return stamp, model.to(app_device()).eval(), tok
    hit = _models.get_or_make(str(folder), make, fresh=lambda h: h[0] == stamp)
    return hit[1], hit[2]


def try_it(name, sub, text, pair=None, question=None):
    """The prediction as the page shows it: label probabilities (a Label), a value, tags per word or
    the answer marked in the passage (HighlightedText)."""
    if not name:
        raise user_error("Pick a fine-tuned run first.")
    if not jobs_ui.valid(name):
        raise user_error(f"bad run name {name!r}")
    run = jobs_ui.run_dir(name)
    if spec_of(run) is not None:
        names = [r for _, r in finished_runs(name)]
        if not names:
            raise user_error(f"Comparison {name} has no finished run yet: its models appear as its runs end.")
        run = run / (sub if sub in names else best_run(name) or names[0])
    folder = model_folder(run)
    if folder is None:
        raise user_error(f"Run {name} has no saved model yet: it appears when the run finishes or is stopped.")
    try:
        model, tok = _load(folder)
        res = classify.predict(model, tok, text if isinstance(text, str) else "",
                               pair=pair if isinstance(pair, str) else None,
                               question=question if isinstance(question, str) else None)
    except (ValueError, TypeError) as e:
        raise user_error(e) from None
    hidden = gr.HighlightedText(visible=False)
    if res["kind"] == "token":
        return gr.Label(visible=False), gr.HighlightedText(value=[(w["word"], w["label"]) for w in res["words"]],
                                                           label="Predicted tags", visible=True)
    if res["kind"] == "qa":
        a, b = res["start"], res["end"]
        spans = [(text[:a], None), (text[a:b], f"answer {res['score']:.0%}"), (text[b:], None)]
        return gr.Label(visible=False), gr.HighlightedText(value=[s for s in spans if s[0]],
                                                           label="Answer in the passage", visible=True)
    if res["problem"] == "regression":
        return gr.Label(value=f"{res['value']:.3f}", label="Predicted value", visible=True), hidden
    return gr.Label(value=res["labels"], label="Per-label probability" if res["problem"] == "multi" else "Prediction",
                    visible=True), hidden


def again(name, sub, text, pair=None, question=None):
    """try_it when the model under the box changes (another run watched, another run of a comparison
    picked, or a comparison's first run ended): the new model's prediction, or an empty box where there
    is none. The old result, and an Error badge from an earlier try, belonged to another model."""
    empty = gr.update(value=None), gr.update(value=None)
    if not (isinstance(text, str) and text.strip()):
        return empty
    try:
        return try_it(name, sub, text, pair, question)
    except (gr.Error, OSError):  # nothing to try yet: the box says nothing rather than an old answer
        return empty
