"""Comparing fine-tuning methods: each method x seed trained on the same data, split and seeds, one
after another, into one table: trainable parameters, the task's metrics (mean ± spread over seeds),
wall time, peak memory and the size of what is saved.

Each run is a normal fine-tune run folder, trained in a spawned child process, so its peak memory is
its own: the child's peak RSS above its RSS just before the run (torch and bertlab already imported),
that is the model, the data, the optimizer's state and the activations. Before the first run, each
method trains a few timed steps (the run's own code, in one child): steps x time a step, plus the
loading and evaluating that trial measured, is the ETA, corrected as real runs finish.

A comparison is a folder: spec.json (kind "compare": a fine-tune spec with two more keys, `methods` and
`seeds`; the job manager runs it as one job, listed with the fine-tune runs), <method>-seed<N>/ (the runs), parts/<method>-seed<N>.json
(each ended run's measurements: finished ones are reused, so a stopped comparison resumes after them),
trials.json, results.json and table.md.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import statistics
import time
from dataclasses import fields
from pathlib import Path

import torch

from . import runs
from .compare_child import run_child, trial_child
from .compare_report import BLURB, minutes, results, run_headline, table_md
from .specs import CompareSpec, FinetuneSpec

METHODS = FinetuneSpec.METHODS
TRIAL_STEPS = 6  # timed steps per method before the comparison (the first is left out: warm-up)
PARTS, TRIALS, RESULTS, TABLE = "parts", "trials.json", "results.json", "table.md"
# a run's settings that may differ from a finished run's and still reuse it
REUSE_IGNORES = ("threads", "log_every", "device", "bf16")


def compare_spec(base: FinetuneSpec, methods, seeds: int) -> CompareSpec:
    """The comparison of `methods` on `base`'s settings; `base.lr` is kept only if it differs from its
    own method's default (else every method gets its own default)."""
    d = {f.name: getattr(base, f.name) for f in fields(FinetuneSpec)}
    if d["lr"] == FinetuneSpec.DEFAULT_LR[base.method]:
        d["lr"] = None
    return CompareSpec(**d, methods=tuple(methods), seeds=seeds)


def spec_of(folder: str | os.PathLike) -> CompareSpec | None:
    """The comparison a folder holds, or None when it is not one."""
    d = runs.Run(folder).spec_dict()
    return CompareSpec.from_dict(d) if d and d.get("kind") == CompareSpec.KIND else None


def run_name(method: str, seed: int) -> str:
    return f"{method}-seed{seed}"


def estimate_run_s(trial: dict, epochs: int, spawn_s: float, setup_s: float) -> float:
    """One run's seconds from its method's trial: starting a process and loading (as the first trial
    did, before anything was cached), the steps, and an evaluation and a checkpoint per epoch."""
    return spawn_s + setup_s + trial["total_steps"] * trial["step_s"] + epochs * trial["end_s"]


# ---- the comparison -----------------------------------------------------------------------------------

class _Stop:
    """Set when the caller's event is, or when a STOP file lands in the comparison's folder (the job
    manager's Stop): each run's own trainer watches only its own folder."""

    def __init__(self, folder: Path, event=None):
        self.folder, self.event = folder, event

    def is_set(self) -> bool:
        return bool(self.event is not None and self.event.is_set()) or runs.stop_requested(self.folder)


def _same(a: dict, b: dict) -> bool:
    drop = set(REUSE_IGNORES) | {"kind"}
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def compare(out_dir, methods, seeds: int, base_spec: FinetuneSpec, log=print, stop_event=None, callbacks=(),
            trial_steps: int = TRIAL_STEPS) -> dict:
    """Fine-tune each of `methods` with `seeds` seeds (base_spec.seed, +1, ...) on base_spec's task and
    settings, into run folders under `out_dir`, one after another; returns {"state", "rows", ...} as
    results.json holds. Finished runs of the same settings are reused. Callbacks get status rows
    {"event": "status", "message", "eta_s", "done", "total"}, progress rows of the run in progress and
    {"event": "run", **part} as each run ends."""
    spec = base_spec if isinstance(base_spec, CompareSpec) and tuple(methods) == base_spec.methods and \
        seeds == base_spec.seeds else compare_spec(base_spec, methods, seeds)
    return run_compare(out_dir, spec, log=log, stop_event=stop_event, callbacks=callbacks, trial_steps=trial_steps)


def run_compare(out_dir, spec: CompareSpec, log=print, stop_event=None, callbacks=(),
                trial_steps: int = TRIAL_STEPS) -> dict:
    out = Path(out_dir)
    if (old := runs.Run(out).spec_dict()) is not None and old.get("kind") != CompareSpec.KIND:
        raise ValueError(f"{out.name} holds a {old.get('kind', 'training')} run, not a comparison: pick another folder")
    out.mkdir(parents=True, exist_ok=True)
    runs.clear_stop(out)  # a Stop asked of an earlier sitting is spent
    stop = _Stop(out, stop_event)
    runs.Run(out).write_spec(spec)
    threads = spec.threads or torch.get_num_threads()
    todo = spec.runs()
    t0 = time.time()
    ctx = mp.get_context("spawn")
    child_stop = ctx.Event()
    state = {"done": 0, "eta_s": None, "estimate_s": None, "message": ""}

    def say(text: str, eta_s: float | None = None, quiet: bool = False) -> None:
        state["message"] = text
        runs.write_status(out, state="running", message=text, pid=os.getpid(), started=t0, step=state["done"],
                          total_steps=len(todo), elapsed=round(time.time() - t0, 1), remaining_s=eta_s,
                          estimate_s=state["estimate_s"])
        if not quiet:
            log(text)
        for cb in callbacks:
            cb({"event": "status", "state": "running", "message": text, "eta_s": eta_s, "done": state["done"],
                "total": len(todo)})

    parts: dict[tuple[str, int], dict] = {}
    before = 0.0
    try:
        for r, p in read_parts(out, spec).items():  # finished runs of these very settings are kept
            if p.get("state") == "finished":
                parts[r] = {**p, "reused": True}
        state["done"] = len(parts)
        if parts:
            log(f"reusing {len(parts)} finished run{'s' if len(parts) > 1 else ''} of these settings")
        est = _estimates(out, spec, todo, parts, threads, trial_steps, stop, child_stop, say, ctx)
        state["estimate_s"] = sum(est.get(r, 0.0) for r in todo if r not in parts)
        before = time.time() - t0 + sum(p.get("wall_s", 0.0) for p in parts.values())  # trials, earlier sittings
        left = len(todo) - len(parts)
        say(f"{left} run{'s' if left > 1 else ''} to train ({len(spec.methods)} methods x {spec.seeds} seed"
            f"{'s' if spec.seeds > 1 else ''}): about {minutes(state['estimate_s'])} in all" if left else
            f"all {len(todo)} runs are done already")
        for i, (m, s) in enumerate(todo, 1):
            if (m, s) in parts:
                continue
            if stop.is_set():
                raise InterruptedError(f"stopped before {m} (seed {s})")
            parts[(m, s)] = _train_one(out, spec, m, s, i, todo, parts, est, threads, stop, child_stop, say, ctx,
                                       callbacks)
            state["done"] += 1
            p = parts[(m, s)]
            for cb in callbacks:
                cb({"event": "run", **p})
            left = _remaining(todo, parts, est)
            head = run_headline(p)
            say(f"{m} seed {s}: " + (f"{head}, {p['seconds']:.0f} s, peak {p['peak_mb']:.0f} MB" if
                                     p["state"] == "finished" else f"failed: {p.get('message', '')}")
                + (f"; about {minutes(left)} left" if left else ""), left)
    except InterruptedError as e:
        runs.write_status(out, state="stopped", message=f"{e}: run it again (or resume) to go on", pid=os.getpid(),
                          remaining_s=None)
        runs.clear_stop(out)
        return {"state": "stopped", "message": str(e)}
    except BaseException as e:
        runs.write_status(out, state="failed", message=f"{type(e).__name__}: {e}", pid=os.getpid(), remaining_s=None)
        raise
    finally:
        shutil.rmtree(out / "trials", ignore_errors=True)
    earlier = sum(p.get("wall_s", 0.0) for p in parts.values() if p.get("reused"))
    res = results(spec, parts, minutes_total=round((time.time() - t0 + earlier) / 60, 1), threads=threads,
                  estimate_minutes=round((before + state["estimate_s"]) / 60, 1))
    runs.write_json_atomic(out / RESULTS, res)
    (out / TABLE).write_text(table_md(res), encoding="utf-8")
    failed = [r["method"] for r in res["rows"] if r["failed"]]
    runs.write_status(out, state="finished", pid=os.getpid(), step=len(todo), total_steps=len(todo), remaining_s=0,
                      message=f"finished in {res['minutes_total']:g} min" + (f"; failed: {', '.join(failed)}"
                                                                            if failed else ""))
    return res


def _estimates(out, spec, todo, parts, threads, trial_steps, stop, child_stop, say, ctx) -> dict:
    """Seconds per run to come: timed trials of the methods not yet measured (kept in trials.json),
    else the wall time a finished run of that method took."""
    path = out / TRIALS
    trials = runs.read_json(path) or {}
    key = {k: v for k, v in spec.base().to_dict().items() if k not in ("method", "lr", "gradual_unfreeze")}
    if not _same(trials.get("spec", {}), key):  # measured on other data or another model: time them again
        trials = {}
    need = [m for m in spec.methods if m not in trials and any(r[0] == m and r not in parts for r in todo)]
    if need and trial_steps > 0:
        say(f"timing {len(need)} method{'s' if len(need) > 1 else ''} ({', '.join(need)}): "
            f"{trial_steps} steps each, for the ETA ...")
        tmp = out / "trials.partial.json"
        tmp.unlink(missing_ok=True)
        specs = {m: spec.run_spec(m, spec.seed).to_dict() for m in need}
        t = time.time()
        p = ctx.Process(target=trial_child, args=(str(out), specs, threads, trial_steps, child_stop, str(tmp)),
                        daemon=True)
        p.start()
        while p.is_alive():
            if stop.is_set():
                child_stop.set()
            p.join(0.3)
        if child_stop.is_set():
            raise InterruptedError("stopped while timing the methods")
        got = runs.read_json(tmp) or {}
        tmp.unlink(missing_ok=True)
        if "spawned_at" in got:
            trials["spawn_s"] = max(0.0, got.pop("spawned_at") - t)
        first = next((got[m] for m in need if "setup_s" in got.get(m, {})), None)
        if first is not None:
            trials["first_setup_s"] = first["setup_s"]  # the data read before anything was cached
        trials.update({m: v for m, v in got.items() if "step_s" in v})
        trials["spec"] = key
        runs.write_json_atomic(path, trials)
    est = {}
    spawn, setup = trials.get("spawn_s", 3.0), trials.get("first_setup_s", 5.0)
    walls = [p["seconds"] + spawn for p in parts.values() if p.get("state") == "finished"]
    for m, s in todo:
        if m in trials and "step_s" in trials[m]:
            est[(m, s)] = estimate_run_s(trials[m], spec.epochs, spawn, setup)
        else:
            own = [p["seconds"] + spawn for (pm, _), p in parts.items() if pm == m and p.get("state") == "finished"]
            est[(m, s)] = statistics.mean(own or walls or [60.0])
    return est


def _remaining(todo, parts, est, current=None, progress: float = 0.0, elapsed: float = 0.0) -> float:
    """Seconds left: the estimates of the runs to come, scaled by how the finished runs compared with
    their own estimates; the run in progress by its share of steps done."""
    done = [(p.get("wall_s", p["seconds"]), est[r]) for r, p in parts.items() if r in est
            and p.get("state") == "finished" and "seconds" in p and not p.get("reused")]
    k = sum(a for a, _ in done) / max(sum(b for _, b in done), 1e-9) if done else 1.0
    left = sum(est[r] * k for r in todo if r not in parts and r != current)
    if current is not None:
        whole = est[current] * k
        left += max(whole * (1 - progress), whole - elapsed, 0.0) if progress > 0 else max(whole - elapsed, 0.0)
    return left


def _train_one(out, spec, m, s, i, todo, parts, est, threads, stop, child_stop, say, ctx, callbacks) -> dict:
    name = run_name(m, s)
    folder, part = out / name, out / PARTS / f"{name}.json"
    shutil.rmtree(folder, ignore_errors=True)  # a run cut short starts over: its time and memory are measured whole
    part.unlink(missing_ok=True)
    (out / f"{name}.log").unlink(missing_ok=True)
    part.parent.mkdir(parents=True, exist_ok=True)
    left = _remaining(todo, parts, est, (m, s))
    say(f"[{i}/{len(todo)}] {m} seed {s}: {BLURB.get(m, m)} ...; about {minutes(left)} left in all", left)
    t = time.time()
    p = ctx.Process(target=run_child, args=(str(folder), spec.run_spec(m, s).to_dict(), threads, child_stop,
                                             str(part)), daemon=True)
    p.start()
    last = 0.0
    while p.is_alive():
        if stop.is_set():
            child_stop.set()
        p.join(0.5)
        if time.time() - last >= 2.0 and p.is_alive():
            last = time.time()
            st = runs.read_status(folder) if (folder / runs.STATUS).exists() else {}
            step, total = int(st.get("step") or 0), st.get("total_steps")
            left = _remaining(todo, parts, est, (m, s), step / total if total else 0.0, time.time() - t)
            for cb in callbacks:
                cb({"event": "progress", "method": m, "seed": s, "step": step, "total_steps": total,
                    "eta_s": left})
            say(f"[{i}/{len(todo)}] {m} seed {s}: " + (f"step {step} of {total}" if total else "loading")
                + f"; about {minutes(left)} left in all", left, quiet=True)
    if child_stop.is_set():
        raise InterruptedError(f"stopped while training {m} (seed {s})")
    res = runs.read_json(part)
    if res is None:
        res = {"method": m, "seed": s, "state": "failed",
               "message": f"its process exited with code {p.exitcode}" + (" (out of memory?)" if p.exitcode in (-9, 137)
                                                                         else "")}
        runs.write_json_atomic(part, res)
    res["wall_s"] = round(time.time() - t, 1)  # with starting the process
    runs.write_json_atomic(part, res)
    if res.get("state") == "finished":  # a finished run is reused, never resumed: its checkpoint only takes disk
        shutil.rmtree(folder / runs.CHECKPOINTS, ignore_errors=True)
    return res


def read_parts(out, spec: CompareSpec) -> dict:
    """The ended runs of this comparison found in its folder, as (method, seed) -> part."""
    found = {}
    for m, s in spec.runs():
        p = runs.read_json(Path(out) / PARTS / f"{run_name(m, s)}.json")
        if p and _same(p.get("spec", {}), spec.run_spec(m, s).to_dict()):
            found[(m, s)] = p
    return found


def current_results(out) -> dict | None:
    """results.json of a finished comparison, else its table so far (state "running"); None if `out`
    holds no comparison."""
    spec = spec_of(out)
    if spec is None:
        return None
    res = runs.read_json(Path(out) / RESULTS)
    if res and [r["method"] for r in res.get("rows", [])] == list(spec.methods) and res.get("seeds") == spec.seeds:
        return res
    return {**results(spec, read_parts(out, spec)), "state": "running"}


