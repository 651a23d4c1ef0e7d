"""A scaling sweep: the same pre-training recipe at several model sizes (one token budget), or at one
size with several token budgets, each a normal pre-training run folder; then the held-out loss of
every run on the same examples and masks, fitted as a power law (analysis/scaling_fit.py).

Same recipe means: MLM only (no pair task to muddy the loss), the same corpus, vocabulary, examples,
seed, learning rate, batch and schedule shape; only the shape of the model (or the number of steps)
changes. The first run prepares the data and every later run starts from a copy of that very
folder, so all of them train on, and are scored on, identical tokens. Each run evaluates at steps 10,
25, 50, 100, 250, ... and at the end, so its curve of held-out loss against tokens and FLOPs is
spaced evenly on a log axis.

A sweep is a folder: spec.json (a ScalingSpec), runs/<L>x<H>x<A>-<tokens> (pre-training runs),
parts/<name>.json (each finished run's numbers: reused, not retrained, by a later call with the same
settings), results.json and table.md.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import torch

from ..analysis import scaling_fit
from ..analysis.compute import non_embedding_params
from ..analysis.sizing import flops, param_counts
from ..config import BertConfig, preset
from . import runs, speed
from .pretrain import pretrain
from .specs import PretrainSpec, ScalingSpec, parse_size

RESULTS, TABLE, PARTS = "results.json", "table.md", "parts"
# a finished run with other values of these is still the same training (evaluating draws no random numbers;
# bf16 is how fast, not what: a run may be resumed with it switched, and sweeps made before it was a field
# ran in fp32)
REUSE_IGNORES = ("threads", "bf16", "log_every", "eval_every", "eval_early", "save_every", "save_every_s", "keep_last", "device",
                 "compile")


def parse_tokens(text) -> float:
    """'2M', '500k', '1.5e6' or 2000000 as a number of tokens."""
    t = str(text).strip().lower().replace("_", "")
    mult = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}.get(t[-1:], 1)
    try:
        return float(t[:-1] if mult != 1 else t) * mult
    except ValueError:
        raise ValueError(f"tokens {str(text)!r:.30} is not a number like 2M, 500k or 2e6") from None


def tokens_label(t: float) -> str:
    return f"{t / 1e6:g}M" if t >= 1e5 else f"{t / 1e3:g}k" if t >= 1e3 else f"{t:g}"


def points(spec: ScalingSpec) -> list[tuple[str, tuple[int, int, int], float]]:
    """(run name, (layers, hidden, heads), tokens) of every run of the sweep, smallest first."""
    pts = [(parse_size(s), t) for s in spec.sizes for t in spec.tokens]
    pts.sort(key=lambda p: (p[0][0] * p[0][1] ** 2, p[1]))
    return [(f"{L}x{H}x{A}-{tokens_label(t)}", (L, H, A), t) for (L, H, A), t in pts]


def run_spec(spec: ScalingSpec, shape: tuple[int, int, int], tokens: float) -> PretrainSpec:
    """One point's PretrainSpec: the sweep's recipe at this shape, steps = tokens / (batch x max_len);
    evaluations at 10, 25, 50, ... steps, at half way and at the end (an even log spacing)."""
    L, H, A = shape
    steps = max(1, math.ceil(tokens / (spec.batch_size * spec.max_len)))
    return PretrainSpec(arch="bert", preset="tiny", layers=L, hidden=H, heads=A, intermediate=4 * H,
                        vocab_size=spec.vocab_size, corpus=spec.corpus, max_docs=spec.max_docs, max_len=spec.max_len,
                        objective="mlm", batch_size=spec.batch_size, eval_batches=spec.eval_batches, steps=steps,
                        lr=spec.lr, seed=spec.seed, threads=spec.threads, bf16=spec.bf16,
                        device=spec.device,
                        eval_every=max(1, -(-steps // 2)), eval_early=steps, save_every=steps, keep_last=1,
                        log_every=max(1, steps // 50))


def config_of(spec: PretrainSpec) -> BertConfig:
    """The model's config as pre-training builds it (the vocabulary size is the spec's: WordPiece fills it)."""
    return preset(spec.preset, vocab_size=spec.vocab_size, **spec.config_overrides())


def flops_per_token(spec: PretrainSpec) -> float:
    """Training FLOPs per token: the size model's count of one full-length example (MLM logits at the
    masked 15 % only), divided by its length."""
    return flops(config_of(spec), spec.max_len, training=True)["total_sparse"] / spec.max_len


def run_seconds(rs: PretrainSpec, machine: float | None = None) -> float:
    """A run's seconds here (speed.pretrain_s), its data already prepared: the sweep prepares them once."""
    return speed.pretrain_s(rs, config_of(rs), machine=machine)


def estimate_s(spec: ScalingSpec, out: str | os.PathLike | None = None, machine: float | None = None) -> float:
    """Seconds the sweep will take here (runs already finished in `out` cost nothing), from the FLOPs of
    each run at this machine's measured matmul rate (speed.py); plus preparing the data once."""
    done = {p["name"] for p in current(out)[1]} if out is not None and Path(out).is_dir() else set()
    todo = [run_spec(spec, shape, t) for name, shape, t in points(spec) if name not in done]
    prep = speed.pretrain_s(todo[0], config_of(todo[0]), prepared=False, machine=machine) - run_seconds(todo[0], machine) \
        if todo and not done else 0
    return sum(run_seconds(rs, machine) for rs in todo) + prep


def _same(a: dict, b: dict) -> bool:
    """The same run settings, read through PretrainSpec (a field added since fills in its default)."""
    a, b = (PretrainSpec.from_dict(x).to_dict() for x in (a, b))
    drop = set(REUSE_IGNORES) | {"kind"}
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def read_curve(run: Path, per_token: float, tokens_per_step: int) -> list[dict]:
    """The run's held-out evaluations: step, tokens, FLOPs, MLM loss and masked-token accuracy."""
    rows = [r for r in runs.read_metrics(run)[0] if r.get("split") == "eval" and "mlm_loss" in r]
    return [{"step": r["step"], "tokens": r["step"] * tokens_per_step,
             "flops": r["step"] * tokens_per_step * per_token, "loss": r["mlm_loss"], "acc": r["mlm_acc"],
             "time": r.get("time")} for r in rows]


def _part(out: Path, name: str, shape, tokens: float, rs: PretrainSpec, status: dict) -> dict:
    config = config_of(rs)
    per_token, tps = flops_per_token(rs), rs.batch_size * rs.max_len
    curve = read_curve(out / "runs" / name, per_token, tps)
    last = curve[-1]
    return {"name": name, "layers": shape[0], "hidden": shape[1], "heads": shape[2], "tokens": rs.steps * tps,
            "tokens_asked": tokens, "steps": rs.steps, "params": param_counts(config)["total"],
            "non_embedding": int(non_embedding_params(config)), "flops": rs.steps * tps * per_token,
            "flops_6nd": 6 * non_embedding_params(config) * rs.steps * tps,
            "loss": last["loss"], "acc": last["acc"], "minutes": round(status.get("elapsed", 0) / 60, 2),
            "curve": curve, "spec": rs.to_dict()}


class _Stop:
    """Set when the caller's event is, or when a STOP file lands in the sweep's folder (the job manager's
    Stop): each run's own trainer watches only its own folder."""

    def __init__(self, folder: Path, event=None):
        self.folder, self.event = folder, event

    def is_set(self) -> bool:
        return bool(self.event is not None and self.event.is_set()) or runs.stop_requested(self.folder)


def _seed_data(out: Path, run: Path) -> None:
    """A new run starts from the data folder an earlier run of the sweep prepared: the same vocabulary
    and examples for every run, even where the shared cache is off or WordPiece would train otherwise."""
    if (run / "data" / "examples.pt").exists():
        return
    src = next((d / "data" for d in sorted((out / "runs").glob("*")) if (d / "data" / "examples.pt").exists()), None)
    if src is not None:
        tmp = run / ".data-seed"
        shutil.rmtree(tmp, ignore_errors=True)
        run.mkdir(parents=True, exist_ok=True)
        try:  # hard links: the files are never written again, and a sweep need not hold six copies of them
            shutil.copytree(src, tmp, copy_function=os.link)
        except OSError:  # another file system, or no links there
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
        os.replace(tmp, run / "data")


def _check_reuse(out: Path, name: str, rs: PretrainSpec) -> bool:
    """True when the run is finished with these very settings (reuse it); ValueError when the folder holds
    a run of that name trained otherwise; False when it is still to train (or to resume)."""
    part_file, saved = out / PARTS / f"{name}.json", runs.Run(out / "runs" / name).spec_dict()
    other = saved is not None and not _same(saved, rs.to_dict())
    if part_file.exists() and not other:
        try:
            other = not _same(json.loads(part_file.read_text())["spec"], rs.to_dict())
        except (OSError, ValueError, KeyError):
            return False  # a part written half: train it again
        if not other:
            return True
    if other:
        raise ValueError(f"{out.name} already holds a run {name} trained with other settings (learning rate, "
                         f"batch, corpus ...): pick another folder to sweep these")
    return False


def train_point(out: Path, spec: ScalingSpec, name: str, shape, tokens: float, stop, log=print) -> tuple[dict, bool]:
    """Train (or reuse) one run of the sweep; (its part, whether it was reused)."""
    rs = run_spec(spec, shape, tokens)
    part_file, run = out / PARTS / f"{name}.json", out / "runs" / name
    if _check_reuse(out, name, rs):
        return json.loads(part_file.read_text()), True
    _seed_data(out, run)
    st = pretrain(run, rs, resume=runs.latest_checkpoint(run) is not None, log=lambda *_: None, stop_event=stop)
    if st.get("state") != "finished":
        if stop is not None and stop.is_set():
            raise InterruptedError(f"stopped while training {name}")
        raise RuntimeError(f"run {name} {st.get('state')}: {st.get('message', '')}")
    part = _part(out, name, shape, tokens, rs, st)
    part_file.parent.mkdir(parents=True, exist_ok=True)
    runs.write_json_atomic(part_file, part)
    return part, False


def sweep(out: str | os.PathLike, spec: ScalingSpec, log=print, stop_event=None,
          callbacks=(), on_part=None) -> dict:
    """Run (or go on with) the sweep in `out`: every point trained or reused, then the fits; returns
    results.json's content. `on_part(part, reused)` hears each finished run."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs.clear_stop(out)  # a Stop asked of an earlier sitting is spent
    stop = _Stop(out, stop_event)
    run = runs.Run(out)
    saved = run.spec_dict()
    if saved is not None and saved.get("kind") != ScalingSpec.KIND:
        raise ValueError(f"{out.name} holds another kind of run ({saved.get('kind')}): pick another folder")
    for name, shape, tokens in points(spec):  # refuse before writing anything, not half way through
        _check_reuse(out, name, run_spec(spec, shape, tokens))
    run.write_spec(spec)
    if spec.threads:
        torch.set_num_threads(spec.threads)
    t0, pts, parts = time.time(), points(spec), []
    guess = {name: run_seconds(run_spec(spec, shape, t)) for name, shape, t in pts}
    took: dict[str, float] = {}  # seconds each run trained in this sitting: the ETA learns from them

    def eta(i: int) -> float:
        fix = sum(took.values()) / sum(guess[n] for n in took) if took else 1.0
        return fix * sum(guess[n] for n, _, _ in pts[i:] if n not in took)

    def say(text: str, i: int) -> None:
        runs.write_status(out, state="running", message=text, pid=os.getpid(), started=t0,
                          progress=len(parts) / len(pts), eta_s=round(eta(i)))
        log(text)
        for cb in callbacks:
            cb({"event": "status", "state": "running", "message": text})
    try:
        for i, (name, shape, tokens) in enumerate(pts):
            say(f"run {i + 1} of {len(pts)}: {name} ({tokens_label(tokens)} tokens) ...", i)
            t = time.time()
            part, reused = train_point(out, spec, name, shape, tokens, stop, log)
            if not reused:
                took[name] = time.time() - t
            parts.append(part)
            if on_part is not None:
                on_part(part, reused)
    except InterruptedError as e:
        runs.write_status(out, state="stopped", message=f"{e}: resume to go on", pid=os.getpid())
        runs.clear_stop(out)
        return {"state": "stopped", "message": str(e), "parts": parts}
    except BaseException as e:
        runs.write_status(out, state="failed", message=f"{type(e).__name__}: {e}", pid=os.getpid())
        raise
    res = results(spec, parts)
    res["minutes_total"] = round((time.time() - t0) / 60, 2)
    runs.write_json_atomic(out / RESULTS, res)
    (out / TABLE).write_text(table_md(res), encoding="utf-8")
    runs.write_status(out, state="finished", message=f"finished in {res['minutes_total']:g} min", pid=os.getpid(),
                      progress=1.0)
    return res


def results(spec: ScalingSpec, parts: list[dict]) -> dict:
    """The sweep's table and fits: final held-out loss against non-embedding parameters (size mode) or
    tokens (data mode), and the compute frontier of the run curves with L against FLOPs on it."""
    x_key = "non_embedding" if spec.mode == "size" else "tokens"
    res = {"state": "finished", "mode": spec.mode, "x": x_key, "rows": [{k: v for k, v in p.items() if k != "spec"}
                                                                        for p in parts],
           "kaplan_alpha": scaling_fit.KAPLAN_ALPHA_N if spec.mode == "size" else scaling_fit.KAPLAN_ALPHA_D}
    xs, ys = [p[x_key] for p in parts], [p["loss"] for p in parts]
    try:
        res["fit"] = scaling_fit.fit_all(xs, ys, f"loss against {x_key}")
    except ValueError as e:
        res["fit_error"] = str(e)
    res["frontier"] = scaling_fit.frontier({p["name"]: [(c["flops"], c["loss"]) for c in p["curve"]] for p in parts})
    try:
        if spec.mode == "size":
            fr = res["frontier"]
            res["fit_flops"] = scaling_fit.fit_all([f["flops"] for f in fr], [f["loss"] for f in fr], "frontier")
    except ValueError:
        pass
    return res


def current(out: str | os.PathLike) -> tuple[ScalingSpec | None, list[dict]]:
    """The sweep's spec and the parts finished so far (what a live page draws while it runs)."""
    out = Path(out)
    try:
        spec = runs.Run(out).spec()
    except (ValueError, OSError):
        return None, []
    if not isinstance(spec, ScalingSpec):
        return None, []
    parts = []
    for name, _, _ in points(spec):
        f = out / PARTS / f"{name}.json"
        if f.exists():
            try:
                parts.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                pass
    return spec, parts


def fit_line(fit: dict, kaplan: float) -> str:
    """One line: α with its interval beside Kaplan's, R², the form."""
    lo, hi = fit["alpha_ci"]
    return (f"α = {fit['alpha']:.3f} (95 % CI {lo:.3f} to {hi:.3f}; Kaplan {kaplan:g}), R² = {fit['r2']:.3f}"
            + (f", c = {fit['c']:.2f}" if fit["c"] else ""))


def frontier_segments(frontier: list[dict]) -> list[tuple[str, float]]:
    """(run, first FLOP budget where it is best) along the frontier, in order."""
    seg = []
    for f in frontier:
        if not seg or seg[-1][0] != f["best"]:
            seg.append((f["best"], f["flops"]))
    return seg


def table_md(res: dict) -> str:
    """The sweep's table and its fits, in Markdown (the command line prints it, the page shows it)."""
    lines = ["| run | layers × hidden | non-embedding params | tokens | FLOPs | held-out MLM loss | masked-token acc. "
             "| minutes |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['name']} | {r['layers']} × {r['hidden']} | {r['non_embedding']:,} | {r['tokens']:.3g} | "
                     f"{r['flops']:.3g} | {r['loss']:.3f} | {r['acc']:.1%} | {r['minutes']:.1f} |")
    x = "non-embedding parameters N" if res["mode"] == "size" else "tokens D"
    notes = []  # each its own paragraph: Markdown joins single lines
    fit = res.get("fit") or {}
    if "offset" in fit:
        notes.append(f"L = a·x^-α + c against {x}: " + fit_line(fit["offset"], res["kaplan_alpha"]))
    if "power" in fit:
        notes.append(f"L = a·x^-α (Kaplan's form, c = 0) against {x}: " + fit_line(fit["power"], res["kaplan_alpha"]))
    if "fit_error" in res:
        notes.append(f"No fit: {res['fit_error']}")
    if seg := frontier_segments(res.get("frontier") or []):
        notes.append("Compute frontier (the best run at each FLOP budget): " + ", then ".join(
            f"{name.split('-')[0] if res['mode'] == 'size' else name} from {lo:.2g} FLOPs" for name, lo in seg))
    if res.get("minutes_total") is not None:
        notes.append(f"The sweep took {res['minutes_total']:g} min.")
    out = "\n".join(lines) + "\n\n" + "\n\n".join(notes)
    return out + "\n"
