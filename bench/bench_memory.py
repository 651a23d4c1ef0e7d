"""Estimated against measured peak training memory (bench/SCALING.md, "Memory, measured").

    nice -n 5 python bench/bench_memory.py                 # tiny, mini, small x batch 8, 32 x checkpointing off, on
    nice -n 5 python bench/bench_memory.py --accum 2       # the same with two micro-batches a step

Each case builds the preset as `pretrain` does (vocabulary 8192, dropout 0, 128 positions), runs one
training step to create AdamW's state, then profiles the next (analysis.memory_measure) and sets
its peak beside sizing's estimate. Memory, not time, is measured: a busy machine changes nothing."""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bertlab.analysis.sizing import param_counts  # noqa: E402
from bertlab.app.memory_cli import MB, case, recipe_config  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["tiny", "mini", "small"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[8, 32])
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--accum", type=int, default=1)
    a = p.parse_args()
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads; sequence length {a.seq_len}, accum {a.accum}\n", flush=True)
    lines = ["| model | parameters | batch | checkpointing | estimated | its moment | measured | measured in "
             "| estimate / measured |", "|---|---|---|---|---|---|---|---|---|"]
    worst, t0 = 0.0, time.time()
    for name in a.models:
        config, _ = recipe_config(name, seq_len=a.seq_len)
        n = param_counts(config)["total"]
        for b in a.batch_sizes:
            for ck in (False, True):
                r = case(config, b, a.seq_len, ck, a.accum, measure=True)
                worst = max(worst, abs(r["ratio"] - 1))
                lines.append(f"| {name} | {n / 1e6:.2f}M | {b} | {'on' if ck else 'off'} | {r['estimate'] / MB:.1f} MB "
                             f"| {r['estimate_moment']} | {r['measured'] / MB:.1f} MB | {r['measured_phase']} "
                             f"| {r['ratio']:.3f} |")
                print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    print(f"\nlargest gap {worst:.1%} (goal: within 10 %); {time.time() - t0:.0f} s")
    return 0 if worst < 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
