"""Every bertlab command on a device, in one process (CUDA starts once), as a user would type them; then
every model folder written loads in transformers, a run started on the GPU resumes on the CPU and back,
and the app's views run on a model on the device. Each part has a time limit, its own log, and the run
goes on past a failure; `summary.json` says which parts passed.

    python bench/gpu_jobs.py --device cuda --out gpu-out            # on a GPU: about 3 minutes
    python bench/gpu_jobs.py --device cpu --quick --out /tmp/dry    # the same at toy sizes (a dry run)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertlab.app import cli  # noqa: E402


class PartTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise PartTimeout("time limit reached")


def commands(d: str, runs: Path, quick: bool) -> list[tuple[str, int, list[str]]]:
    """(name, seconds allowed, argv of `python -m bertlab`) for every job kind and inference command."""
    shape = ["--preset", "tiny", "--layers", "1", "--hidden", "64", "--heads", "2", "--vocab-size", "1000"] if quick \
        else ["--preset", "mini"]
    docs, big, length, bs = (300, 300, 32, 16) if quick else (1000, 12000, 128, 128)
    ft = ["--max-examples", "200" if quick else "2000", "--epochs", "1"] + (["--max-len", "32"] if quick else [])
    ev = ["--eval-every", "20", "--eval-early", "10", "--save-every", "20"]
    small = ["--preset", "tiny", "--max-docs", str(docs), "--max-len", "64", "--batch-size", "32", "--steps", "40", *ev]
    if quick:
        small = [*shape[2:8], "--preset", "tiny", "--max-docs", str(docs), "--max-len", "32", "--batch-size", "8",
                 "--steps", "20", *ev]
    r = lambda name: str(runs / name)  # noqa: E731
    cmds = [
        ("pretrain-bert", 150, ["pretrain", "--device", d, "--bf16", *shape, "--objective", "mlm", "--max-docs",
                                str(big), "--max-len", str(length), "--batch-size", str(bs), "--steps", "60",
                                "--stop-at", "30", *ev, "--out", r("bert")]),
        ("resume-on-cpu", 150, ["pretrain", "--out", r("bert"), "--resume", "--device", "cpu", "--steps", "60"]),
        ("resume-back-on-device", 60, ["pretrain", "--out", r("bert"), "--resume", "--device", d, "--steps", "80"]),
        ("pretrain-bert-nsp", 90, ["pretrain", "--device", d, "--bf16", *small, "--out", r("nsp")]),
    ]
    for arch in ("roberta", "albert", "electra"):
        cmds.append((f"pretrain-{arch}", 90, ["pretrain", "--arch", arch, "--device", d, "--bf16", *small,
                                              "--out", r(arch)]))
    cmds.append(("distill", 90, ["distill", "--device", d, "--teacher", "default", "--layers", "2", "--steps", "40",
                                 "--max-docs", str(docs), "--eval-every", "20", "--save-every", "20", "--out", r("distil")]))
    for m in ("full", "frozen", "bitfit", "lora", "ia3", "prefix", "prompt", "adapter"):
        cmds.append((f"finetune-{m}", 60, ["finetune", "--device", d, "--task", "sentiment", "--method", m, *ft,
                                           "--out", r(f"ft-{m}")]))
    ex = ROOT / "examples"
    cmds += [
        ("finetune-pos", 90, ["finetune", "--device", d, "--task", "pos", *ft, "--out", r("ft-pos")]),
        ("finetune-pair", 60, ["finetune", "--device", d, "--task", str(ex / "same_sentiment.csv"), "--pair-column",
                               "text_b", "--max-len", "96", "--epochs", "1", "--out", r("ft-pair")]),
        ("finetune-regression", 60, ["finetune", "--device", d, "--task", str(ex / "polarity.csv"), "--problem",
                                     "regression", "--epochs", "1", "--out", r("ft-reg")]),
        ("finetune-multi", 60, ["finetune", "--device", d, "--task", str(ex / "aspects.jsonl"), "--problem", "multi",
                                "--epochs", "1", "--out", r("ft-multi")]),
        ("finetune-qa", 60, ["finetune", "--device", d, "--task", str(ex / "movie_qa.json"), "--max-len", "128",
                             "--epochs", "1", "--batch-size", "8", "--out", r("ft-qa")]),
        ("finetune-electra-lora", 60, ["finetune", "--device", d, "--model", r("electra/model"), "--task", "sentiment",
                                       "--method", "lora", *ft, "--out", r("ft-electra")]),
        ("finetune-roberta-prefix", 60, ["finetune", "--device", d, "--model", r("roberta/model"), "--task",
                                         "sentiment", "--method", "prefix", *ft, "--out", r("ft-roberta")]),
        ("finetune-distil-ia3", 60, ["finetune", "--device", d, "--model", r("distil/model"), "--task", "sentiment",
                                     "--method", "ia3", *ft, "--out", r("ft-distil")]),
        ("finetune-albert-adapter", 60, ["finetune", "--device", d, "--model", r("albert/model"), "--task",
                                         "sentiment", "--method", "adapter", *ft, "--out", r("ft-albert")]),
        ("classify", 30, ["classify", "--device", d, "--model", r("ft-lora"), "a gripping, funny film", "--json"]),
        ("classify-adapter-folder", 30, ["classify", "--device", d, "--model", r("ft-lora/adapter"), "a dull film"]),
        ("classify-qa", 30, ["classify", "--device", d, "--model", r("ft-qa"), "--question", "who directed it?",
                             "the film was directed by ana lopez ."]),
        ("classify-pos", 30, ["classify", "--device", d, "--model", r("ft-pos"), "the plot was slow"]),
        ("fill-mask", 30, ["fill-mask", "--device", d, "the acting was [MASK] ."]),
        ("fill-mask-run", 30, ["fill-mask", "--device", d, "--model", r("bert"), "the plot was [MASK] ."]),
        ("evaluate", 90, ["evaluate", "--device", d, "--max-docs", "600", "--batches", "5"]),
        ("evaluate-run", 60, ["evaluate", "--device", d, r("bert"), "--batches", "5"]),
        ("probe-pos", 120, ["probe", "--device", d, "--task", "pos", "--sample", "200", "--compare-random"]),
        ("probe-sentiment", 90, ["probe", "--device", d, "--task", "sentiment", "--sample", "300"]),
        ("scaling", 150, ["scaling", "--device", d, "--sizes", "1x32,1x64,2x64" if quick else "1x64,2x128,3x192,4x256",
                          "--tokens", "20k" if quick else "2M", "--max-docs", str(big), "--max-len", str(length),
                          "--batch-size", str(bs), "--out", r("scaling")]),
    ]
    return cmds


def run_part(name: str, seconds: int, fn, out: Path, results: dict) -> None:
    t = time.time()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    with open(out / f"{name}.log", "w", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        try:
            rc = fn()
        except BaseException as e:  # noqa: BLE001  (a failed part is recorded; the run goes on)
            traceback.print_exc()
            rc = f"{type(e).__name__}: {e}"[:300]
        finally:
            signal.alarm(0)
    results[name] = {"rc": rc, "seconds": round(time.time() - t, 1)}
    print(f"{name:<28} rc={rc!s:<6.60} {time.time() - t:6.1f} s", flush=True)


def check_models(runs: Path) -> dict:
    """Every model folder the commands wrote loads in transformers, and its weights equal ours."""
    import transformers
    from safetensors.torch import load_file
    res = {}
    for cfg in sorted(runs.glob("**/model/config.json")) + sorted(runs.glob("**/generator/config.json")):
        folder = cfg.parent
        if "checkpoints" in folder.parts:
            continue
        name = str(folder.relative_to(runs))
        try:
            arch = json.loads(cfg.read_text())["architectures"][0]
            hf = getattr(transformers, arch).from_pretrained(folder)
            ours = load_file(folder / "model.safetensors")
            theirs = hf.state_dict()
            diff = max(float((theirs[k].float() - v.float()).abs().max()) for k, v in ours.items() if k in theirs)
            res[name] = {"class": arch, "max_abs_diff": diff, "keys_matched": sum(k in theirs for k in ours),
                         "keys": len(ours)}
        except Exception as e:  # noqa: BLE001
            res[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return res


def check_resume(runs: Path, device: str) -> dict:
    """The GPU run stopped at step 30: its checkpoint holds exactly the weights the GPU model had (model/ was
    written from memory at the stop), read on the CPU and on the device alike."""
    from safetensors.torch import load_file
    ck = runs / "bert" / "checkpoints"
    steps = sorted(int(p.name.split("-")[1]) for p in ck.glob("step-*"))
    a = load_file(ck / f"step-{steps[-1]}" / "model.safetensors")
    b = load_file(ck / f"step-{steps[-1]}" / "model.safetensors", device=device)
    metrics = [json.loads(x) for x in (runs / "bert" / "metrics.jsonl").read_text().splitlines()]
    return {"checkpoints": steps, "cpu_equals_device": all(torch.equal(v, b[k].cpu()) for k, v in a.items()),
            "last_step": max(r["step"] for r in metrics)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default="gpu-out")
    p.add_argument("--runs", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default=None, help="comma-separated part names")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = Path(a.runs or tempfile.mkdtemp(prefix="bertlab-gpu-"))
    results = {"device": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
               "torch": torch.__version__}
    for name, secs, argv in commands(a.device, runs, a.quick):
        if a.only and name not in a.only.split(","):
            continue
        run_part(name, secs, lambda argv=argv: cli.main(argv), out, results)
    def check(key, fn, ok):
        """A check's details under results[key]; its part passes when ok(details)."""
        def part():
            results[key] = fn()
            return 0 if ok(results[key]) else f"see summary.json[{key!r}]"
        return part
    ran = lambda name: not a.only or name in a.only.split(",")  # noqa: E731
    if ran("resume-back-on-device"):  # the resume check reads the three resume commands' run
        run_part("resume-weights", 60, check("resume", lambda: check_resume(runs, a.device),
                                             lambda r: r["cpu_equals_device"] and r["last_step"] == 80), out, results)
    run_part("transformers-loads", 180, check("models", lambda: check_models(runs),
                                              lambda r: all(v.get("max_abs_diff") == 0.0 for v in r.values())),
             out, results)
    from gpu_views import run_views  # the app's views on the device (bench/gpu_views.py)
    run_part("views", 120, check("views_compared", lambda: run_views(a.device, runs),
                                 lambda r: all(v == "same" for v in r.values())), out, results)
    (out / "summary.json").write_text(json.dumps(results, indent=2, default=str))
    bad = [k for k, v in results.items() if isinstance(v, dict) and v.get("rc") not in (0, None)]
    print(f"{len(bad)} parts failed: {', '.join(bad) or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
