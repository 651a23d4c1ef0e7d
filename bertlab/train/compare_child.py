"""What runs in a comparison's spawned child processes (compare.py): one fine-tuning run, measured
(wall time, peak memory above what the process held before it, bytes saved), or the timed trials
of the methods behind the ETA. Each child is a fresh process, so its peak memory is its own."""
from __future__ import annotations

import os
import resource
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

import torch

from ..methods.saving import RUN_ADAPTER
from . import runs
from .finetune import finetune
from .specs import FinetuneSpec


def rss_bytes() -> int:
    """This process's resident memory now (Linux /proc; elsewhere its peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes, Linux: KiB


def folder_bytes(path) -> int:
    p = Path(path) if path else None
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p and p.is_dir() else 0


def saved_sizes(model_dir, adapter_dir=None) -> dict:
    """What a method saves: "saved_bytes" is the folder a user keeps for the task (peft's adapter folder
    where there is one: LoRA and IA3 write it beside their merged model, <run>/adapter, prefix and prompt
    tuning as the model folder itself), "model_bytes" the model folder, "adapter_bytes" Houlsby adapters'
    own file."""
    if not model_dir:
        return {"saved_bytes": 0}
    d = Path(model_dir)
    beside = next((a for a in (adapter_dir, d.parent / RUN_ADAPTER, d.with_name(d.name + "-adapter"))
                   if a and (Path(a) / "adapter_config.json").is_file()), None)
    out = {"model_bytes": folder_bytes(d)}
    out["saved_bytes"] = folder_bytes(beside) if beside else out["model_bytes"]
    if (d / "adapters.safetensors").is_file():
        out["adapter_bytes"] = (d / "adapters.safetensors").stat().st_size
    return out


def _file_log(path: Path):
    def log(msg: str) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{msg}\n")
    return log


def run_child(folder: str, spec: dict, threads: int, stop, part: str) -> None:
    """In the spawned child: fine-tune one run, measure it, and write its part (finished or failed)."""
    torch.set_num_threads(threads)
    spec = FinetuneSpec.from_dict(spec)
    rss0, t = rss_bytes(), time.time()
    info = {"method": spec.method, "seed": spec.seed, "spec": spec.to_dict()}
    log = _file_log(Path(folder).parent / f"{Path(folder).name}.log")
    trained = {}

    def note_peak(row: dict) -> None:  # ru_maxrss only grows: at the last evaluation, training's own peak
        if row.get("event") == "eval":
            trained["peak"] = peak_rss_bytes()
    try:
        res = finetune(folder, spec, log=log, stop_event=stop, callbacks=[note_peak])
    except Exception as e:  # said in the table; the traceback goes to the run's log, not the terminal
        log(traceback.format_exc())
        runs.write_json_atomic(part, {**info, "state": "failed", "message": f"{type(e).__name__}: {e}"})
        return
    if res["state"] == "stopped":
        return
    peak = peak_rss_bytes()
    keep = {k: v for k, v in res.items() if isinstance(v, (int, float, str)) or v is None}
    out = {**keep, **info, "seconds": round(time.time() - t, 1), "peak_mb": round((peak - rss0) / 2**20, 1),
           "rss_before_mb": round(rss0 / 2**20, 1), **saved_sizes(res.get("model_dir"), res.get("adapter_dir"))}
    if "peak" in trained:  # up to the last evaluation, before the model is saved
        out["train_peak_mb"] = round((trained["peak"] - rss0) / 2**20, 1)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["gpu_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    runs.write_json_atomic(part, out)


def trial_child(out: str, specs: dict, threads: int, steps: int, stop, path: str) -> None:
    """In one spawned child: a few timed steps of each method (the run's own code, a throwaway folder).
    Writes {method: {step_s, setup_s, end_s, total_steps, ...}} to `path` as each trial ends."""
    torch.set_num_threads(threads)
    found = {"spawned_at": time.time()}
    for method, d in specs.items():
        if stop.is_set():
            break
        folder = Path(out) / "trials" / method
        shutil.rmtree(folder, ignore_errors=True)
        local, times = threading.Event(), []

        def on_row(row, times=times, local=local):
            if row.get("event") == "train":
                times.append((time.monotonic(), row["step"]))
                if row["step"] >= steps or stop.is_set():
                    local.set()
        t0 = time.monotonic()
        try:
            res = finetune(folder, FinetuneSpec.from_dict({**d, "log_every": 1}), log=lambda *_: None,
                           stop_event=local, callbacks=[on_row])
        except Exception as e:  # the real run will say it again, in full
            found[method] = {"error": f"{type(e).__name__}: {e}"}
            runs.write_json_atomic(path, found)
            continue
        t_end = time.monotonic()
        if not times:  # stopped before its first step
            break
        (a, s_a), (b, s_b) = times[0], times[-1]
        step_s = (b - a) / (s_b - s_a) if s_b > s_a else (a - t0) / 2
        found[method] = {"step_s": step_s, "setup_s": max(0.0, a - t0 - step_s),
                         "end_s": max(0.0, t_end - b - step_s),  # the step after the stop, then evaluate and save
                         "total_steps": res["total_steps"], "trial_steps": s_b}
        runs.write_json_atomic(path, found)
        shutil.rmtree(folder, ignore_errors=True)
