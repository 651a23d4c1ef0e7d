"""Core speed against transformers, measured in one run (medians; the ratio is what we track).

    python bench/bench_core.py [--reps 7] [--threads 2]

Forward of `base` at 8x128 (fp32 and bf16 autocast, no_grad) and one pre-training step
(forward + backward + AdamW) of `mini` at 32x128 with 15 % of tokens labelled. transformers runs
with its default attention (SDPA) in both; ours uses SDPA too, and sparse MLM logits in training.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import BertConfig, BertForPreTraining, preset  # noqa: E402


def hf_model(c: BertConfig):
    import transformers
    return transformers.BertForPreTraining(transformers.BertConfig(**c.to_dict()))


def timeit(fns, reps: int) -> list[float]:
    """Median seconds of each fn; the fns alternate within every rep so load drift hits all alike."""
    for fn in fns:
        fn()  # warm-up: allocator, kernels, lazy init
    ts = [[] for _ in fns]
    for _ in range(reps):
        for t, fn in zip(ts, fns):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def bench_forward(reps: int, bf16: bool) -> tuple[float, float]:
    c = preset("base")
    torch.manual_seed(0)
    ours = BertForPreTraining(c).eval()
    theirs = hf_model(c).eval()
    theirs.load_state_dict(ours.state_dict(), strict=False)
    ids = torch.randint(5, c.vocab_size, (8, 128))
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext

    def run(m, **kw):
        with torch.no_grad(), ctx():
            m(input_ids=ids, **kw)
    return timeit([lambda: run(ours), lambda: run(theirs)], reps)


def bench_train_step(reps: int) -> tuple[float, float]:
    c = preset("mini", vocab_size=8192)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, c.vocab_size, (32, 128), generator=g)
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.15, ids, -100)
    nsp = torch.randint(0, 2, (32,), generator=g)
    tt = torch.zeros_like(ids)
    tt[:, 64:] = 1

    def make_step(m, **kw):
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def step():
            out = m(input_ids=ids, token_type_ids=tt, labels=labels, next_sentence_label=nsp, **kw)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    return timeit([make_step(BertForPreTraining(c), sparse_mlm=True), make_step(hf_model(c))], reps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {a.threads} threads, median of {a.reps}\n")
    print(f"{'what':<38}{'bertlab':>10}{'transformers':>14}{'ratio':>8}")
    for name, fn in (("forward base 8x128 fp32", lambda: bench_forward(a.reps, False)),
                     ("forward base 8x128 bf16 autocast", lambda: bench_forward(a.reps, True)),
                     ("train step mini 32x128 (sparse MLM)", lambda: bench_train_step(a.reps))):
        ours, theirs = fn()
        print(f"{name:<38}{ours:>9.3f}s{theirs:>13.3f}s{ours / theirs:>7.2f}x", flush=True)
    print("\nratio = bertlab time / transformers time (below 1 is faster)")


if __name__ == "__main__":
    main()
