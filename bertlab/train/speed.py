"""How fast this machine is, measured, so that every "about N minutes" the app prints holds here.

An estimate is either work over this machine's measured matmul rate (FLOPs / rate), or seconds timed
on the reference machine scaled by how much faster this one multiplies matrices (`here`). Both read one
measurement, taken once and again after MEASURE_EVERY_S: a server that was busy when it started does not
keep a slow figure for ever. bench/bench_estimates.py times real runs and records the rate they ran at;
tests/test_speed.py holds every estimator to those runs at that rate (a test of the estimator, not of
the clock).
"""
from __future__ import annotations

import threading
import time

import torch

from ..analysis.sizing import flops
from .loop import early_evals, resolve_device
from .precision import bf16_is_fast

# fp32 512x512 matmul FLOP/s of one thread of the 2-core AMD EPYC (AVX2, no native bf16) on which the
# constants below were timed (bench/ESTIMATES.md)
REFERENCE_RATE = 9.0e10
THREADS_EXP = 0.85  # n threads reach n ** THREADS_EXP times one thread's rate
MEASURE_EVERY_S = 600.0
_rates: dict[tuple, tuple[float, float]] = {}  # (bf16, device) -> (rate, when measured)
_lock = threading.Lock()


def matmul_rate(seconds: float = 0.2, n: int = 512, bf16: bool = False, device: str = "cpu") -> float:
    """This machine's matmul rate (FLOP/s) with torch's threads, or a GPU's: fp32, or bf16 where training
    will use it."""
    dev = resolve_device(device)
    dtype = torch.bfloat16 if bf16 and bf16_is_fast(dev.type) else torch.float32
    if dev.type == "cuda":
        n = max(n, 4096)  # a GPU needs big matrices to show its rate
    a, b = torch.randn(n, n, dtype=dtype, device=dev), torch.randn(n, n, dtype=dtype, device=dev)
    torch.mm(a, b)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0, reps = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        reps += 1
        sync()
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def rate(bf16: bool = False, device: str = "cpu") -> float:
    """One CPU thread's measured matmul rate (a GPU's whole rate), remembered for MEASURE_EVERY_S: an
    estimate costs no matmuls. Measured on one thread, so that it is a property of the machine, not of
    how many threads this process happens to use."""
    key, now = (bool(bf16), str(device)), time.monotonic()
    with _lock:
        got = _rates.get(key)
        if got is None or now - got[1] > MEASURE_EVERY_S:
            cpu, before = resolve_device(device).type == "cpu", torch.get_num_threads()
            torch.set_num_threads(1) if cpu else None
            try:
                got = _rates[key] = (matmul_rate(bf16=bf16, device=device), now)
            finally:
                torch.set_num_threads(before) if cpu else None
        return got[0]


def job_rate(threads: int | None, bf16: bool = False, device: str = "cpu") -> float:
    """The matmul rate a job on `threads` CPU threads reaches (threads share memory bandwidth: less
    than one thread's times their number), or the GPU's."""
    if resolve_device(device).type != "cpu":
        return rate(bf16, device)
    return rate(bf16, device) * max(1, threads or torch.get_num_threads()) ** THREADS_EXP


def factor(device: str = "cpu", machine: float | None = None) -> float:
    """How many times longer work takes here than on the reference machine (below 1: faster)."""
    return REFERENCE_RATE / (machine or rate(device=device))


def here(reference_s: float, device: str = "cpu", machine: float | None = None) -> float:
    """Seconds that took `reference_s` on the reference machine, on this one (`machine`: one thread's
    matmul rate measured already, as bench/ESTIMATES.json records it)."""
    return reference_s * factor(device, machine)


def say(seconds: float) -> str:
    """'40 s', '6 min', '1 h 40 min': an estimate, rounded as a person says one."""
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60):.0f} min"
    h, m = divmod(round(seconds / 600) * 10, 60)
    return f"{h:.0f} h" + (f" {m:.0f} min" if m else "")


# ---- pre-training -----------------------------------------------------------------------------------
# at the reference machine, bench/ESTIMATES.md: what a step costs beyond its matmuls (optimizer, masking,
# small ops), the share of the matmul rate training sustains, an evaluation's fixed cost, reading and
# tokenizing one document of the corpus, and starting a job (imports, building the model, first files)
STEP_OVERHEAD_S = 0.06
RATE_SHARE = 0.8
EVAL_OVERHEAD_S = 0.5
PREP_S_PER_DOC = 1.1e-3
START_S = 5.0
CORPUS_DOCS = 25_000  # the shipped IMDB reviews: a corpus read whole when max_docs is not set


def flops_per_step(spec, config, generator=None) -> int:
    """Training FLOPs of one batch at full length (masked-LM logits only at the masked positions)."""
    per = flops(config, spec.max_len, training=True)["total_sparse"]
    if generator is not None:  # ELECTRA: the generator's MLM too; the discriminator has no vocabulary head
        per = flops(config, spec.max_len, training=True, heads=False)["total"] + \
            flops(generator, spec.max_len, training=True)["total_sparse"]
    return int(per * spec.batch_size)


def evaluations(steps: int, every: int, early: int) -> int:
    """How many held-out evaluations a run of `steps` makes (the Trainer's schedule, the last step too)."""
    return len({e for e in early_evals(early, every) if e <= steps} | set(range(every, steps + 1, every)) | {steps})


def pretrain_s(spec, config, generator=None, prepared: bool = True, machine: float | None = None) -> float:
    """Seconds a pre-training run takes here: its steps' FLOPs at the share of the job's matmul rate that
    training sustains, a fixed cost a step, its evaluations, starting, and (`prepared` False) building
    the vocabulary and examples first. `machine`: one thread's matmul rate (default: measured now)."""
    one = machine or rate(spec.bf16, spec.device)
    threads = max(1, spec.threads or torch.get_num_threads()) if resolve_device(spec.device).type == "cpu" else 1
    job, slow = RATE_SHARE * one * threads ** THREADS_EXP, factor(machine=one)
    evals = evaluations(spec.steps, spec.eval_every, spec.eval_early)
    eval_flops = flops(config, spec.max_len)["total_sparse"] * spec.batch_size * spec.eval_batches
    train = spec.steps * (STEP_OVERHEAD_S * slow + spec.accum * flops_per_step(spec, config, generator) / job)
    prep = 0.0 if prepared else PREP_S_PER_DOC * (spec.max_docs or CORPUS_DOCS) * slow
    return START_S * slow + prep + train + evals * (EVAL_OVERHEAD_S * slow + eval_flops / job)
