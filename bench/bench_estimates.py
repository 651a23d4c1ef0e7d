"""Every "about N" the app prints before a run, against that run timed here (issue 42, item 2).

    python bench/bench_estimates.py [--steps 120] [--only recipe:quick,story] [--out bench/ESTIMATES.json]

Each case is run as the server runs it (a training job on BERTLAB_JOB_THREADS threads, a probe in the
worker), in a fresh data cache, and timed; the one-thread matmul rate (bertlab.train.speed.rate) is
measured just before it. ESTIMATES.json keeps, per case, what the app's own estimator takes and what the
run took; tests/test_speed.py recomputes every estimate at the recorded rate and holds it within a
factor of 1.5 of the measured time (a test of the estimator, not of the clock). Training cases are cut
to --steps steps: the estimate is linear in steps, and so checked on a run of minutes, not of half an
hour. Run it on an idle machine; its table goes into bench/ESTIMATES.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = ""  # main() makes it: every case prepares its own data, as on a fresh server

import torch  # noqa: E402

from bertlab.train import speed  # noqa: E402


def cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


# ---- the cases: what the app estimates (given the one-thread rate) and how the run is timed --------------

def _recipe(name: str):
    from bertlab.app.ui.training import pretrain_tab
    return next(r for r in pretrain_tab.RECIPES if r.lower().startswith(name))


def recipe_estimate(args: dict, machine: float) -> float:
    from bertlab.app.ui.training import pretrain_tab
    return pretrain_tab.recipe_seconds(_recipe(args["recipe"]), machine, steps=args["steps"])


def recipe_run(args: dict) -> float:
    from bertlab.app.ui.training import pretrain_tab
    from bertlab.train.pretrain import pretrain, warm_cache
    recipe = _recipe(args["recipe"])
    spec = pretrain_tab.form_spec(**{**pretrain_tab.recipe_values(recipe), "steps": args["steps"]})
    if args.get("warm"):  # the server prepares the default recipe's data as it starts, before any visitor
        warm_cache(pretrain_tab.default_spec(), log=lambda *_: None)
    torch.set_num_threads(spec.threads)
    t = time.perf_counter()
    pretrain(Path(CACHE) / "runs" / f"recipe-{args['recipe']}", spec, log=lambda *_: None)
    return time.perf_counter() - t


def distill_estimate(args: dict, machine: float) -> float:
    from bertlab.app.ui.training import distill_tab
    from bertlab.checkpoint import DEFAULT_MODEL_DIR
    from bertlab.config import BertConfig
    c = BertConfig.from_json_file(Path(DEFAULT_MODEL_DIR) / "config.json")
    return distill_tab.estimate_s(c, args["layers"], args["steps"], args["threads"], machine=machine)


def distill_run(args: dict) -> float:
    from bertlab.app.ui.training import distill_tab
    from bertlab.train.distill import distill
    spec = distill_tab.form_spec(layers=args["layers"], steps=args["steps"])  # as the tab starts it
    torch.set_num_threads(spec.threads)
    t = time.perf_counter()
    distill(Path(CACHE) / "runs" / "distill", spec, log=lambda *_: None)
    return time.perf_counter() - t


def race_estimate(args: dict, machine: float) -> float:
    """The race's estimate minus its pre-training minutes (those are the race's own budget, not a guess)."""
    from bertlab.train.race import estimate_minutes
    from bertlab.train.specs import RaceSpec
    spec = RaceSpec(recipes=tuple(args["recipes"]), minutes=args["minutes"], threads=args["threads"])
    return 60 * (estimate_minutes(spec, machine) - spec.minutes * len(spec.recipes))


def race_run(args: dict) -> float:
    """A whole race, less the minutes of pre-training it was given (its trials, model building, data,
    what its runs take past their minutes, and fine-tuning)."""
    from bertlab.train.race import race
    from bertlab.train.specs import RaceSpec
    spec = RaceSpec(recipes=tuple(args["recipes"]), minutes=args["minutes"], threads=args["threads"])
    torch.set_num_threads(args["threads"])
    t = time.perf_counter()
    race(Path(CACHE) / "runs" / "race", spec, log=lambda *_: None)
    return time.perf_counter() - t - 60 * spec.minutes * len(spec.recipes)


def probe_estimate(args: dict, machine: float) -> float:
    from bertlab.app.ui.labs import probe_tab
    return speed.here(probe_tab.STORY_S if args["what"] == "story" else probe_tab.PROBE_S, machine=machine)


def probe_run(args: dict) -> float:
    """The layer story or the default probe in the app's worker, after a first run that read the data."""
    from bertlab.app.ui.labs import probe_tab
    from bertlab.app.ui.shared import models
    from bertlab.cache import LRU
    quiet = lambda *a, **k: None  # noqa: E731 (gr.Progress outside a request)

    def once():
        probe_tab._results = LRU(16, 200e6, probe_tab._bytes)  # computed anew, not read from the cache
        t = time.perf_counter()
        if args["what"] == "story":
            probe_tab.run_story(models.DEFAULT, progress=quiet)
        else:
            probe_tab.probe_model(models.DEFAULT, probe_tab._folder(models.DEFAULT), False, "pos", None, "linear", 1000)
        return time.perf_counter() - t
    first = once()  # also starts the worker and reads the data: once per server
    print(f"{args['what']}: the server's first {first:.1f} s (worker start and data), then:", flush=True)
    return once()


def sweep_estimate(args: dict, machine: float) -> float:
    from bertlab.app.ui.labs import scaling_sweep
    from bertlab.train import scaling
    return scaling.estimate_s(scaling_sweep.form_spec(args["sizes"], args["tokens"]), machine=machine)


def sweep_run(args: dict) -> float:
    from bertlab.app.ui.labs import scaling_sweep
    from bertlab.train import scaling
    spec = scaling_sweep.form_spec(args["sizes"], args["tokens"])
    t = time.perf_counter()
    scaling.sweep(Path(CACHE) / "runs" / "sweep", spec, log=lambda *_: None)
    return time.perf_counter() - t


KINDS = {"recipe": (recipe_estimate, recipe_run), "distill": (distill_estimate, distill_run),
         "race": (race_estimate, race_run), "probe": (probe_estimate, probe_run),
         "sweep": (sweep_estimate, sweep_run)}


def cases(steps: int) -> dict[str, tuple[str, dict]]:
    from bertlab.app.limits import limits
    threads = limits().job_threads
    return {
        "recipe:quick": ("recipe", {"recipe": "quick", "steps": steps, "warm": True}),
        "recipe:tiny": ("recipe", {"recipe": "tiny", "steps": 4 * steps, "warm": True}),
        "recipe:tapt": ("recipe", {"recipe": "adapt", "steps": steps}),
        "recipe:textbook": ("recipe", {"recipe": "textbook", "steps": steps // 2}),
        "recipe:class": ("recipe", {"recipe": "class", "steps": steps // 2}),  # all 25,000 reviews prepared
        "distill": ("distill", {"layers": 2, "steps": steps // 2, "threads": threads}),  # the tab's threads
        "probe": ("probe", {"what": "probe"}),
        "story": ("probe", {"what": "story"}),
        "race": ("race", {"recipes": ["mlm", "electra"], "minutes": 1.0, "threads": threads}),
        "sweep": ("sweep", {"sizes": ["1x32", "2x32", "1x64"], "tokens": ["250k"]}),  # the fewest a fit takes
    }


def estimate(case: dict, machine: float | None = None) -> float:
    """What the app says the case takes, at one thread's matmul rate `machine` (the recorded one)."""
    return KINDS[case["kind"]][0](case["args"], machine or case["rate"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=120, help="training steps of the pre-training cases")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "ESTIMATES.json"))
    a = ap.parse_args()
    global CACHE
    CACHE = os.environ["BERTLAB_CACHE"] = tempfile.mkdtemp(prefix="bertlab-estimates-")
    todo = cases(a.steps)
    names = [n for n in a.only.split(",") if n] or list(todo)
    out = Path(a.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    done = {c["name"]: c for c in old.get("cases", [])}
    for name in names:
        kind, args = todo[name]
        speed._rates.clear()  # measured now, beside this case
        rate = speed.rate()
        took = KINDS[kind][1](args)
        case = {"name": name, "kind": kind, "args": args, "rate": rate, "measured_s": round(took, 1)}
        case["estimate_s"] = round(estimate(case), 1)
        done[name] = case
        print(f"{name:16} measured {took:7.1f} s   estimate {case['estimate_s']:7.1f} s   "
              f"ratio {case['estimate_s'] / took:4.2f}   (one thread: {rate / 1e9:.0f} GFLOP/s)", flush=True)
        out.write_text(json.dumps({"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__,
                                   "date": time.strftime("%Y-%m-%d"), "cases": list(done.values())}, indent=1))


if __name__ == "__main__":
    main()
