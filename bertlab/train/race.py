"""The race: several pre-training recipes, each given the same wall-clock minutes on the same corpus
and the same shape, then each fine-tuned on one task, into one table (parameters, minutes, held-out
masked-token accuracy, fine-tune accuracy over seeds, forward latency).

A recipe's minutes become steps by timing a short trial of that very recipe first, so each run's
learning-rate schedule ends where its time does (a cap stops a run that still overshoots). A race is
a folder: runs/<recipe> (pre-training runs), finetune/<recipe>-seed<N>, parts/*.json (each finished
part: a stopped race resumes after them), results.json and table.md.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import statistics
import threading
import time
from pathlib import Path

import torch

from .. import family
from ..checkpoint import load_pretrained
from ..config import BertConfig, preset
from . import runs, speed
from .finetune import finetune
from .loop import resolve_device
from .pretrain import pretrain
from .specs import RECIPES, FinetuneSpec, PretrainSpec, RaceSpec
from .speed import flops_per_step

TRIAL_STEPS = 15  # timed steps per recipe before its run (the first five are left out: warm-up)
TRIAL_LOG = 5  # a log row reads the loss back, which waits for the GPU: one every 5 steps, near a real run's
# rhythm (a row every 1 % of it); a row a step timed an H200's steps 1.4-1.8x slower than the run took
EVALS = 8  # held-out evaluations per run: enough points for a curve, little time taken from training
# at speed.py's reference machine, one thread (bench/ESTIMATES.md): a fine-tuning epoch on sentiment (mini
# timed; tiny and small scaled by their FLOPs), what a recipe takes besides its minutes (its timing trial,
# building the model, the last evaluation past its budget), and the race's own start (data, folders)
FINETUNE_S = {"tiny": 25, "mini": 72, "small": 240}
RECIPE_SETUP_S, RACE_SETUP_S = 33, 23
GPU_FINETUNE_S = 15  # the same on a GPU (an H200: 11-15 s for two epochs of mini)


def recipe_spec(race: RaceSpec, name: str, **kw) -> PretrainSpec:
    """The recipe's PretrainSpec: the race's shape, corpus and schedule, the recipe's own fields."""
    L, H, A = (preset(race.preset).num_hidden_layers, preset(race.preset).hidden_size,
               preset(race.preset).num_attention_heads)
    own = dict(RECIPES[name][1])
    if own.get("layer_groups") == 0:  # "unshared": a weight set per layer
        own["layer_groups"] = L
    if family.trains_generator(own["arch"]):  # the discriminator the same shape as BERT's (E = H)
        own["embedding_size"] = H
    base = dict(preset=race.preset if own["arch"] == "bert" else "tiny", layers=L, hidden=H, heads=A,
                intermediate=4 * H, corpus=race.corpus, max_docs=race.max_docs, max_len=race.max_len,
                batch_size=race.batch_size, lr=race.lr, seed=race.seed,
                eval_batches=8, eval_early=0, keep_last=1, device=race.device, bf16=race.bf16)
    return PretrainSpec(**{**base, **own, **kw})


def estimate_minutes(race: RaceSpec, machine: float | None = None) -> float:
    """What the race will take, said before it starts: training, trials, data and fine-tuning."""
    n = len(race.recipes)
    train = race.minutes * (1 if race.side_by_side else n)
    setup = speed.here(n * RECIPE_SETUP_S + RACE_SETUP_S, race.device, machine) / 60
    per_epoch = GPU_FINETUNE_S if resolve_device(race.device).type == "cuda" else speed.here(FINETUNE_S[race.preset], machine=machine)
    tune = n * race.seeds * race.epochs * per_epoch / 60
    return train + setup + tune


def _trial(spec: PretrainSpec, folder: Path, log) -> float:
    """Seconds per step of this recipe here and now (the run's own code, a throwaway folder)."""
    shutil.rmtree(folder, ignore_errors=True)
    pretrain(folder, spec.replace(steps=TRIAL_STEPS, log_every=TRIAL_LOG, eval_every=10**6, save_every=10**6, save_every_s=0),
             log=lambda *_: None)
    t = {r["step"]: r["time"] for r in runs.read_metrics(folder)[0] if r.get("split") == "train"}
    shutil.rmtree(folder, ignore_errors=True)
    return (t[TRIAL_STEPS] - t[TRIAL_LOG]) / (TRIAL_STEPS - TRIAL_LOG)


def pretrain_recipe(out: Path, race: RaceSpec, name: str, threads: int, stop=None, log=print) -> dict:
    """Time a trial, then pre-train the recipe for the race's minutes; returns its part of the table."""
    torch.set_num_threads(threads)
    part = out / "parts" / f"{name}.json"
    if part.exists():
        return json.loads(part.read_text())
    run = out / "runs" / name
    budget = race.minutes * 60
    if not (run / runs.SPEC).exists():
        sec = _trial(recipe_spec(race, name), out / "trials" / name, log)
        steps = max(TRIAL_STEPS, int(0.9 * budget / sec))
        log(f"{name}: {sec * 1000:.0f} ms a step here, so {steps:,} steps fill {race.minutes:g} min")
        spec = recipe_spec(race, name, steps=steps, threads=threads, log_every=max(1, steps // 100),
                           eval_every=max(1, steps // EVALS), save_every=max(1, steps // 4))
    else:  # a stopped race: this recipe's run goes on with its own spec
        spec = runs.Run(run).spec()
    local = threading.Event()

    def cap(row: dict) -> None:  # the trial's estimate can be off: the budget holds regardless
        if row.get("elapsed", row.get("time", 0)) > 1.1 * budget or (stop is not None and stop.is_set()):
            local.set()
    st = pretrain(run, spec, resume=(run / runs.SPEC).exists(), log=lambda *_: None, stop_event=local,
                  callbacks=[cap])
    if stop is not None and stop.is_set():
        raise InterruptedError(f"stopped while pre-training {name}")
    model, tok = load_pretrained(run)
    gen = BertConfig.from_json_file(run / "generator" / "config.json") if (run / "generator").is_dir() else None
    evals = [r for r in runs.read_metrics(run)[0] if r.get("split") == "eval"]
    res = {"recipe": name, "label": RECIPES[name][0], "arch": spec.arch, "steps": st["step"],
           "minutes": round(st.get("elapsed", 0) / 60, 2), "params": sum(p.numel() for p in model.parameters()),
           "generator_params": None, "flops_per_step": flops_per_step(spec, model.config, gen),
           "mlm_acc": evals[-1]["mlm_acc"] if evals else None, "state": st["state"],
           "latency_ms": latency_ms(model, tok)}
    if gen is not None:
        g, _ = load_pretrained(run / "generator")
        # the generator's embeddings are the pair's (ELECTRA ties them; DeBERTa-v3's discriminator reads them
        # plus its own delta table)
        shared = sum(p.numel() for p in family.encoder_of(g).embeddings.parameters())
        res["generator_params"] = sum(p.numel() for p in g.parameters()) - shared
    part.parent.mkdir(parents=True, exist_ok=True)
    runs.write_json_atomic(part, res)
    return res


def _child(out: str, race: dict, name: str, stop) -> None:
    pretrain_recipe(Path(out), RaceSpec.from_dict(race), name, 1, stop, log=lambda *_: None)


def latency_ms(model, tok, seq_len: int = 64, batch: int = 8, repeats: int = 15) -> float:
    """Median forward time of the pre-trained model on one batch, one thread (so runs compare)."""
    model.eval()
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    ids = torch.randint(len(tok.special_ids), model.config.vocab_size, (batch, seq_len))
    times = []
    try:
        with torch.inference_mode():
            for _ in range(repeats + 2):
                t = time.perf_counter()
                model(ids)
                times.append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(n)
    return round(statistics.median(times[2:]) * 1000, 2)


def _finetune_part(out: Path, race: RaceSpec, name: str, seed: int, threads: int, stop) -> dict:
    part = out / "parts" / f"{name}-seed{seed}.json"
    if part.exists():
        return json.loads(part.read_text())
    folder = out / "finetune" / f"{name}-seed{seed}"
    shutil.rmtree(folder, ignore_errors=True)  # a fine-tune cut short starts over: it takes a minute
    torch.set_num_threads(threads)
    causal = RECIPES[name][1].get("objective") == "causal"  # its [CLS] sees only itself: read every token's mean
    res = finetune(folder, FinetuneSpec(model=str(out / "runs" / name / runs.MODEL), task=race.task,
                                        epochs=race.epochs, seed=seed, threads=threads, device=race.device,
                                        layer_decay=race.layer_decay, pooling="mean" if causal else "auto"),
                   log=lambda *_: None, stop_event=stop)
    if res["state"] != "finished":
        raise InterruptedError(f"stopped while fine-tuning {name} (seed {seed})")
    res = {"recipe": name, "seed": seed, "accuracy": res["accuracy"], "seconds": res["seconds"],
           "majority": res.get("majority_baseline"), "val_examples": res.get("val_examples")}
    runs.write_json_atomic(part, res)
    return res


class _Stop:
    """Set when the caller's event is, or when a STOP file lands in the race folder (the job manager's
    Stop): the recipes' own trainers watch only their own folders."""

    def __init__(self, folder: Path, event=None):
        self.folder, self.event = folder, event

    def is_set(self) -> bool:
        return bool(self.event is not None and self.event.is_set()) or runs.stop_requested(self.folder)


def race(out: str | os.PathLike, spec: RaceSpec, resume: bool = False, log=print, stop_event=None,
         callbacks=()) -> dict:
    """Run (or go on with) the race in `out`; returns {"state", "rows", ...} as results.json holds."""
    out = Path(out)
    if out.is_dir():
        runs.clear_stop(out)  # a Stop asked of an earlier sitting is spent
    stop_event = _Stop(out, stop_event)
    run = runs.Run(out)
    if resume and (saved := run.spec()) is not None:
        spec, _ = saved.resumed({k: getattr(spec, k) for k in spec.RESUMABLE})
    elif (out / "parts").exists():
        raise ValueError(f"{out.name} already holds a race: resume it, or pick another folder")
    run.write_spec(spec)
    threads = spec.threads or torch.get_num_threads()
    est = estimate_minutes(spec)

    def say(text: str) -> None:
        runs.write_status(out, state="running", message=text, pid=os.getpid(), started=t0)
        log(text)
        for cb in callbacks:
            cb({"event": "status", "state": "running", "message": text})
    t0 = time.time()
    say(f"a race of {len(spec.recipes)} recipes, {spec.minutes:g} min of pre-training each"
        f"{' side by side' if spec.side_by_side else ''}: about {est:.0f} min in all")
    try:
        parts = {}
        if spec.side_by_side:
            say("pre-training " + ", ".join(spec.recipes) + " side by side, one thread each ...")
            ctx = mp.get_context("spawn")
            stop = ctx.Event()
            procs = [ctx.Process(target=_child, args=(str(out), spec.to_dict(), n, stop), daemon=True)
                     for n in spec.recipes]
            for p in procs:
                p.start()
            while any(p.is_alive() for p in procs):
                if stop_event is not None and stop_event.is_set():
                    stop.set()
                time.sleep(0.5)
            if stop.is_set():
                raise InterruptedError("stopped while pre-training")
            missing = [n for n in spec.recipes if not (out / "parts" / f"{n}.json").exists()]
            if missing:
                raise RuntimeError(f"pre-training {', '.join(missing)} failed: see {out / 'runs'}")
        for i, name in enumerate(spec.recipes, 1):
            if not spec.side_by_side:
                say(f"pre-training {name} ({i} of {len(spec.recipes)}): {RECIPES[name][0]} ...")
            parts[name] = pretrain_recipe(out, spec, name, threads, stop_event, log)
        shutil.rmtree(out / "trials", ignore_errors=True)
        tuned = {n: [] for n in spec.recipes}
        for name in spec.recipes:
            for seed in range(spec.seeds):
                say(f"fine-tuning {name} on {spec.task} (seed {seed + 1} of {spec.seeds}) ...")
                tuned[name].append(_finetune_part(out, spec, name, seed, threads, stop_event))
    except InterruptedError as e:
        runs.write_status(out, state="stopped", message=f"{e}: resume to go on", pid=os.getpid())
        runs.clear_stop(out)
        return {"state": "stopped", "message": str(e)}
    except BaseException as e:
        runs.write_status(out, state="failed", message=f"{type(e).__name__}: {e}", pid=os.getpid())
        raise
    rows = [table_row(parts[n], tuned[n]) for n in spec.recipes]
    res = {"state": "finished", "rows": rows, "minutes_total": round((time.time() - t0) / 60, 1),
           "estimate_minutes": round(est, 1), "threads": 1 if spec.side_by_side else threads,
           "side_by_side": spec.side_by_side, "task": spec.task, "seeds": spec.seeds}
    runs.write_json_atomic(out / "results.json", res)
    (out / "table.md").write_text(table_md(res), encoding="utf-8")
    runs.write_status(out, state="finished", message=f"finished in {res['minutes_total']:g} min", pid=os.getpid())
    return res


def table_row(part: dict, tuned: list[dict]) -> dict:
    """A recipe's row: its pre-training part, its fine-tuned accuracies, their mean and spread, and the
    line to beat (always answering the task's commonest label) on how many held-out examples."""
    acc = [t["accuracy"] for t in tuned]
    first = lambda k: next((t[k] for t in tuned if t.get(k) is not None), None)  # noqa: E731
    return {**part, "finetune_acc": acc, "finetune_mean": statistics.mean(acc),
            "finetune_spread": statistics.stdev(acc) if len(acc) > 1 else 0.0,
            "line_to_beat": first("majority"), "val_examples": first("val_examples")}


def table_md(res: dict) -> str:
    """The race's one table, in Markdown (the CLI prints it; the UI shows it)."""
    lines = ["| recipe | parameters | pre-training | steps | time a step | held-out masked-token acc. | "
             f"{res['task']} accuracy ({res['seeds']} seed{'s' if res['seeds'] > 1 else ''}) | forward |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        params = f"{r['params'] / 1e6:.2f} M" + (f" (+{r['generator_params'] / 1e6:.2f} M generator)"
                                                 if r.get("generator_params") else "")
        mlm = "–" if r["mlm_acc"] is None else f"{r['mlm_acc']:.1%}" + (" (generator)" if r.get("generator_params") is not None else "")
        if r["mlm_acc"] is not None and RECIPES.get(r["recipe"], ("", {}))[1].get("objective") == "causal":
            mlm += " (next token)"  # a causal run scores the token after each position, not masked ones
        acc = f"{r['finetune_mean']:.1%}" + (f" ± {r['finetune_spread']:.1%}" if res["seeds"] > 1 else "")
        step_ms = r["minutes"] * 60_000 / max(1, r["steps"])
        lines.append(f"| {r['recipe']}: {r['label']} | {params} | {r['minutes']:.1f} min | {r['steps']:,} | "
                     f"{step_ms:,.0f} ms | {mlm} | "
                     f"{acc} | {r['latency_ms']:.1f} ms |")
    line = next((r["line_to_beat"] for r in res["rows"] if r.get("line_to_beat") is not None), None)
    n_val = next((r["val_examples"] for r in res["rows"] if r.get("val_examples")), None)
    beat = (f"\n\nLine to beat: always answering the commonest label scores {line:.1%} on the {n_val:,} held-out "
            f"examples." if line is not None and n_val else "")
    n = res["threads"]
    how = "side by side, one thread each" if res["side_by_side"] else \
        f"one after another, {n} thread{'s' if n > 1 else ''} each"
    return "\n".join(lines) + f"\n\nPre-trained {how}; the race took {res['minutes_total']:g} min in all " \
                              f"(estimated {res['estimate_minutes']:.0f}). Forward: one batch of 8 × 64 tokens, one thread." \
                              + beat + "\n"
