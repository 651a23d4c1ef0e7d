"""Core speed against transformers, measured in one run (medians; the ratio is what we track).

    python bench/bench_core.py [--reps 7] [--threads 2]

Forward of `base` at 8x128 (fp32 and bf16 autocast, no_grad) and one pre-training step
(forward + backward + AdamW) of `mini` at 32x128 with 15 % of tokens labelled. transformers runs
with its default attention (SDPA) in both; ours uses SDPA too, and sparse MLM logits in training.
The fp32 forward is timed for our plain model and for the same model after `fast.optimize`, beside
a plain (1024x768)@(768x3072) GEMM in the same loop: achieved GFLOP/s (matmul FLOPs from
`sizing.flops` over the median time) against what one GEMM reaches here, the practical ceiling.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import BertConfig, BertForPreTraining, fast, preset  # noqa: E402
from bertlab.analysis.sizing import flops  # noqa: E402

GEMM = (1024, 768, 3072)  # (M, K, N): BERT-base's FFN input projection at 8x128 tokens


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


def forward_models():
    c = preset("base")
    torch.manual_seed(0)
    ours = BertForPreTraining(c).eval()
    theirs = hf_model(c).eval()
    theirs.load_state_dict(ours.state_dict(), strict=False)
    return c, ours, theirs, torch.randint(5, c.vocab_size, (8, 128))


def bench_forward_bf16(reps: int) -> tuple[float, float]:
    _, ours, theirs, ids = forward_models()

    def run(m):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            m(input_ids=ids)
    return timeit([lambda: run(ours), lambda: run(theirs)], reps)


def bench_forward_fp32(reps: int) -> dict[str, float]:
    """Median seconds of transformers, our plain model, our model after fast.optimize, and one GEMM,
    all interleaved in one loop."""
    c, ours, theirs, ids = forward_models()
    optimized = fast.optimize(BertForPreTraining(c).eval())
    optimized.load_state_dict(ours.state_dict())
    M, K, N = GEMM
    a, w = torch.randn(M, K), torch.randn(K, N)

    def run(m):
        with torch.no_grad():
            m(input_ids=ids)

    def gemm():  # ten in a row: one alone is short enough for a scheduler hiccup to dominate
        with torch.no_grad():
            for _ in range(10):
                a @ w
    names = ("transformers", "bertlab", "bertlab fast", "gemm")
    fns = (lambda: run(theirs), lambda: run(ours), lambda: run(optimized), gemm)
    out = dict(zip(names, timeit(fns, reps)))
    out["gemm"] /= 10
    out["model flop"] = ids.shape[0] * flops(c, ids.shape[1])["total"]
    return out


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
    print(f"{'what':<42}{'bertlab':>10}{'transformers':>14}{'ratio':>8}")

    def row(name, ours, theirs):
        print(f"{name:<42}{ours:>9.3f}s{theirs:>13.3f}s{ours / theirs:>7.2f}x", flush=True)
    t = bench_forward_fp32(a.reps)
    row("forward base 8x128 fp32", t["bertlab"], t["transformers"])
    row("forward base 8x128 fp32, fast.optimize", t["bertlab fast"], t["transformers"])
    row("forward base 8x128 bf16 autocast", *bench_forward_bf16(a.reps))
    row("train step mini 32x128 (sparse MLM)", *bench_train_step(a.reps))
    print("\nratio = bertlab time / transformers time (below 1 is faster)")
    M, K, N = GEMM
    gemm = 2 * M * K * N / t["gemm"] / 1e9
    print(f"\nachieved GFLOP/s, fp32 forward of base 8x128 ({t['model flop'] / 1e9:.0f} GFLOP of matmuls) "
          f"against one ({M}x{K})@({K}x{N}) GEMM, measured in the same loop:")
    for name in ("gemm", "transformers", "bertlab", "bertlab fast"):
        rate = (2 * M * K * N if name == "gemm" else t["model flop"]) / t[name] / 1e9
        print(f"  {name:<14}{rate:>7.0f} GFLOP/s{rate / gemm:>7.0%} of the GEMM")
    if t["model flop"] / t["bertlab fast"] > 2 * M * K * N / t["gemm"]:
        print("  (above 100 %: fast.optimize's pre-packed oneDNN GEMMs beat torch's own matmul on this CPU)")


if __name__ == "__main__":
    main()
