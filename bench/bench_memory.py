"""Estimated against measured peak training memory (bench/SCALING.md, "Memory, measured").

    nice -n 5 python bench/bench_memory.py                 # tiny, mini, small x batch 8, 32 x checkpointing off, on
    nice -n 5 python bench/bench_memory.py --accum 2       # the same with two micro-batches a step
    nice -n 5 python bench/bench_memory.py --guides        # BERT-base at 1, 2, 4, 8 x 512 against the guides' 13.8 GB

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
from bertlab.analysis.memory_measure import guides_gap  # noqa: E402
from bertlab.app.memory_cli import MB, case, recipe_config  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["tiny", "mini", "small"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[8, 32])
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--guides", action="store_true", help="BERT-base (30,522 words, dropout 0.1) at --batch-sizes "
                   "(default 1 2 4 8) x 512, its line drawn out to the guides' 32 x 512")
    a = p.parse_args()
    if a.guides:
        return guides(a.batch_sizes if a.batch_sizes != [8, 32] else [1, 2, 4, 8])
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


def guides(batches: list[int]) -> int:
    """Each batch measured beside the estimate, then the least-squares line at 32 x 512 beside the guides."""
    config, _ = recipe_config("base", None, None, 512)
    peaks = {}
    for b in batches:
        r = case(config, b, 512, False, measure=True)
        peaks[b] = r["measured"]
        print(f"base {b} x 512: measured {r['measured']} B ({r['measured'] / MB:.1f} MB), estimated "
              f"{r['estimate'] / MB:.1f} MB, in {r['measured_phase']}, {r['seconds']:.0f} s", flush=True)
    g = guides_gap(peaks)
    e = g["estimate"]
    print(f"\nper sequence {g['per_sequence'] / MB:.1f} MB, at no sequence {g['fixed'] / MB:.1f} MB; at 32 x 512: "
          f"measured line {g['measured'] / 1e9:.2f} GB, estimate {e['cpu'] / 1e9:.2f} GB (this CPU's step), "
          f"{e['gpu'] / 1e9:.2f} GB (fused attention on a GPU), guides {g['guide']['total'] / 1e9:.1f} GB")
    print("estimate under other assumptions: " + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in e.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
