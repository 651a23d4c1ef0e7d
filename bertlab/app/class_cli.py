"""`python -m bertlab class`: the class's pre-training runs ranked by held-out accuracy, and (--clear)
the teacher's clearing of every run started from the web page, from the server's own terminal."""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import classroom
from .jobs import JobManager


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", default=None, help="the runs folder (default: BERTLAB_RUNS_DIR, else runs)")
    p.add_argument("--clear", action="store_true",
                   help="stop and delete every run started from the web page (command-line runs stay); "
                        "needs BERTLAB_TEACHER_TOKEN set, as the web page does")
    p.add_argument("--json", action="store_true", help="print the ranking (or what was cleared) as JSON")


def cmd_class(a: argparse.Namespace) -> int:
    mgr = JobManager(a.runs or os.environ.get("BERTLAB_RUNS_DIR", "runs"))
    if a.clear:
        if not classroom.teacher_token():
            raise ValueError("clearing is off: set BERTLAB_TEACHER_TOKEN (the server's teacher token) first")
        out = classroom.clear_class(mgr)
        print(json.dumps(out) if a.json else f"removed {len(out['removed'])} runs ({out['stopped']} were training; "
              f"runs queued in a running server stay in its queue), kept {out['kept']} command-line runs"
              + "".join(f"\nnot removed: {n}: {why}" for n, why in out["failed"].items()))
        return 1 if out["failed"] else 0
    rows = classroom.class_runs(mgr, fresh=True)
    if a.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no pre-training runs here", file=sys.stderr)
        return 0
    print(f"{'#':>3}  {'student':<24} {'run':<28} {'held-out acc.':>13}  step")
    for r in rows:
        acc = "–" if r["held_out_acc"] is None else f"{r['held_out_acc']:.1%}"
        print(f"{r['rank'] or '–':>3}  {(r['student'] or '(no name)')[:24]:<24} {r['run'][:28]:<28} {acc:>13}  "
              f"{r['step']:,} ({r['state']})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command on its own (`python -m bertlab class` runs the same through bertlab's CLI)."""
    p = argparse.ArgumentParser(prog="python -m bertlab class", description=__doc__)
    add_arguments(p)
    try:
        return cmd_class(p.parse_args(argv))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
