"""The peak memory of one real training step on CPU, set beside sizing.memory's estimate.

How it is measured: torch.profiler with profile_memory=True records every allocation and every free
of PyTorch's CPU allocator, in order; their running sum is what tensors hold at each moment, and
its maximum (plus what existed before: weights, optimizer state) is the step's peak. Process RSS
is too coarse for this: the C allocator keeps freed pages and the interpreter has its own. The
profiler's memory timeline also files every tensor under parameters, gradients, optimizer state,
activations (kept for backward) or temporaries (gradients of activations, scratch), so the peak
comes split. The step is the Trainer's: `accum` micro-batches of forward (masked-LM logits at the
masked 15 % only) and backward, clipping, AdamW, zero_grad(set_to_none=True), measured after a first
step that creates AdamW's state.

On a CUDA GPU (`measure_step_cuda`, `device_chapter`) the peak is the caching allocator's own
max_memory_allocated over the same step (phase by phase), under fp32 or bf16 autocast; the chapter adds the
largest micro-batch that trains (doubling until the GPU runs out of memory), the latency of one
sequence and the throughput of the best inference batch. `device_chapter` on the CPU runs the
profiled step and the timings (no search for the largest batch: the CPU would swap, not fail)."""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from .. import family
from ..config import BertConfig
from ..model import set_gradient_checkpointing
from . import sizing
from .compute import model_config

PHASES = ("forward", "backward", "optimizer")
PRECISIONS = ("fp32", "bf16")  # bf16 = bf16 autocast over fp32 weights, as `pretrain --bf16`
CPU_MASK_BYTES = 4  # PyTorch's CPU dropout keeps its mask as floats
# the profiler's categories -> ours (torch.profiler._memory_profiler.Category names)
SPLIT = {"PARAMETER": "weights", "GRADIENT": "gradients", "OPTIMIZER_STATE": "optimizer", "ACTIVATION": "activations",
         "INPUT": "activations", "TEMPORARY": "temporaries", "AUTOGRAD_DETAIL": "temporaries", None: "temporaries"}


def _batch(c: BertConfig, parts: frozenset, B: int, T: int, g: torch.Generator) -> dict:
    """Random token ids with exactly ceil(15 %) masked-LM targets (as sizing counts them), a pair label
    where the model has a pair head, ELECTRA's replaced/original labels."""
    ids = torch.randint(5, c.vocab_size, (B, T), generator=g)
    kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if family.MEMBERS[c.model_type].token_types:
        kw["token_type_ids"] = torch.zeros_like(ids)
    if "mlm" in parts:
        labels = torch.full((B * T,), -100)
        at = torch.randperm(B * T, generator=g)[:math.ceil(sizing.MLM_FRACTION * B * T)]
        labels[at] = ids.reshape(-1)[at]
        kw |= {"labels": labels.view(B, T), "sparse_mlm": True}
    if "rtd" in parts:
        kw["labels"] = torch.randint(0, 2, (B, T), generator=g)
    if "nsp" in parts:
        kw["next_sentence_label"] = torch.randint(0, 2, (B,), generator=g)
    return kw


def _autocast(device_type: str, dtype: str):
    return (torch.autocast(device_type, dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext())


def _timeline_split(prof) -> dict | None:
    """Bytes by kind at the peak of the profiler's memory timeline, or None where torch lacks it."""
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")
    except Exception:  # a private API: the split is a bonus, the peak does not depend on it
        return None
    at = max(sizes, key=sum)
    split = dict.fromkeys(("weights", "gradients", "optimizer", "activations", "temporaries"), 0)
    for cat, i in _CATEGORY_TO_INDEX.items():
        split[SPLIT[getattr(cat, "name", None)]] += at[i + 1]  # column 0 is unused
    return split


def measure_step(config: BertConfig, batch_size: int, seq_len: int, checkpointing: bool = False,
                 accum: int = 1, optimizer: str = "adamw", seed: int = 0, split: bool = True,
                 dtype: str = "fp32") -> dict:
    """Peak bytes of one training step of config's pre-training model (family.build) at micro-batch
    `batch_size` x `seq_len`, with `accum` micro-batches per optimizer step, beside sizing.memory's
    estimate for the same step. Returns {"measured": {"peak", "weights", "gradients", "optimizer",
    "activations", "temporaries", "phase"}, "estimate": sizing.memory(...), "ratio": estimate / measured,
    "seconds", and the settings}; the split (`split`: it takes the profiler's shapes and stacks, several
    seconds more) is at the profiler timeline's peak, and absent where torch cannot give it. `dtype`
    "bf16": the forward under bf16 autocast (weights, gradients and AdamW stay fp32)."""
    if dtype not in PRECISIONS:
        raise ValueError(f"dtype must be one of {', '.join(PRECISIONS)}, got {dtype!r}")
    if optimizer not in ("adamw", "sgd"):
        raise ValueError(f"optimizer must be adamw or sgd, got {optimizer!r}")
    if batch_size < 1 or accum < 1 or not 1 <= seq_len <= config.max_tokens:
        raise ValueError(f"batch size and accum must be at least 1 and the length from 1 to {config.max_tokens}")
    arch = sizing.architecture_of(config)
    parts = sizing.ARCHITECTURES[arch][1]
    torch.manual_seed(seed)
    model = set_gradient_checkpointing(family.build(config).train(), checkpointing)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.AdamW(params, lr=1e-4) if optimizer == "adamw"
           else torch.optim.SGD(params, lr=1e-4, momentum=0.9))
    g = torch.Generator().manual_seed(seed)

    def step():
        for _ in range(accum):
            with record_function("forward"), _autocast("cpu", dtype):
                loss = model(**_batch(config, parts, batch_size, seq_len, g)).loss  # the outputs go, as in the Trainer
            with record_function("backward"):
                (loss / accum).backward()
            del loss
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

    step()  # AdamW's moments exist from here on, as at every later step
    held = sum(t.untyped_storage().nbytes() for t in params)
    held += sum(v.untyped_storage().nbytes() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=split, with_stack=split) as prof:
        step()
    seconds = time.perf_counter() - t0
    events = list(prof.profiler.kineto_results.events())
    now = top = top_ns = 0
    for e in events:  # allocations (+) and frees (-) in the order the allocator saw them
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU:
            now += e.nbytes()
            if now > top:
                top, top_ns = now, e.start_ns()
    phase = next((e.name() for e in events if e.name() in PHASES and e.start_ns() <= top_ns <= e.end_ns()), None)
    measured = {"peak": held + top, **((split and _timeline_split(prof)) or {}), "phase": phase}
    estimate = sizing.memory(config, batch_size, seq_len, dtype=dtype, training=True, optimizer=optimizer,
                             sparse_mlm=True, checkpointing=checkpointing, accum=accum, mask_bytes=CPU_MASK_BYTES)
    return {"device": "cpu", "dtype": dtype, "model_type": config.model_type, "architecture": arch, "layers": config.num_hidden_layers,
            "hidden": config.hidden_size, "batch_size": batch_size, "seq_len": seq_len, "accum": accum,
            "checkpointing": checkpointing, "optimizer": optimizer, "measured": measured, "estimate": estimate,
            "ratio": estimate["total"] / measured["peak"], "seconds": round(seconds, 2)}


# ---- on a CUDA GPU ------------------------------------------------------------------------------
CUDA_MASK_BYTES = 1  # CUDA's dropout keeps a bool mask
MAX_FIT_BATCH = 4096  # the doubling search for the largest batch stops here even if it still fits


def device_name(device: str | torch.device) -> str:
    d = torch.device(device)
    if d.type == "cuda":
        return torch.cuda.get_device_name(d)
    import platform
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _trainer(config: BertConfig, device: torch.device, dtype: str, checkpointing: bool = False,
             optimizer: str = "adamw", seed: int = 0, accum: int = 1):
    """A fresh pre-training model on `device` and a step(batch_size, seq_len, marks) as the Trainer takes
    it (accum micro-batches, clipping, the optimizer, gradients set to None); `marks(phase)` is called
    at the end of each phase."""
    arch = sizing.architecture_of(config)
    parts = sizing.ARCHITECTURES[arch][1]
    torch.manual_seed(seed)
    model = set_gradient_checkpointing(family.build(config).to(device).train(), checkpointing)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.AdamW(params, lr=1e-4) if optimizer == "adamw"
           else torch.optim.SGD(params, lr=1e-4, momentum=0.9))
    g = torch.Generator().manual_seed(seed)

    def step(batch_size: int, seq_len: int, mark=lambda phase: None):
        for _ in range(accum):
            kw = {k: v.to(device) if torch.is_tensor(v) else v
                  for k, v in _batch(config, parts, batch_size, seq_len, g).items()}
            with _autocast(device.type, dtype):
                loss = model(**kw).loss
            del kw
            mark("forward")
            (loss / accum).backward()
            del loss
            mark("backward")
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        mark("optimizer")
    return model, opt, step


def measure_step_cuda(config: BertConfig, batch_size: int, seq_len: int, dtype: str = "fp32",
                      checkpointing: bool = False, accum: int = 1, optimizer: str = "adamw", seed: int = 0,
                      device: str | torch.device = "cuda") -> dict:
    """measure_step's GPU twin: the peak of one training step (after a first one that creates the
    optimizer's state) as torch.cuda.max_memory_allocated sees it, phase by phase, beside sizing.memory's
    estimate for the same step (bool dropout masks; fused attention). Same keys as measure_step; the
    measured split is by phase ({"forward", "backward", "optimizer"}: each phase's own peak) and
    "reserved" is what the caching allocator holds from the device after the step (blocks rounded up, kept)."""
    if dtype not in PRECISIONS:
        raise ValueError(f"dtype must be one of {', '.join(PRECISIONS)}, got {dtype!r}")
    if batch_size < 1 or accum < 1 or not 1 <= seq_len <= config.max_tokens:
        raise ValueError(f"batch size and accum must be at least 1 and the length from 1 to {config.max_tokens}")
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError("measure_step_cuda needs a CUDA GPU; measure_step measures on the CPU")
    _free(dev)
    model, opt, step = _trainer(config, dev, dtype, checkpointing, optimizer, seed, accum)
    step(batch_size, seq_len)
    sync(dev)
    peaks = dict.fromkeys(PHASES, 0)

    def mark(phase):
        sync(dev)
        peaks[phase] = max(peaks[phase], torch.cuda.max_memory_allocated(dev))
        torch.cuda.reset_peak_memory_stats(dev)  # from here the peak starts at what is allocated now

    torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    step(batch_size, seq_len, mark)
    sync(dev)
    seconds = time.perf_counter() - t0
    phase = max(peaks, key=peaks.get)
    reserved = torch.cuda.memory_reserved(dev)  # the cache keeps what it took: at least the peak's blocks
    del model, opt, step
    _free(dev)
    estimate = sizing.memory(config, batch_size, seq_len, dtype=dtype, training=True, optimizer=optimizer,
                             sparse_mlm=True, checkpointing=checkpointing, accum=accum,
                             fused_attention=True, mask_bytes=CUDA_MASK_BYTES)
    measured = {"peak": peaks[phase], "phase": phase, "by_phase": peaks, "reserved": reserved}
    return {"device": device_name(dev), "dtype": dtype, "model_type": config.model_type,
            "architecture": sizing.architecture_of(config), "layers": config.num_hidden_layers,
            "hidden": config.hidden_size, "batch_size": batch_size, "seq_len": seq_len, "accum": accum,
            "checkpointing": checkpointing, "optimizer": optimizer, "measured": measured, "estimate": estimate,
            "ratio": estimate["total"] / measured["peak"], "seconds": round(seconds, 3)}


def largest_batch(config: BertConfig, seq_len: int, dtype: str = "fp32", device: str | torch.device = "cuda",
                  checkpointing: bool = False, start: int = 1, cap: int = MAX_FIT_BATCH) -> dict:
    """The largest micro-batch (start, 2·start, 4·start, ...) whose training step runs on the GPU, doubling
    until it runs out of memory (or reaches `cap`). {"batch": the last that ran (None if none did),
    "oom_at": the first that did not (None if none failed), "tried": [[batch, ran], ...], "peak": bytes
    at the last that ran}. On the CPU {"batch": None, "note": ...}: a CPU swaps rather than fails."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return {"batch": None, "oom_at": None, "tried": [], "peak": None,
                "note": "on a GPU only: a CPU swaps to disk instead of running out of memory"}
    _free(dev)
    model, opt, step = _trainer(config, dev, dtype, checkpointing)
    best, oom_at, tried, peak, b = None, None, [], None, start
    while b <= cap:
        torch.cuda.reset_peak_memory_stats(dev)
        ok = _try(functools.partial(step, b, seq_len), dev)  # not a lambda: `step` is deleted below
        if ok is not True:
            opt.zero_grad(set_to_none=True)
            _free(dev)
            tried.append([b, False])
            if ok is False:
                oom_at = b
                break
            raise ok
        sync(dev)
        tried.append([b, True])
        best, peak = b, torch.cuda.max_memory_allocated(dev)
        b *= 2
    del model, opt, step
    _free(dev)
    return {"batch": best, "oom_at": oom_at, "tried": tried, "peak": peak, "cap": cap}


def _try(fn, dev: torch.device):
    """True if fn ran; False if it ran out of memory; any other error, returned (raised by the caller
    outside this frame, so the OOM's traceback, and the tensors it holds, are gone)."""
    try:
        fn()
        sync(dev)
        return True
    except Exception as e:  # noqa: BLE001
        return False if is_oom(e) else e


def timeit(fns, device: torch.device, reps: int, warmup: int) -> list[float]:
    """Median seconds of each fn; the fns alternate within every rep so drift hits all alike. CUDA
    events on a GPU (the kernels' own time from the first launch to the last), perf_counter on CPU."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    sync(device)
    ts = [[] for _ in fns]
    for _ in range(reps):
        for t, fn in zip(ts, fns):
            if device.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                t.append(a.elapsed_time(b) / 1000)
            else:
                t0 = time.perf_counter()
                fn()
                t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def inference_speed(config: BertConfig, seq_len: int, dtype: str = "fp32", device: str | torch.device = "cuda",
                    max_batch: int = 256, reps: int = 10, seed: int = 0) -> dict:
    """The pre-training model's forward (no gradients; every position's vocabulary logits, as fill-mask
    computes them): median latency of one sequence, and sequences/s at batches 1, 2, 4, ... max_batch
    (stopping at the first that runs out of memory); the best of them."""
    dev = torch.device(device)
    _free(dev)
    torch.manual_seed(seed)
    model = family.build(config).to(dev).eval()
    g = torch.Generator().manual_seed(seed)
    rates, latency, b, err = {}, None, 1, None
    while b <= max_batch:
        ids = torch.randint(5, config.vocab_size, (b, seq_len), generator=g).to(dev)

        def fwd():
            with torch.inference_mode(), _autocast(dev.type, dtype):
                model(ids)
        t = None

        def timed():
            nonlocal t
            t = timeit([fwd], dev, reps if b == 1 else max(3, reps // 2), 2)[0]
        ok = _try(timed, dev)
        del ids
        if ok is not True:
            _free(dev)
            if ok is not False:
                err = f"{type(ok).__name__}: {ok}"
            break
        if b == 1:
            latency = t
        rates[b] = b / t
        b *= 2
    _free(dev)  # the model goes with this frame: fwd reads it, so no `del model` here
    best = max(rates, key=rates.get) if rates else None
    return {"latency_ms": None if latency is None else latency * 1000, "seq_per_s": rates, "best_batch": best,
            "best_seq_per_s": rates.get(best), "error": err}


def device_chapter(config: BertConfig, precisions=("fp32", "bf16"), batch_sizes=(8, 32), seq_lens=(128,),
                   device: str | torch.device | None = None, checkpointing=(False,), reps: int = 10,
                   fit_cap: int = MAX_FIT_BATCH, infer_cap: int | None = None, log=None) -> dict:
    """For each precision and length: every batch's training-step peak beside sizing's estimate
    (measure_step_cuda on a GPU, the profiled measure_step on the CPU), the largest batch that trains
    (GPU only), the latency of one sequence and the best inference throughput (at batches doubling up
    to the largest that trains, or to `infer_cap`; on the CPU to max(batch_sizes)). A measurement that
    fails is recorded (its "error") and the rest goes on. `log(str)` hears each result as it comes."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    say = log or (lambda s: None)
    out = {"device": device_name(dev), "device_type": dev.type, "torch": torch.__version__,
           "layers": config.num_hidden_layers, "hidden": config.hidden_size, "vocab_size": config.vocab_size,
           "memory": [], "fit": [], "speed": []}
    if dev.type == "cuda":
        out["device_memory"] = torch.cuda.get_device_properties(dev).total_memory
    for dtype in precisions:
        if dev.type == "cuda" and dtype == "bf16" and not torch.cuda.is_bf16_supported():
            out["memory"].append({"dtype": dtype, "error": "this GPU has no bf16"})
            continue
        for T in seq_lens:
            for B in batch_sizes:
                for ck in checkpointing:
                    row = {"dtype": dtype, "batch_size": B, "seq_len": T, "checkpointing": ck}
                    try:
                        r = (measure_step_cuda(config, B, T, dtype, ck, device=dev) if dev.type == "cuda"
                             else measure_step(config, B, T, ck, split=False, dtype=dtype))
                        row |= {"measured": r["measured"]["peak"], "phase": r["measured"]["phase"],
                                "estimate": r["estimate"]["total"], "ratio": r["ratio"], "seconds": r["seconds"]}
                        if "reserved" in r["measured"]:
                            row["reserved"] = r["measured"]["reserved"]
                    except Exception as e:  # noqa: BLE001 - one failure must not lose the others
                        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                        _free(dev)
                    out["memory"].append(row)
                    say(f"memory {dtype} {B}x{T} ck {'on' if ck else 'off'}: " + (
                        row.get("error") or f"measured {row['measured'] / 1e6:.1f} MB, estimated "
                        f"{row['estimate'] / 1e6:.1f} MB"))
            fit = {"dtype": dtype, "seq_len": T}
            try:
                fit |= largest_batch(config, T, dtype, dev, cap=fit_cap)
            except Exception as e:  # noqa: BLE001
                fit |= {"batch": None, "error": f"{type(e).__name__}: {str(e)[:300]}"}
                _free(dev)
            out["fit"].append(fit)
            say(f"largest batch {dtype} x{T}: {fit.get('batch')} ({fit.get('error') or fit.get('note') or ''})")
            cap = infer_cap or (fit.get("batch") if dev.type == "cuda" else None) or max(batch_sizes)
            speed = {"dtype": dtype, "seq_len": T, "max_batch": cap}
            try:
                speed |= inference_speed(config, T, dtype, dev, max_batch=cap, reps=reps)
            except Exception as e:  # noqa: BLE001
                speed |= {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                _free(dev)
            out["speed"].append(speed)
            say(f"inference {dtype} x{T}: latency {speed.get('latency_ms')} ms, best "
                f"{speed.get('best_seq_per_s')} seq/s at {speed.get('best_batch')}")
    return out


# ---- rows and tables the command line and the Scaling tab show -------------------------------------
MB = 1e6


def recipe_config(name: str, vocab_size: int | None = 8192, dropout: float | None = 0.0, seq_len: int = 128):
    """A model as `pretrain` builds it (a preset, FAMILY:PRESET or folder; its WordPiece vocabulary of
    8192, dropout 0 and max(128, seq_len) positions: the CPU recipe); a folder keeps its positions."""
    c, where = model_config(name)
    changes = {} if where == name else {"max_position_embeddings": max(128, seq_len) + c.position_offset}
    if vocab_size:
        changes["vocab_size"] = vocab_size
    if dropout is not None:
        changes |= {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    return (c.replace(**changes) if changes else c), where


def case(config, batch_size: int, seq_len: int, checkpointing: bool, accum: int = 1, measure: bool = False) -> dict:
    """One row: the estimate (its peak moment too) and, if asked, the measured peak beside it."""
    phases = sizing.training_phases(config, batch_size, seq_len, sparse_mlm=True, checkpointing=checkpointing,
                                    accum=accum, mask_bytes=CPU_MASK_BYTES)
    moment, est = max(phases.items(), key=lambda kv: kv[1]["total"])
    row = {"layers": config.num_hidden_layers, "hidden": config.hidden_size, "batch_size": batch_size,
           "seq_len": seq_len, "accum": accum, "checkpointing": checkpointing, "estimate": est["total"],
           "estimate_moment": moment, "estimate_split": est}
    if measure:
        r = measure_step(config, batch_size, seq_len, checkpointing, accum=accum)
        assert r["estimate"]["total"] == est["total"]  # one model of memory, two callers
        row |= {"measured": r["measured"]["peak"], "measured_phase": r["measured"]["phase"],
                "measured_split": r["measured"], "ratio": r["ratio"], "seconds": r["seconds"]}
    return row


def table(rows: list[dict], names: list[str]) -> str:
    """A Markdown table of the rows (names: each row's model name)."""
    measured = any("measured" in r for r in rows)
    head = "| model | batch × len | accum | checkpointing | estimated peak | its moment |"
    head += " measured peak | estimate / measured |" if measured else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in zip(names, rows):
        line = (f"| {name} | {r['batch_size']} × {r['seq_len']} | {r['accum']} | {'on' if r['checkpointing'] else 'off'} "
                f"| {r['estimate'] / MB:.1f} MB | {r['estimate_moment']} |")
        if measured:
            line += f" {r['measured'] / MB:.1f} MB | {r['ratio']:.3f} |" if "measured" in r else " | |"
        lines.append(line)
    return "\n".join(lines)


def chapter_tables(result: dict, name: str) -> str:
    """Markdown: the peaks against the estimate, the largest batch, latency and throughput."""
    lines = [f"### {name} on {result['device']}", "",
             "| precision | batch × len | checkpointing | measured peak | estimated peak | estimate / measured | peak in |",
             "|---|---|---|---|---|---|---|"]
    for r in result["memory"]:
        what = f"| {r['dtype']} | {r.get('batch_size', '')} × {r.get('seq_len', '')} | " \
               f"{'on' if r.get('checkpointing') else 'off'} |"
        if "error" in r:
            lines.append(f"{what} failed: {r['error'][:120]} | | | |")
        else:
            lines.append(f"{what} {r['measured'] / MB:.1f} MB | {r['estimate'] / MB:.1f} MB | {r['ratio']:.3f} "
                         f"| {r['phase']} |")
    lines += ["", "| precision | len | largest batch that trains | first that did not fit | latency, 1 sequence "
              "| best inference throughput |", "|---|---|---|---|---|---|"]
    for f, s in zip(result["fit"], result["speed"]):
        fit = f.get("error") or (f"{f['batch']}" + (f" (the search stops at {f.get('cap')})"
                                                    if f.get("batch") and not f.get("oom_at") else "")
                                 if f.get("batch") else (f.get("note") or "none"))
        lat = f"{s['latency_ms']:.2f} ms" if s.get("latency_ms") is not None else (s.get("error") or "–")
        thr = (f"{s['best_seq_per_s']:,.0f} sequences/s at batch {s['best_batch']}" if s.get("best_batch")
               else (s.get("error") or "–"))
        lines.append(f"| {f['dtype']} | {f['seq_len']} | {fit} | {f.get('oom_at') or '–'} | {lat} | {thr} |")
    return "\n".join(lines)


# ---- the guides' 13.8 GB against measured BERT-base steps -------------------------------------------
# Peak bytes of BERT-base's training step (30,522 words, dropout 0.1, fp32, AdamW) at 512 tokens, by
# micro-batch, measured by measure_step on a 2-core AMD EPYC, torch 2.13 (bench/ESTIMATES.md):
# `python bench/bench_memory.py --guides`. A CPU this size cannot hold 32 × 512, so the line is drawn out.
BASE_512_MEASURED = {1: 2232422148, 2: 3033885444, 4: 4647747524, 8: 7934576988}


def per_sequence(peaks: dict[int, int]) -> tuple[float, float]:
    """(bytes at no sequence, bytes per sequence): the least-squares line of the peaks against the
    micro-batch at one length; activations grow linearly in it, the weights and AdamW do not."""
    slope, fixed = statistics.linear_regression(list(peaks), list(peaks.values()))
    return fixed, slope


def guides_gap(peaks: dict[int, int] | None = None) -> dict:
    """The guides' BERT-base figure beside the measured line drawn out to their 32 × 512 and beside
    sizing's estimate under each assumption (sizing.memory_assumptions)."""
    g = sizing.GUIDE_BASE_TRAINING
    B, T = g["batch_size"], g["seq_len"]
    fixed, slope = per_sequence(peaks or BASE_512_MEASURED)
    c = recipe_config("base", vocab_size=None, dropout=None, seq_len=T)[0]
    return {"guide": g, "batches": sorted(peaks or BASE_512_MEASURED), "fixed": fixed, "per_sequence": slope,
            "measured": fixed + slope * B, "estimate": sizing.memory_assumptions(c, B, T),
            "heads": c.num_attention_heads, "layers": sizing.layers_run(c)}
