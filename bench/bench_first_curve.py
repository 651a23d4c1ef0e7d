"""How long until a student's first pre-training run draws something? (issue 31, item 10: the shortest
recipe should show a curve within 30 s on a busy machine; before the warm cache, 53 s went on preparing
the data, the first point came at 55 s and all panels at 66 s, at load 2-4.)

    python bench/bench_first_curve.py [--load 2] [--repeats 3] [--cold]

Starts `python app.py` on a free port with its own empty data cache, and `--load` busy processes (a
loop each, at normal priority: the class's other work). Unless --cold, waits until the server has
prepared the default recipe's data in the background (BERTLAB_WARM_CACHE), as it does once after a
start. Then, --repeats times, starts the Pre-train form's first recipe through /pretrain_start and
times, from the call: the first training row in metrics.jsonl (the loss chart's first point) and
the first evaluation row (the panels that need the held-out set). Medians are printed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_class as bc  # noqa: E402  (its serving and client)


def busy() -> None:
    while True:
        pass


def rows(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def one_run(url: str, runs: Path, name: str, limit_s: float = 300) -> tuple[float | None, float | None]:
    from bertlab.app.ui.training import pretrain_tab
    c = bc.client(url)
    values = pretrain_tab.recipe_values(next(iter(pretrain_tab.RECIPES)))
    t0 = time.perf_counter()
    c.predict(owner=name, name=name, upload=None, hub_name="", **values, api_name="/pretrain_start")
    first = evaluated = None
    while time.perf_counter() - t0 < limit_s and evaluated is None:
        got = rows(runs / name / "metrics.jsonl")
        if first is None and any(r.get("split") == "train" for r in got):
            first = time.perf_counter() - t0
        if any(r.get("split") == "eval" for r in got):
            evaluated = time.perf_counter() - t0
        time.sleep(0.2)
    c.predict(owner=name, name=name, api_name="/pretrain_stop")
    for _ in range(120):  # the next run starts on a machine this one has left
        if json.loads((runs / name / "status.json").read_text()).get("state") not in ("running", "starting"):
            break
        time.sleep(0.5)
    return first, evaluated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the server (2 cores: load ~4)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="start at once, before the data are prepared")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-first-"))
    os.environ.update({"BERTLAB_CACHE": str(tmp / "cache"), "BERTLAB_WARM_CACHE": "1"})
    hogs = [mp.Process(target=busy, daemon=True) for _ in range(a.load)]
    for h in hogs:
        h.start()
    try:
        with bc.serving(tmp) as (url, _):
            if not a.cold:
                end = time.time() + 600
                while not list((tmp / "cache").rglob("examples.pt")) and time.time() < end:
                    time.sleep(1)
            got = [one_run(url, tmp / "runs", f"first-{i}") for i in range(a.repeats)]
    finally:
        for h in hogs:
            h.terminate()
    print(f"bertlab first curve · {bc.cpu()} · {a.load} busy processes · "
          f"{'cold cache' if a.cold else 'data prepared in the background first'}")
    for i, (f, e) in enumerate(got):
        print(f"  run {i + 1}: first point {f if f is None else round(f, 1)} s, first evaluation "
              f"{e if e is None else round(e, 1)} s")
    firsts = [f for f, _ in got if f is not None]
    evals = [e for _, e in got if e is not None]
    if firsts:
        print(f"median: first point {statistics.median(firsts):.1f} s"
              + (f", first evaluation {statistics.median(evals):.1f} s" if evals else ""))


if __name__ == "__main__":
    main()
