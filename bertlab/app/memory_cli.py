"""`python -m bertlab memory ...`: a training step's peak memory, estimated (sizing.training_phases)
and, with --measure, measured on this CPU (analysis.memory_measure), with and without activation
checkpointing. bench/bench_memory.py prints the same table for the presets."""
from __future__ import annotations

import json

from ..analysis import memory_measure, sizing
from .compute_cli import model_config

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
                                    accum=accum, mask_bytes=memory_measure.CPU_MASK_BYTES)
    moment, est = max(phases.items(), key=lambda kv: kv[1]["total"])
    row = {"layers": config.num_hidden_layers, "hidden": config.hidden_size, "batch_size": batch_size,
           "seq_len": seq_len, "accum": accum, "checkpointing": checkpointing, "estimate": est["total"],
           "estimate_moment": moment, "estimate_split": est}
    if measure:
        r = memory_measure.measure_step(config, batch_size, seq_len, checkpointing, accum=accum)
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


def add_arguments(p) -> None:
    p.add_argument("--model", nargs="+", default=["tiny"], help="BERT presets (tiny mini small ...), "
                   "FAMILY:PRESET (roberta:mini) or model folders (default tiny)")
    p.add_argument("--batch-size", nargs="+", type=int, default=[8, 32], help="micro-batch sizes (default 8 32)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--checkpointing", choices=("off", "on", "both"), default="both",
                   help="activation checkpointing (default both: a row each)")
    p.add_argument("--vocab-size", type=int, default=8192, help="vocabulary (default 8192, pretrain's; 0 = the model's)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout (default 0, pretrain's; -1 = the model's)")
    p.add_argument("--measure", action="store_true", help="also run one real training step each and measure its "
                   "peak with torch.profiler (seconds to minutes each)")
    p.add_argument("--json", action="store_true", help="print every row as JSON")


def cmd_memory(a) -> int:
    if a.seq_len < 1 or a.accum < 1 or min(a.batch_size) < 1:
        raise ValueError("batch sizes, --seq-len and --accum must be at least 1")
    rows, names = [], []
    for name in a.model:
        config, _ = recipe_config(name, a.vocab_size or None, None if a.dropout < 0 else a.dropout, a.seq_len)
        for b in a.batch_size:
            for ck in {"off": (False,), "on": (True,), "both": (False, True)}[a.checkpointing]:
                rows.append(case(config, b, a.seq_len, ck, a.accum, a.measure))
                names.append(name)
                if a.measure and not a.json:
                    r = rows[-1]
                    print(f"{name} {b}x{a.seq_len} checkpointing {'on' if ck else 'off'}: measured "
                          f"{r['measured'] / MB:.1f} MB, estimated {r['estimate'] / MB:.1f} MB ({r['seconds']:.0f} s)",
                          flush=True)
    if a.json:
        print(json.dumps([{"model": n, **r} for n, r in zip(names, rows)], indent=2, default=str))
        return 0
    print(table(rows, names))
    return 0

