"""A term's worth of strangers in a quarter of an hour: does a classroom server stay bounded?
(issue 30: 2,000 fresh sessions, then 30 students thinking ~1 s for 10 minutes beside a training job,
while 10 visitors upload corpora, start runs on them and stop them; goals: the web server's RSS
≤ 1.5 GB at the end and flat over the last 5 minutes, the runs folder, the data cache and the uploads
within their budgets, another visitor's finished run never evicted, fill-mask p95 ≤ 500 ms.)

    python bench/soak.py [--sessions 2000] [--students 30] [--minutes 10] [--uploaders 10] [--json]

Everything runs on 127.0.0.1: `python app.py` in classroom mode (BERTLAB_CLASSROOM=1) with small
budgets so that they are reached (runs 300 MB, data cache 200 MB, uploads 200 MB), its runs, caches
and uploads in a temporary folder. First a visitor ("keeper") pre-trains a tiny model to the end:
their finished run must survive. The students are bench_class.py's browser-like clients; uploaders
use gradio_client as a page would (upload a 1 MB corpus, start a tiny pre-training on it, stop it
10 s later, think, again). The server's RSS (its own process: the probe worker and the jobs are
bounded by their own caps) is sampled every 10 s.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_class as bc  # noqa: E402  (its serving, students and training start)

from bertlab.app.quota import folder_bytes  # noqa: E402

RSS_GOAL_MB, FLAT_MB, P95_GOAL_MS = 1500, 100, 500
BUDGETS = {"BERTLAB_DISK_BUDGET_MB": "300", "BERTLAB_CACHE_MB": "200", "BERTLAB_UPLOADS_MB": "200"}


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS")).split()[1]) / 1024


def folder_mb(folder: Path) -> float:
    return folder_bytes(folder) / 1e6 if folder.exists() else 0.0


def fresh_sessions(url, n: int) -> tuple[int, int]:
    """n visitors who each open the page and tokenize once: (answered, refused or failed)."""
    b = bc.Browser(url, bc.parameter_names(url))
    ok = bad = 0
    for _ in range(n):
        b.session = uuid.uuid4().hex
        try:
            b.predict("/tokenize", text="a fresh visitor .", pair="")
            ok += 1
        except Exception:  # noqa: BLE001 -- counted
            bad += 1
    return ok, bad


def keeper_run(url, runs: Path) -> str:
    """A visitor's tiny pre-training, trained to its end: the run that must survive the term."""
    from bertlab.config import PRESETS
    from bertlab.train.runs import read_status
    L, H, _ = PRESETS["tiny"]
    c = bc.client(url)
    c.predict(owner="keeper", name="keeper-run", upload=None, hub_name="", preset="tiny", layers=L, hidden=H,
              heads=2, intermediate=4 * H, max_len=32, batch_size=16, steps=20, api_name="/pretrain_start")
    for _ in range(600):
        if read_status(runs / "keeper-run")["state"] in ("finished", "failed", "stopped"):
            break
        time.sleep(1)
    return read_status(runs / "keeper-run")["state"]


def uploader(url, i: int, stop: threading.Event, tmp: Path, rec: list) -> None:
    from gradio_client import handle_file
    r = random.Random(i)
    words = ("the film was long and the acting was good but the story was thin and i liked it " * 3).split()
    corpus = tmp / f"corpus-{i}.txt"
    corpus.write_text("\n".join(" ".join(r.choice(words) for _ in range(12)) for _ in range(14_000)))
    try:
        c = bc.client(url)
    except Exception as e:  # noqa: BLE001
        return rec.append(("connect", str(e)[:120]))
    owner, n = f"uploader-{i}", 0
    while not stop.is_set():
        name = f"up-{i}-{n}"
        n += 1
        try:
            out = c.predict(owner=owner, name=name, corpus="upload", upload=handle_file(str(corpus)), hub_name="",
                            preset="tiny", steps=200, api_name="/pretrain_start")
            rec.append(("start", str(out[1])[:80]))
        except Exception as e:  # noqa: BLE001 -- a refusal (a cap) is an answer too
            rec.append(("start refused", str(e)[:120]))
        stop.wait(10)
        try:
            c.predict(owner=owner, name=name, api_name="/pretrain_stop")
            rec.append(("stop", ""))
        except Exception as e:  # noqa: BLE001
            rec.append(("stop refused", str(e)[:120]))
        stop.wait(r.uniform(20, 40))


def soak(a, tmp: Path) -> dict:
    runs, cache, uploads = tmp / "runs", tmp / "cache", tmp / "uploads"
    os.environ.update({"BERTLAB_CLASSROOM": "1", "BERTLAB_CACHE": str(cache), "GRADIO_TEMP_DIR": str(uploads),
                       "BERTLAB_MAX_STEPS": "3000", **BUDGETS})
    report = {"cpu": bc.cpu(), "sessions": a.sessions, "students": a.students, "minutes": a.minutes,
              "uploaders": a.uploaders, "budgets_mb": {k: float(v) for k, v in BUDGETS.items()}}
    with bc.serving(tmp) as (url, pid):
        report["rss_start_mb"] = round(rss_mb(pid))
        report["keeper"] = keeper_run(url, runs)
        t = time.time()
        report["fresh_sessions"] = dict(zip(("answered", "failed"), fresh_sessions(url, a.sessions)))
        report["fresh_sessions"]["seconds"] = round(time.time() - t)
        report["rss_after_sessions_mb"] = round(rss_mb(pid))
        c = bc.client(url)
        report["job"] = bc.start_training(c, runs, steps=3000)
        stop, rec, up = threading.Event(), [], []
        ups = [threading.Thread(target=uploader, args=(url, i, stop, tmp, up), daemon=True) for i in range(a.uploaders)]
        for th in ups:
            th.start()
        samples, done = [], threading.Event()

        def sample():
            t0 = time.time()
            while not done.is_set():
                samples.append((round(time.time() - t0), round(rss_mb(pid)), round(folder_mb(runs)),
                                round(folder_mb(cache)), round(folder_mb(uploads))))
                done.wait(10)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            rec_load, dt = bc.load(url, a.students, a.minutes * 60, False, 1.0)
        finally:
            stop.set()
            done.set()
            bc.stop_training(c, runs)
        for th in ups:
            th.join(timeout=60)
        sampler.join(timeout=30)
        report["rss_end_mb"] = round(rss_mb(pid))
    fm = [t for n, t, e in rec_load if n == "/fill_mask" and t is not None]
    errs = [e for _, _, e in rec_load if e]
    half = [s for s in samples if s[0] >= samples[-1][0] - 300] if samples else []
    report.update(
        fill_mask={"calls": len(fm), "p50_ms": bc.ms(fm, 50), "p95_ms": bc.ms(fm, 95)} if fm else {},
        student_errors={"count": len(errs), "first": errs[0] if errs else None},
        uploads={k: sum(1 for w, _ in up if w == k) for k in ("start", "start refused", "stop", "stop refused")},
        samples="t_s, rss_mb, runs_mb, cache_mb, uploads_mb: " + "; ".join(",".join(map(str, s)) for s in samples),
        last_5_min_rss_mb=[min(s[1] for s in half), max(s[1] for s in half)] if half else None,
        max_mb={"runs": max(s[2] for s in samples), "cache": max(s[3] for s in samples),
                "uploads": max(s[4] for s in samples)} if samples else {},
        keeper_kept=(runs / "keeper-run" / "spec.json").exists(),
    )
    lo, hi = report["last_5_min_rss_mb"] or (0, 0)
    p95 = report["fill_mask"].get("p95_ms", float("inf"))
    report["goals"] = {
        f"server RSS ≤ {RSS_GOAL_MB} MB at the end": report["rss_end_mb"] <= RSS_GOAL_MB,
        f"RSS flat over the last 5 minutes (within {FLAT_MB} MB)": hi - lo <= FLAT_MB,
        "runs folder within its budget (+ the live job)": report["max_mb"].get("runs", 0) <= 300 + 100,
        "data cache within its budget": report["max_mb"].get("cache", 0) <= 200,
        "uploads within their budget": report["max_mb"].get("uploads", 0) <= 200,
        "the keeper's finished run kept": report["keeper_kept"],
        f"fill-mask p95 ≤ {P95_GOAL_MS} ms": p95 <= P95_GOAL_MS,
    }
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--uploaders", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = soak(a, Path(tempfile.mkdtemp(prefix="bench-soak-")))
    if a.json:
        print(json.dumps(r, indent=1, ensure_ascii=False))
        return
    print(f"bertlab soak · {r['cpu']} · {a.sessions} fresh sessions, then {a.students} students for "
          f"{a.minutes:g} min beside a training job, {a.uploaders} uploaders")
    for k in ("keeper", "fresh_sessions", "job", "rss_start_mb", "rss_after_sessions_mb", "rss_end_mb",
              "last_5_min_rss_mb", "max_mb", "fill_mask", "student_errors", "uploads", "samples"):
        print(f"{k}: {r[k]}")
    for goal, ok in r["goals"].items():
        print(f"  {'pass' if ok else 'FAIL'}  {goal}")


if __name__ == "__main__":
    main()
