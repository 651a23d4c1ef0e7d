"""GPU speed against transformers, measured in one run (medians; the ratio is what we track).

    python bench/bench_gpu.py --json gpu.json                       # on a CUDA GPU: about a minute
    python bench/bench_gpu.py --json gpu.json --cli-run mini=runs/m --cli-run base=runs/b
    python bench/bench_gpu.py --quick --json /tmp/q.json            # tiny sizes, CPU: seconds

On the device at hand (cuda if there is one, else the CPU; use --quick there):
- peak: one large bf16 GEMM (8192^3 on cuda), timed with CUDA events: the practical ceiling, TFLOP/s;
- forward, bf16 autocast, no gradients, BERT-base at 64x128 and 16x512: transformers'
  BertForPreTraining (SDPA attention) against bertlab's with the same weights (bertlab's
  save_pretrained, transformers' from_pretrained): median ms, TFLOP/s (sizing.flops, matmuls only,
  logits at every position), MFU against the GEMM, ratio ours/transformers;
- a pre-training step (forward + backward + AdamW(fused=True on cuda), bf16 autocast, 15 % of tokens
  labelled, NSP labels; ours with sparse_mlm=True as the Trainer runs it) for mini (vocab 8192) and
  base (30522): tokens/s of each at the largest batch of 512, 256, ... 32 sequences of 128 tokens that
  fits for BOTH; with --compile also ours under torch.compile;
- with --cli-run NAME=DIR: the steady tokens/s of a `python -m bertlab pretrain` run (the median of
  metrics.jsonl's train rows after the first --cli-skip) against the bare step above at the run's
  own model, batch and length (measured again if the train section did not use that shape).

Every measurement is caught on its own: a failure is recorded in the JSON ("error") and the run goes
on. The JSON is rewritten after each section, so a run cut short still leaves what it measured.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import BertConfig, BertForPreTraining, preset, save_pretrained  # noqa: E402
from bertlab.analysis.memory_measure import is_oom, sync, timeit  # noqa: E402
from bertlab.analysis.sizing import flops  # noqa: E402

FULL = {"gemm": 8192, "forward_preset": "base", "forward_shapes": [(64, 128), (16, 512)],
        "train": [("mini", 8192), ("base", 30522)], "batches": [512, 256, 128, 64, 32], "seq_len": 128,
        "reps": 7, "warmup": 3}
QUICK = {"gemm": 256, "forward_preset": "tiny", "forward_vocab": 1000, "forward_shapes": [(2, 16), (1, 32)],
         "train": [("tiny", 1000)], "batches": [8, 4, 2], "seq_len": 16, "reps": 2, "warmup": 1}
SECTIONS = ("gemm", "forward", "train", "cli")
MASK_RATE, LR = 0.15, 1e-4


# ---- timing -------------------------------------------------------------------------------------
def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16)


def error_of(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()[:400]}"


# ---- models -------------------------------------------------------------------------------------
def model_pair(c: BertConfig, device: torch.device, seed: int = 0):
    """bertlab's BertForPreTraining and transformers' (SDPA attention) with the same weights: ours is
    saved with bertlab.save_pretrained and loaded with transformers' from_pretrained."""
    import transformers
    torch.manual_seed(seed)
    ours = BertForPreTraining(c)
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(ours, None, Path(tmp) / "m")
        theirs = transformers.BertForPreTraining.from_pretrained(Path(tmp) / "m", attn_implementation="sdpa",
                                                                 dtype=torch.float32)
    n = lambda m: sum(q.numel() for q in m.parameters())
    assert n(ours) == n(theirs), (n(ours), n(theirs))
    return ours.to(device), theirs.to(device)


def pretraining_batch(c: BertConfig, B: int, T: int, device: torch.device, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, c.vocab_size, (B, T), generator=g)
    labels = torch.where(torch.rand(ids.shape, generator=g) < MASK_RATE, ids, -100)
    tt = torch.zeros_like(ids)
    tt[:, T // 2:] = 1
    nsp = torch.randint(0, 2, (B,), generator=g)
    return {k: v.to(device) for k, v in dict(input_ids=ids, token_type_ids=tt, labels=labels,
                                              next_sentence_label=nsp).items()}


def make_step(model, batch: dict, device: torch.device, bf16: bool = True, **kw):
    """forward + backward + AdamW (fused on cuda), bf16 autocast; the loss is not read back (no sync)."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, fused=device.type == "cuda")

    def step():
        with autocast(device) if bf16 else contextlib.nullcontext():
            loss = model(**batch, **kw).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, opt


# ---- sections -----------------------------------------------------------------------------------
def bench_gemm(n: int, device: torch.device, reps: int) -> dict:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    (t,) = timeit([lambda: a @ b], device, max(reps, 10), 3)
    del a, b
    free(device)
    return {"n": n, "dtype": str(dtype).removeprefix("torch."), "ms": t * 1e3, "tflops": 2 * n ** 3 / t / 1e12}


def bench_forward(cfg: dict, device: torch.device, reps: int, peak: float | None) -> list[dict]:
    c = preset(cfg["forward_preset"], **({"vocab_size": cfg["forward_vocab"]} if cfg.get("forward_vocab") else {}))
    rows = []
    try:
        ours, theirs = model_pair(c, device)
    except Exception as e:  # noqa: BLE001
        return [{"preset": cfg["forward_preset"], "error": error_of(e)}]
    ours.eval(), theirs.eval()
    for B, T in cfg["forward_shapes"]:
        row = {"preset": cfg["forward_preset"], "batch": B, "seq_len": T, "dtype": "bf16 autocast"}
        try:
            ids = torch.randint(5, c.vocab_size, (B, T), generator=torch.Generator().manual_seed(0)).to(device)

            def run(m):
                with torch.inference_mode(), autocast(device):
                    m(input_ids=ids)
            t_ours, t_theirs = timeit([lambda: run(ours), lambda: run(theirs)], device, reps, cfg["warmup"])
            fl = B * flops(c, T)["total"]
            row |= {"ours_ms": t_ours * 1e3, "transformers_ms": t_theirs * 1e3, "ratio": t_ours / t_theirs,
                    "gflop": fl / 1e9, "ours_tflops": fl / t_ours / 1e12, "transformers_tflops": fl / t_theirs / 1e12}
            if peak:
                row |= {"ours_mfu": fl / t_ours / 1e12 / peak, "transformers_mfu": fl / t_theirs / 1e12 / peak}
        except Exception as e:  # noqa: BLE001
            row["error"] = error_of(e)
        rows.append(row)
        free(device)
    del ours, theirs
    free(device)
    return rows


def _fits(step, opt, device) -> bool | BaseException:
    """One step ran (True), ran out of memory (False, the memory given back), or another error."""
    err = None
    try:
        step()
        sync(device)
        return True
    except Exception as e:  # noqa: BLE001 - an OOM's traceback (and the tensors its frames hold) goes here
        if not is_oom(e):
            err = e
    opt.zero_grad(set_to_none=True)
    free(device)
    return False if err is None else err


def train_pair(name: str, vocab: int, cfg: dict, device: torch.device, reps: int, compile_: bool) -> list[dict]:
    """Ours (sparse MLM) and transformers at the largest batch of cfg["batches"] that fits both."""
    c = preset(name, vocab_size=vocab)
    T = cfg["seq_len"]
    ours, theirs = model_pair(c, device)
    rows, tried = [], []
    for B in cfg["batches"]:
        batch = pretraining_batch(c, B, T, device)
        s_ours, o_ours = make_step(ours, batch, device, sparse_mlm=True)
        s_theirs, o_theirs = make_step(theirs, batch, device)
        fit = _fits(s_ours, o_ours, device)
        fit = _fits(s_theirs, o_theirs, device) if fit is True else fit
        if fit is not True:
            tried.append([B, False])
            del batch, s_ours, o_ours, s_theirs, o_theirs
            free(device)
            if fit is False:
                continue  # out of memory: the next, smaller batch
            raise fit
        tried.append([B, True])
        t_ours, t_theirs = timeit([s_ours, s_theirs], device, reps, cfg["warmup"])
        tokens = B * T
        rows.append({"preset": name, "vocab_size": vocab, "batch": B, "seq_len": T, "what": "step",
                     "ours_ms": t_ours * 1e3, "transformers_ms": t_theirs * 1e3,
                     "ours_tokens_per_s": tokens / t_ours, "transformers_tokens_per_s": tokens / t_theirs,
                     "ratio": t_theirs / t_ours, "tried": tried,
                     "ours_train_tflops": B * flops(c, T, training=True)["total_sparse"] / t_ours / 1e12,
                     "transformers_train_tflops": B * flops(c, T, training=True)["total"] / t_theirs / 1e12})
        del s_ours, o_ours, s_theirs, o_theirs
        if compile_:
            row = {"preset": name, "vocab_size": vocab, "batch": B, "seq_len": T, "what": "step, ours compiled"}
            try:
                t0 = time.perf_counter()
                s_c, _ = make_step(torch.compile(ours), batch, device, sparse_mlm=True)
                s_c()
                sync(device)
                row["compile_s"] = time.perf_counter() - t0
                (t_c,) = timeit([s_c], device, reps, cfg["warmup"])
                row |= {"ours_ms": t_c * 1e3, "ours_tokens_per_s": tokens / t_c, "transformers_ms": t_theirs * 1e3,
                        "transformers_tokens_per_s": tokens / t_theirs, "ratio": t_theirs / t_c}
            except Exception as e:  # noqa: BLE001
                row["error"] = error_of(e)
            rows.append(row)
        break
    else:
        rows.append({"preset": name, "vocab_size": vocab, "seq_len": T, "what": "step", "tried": tried,
                     "error": f"no batch of {cfg['batches']} fits both models"})
    del ours, theirs
    free(device)
    return rows


def bare_step(c: BertConfig, B: int, T: int, device: torch.device, reps: int, warmup: int, bf16: bool = True) -> dict:
    """Ours alone: the step train_pair times, at another model or shape (for --cli-run)."""
    torch.manual_seed(0)
    model = BertForPreTraining(c).to(device)
    batch = pretraining_batch(c, B, T, device)
    step, opt = make_step(model, batch, device, bf16, sparse_mlm=True)
    (t,) = timeit([step], device, reps, warmup)
    del model, batch, step, opt
    free(device)
    return {"ms": t * 1e3, "tokens_per_s": B * T / t}


# ---- the CLI's runs -----------------------------------------------------------------------------
def cli_steady(run_dir: str | Path, skip: int = 3) -> dict:
    """A run folder's steady training speed: the median tokens_per_s of metrics.jsonl's rows with
    split "train", after the first `skip` (start-up, compilation, cache warm-up); with no more than
    `skip` rows, the last one. Half-written lines are skipped."""
    rows = []
    path = Path(run_dir) / "metrics.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("split") == "train" and isinstance(r.get("tokens_per_s"), (int, float)):
            rows.append(r)
    if not rows:
        raise ValueError(f"{path} has no train rows with tokens_per_s")
    used = rows[skip:] if len(rows) > skip else rows[-1:]
    return {"rows": len(rows), "used": len(used), "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in used),
            "first_step": used[0].get("step"), "last_step": used[-1].get("step")}


def cli_shape(run_dir: str | Path) -> dict:
    """What the run trained: preset, batch, length, bf16, and the model's config (model/config.json,
    else spec.json's preset and vocabulary, dropout 0 as pretrain's default)."""
    d = Path(run_dir)
    spec = {}
    for name in ("spec.json", "pretrain.json"):
        if (d / name).is_file():
            spec = json.loads((d / name).read_text(encoding="utf-8"))
            break
    shape = {"preset": spec.get("preset", "mini"), "batch": int(spec.get("batch_size", 128)),
             "seq_len": int(spec.get("max_len", 32)), "bf16": bool(spec.get("bf16", False)),
             "accum": int(spec.get("accum", 1) or 1), "arch": spec.get("arch", "bert")}
    if (d / "model" / "config.json").is_file():
        c = BertConfig.from_json_file(d / "model" / "config.json")
    else:
        drop = float(spec.get("dropout", 0.0) or 0.0)
        c = preset(shape["preset"], vocab_size=int(spec.get("vocab_size", 8192)), hidden_dropout_prob=drop,
                   attention_probs_dropout_prob=drop)
    return shape | {"config": c}


def bench_cli(runs: list[str], train_rows: list[dict], device: torch.device, reps: int, warmup: int,
              skip: int) -> list[dict]:
    rows = []
    for spec in runs:
        name, _, folder = spec.partition("=")
        row = {"name": name, "dir": folder}
        try:
            if not folder:
                raise ValueError(f"--cli-run wants NAME=DIR, got {spec!r}")
            row |= cli_steady(folder, skip)
            shape = cli_shape(folder)
            c = shape.pop("config")
            row |= shape | {"vocab_size": c.vocab_size, "dropout": c.hidden_dropout_prob}
            B, T = shape["batch"], shape["seq_len"]
            if shape["arch"] != "bert" or c.model_type != "bert":
                raise ValueError(f"the bare step is BERT's; this run trains {shape['arch']}")
            bare = bare_step(c, B, T, device, reps, warmup, bf16=shape["bf16"])
            row |= {"bare_tokens_per_s": bare["tokens_per_s"], "bare_ms": bare["ms"],
                    "ratio": row["median_tokens_per_s"] / bare["tokens_per_s"]}
            same = [r for r in train_rows if r.get("preset") == shape["preset"] and r.get("batch") == B
                    and r.get("seq_len") == T and r.get("what") == "step" and "error" not in r]
            if same:  # the shape of the train section: the same step, at the preset's dropout
                row["train_section_tokens_per_s"] = same[0]["ours_tokens_per_s"]
        except Exception as e:  # noqa: BLE001
            row["error"] = error_of(e)
            free(device)
        rows.append(row)
    return rows


# ---- report -------------------------------------------------------------------------------------
def fmt(x, spec=",.0f", none="–"):
    return none if x is None else format(x, spec)


def markdown(res: dict) -> str:
    out = [f"## bertlab on {res['device']} (torch {res['torch']}, transformers {res.get('transformers')})", ""]
    g = res.get("gemm") or {}
    if "error" in g:
        out.append(f"GEMM: failed: {g['error']}")
    elif g:
        out.append(f"Peak: one {g['n']}³ {g['dtype']} GEMM, {g['ms']:.2f} ms = **{g['tflops']:.3g} TFLOP/s**")
    if res.get("forward"):
        out += ["", "### Forward, bf16 autocast, no gradients", "",
                "| model | batch × len | bertlab ms | transformers ms | ratio (ours/theirs time) | bertlab TFLOP/s "
                "| transformers TFLOP/s | bertlab MFU | transformers MFU |", "|---|---|---|---|---|---|---|---|---|"]
        for r in res["forward"]:
            if "error" in r:
                out.append(f"| {r['preset']} | {r.get('batch', '')} × {r.get('seq_len', '')} | failed: {r['error'][:150]} "
                           "| | | | | | |")
                continue
            out.append(f"| {r['preset']} | {r['batch']} × {r['seq_len']} | {r['ours_ms']:.2f} | {r['transformers_ms']:.2f} "
                       f"| {r['ratio']:.3f} | {r['ours_tflops']:.3g} | {r['transformers_tflops']:.3g} "
                       f"| {fmt(r.get('ours_mfu'), '.1%')} | {fmt(r.get('transformers_mfu'), '.1%')} |")
    if res.get("train"):
        out += ["", "### Pre-training step (forward + backward + AdamW, bf16 autocast; ours sparse MLM)", "",
                "| model | what | batch × len | bertlab tokens/s | transformers tokens/s | ratio (ours/theirs tokens/s) "
                "| bertlab ms | transformers ms |", "|---|---|---|---|---|---|---|---|"]
        for r in res["train"]:
            name = f"{r['preset']} (vocab {r['vocab_size']})"
            if "error" in r:
                out.append(f"| {name} | {r.get('what', '')} | {r.get('batch', '–')} × {r['seq_len']} "
                           f"| failed: {r['error'][:150]} | | | | |")
                continue
            out.append(f"| {name} | {r['what']} | {r['batch']} × {r['seq_len']} | {r['ours_tokens_per_s']:,.0f} "
                       f"| {r['transformers_tokens_per_s']:,.0f} | {r['ratio']:.3f} | {r['ours_ms']:.1f} "
                       f"| {r['transformers_ms']:.1f} |")
    if res.get("cli"):
        out += ["", "### `python -m bertlab pretrain` against the bare step (goal: ≥ 0.8)", "",
                "| run | model | batch × len | bf16 | CLI tokens/s (median of rows) | bare step tokens/s | ratio |",
                "|---|---|---|---|---|---|---|"]
        for r in res["cli"]:
            if "error" in r:
                out.append(f"| {r['name']} | failed: {r['error'][:200]} | | | | | |")
                continue
            out.append(f"| {r['name']} | {r['preset']} (vocab {r['vocab_size']}) | {r['batch']} × {r['seq_len']} "
                       f"| {'on' if r['bf16'] else 'off'} | {r['median_tokens_per_s']:,.0f} ({r['used']} of {r['rows']}) "
                       f"| {r['bare_tokens_per_s']:,.0f} | **{r['ratio']:.2f}** |")
        out.append("\nThe CLI counts non-pad tokens; the bare step has no padding, AdamW fused on cuda, no "
                   "clipping, no data loading, no logging.")
    if res.get("errors"):
        out += ["", "Errors:"] + [f"- {e}" for e in res["errors"]]
    out.append(f"\n({res.get('seconds', 0):.0f} s in all)")
    return "\n".join(out)


# ---- main ---------------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", metavar="PATH", default=None, help="write every number here as JSON")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a CPU runs it in seconds)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if there is one)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per measurement (median)")
    p.add_argument("--compile", action="store_true", help="also time ours under torch.compile (adds its compile time)")
    p.add_argument("--presets", nargs="+", default=None, help="train section: presets to run (default mini base)")
    p.add_argument("--batches", nargs="+", type=int, default=None, help="train section: batches to try, largest first")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"which to run (default {','.join(SECTIONS)})")
    p.add_argument("--cli-run", action="append", default=[], metavar="NAME=DIR",
                   help="a `bertlab pretrain` run folder to compare with the bare step (repeatable)")
    p.add_argument("--cli-skip", type=int, default=3, help="metrics.jsonl train rows to skip at the start (default 3)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    a = p.parse_args(argv)
    t_start = time.perf_counter()
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = dict(QUICK if a.quick else FULL)
    reps = a.reps or cfg["reps"]
    sections = {s.strip() for s in a.sections.split(",") if s.strip()}
    if sections - set(SECTIONS):
        p.error(f"--sections: unknown {sorted(sections - set(SECTIONS))}; choose from {', '.join(SECTIONS)}")
    try:
        import transformers
        tv = transformers.__version__
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        tv = None
    res = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
           "device_type": device.type, "torch": torch.__version__, "transformers": tv,
           "python": sys.version.split()[0], "quick": a.quick, "reps": reps, "gemm": None, "forward": [],
           "train": [], "cli": [], "errors": []}

    def save():
        res["seconds"] = time.perf_counter() - t_start
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=2, default=str), encoding="utf-8")

    def guarded(what, fn):
        t0 = time.perf_counter()
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            res["errors"].append(f"{what}: {error_of(e)}")
            traceback.print_exc(file=sys.stderr)
            free(device)
        finally:
            print(f"[{what}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)
            save()

    if "gemm" in sections:
        res["gemm"] = guarded("gemm", lambda: bench_gemm(cfg["gemm"], device, reps))
    peak = (res["gemm"] or {}).get("tflops")
    if "forward" in sections:
        res["forward"] = guarded("forward", lambda: bench_forward(cfg, device, reps, peak)) or []
    if "train" in sections:
        train = cfg["train"] if not a.presets else [(n, dict(FULL["train"]).get(n, 8192) if not a.quick else 1000)
                                                    for n in a.presets]
        tcfg = cfg | ({"batches": sorted(a.batches, reverse=True)} if a.batches else {})
        for name, vocab in train:
            res["train"] += guarded(f"train {name}", lambda: train_pair(name, vocab, tcfg, device, reps, a.compile)) or [
                {"preset": name, "vocab_size": vocab, "seq_len": tcfg["seq_len"], "what": "step",
                 "error": res["errors"][-1] if res["errors"] else "failed"}]
    if "cli" in sections and a.cli_run:
        res["cli"] = guarded("cli", lambda: bench_cli(a.cli_run, res["train"], device, reps, cfg["warmup"],
                                                      a.cli_skip)) or []
    save()
    print(markdown(res))
    if a.json:
        print(f"\nJSON: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
