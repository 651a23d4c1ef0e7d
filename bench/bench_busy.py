"""Does the explorer stay responsive while a pre-training job runs? (issue goal: fill-mask p95 ≤ 250 ms
for a 32-token input with a job running.)

    python bench/bench_busy.py [--calls 100] [--job-threads 1]

Starts `python app.py`, measures /fill_mask round trips through gradio_client (what a student's
browser waits for: queue, handler and transport) with no job, then again while the job manager
trains the pre-train tab's "quick demo" recipe in the background (same flags the tab passes, at
the server's default priority and thread count unless --job-threads is given).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
TEXT = ("the acting was [MASK] , but the story of the old man and his young son kept me watching "
        "until the very end of this long and quiet film .")


def latencies(client, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        client.predict(text=TEXT, api_name="/fill_mask")
        out.append(time.perf_counter() - t)
    return out


def summary(ts: list[float]) -> str:
    q = statistics.quantiles(ts, n=20)
    return f"p50 {statistics.median(ts) * 1e3:.0f} ms, p95 {q[18] * 1e3:.0f} ms, max {max(ts) * 1e3:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--job-threads", type=int, default=None)
    a = ap.parse_args()
    from bench_app import launch_app
    from gradio_client import Client
    runs = Path(tempfile.mkdtemp(prefix="bench-busy-"))
    env = {"BERTLAB_RUNS_DIR": str(runs), "GRADIO_ANALYTICS_ENABLED": "False"}
    if a.job_threads:
        env["BERTLAB_JOB_THREADS"] = str(a.job_threads)
    os.environ.update(env)  # the job manager below reads the same settings
    server, url, _ = launch_app(env)
    try:
        client = Client(url, verbose=False, analytics_enabled=False, download_files=False)
        latencies(client, 5)
        idle = latencies(client, a.calls)
        print(f"no job:      {summary(idle)}")
        from bertlab.app.jobs import JobManager
        from bertlab.app.ui.training import pretrain_tab
        recipe = next(iter(pretrain_tab.RECIPES))
        spec = pretrain_tab.form_spec(**{**pretrain_tab.recipe_values(recipe), "steps": 100_000 // 50,
                                         "max_docs": None, "bf16": False})  # every document: a long first phase
        mgr = JobManager(runs)
        mgr.start("busy", spec)
        while mgr.status("busy")["state"] != "running":  # past data preparation: the trainer is stepping
            time.sleep(1)
        time.sleep(5)
        busy = latencies(client, a.calls)
        st = mgr.status("busy")
        print(f"job running: {summary(busy)}   (job {recipe!r}, threads {spec.threads}, "
              f"at step {st['step']})")
        mgr.kill("busy", timeout=5)
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
