"""The Fine-tune tab's comparison of methods: one background job (train/compare.py) that trains each
picked method on the same data and seeds, one after another; its status with the ETA, the table so
far, accuracy against the share of parameters trained, and the learning curves overlaid."""
from __future__ import annotations

from dataclasses import fields

import gradio as gr

from ....train.compare import PARTS, current_results, run_name, spec_of
from ....train.compare_report import headline, metric_keys, table_cells
from ....train.specs import CompareSpec, FinetuneSpec
from ...jobs import check_name
from ..shared import common
from . import jobs_ui
from .finetune_form import LABEL_TO_METHOD, METHOD_LABELS, form_spec
from .train_charts import compare_curves, compare_figure, metrics, read_json

SEEDS = (1, 2, 3)  # a web comparison: at most three seeds (24 runs of the eight methods)


def methods_of(picked) -> tuple[str, ...]:
    """Method names from the form's checkboxes (labels, or names from an API caller), in the usual order."""
    names = set()
    for p in picked or []:
        m = p if p in METHOD_LABELS else LABEL_TO_METHOD.get(p)
        if m is None:
            raise ValueError(f"unknown method {p!r:.60}: choose from {', '.join(METHOD_LABELS)}")
        names.add(m)
    if len(names) < 2:
        raise ValueError("pick at least two methods to compare")
    return tuple(m for m in METHOD_LABELS if m in names)


def compare_spec(form: dict, picked, seeds) -> CompareSpec:
    """The form (fields by name) as a comparison of the picked methods; the form's method is not used,
    and its learning rate only when set (else each method its own default)."""
    if isinstance(seeds, bool) or not isinstance(seeds, (int, float)) or seeds not in SEEDS:
        raise ValueError(f"seeds must be one of {', '.join(map(str, SEEDS))}, got {seeds!r:.40}")
    methods = methods_of(picked)
    # as full fine-tuning: gradual unfreezing (full's option) is then checked, and kept for full only
    base = form_spec(**{**form, "method": "full"})
    d = {f.name: getattr(base, f.name) for f in fields(FinetuneSpec)}
    if not form.get("lr"):  # the learning rate box: 0 = each method's default
        d["lr"] = None
    return CompareSpec(**d, methods=methods, seeds=int(seeds))


def start(owner, name, form: dict, picked, seeds) -> str:
    """Launch (or queue) the comparison as one job of this visitor; a stopped comparison of the same
    name goes on, reusing its finished runs."""
    name = check_name((name or "").strip() or jobs_ui.default_name("compare"))
    spec = compare_spec(form, picked, seeds)
    folder = jobs_ui.run_dir(name)
    again = folder.exists()
    if again and (spec_of(folder) is None or jobs_ui.is_live(jobs_ui.status(name))):
        jobs_ui.discard_staged(spec)
        raise ValueError(f"run {name} exists: pick another name for the comparison")
    try:
        job = jobs_ui.manager().start(name, spec, owner=jobs_ui.visitor(owner), resume=again)
    except BaseException:
        jobs_ui.discard_staged(spec)
        raise
    if job.notice:
        common.warn(job.notice)
    return name


def is_compare(name) -> bool:
    return bool(name) and jobs_ui.valid(name) and spec_of(jobs_ui.run_dir(name)) is not None


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def status_of(name) -> dict | None:
    """The job's status as a comparison reads: runs instead of steps, and the comparison's own ETA
    (its timed trials, corrected as runs end) rather than the job manager's steps x time a step."""
    st = jobs_ui.status(name)
    if not st:
        return st
    st = dict(st)
    left, est = st.get("remaining_s"), st.get("estimate_s")
    done, total = st.get("step") or 0, st.get("total_steps")
    st["total_steps"], st["eta_s"] = None, None  # the message says the comparison's own ETA
    if total and st.get("state") in ("running", "stopped", "failed"):
        head = f"{done} of {total} runs done"
        if st["state"] == "running" and done < total:
            head = f"before run 1 of {total}" if "timing" in (st.get("message") or "") else \
                f"run {done + 1} of {total}"
        st["message"] = f"{head} · " + (st.get("message") or "") + (
            f" (estimated {_duration(est)} before the first run)" if est and st["state"] == "running" else "")
    if st.get("state") == "running" and left is not None and st.get("elapsed"):
        st["progress"] = st["elapsed"] / max(st["elapsed"] + left, 1e-9)
    return st


def view(name, owner):
    """(status, learning curves, the table's value, the chart of scores, confusion source) of a comparison."""
    folder = jobs_ui.run_dir(name)
    spec, st = spec_of(folder), status_of(name)
    res = current_results(folder) or {"rows": [], "seeds": 1}
    key, label = headline(res)
    curves = compare_curves({(m, s): metrics(folder / run_name(m, s)) for m, s in spec.runs()
                             if (folder / run_name(m, s)).is_dir()}, key, label)
    # the method's name only: its blurb pushed the score off a phone's screen (the method note explains it)
    headers, rows = table_cells(res, blurbs=False)
    chart = compare_figure(res["rows"], key, label)
    best = max((r for r in res["rows"] if r.get(f"{key}_mean") is not None),
               key=lambda r: r[f"{key}_mean"], default=None)
    conf = folder / run_name(best["method"], best["seeds"][0]) if best else None
    html = jobs_ui.status_html(st, owner)
    return html, curves, gr.Dataframe(value=rows, headers=headers), chart, conf, jobs_ui.is_live(st)


def finished_runs(name) -> list[tuple[str, str]]:
    """(label, run folder name) of a comparison's runs with a saved model, for the try-it box."""
    folder = jobs_ui.run_dir(name)
    spec = spec_of(folder)
    if spec is None:
        return []
    out = []
    for m, s in spec.runs():
        if (folder / PARTS / f"{run_name(m, s)}.json").exists() and (folder / run_name(m, s) / "model").is_dir():
            out.append((f"{METHOD_LABELS.get(m, m)}" + (f" (seed {s})" if spec.seeds > 1 else ""), run_name(m, s)))
    return out


def best_run(name) -> str | None:
    """The comparison's finished run with the best headline score (the try-it box starts with it)."""
    folder, best = jobs_ui.run_dir(name), (None, float("-inf"))
    for _, r in finished_runs(name):
        part = read_json(folder / PARTS / f"{r}.json") or {}
        score = next((part[k] for k in metric_keys(part) if isinstance(part.get(k), (int, float))), None)
        if score is not None and score > best[1]:
            best = (r, score)
    return best[0]


def estimate_note(picked, seeds, epochs) -> str:
    """What a click on Compare will do, said before it starts."""
    try:
        n = len(methods_of(picked)) * int(seeds or 1)
    except (ValueError, TypeError):
        return "Pick at least two methods to compare."
    return (f"**{n} runs** ({n // int(seeds or 1)} methods × {int(seeds or 1)} seed{'s' if (seeds or 1) > 1 else ''}, "
            f"{int(epochs or 1)} epoch{'s' if (epochs or 1) > 1 else ''} each), one after another. Each method first "
            f"trains a few timed steps: the ETA follows from them, before the first run starts, and is corrected "
            f"as runs end. It is one job of yours: Stop ends it; Compare again with the same name goes on.")
