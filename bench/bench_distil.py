"""A distilled student against its teacher: parameters and forward time, measured in one run.

    python bench/bench_distil.py STUDENT [--teacher default] [--reps 15] [--threads 1 2]

Both models run the same batches (8 x 64 and 32 x 64 tokens, eval, inference_mode), alternating
within every repetition so the machine's load drifts onto both alike; the figure is the ratio of
medians (DistilBERT's claim: 60 % faster with 40 % fewer parameters, Sanh et al. 2019). Timed twice:
the encoder alone (what a fine-tuned classifier runs; the claim's setting) and with the masked-LM
head at every position (vocabulary logits, the same cost in both models: it dilutes the gain).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import load_pretrained  # noqa: E402
from bertlab.family import encoder_of  # noqa: E402


def medians(models, ids, reps: int) -> list[float]:
    with torch.inference_mode():
        for m in models:
            m(ids)  # warm-up
        ts = [[] for _ in models]
        for _ in range(reps):
            for t, m in zip(ts, models):
                t0 = time.perf_counter()
                m(ids)
                t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("student")
    p.add_argument("--teacher", default=None, help="default: the shipped model")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    teacher, tok = load_pretrained(a.teacher)
    student, _ = load_pretrained(a.student)
    teacher.eval(), student.eval()
    n_t, n_s = (sum(p.numel() for p in m.parameters()) for m in (teacher, student))
    print(f"parameters: teacher {n_t:,} ({teacher.config.num_hidden_layers} layers), student {n_s:,} "
          f"({student.config.num_hidden_layers} layers): {1 - n_s / n_t:.0%} fewer")
    g = torch.Generator().manual_seed(0)
    for threads in a.threads:
        torch.set_num_threads(threads)
        for batch in (8, 32):
            ids = torch.randint(len(tok.special_ids), tok.vocab_size, (batch, 64), generator=g)
            for what, pair in (("encoder", [encoder_of(teacher), encoder_of(student)]),
                               ("with MLM head", [teacher, student])):
                t, s = medians(pair, ids, a.reps)
                print(f"{threads} thread{'s' if threads > 1 else ''}, {batch} x 64 tokens, {what}: teacher "
                      f"{t * 1000:.1f} ms, student {s * 1000:.1f} ms: the student is {t / s:.2f}x as fast")


if __name__ == "__main__":
    main()
