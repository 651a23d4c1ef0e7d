"""`python -m bertlab memory ...`: a training step's peak memory, estimated (sizing.training_phases)
and, with --measure, measured on this CPU (analysis.memory_measure), with and without activation
checkpointing. bench/bench_memory.py prints the same table for the presets.

With --device cuda (or cpu) it runs the device chapter instead (memory_measure.device_chapter): for
each precision (fp32, bf16 autocast), length and batch, the step's measured peak beside the
estimate; the largest batch that trains (GPU only); the latency of one sequence and the best
inference throughput. --quick: a tiny model and sizes (seconds on a CPU)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..analysis import memory_measure
from ..analysis.memory_measure import MB, case, chapter_tables, recipe_config, table


def add_arguments(p) -> None:
    p.add_argument("--model", nargs="+", default=None, help="BERT presets (tiny mini small ...), "
                   "FAMILY:PRESET (roberta:mini) or model folders (default tiny; base with --device cuda)")
    p.add_argument("--batch-size", nargs="+", type=int, default=[8, 32], help="micro-batch sizes (default 8 32)")
    p.add_argument("--seq-len", type=int, nargs="+", default=[128], help="tokens per sequence (default 128; "
                   "several with --device)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--checkpointing", choices=("off", "on", "both"), default=None,
                   help="activation checkpointing (default both: a row each; with --device, off)")
    p.add_argument("--vocab-size", type=int, default=8192, help="vocabulary (default 8192, pretrain's; 0 = the model's)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout (default 0, pretrain's; -1 = the model's)")
    p.add_argument("--measure", action="store_true", help="also run one real training step each and measure its "
                   "peak with torch.profiler (seconds to minutes each)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="every row as JSON: printed, or written to PATH (the table is printed then)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="run the device chapter on this device: measured peak against the estimate for each "
                   "--precision, the largest batch that trains (cuda), latency and throughput")
    p.add_argument("--gpu-chapter", action="store_true",
                   help="run the device chapter on the GPU if there is one, else on the CPU (= --device cuda/cpu)")
    p.add_argument("--precision", nargs="+", choices=memory_measure.PRECISIONS, default=None,
                   help="with --device: fp32 and/or bf16 autocast (default both on cuda, fp32 on cpu)")
    p.add_argument("--max-batch", type=int, default=memory_measure.MAX_FIT_BATCH,
                   help=f"with --device cuda: stop the doubling search here (default {memory_measure.MAX_FIT_BATCH})")
    p.add_argument("--reps", type=int, default=10, help="with --device: timed forwards for the latency (median)")
    p.add_argument("--quick", action="store_true", help="with --device: tiny sizes, a few seconds on a CPU "
                   "(overrides --model, --batch-size, --seq-len)")


CHECKPOINTING = {"off": (False,), "on": (True,), "both": (False, True)}


def _emit(a, data, text: str) -> None:
    """--json alone: the JSON on stdout; --json PATH: the JSON there and the table on stdout."""
    if a.json and a.json != "-":
        Path(a.json).write_text(json.dumps(data, indent=2, default=str))
    if a.json == "-":
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def cmd_memory(a) -> int:
    if min(a.seq_len) < 1 or a.accum < 1 or min(a.batch_size) < 1:
        raise ValueError("batch sizes, --seq-len and --accum must be at least 1")
    if a.gpu_chapter and not a.device:
        import torch
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device:
        return cmd_device(a)
    rows, names = [], []
    for name in a.model or ["tiny"]:
        for seq_len in a.seq_len:
            config, _ = recipe_config(name, a.vocab_size or None, None if a.dropout < 0 else a.dropout, seq_len)
            for b in a.batch_size:
                for ck in CHECKPOINTING[a.checkpointing or "both"]:
                    rows.append(case(config, b, seq_len, ck, a.accum, a.measure))
                    names.append(name)
                    if a.measure and a.json != "-":
                        r = rows[-1]
                        print(f"{name} {b}x{seq_len} checkpointing {'on' if ck else 'off'}: measured "
                              f"{r['measured'] / MB:.1f} MB, estimated {r['estimate'] / MB:.1f} MB "
                              f"({r['seconds']:.0f} s)", flush=True)
    _emit(a, [{"model": n, **r} for n, r in zip(names, rows)], table(rows, names))
    return 0


# ---- the device chapter -------------------------------------------------------------------------
QUICK = {"model": ["tiny"], "batch_size": [2], "seq_len": [16], "reps": 3, "max_batch": 8}


def cmd_device(a) -> int:
    """The device chapter for each --model (memory_measure.device_chapter)."""
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: PyTorch sees no CUDA GPU here; use --device cpu")
    models = a.model or (["base"] if a.device == "cuda" else ["tiny"])
    batches, lengths, reps, cap = a.batch_size, a.seq_len, a.reps, a.max_batch
    if a.quick:
        models, batches, lengths, reps, cap = (QUICK[k] for k in ("model", "batch_size", "seq_len", "reps",
                                                                   "max_batch"))
    precisions = a.precision or (["fp32", "bf16"] if a.device == "cuda" else ["fp32"])
    log = None if a.json == "-" else (lambda s: print(s, file=sys.stderr, flush=True))
    results, texts = [], []
    for name in models:
        config, _ = recipe_config(name, a.vocab_size or None, None if a.dropout < 0 else a.dropout, max(lengths))
        r = memory_measure.device_chapter(config, precisions, batches, lengths, a.device,
                                          CHECKPOINTING[a.checkpointing or "off"], reps=reps, fit_cap=cap, log=log)
        results.append({"model": name, **r})
        texts.append(chapter_tables(r, f"BERT {name}" if ":" not in name else name))
    _emit(a, results, "\n\n".join(texts))
    return 0

