"""The comparison's table: one row per method (trainable parameters, the task's metrics as mean ±
spread over seeds, time, peak memory, size saved), in Markdown and as cells for the UI."""
from __future__ import annotations

import statistics
from pathlib import Path

from ..methods.registry import REGISTRY

# the metrics the table shows for each problem, the headline first (finetune_metrics' keys)
PROBLEM_METRICS = {"single": ("accuracy", "macro_f1"), "multi": ("micro_f1", "macro_f1"),
                   "regression": ("pearson", "spearman"), "qa": ("exact_match", "f1")}
METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "micro_f1": "micro-F1", "pearson": "Pearson r",
                "spearman": "Spearman ρ", "exact_match": "exact match", "f1": "F1", "mse": "MSE"}
PERCENT = ("accuracy", "exact_match")  # shown as %; the others as 0.xxx
BLURB = {n: m.blurb for n, m in REGISTRY.items()}  # what each method trains, in a few words


def minutes(s: float | None) -> str:
    """Seconds as people say them: "45 s", "12 min"."""
    if s is None:
        return "? min"
    return f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


def run_headline(p: dict) -> str:
    k = next((k for k in metric_keys(p) if isinstance(p.get(k), (int, float))), None)
    return f"{METRIC_NAMES[k]} {fmt_metric(k, p[k])}" if k else "no metric"


def metric_keys(p: dict) -> tuple[str, ...]:
    """The metrics of a run's problem, as its results name them."""
    keys = PROBLEM_METRICS.get(p.get("problem") or "single", PROBLEM_METRICS["single"])
    return tuple(k for k in keys if k in p) or tuple(k for k in METRIC_NAMES if isinstance(p.get(k), (int, float)))


def fmt_metric(key: str, v: float | None, spread: float | None = None) -> str:
    if v is None:
        return "–"
    if key in PERCENT:
        return f"{v:.1%}" + (f" ± {spread * 100:.1f}" if spread is not None else "")
    return f"{v:.3f}" + (f" ± {spread:.3f}" if spread is not None else "")


def _mean_spread(xs: list[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if isinstance(x, (int, float))]
    if not xs:
        return None, None
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def results(spec, parts: dict, **extra) -> dict:
    """One row per method of `spec` (a CompareSpec): its runs' measurements, the metrics' mean and
    spread over seeds, from `parts` ((method, seed) -> what the run measured). A method
    with no ended run yet is "pending" (a comparison in progress shows its table so far)."""
    rows = []
    for m in spec.methods:
        ps = [parts[(m, s)] for mm, s in spec.runs() if mm == m and (m, s) in parts]
        ok = [p for p in ps if p.get("state") == "finished"]
        state = "finished" if ok else "failed" if ps else "pending"
        row = {"method": m, "runs": len(ps), "finished": len(ok), "state": state, "failed": state == "failed",
               "message": next((p.get("message", "") for p in ps if p.get("state") != "finished"), "")}
        if ok:
            keys = metric_keys(ok[0])
            row.update(problem=ok[0].get("problem") or "single", metrics=list(keys),
                       trainable_params=ok[0].get("trainable_params"), total_params=ok[0].get("total_params"),
                       seconds=statistics.mean(p["seconds"] for p in ok),
                       peak_mb=max(p["peak_mb"] for p in ok), saved_bytes=ok[0].get("saved_bytes", 0),
                       adapter_bytes=ok[0].get("adapter_bytes"),
                       seeds=[p["seed"] for p in ok], lr=ok[0].get("spec", {}).get("lr"))
            row["trainable_share"] = (row["trainable_params"] / row["total_params"]
                                      if row["trainable_params"] and row["total_params"] else None)
            for k in keys:
                row[k] = [p.get(k) for p in ok]
                row[f"{k}_mean"], row[f"{k}_spread"] = _mean_spread(row[k])
            for k in ("task", "train_examples", "val_examples"):
                extra.setdefault(k, ok[0].get(k))
        rows.append(row)
    return {"state": "finished", "rows": rows, "seeds": spec.seeds, "epochs": spec.epochs, "task": spec.task,
            "model": spec.model, **extra}


def headline(res: dict) -> tuple[str, str]:
    """(metric key, its name) the chart plots: the first metric of the task's problem."""
    k = next((r["metrics"][0] for r in res["rows"] if r.get("metrics")), "accuracy")
    return k, METRIC_NAMES.get(k, k)


def table_cells(res: dict, blurbs: bool = True) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the comparison's table: the Markdown below and the UI's table. `blurbs`: each
    method's name with its one-line description (a phone's table keeps the name alone)."""
    ok = [r for r in res["rows"] if r["state"] == "finished"]
    keys = ok[0]["metrics"] if ok else ["accuracy", "macro_f1"]
    n = res["seeds"]
    headers = (["method", "trainable parameters"] + [METRIC_NAMES.get(k, k) + (f" ({n} seeds)" if n > 1 else "")
                                                      for k in keys] + ["time", "peak memory", "saved"])
    rows = []
    for r in res["rows"]:
        name = f"{r['method']}: {BLURB.get(r['method'], '')}" if blurbs else r["method"]
        if r["state"] != "finished":
            what = f"failed: {r['message'][:120]}" if r["failed"] else "…"
            rows.append([name, what] + [""] * (len(keys) + 3))
            continue
        share = f" ({r['trainable_share']:.2%})" if r.get("trainable_share") is not None else ""
        rows.append([name, f"{r['trainable_params']:,}{share}"]
                    + [fmt_metric(k, r.get(f"{k}_mean"), r.get(f"{k}_spread")) for k in keys]
                    + [minutes(r["seconds"]), f"{r['peak_mb']:,.0f} MB", _size(r["saved_bytes"]) + _must_keep(r)])
    return headers, rows


def _must_keep(r: dict) -> str:
    """What the saved size hides: Houlsby adapters' own file, or, where a method saved a whole model but
    trained a small part of it (a frozen encoder's head), that part, all it must keep beside the unchanged
    base model (the table said a frozen run "saved 21.7 MB", as much as full fine-tuning)."""
    if r.get("adapter_bytes"):
        return f" (adapters {_size(r['adapter_bytes'])})"
    trained = 4 * (r.get("trainable_params") or 0)  # fp32
    if trained and (r.get("trainable_share") or 1) < 0.5 and r["saved_bytes"] > 4 * trained:
        return f" (trained: {_size(trained)}; the rest is the unchanged base model)"
    return ""


def _size(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def table_md(res: dict) -> str:
    """The comparison's one table, in Markdown (the CLI prints it, bench/FINETUNE.md keeps it)."""
    headers, rows = table_cells(res)
    lines = ["| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    n = res["seeds"]
    data = Path(str(res.get("task"))).name + (f" ({res['train_examples']:,} training / {res['val_examples']:,} "
                                               f"validation examples)" if res.get("train_examples") else "")
    spread = "; mean ± standard deviation over the seeds" if n > 1 else ""
    return "\n".join(lines) + (
        f"\n\n{n} seed{'s' if n > 1 else ''} per method, {res['epochs']} epoch{'s' if res['epochs'] > 1 else ''} "
        f"on {data}{spread}. Time: one run's wall time (loading, training, evaluating, saving), runs one after "
        f"another with {res.get('threads', '?')} threads. Peak memory: the run's process' peak resident memory "
        f"above what it held just before the run (torch and bertlab imported). Saved: the model or adapter "
        f"folder; where a method saved a whole model but trained a small part, that part (fp32) is all it must "
        f"keep beside the unchanged base model. The comparison took {res.get('minutes_total', '?')} min (estimated "
        f"{res.get('estimate_minutes', '?')} before it began).\n")
