"""The Scaling tab's memory section: a training step's peak memory as sizing estimates it, and, on a
click, as one real step on this server measures it (torch.profiler, analysis.memory_measure), with
activation checkpointing off and on. The step runs in a child process (`python -m bertlab memory
--measure --json`), one at a time, within caps, so a click cannot starve the server.

Below it, "On a GPU": where the server has a CUDA GPU, a button runs the device chapter there (`python
-m bertlab memory --device cuda`: peaks in fp32 and bf16 against the estimate, the largest batch
that trains, latency and throughput); where it has none, a plain note, the estimate, and the
published peak speeds of two GPUs."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go
import torch

from ....analysis import compute, memory_measure, sizing
from ...limits import limits
from ..shared import common
from ..shared.common import mistakes, user_error

EXPLAIN = """**Where does training memory go, and what does checkpointing buy?** A training step keeps
the weights and AdamW's two moments (12 bytes a parameter in fp32) all along. On top of that, the
forward pass **saves activations** for backward: every layer keeps about 8 copies of its B×T×H
input-sized tensors and 2 of the feed-forward's B×T×4H, so they grow with the micro-batch, the length
and the depth. The peak usually comes at the start of backward, when all of them are still there
and the masked-word logits get their gradients.

- **Activation checkpointing** keeps only each layer's *input* and runs the layer again during
  backward, one layer at a time: the numbers are the same (bit for bit), the compute is about a third
  more (one more forward), and the activations shrink from L layers' worth to L inputs + one layer.
- **Gradient accumulation** (`--accum N`) runs N micro-batches before each optimizer step: the
  activations follow the micro-batch, but the gradients then stay in memory all along.
- **Measure** runs one real training step of a fresh model on this server and records every allocation
  with torch.profiler: its peak sits beside the estimate, split by what holds it.

From a terminal:
- `python -m bertlab memory --measure`
- `python -m bertlab pretrain --grad-checkpointing --accum 2`"""

NOTES = """*Estimated*: `sizing.training_phases`, the bytes alive at four moments of the step (the head's
backward, the top and bottom layer's backward, the optimizer step); the largest is the peak. *Measured*:
the running sum of the CPU allocator's allocations and frees in one profiled step, plus the weights and
AdamW state held before it; its split is the profiler's own filing of each tensor (under checkpointing
it files a recomputed layer as temporaries). Neither counts the Python process itself, the allocator's
fragmentation, or what torch's kernels take outside its allocator; on a GPU the caching allocator rounds
each block up too. Models are BERT presets as `pretrain` builds them (8192 words, dropout 0)."""


def guides_md(gap: dict | None = None) -> str:
    """The guides' 13.8 GB for BERT-base beside a measured step drawn out to 32 × 512, and which
    assumptions separate them (memory_measure.guides_gap)."""
    g = gap or memory_measure.guides_gap()
    e, G, guide = g["estimate"], 1e9, g["guide"]
    B, T = guide["batch_size"], guide["seq_len"]
    return (f"**The guides' figure.** The guides (004, the textbook chapter) put training BERT-base at "
            f"{B} × {T} tokens in fp32 at about {guide['total'] / G:.1f} GB, {guide['activations'] / G:.0f} GB "
            f"of it activations. Measured on a 2-core CPU at {', '.join(map(str, g['batches'][:-1]))} and "
            f"{g['batches'][-1]} × {T} (bench/ESTIMATES.md), each extra sequence adds "
            f"{g['per_sequence'] / MB:,.0f} MB; drawn out to {B} sequences that is **{g['measured'] / G:.1f} GB**, "
            f"and the estimate for the same step is {e['cpu'] / G:.1f} GB. The guides describe a different step. "
            f"With attention dropout on, PyTorch's CPU attention keeps, for each sequence, every layer's "
            f"{g['heads']} × {T} × {T} probabilities, their dropped-out copy and the mask: "
            f"{e['attention_maps'] / G:.1f} GB for {B} sequences and {g['layers']} layers (and its dropout masks "
            f"are floats). On a GPU bertlab's attention is one fused kernel that keeps none of them: the estimate "
            f"is then {e['gpu'] / G:.1f} GB, near the guides' total, and so is an attention that keeps the maps in "
            f"bf16 ({e['bf16'] / G:.1f} GB). The guides also count every gradient, which does not exist yet at "
            f"this peak (backward's start). The Architecture tab and `info` count the maps and the vocabulary "
            f"logits at every position ({e['all_logits'] / G:.1f} GB); `pretrain` computes logits at the masked "
            f"15 % only.")


SIZES = ("tiny", "mini", "small")  # at most small: 1 GB and about a minute at the caps
MAX_BATCH, LENGTHS, MAX_TOKENS = 32, (32, 64, 128, 256), 4096  # a micro-batch of at most 32 × 128 tokens
MODES = {"off": (False,), "on": (True,), "both": (False, True)}
TIMEOUT_S = 600
PACKAGE_ROOT = str(Path(__file__).resolve().parents[4])
PARTS = [("weights", "weights", "#1f77b4"), ("optimizer", "AdamW state", "#2ca02c"),
         ("gradients", "gradients", "#ff7f0e"), ("activations", "saved activations", "#9467bd"),
         ("temporaries", "gradients of activations, scratch", "#d62728")]
MB = 1e6
EXAMPLES = [["tiny", 32, 128, "both", 1], ["mini", 16, 128, "both", 1], ["small", 8, 128, "both", 1],
            ["tiny", 8, 128, "off", 4]]


def checked(size, batch, seq_len, mode, accum) -> tuple[str, int, int, str, int]:
    """The form's values within this server's caps, or a user_error saying which is out."""
    if size not in SIZES:
        raise user_error(f"The model must be one of {', '.join(SIZES)} here, got {size!r}.")
    if mode not in MODES:
        raise user_error(f"Checkpointing must be off, on or both, got {mode!r}.")
    b = common.whole_number(batch, "micro-batch", 1, MAX_BATCH)
    t = common.whole_number(seq_len, "sequence length", 8, max(LENGTHS))
    a = common.whole_number(accum, "number of accumulated micro-batches", 1, 4)
    if b * t > MAX_TOKENS:
        raise user_error(f"{b} × {t} = {b * t:,} tokens a micro-batch: this server measures at most "
                         f"{MAX_TOKENS:,} (e.g. 32 × 128 or 16 × 256).")
    return size, b, t, mode, a


def estimate_rows(size, batch, seq_len, mode, accum) -> list[dict]:
    config, _ = memory_measure.recipe_config(size, seq_len=seq_len)
    return [memory_measure.case(config, batch, seq_len, ck, accum) for ck in MODES[mode]]


@functools.lru_cache(maxsize=64)
def measured_rows(size: str, batch: int, seq_len: int, mode: str, accum: int) -> tuple[dict, ...]:
    """One profiled step per checkpointing setting, in a child process (a fresh allocator, and the
    server's memory untouched); the same inputs give the same bytes, so results are kept."""
    cmd = [sys.executable, "-m", "bertlab", "memory", "--model", size, "--batch-size", str(batch), "--seq-len",
           str(seq_len), "--accum", str(accum), "--checkpointing", mode, "--measure", "--json"]
    path = os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)  # this very bertlab
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": str(limits().job_threads)}
    try:
        done = subprocess.run(["nice", "-n", "5", *cmd], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise user_error(f"The measurement took over {TIMEOUT_S // 60} minutes (the server is busy): try a "
                         f"smaller model or batch.") from None
    if done.returncode != 0:
        raise RuntimeError(f"the memory measurement failed: {done.stderr.strip()[-500:]}")
    return tuple(json.loads(done.stdout))


def figure(rows: list[dict]) -> go.Figure:
    """Stacked bars, estimated beside measured, for each checkpointing setting."""
    bars = []
    for r in rows:
        ck = "on" if r["checkpointing"] else "off"
        est = dict(r["estimate_split"])
        est["temporaries"] = est.get("temporaries", 0) + est.get("logits", 0)
        bars.append((f"{ck}<br>estimated", est, r["estimate"]))
        if "measured" in r:
            bars.append((f"{ck}<br>measured", r["measured_split"], r["measured"]))
    fig = go.Figure()
    for key, label, color in PARTS:
        fig.add_trace(go.Bar(name=label, x=[b for b, _, _ in bars], y=[(d.get(key) or 0) / MB for _, d, _ in bars],
                             marker_color=color, hovertemplate=f"{label}: %{{y:.1f}} MB<extra></extra>"))
    for b, _, total in bars:
        fig.add_annotation(x=b, y=total / MB, text=f"{total / MB:.1f} MB", showarrow=False, yshift=10)
    fig.update_layout(barmode="stack", height=420, yaxis=dict(title="MB (10⁶ bytes) at the peak"),
                      xaxis=dict(tickangle=0),
                      title="Peak of one training step", legend=dict(orientation="h", y=-0.2),
                      margin=dict(l=60, r=20, t=50, b=40))
    return fig


MOMENTS = {"head": "head's backward", "top layer": "top layer's backward", "bottom layer": "bottom layer's backward",
           "optimizer": "optimizer step"}


def table_md(rows: list[dict]) -> str:
    lines = ["| checkpointing | estimated peak, when | measured peak, when | estimate / measured |", "|---|---|---|---|"]
    for r in rows:
        est = f"{r['estimate'] / MB:.1f} MB, {MOMENTS[r['estimate_moment']]}"
        if "measured" in r:
            meas, ratio = f"{r['measured'] / MB:.1f} MB, {r['measured_phase'] or '?'}", f"{r['ratio']:.3f}"
        else:
            meas, ratio = "–", "–"
        lines.append(f"| {'on' if r['checkpointing'] else 'off'} | {est} | {meas} | {ratio} |")
    return "\n".join(lines)


def summary_md(rows: list[dict], size: str, batch: int, seq_len: int, accum: int) -> str:
    what = (f"**BERT {size}**, a micro-batch of {batch} × {seq_len} tokens"
            + (f", {accum} micro-batches a step (an effective batch of {batch * accum})" if accum > 1 else ""))
    by = {r["checkpointing"]: r for r in rows}
    if len(by) == 2:
        key = "measured" if "measured" in by[False] else "estimate"
        off, on = by[False][key], by[True][key]
        what += (f": checkpointing takes the {'measured' if key == 'measured' else 'estimated'} peak from "
                 f"{off / MB:.1f} MB to {on / MB:.1f} MB ({1 - on / off:.0%} less), for one more forward pass "
                 f"of every layer.")
    return what + ("" if any("measured" in r for r in rows) else " Click **Measure** to run one real step.")


def estimate(size, batch, seq_len, mode, accum):
    """The estimate alone: instant, on every change of the form."""
    size, b, t, mode, a = checked(size, batch, seq_len, mode, accum)
    with mistakes():
        rows = estimate_rows(size, b, t, mode, a)
    return summary_md(rows, size, b, t, a), table_md(rows), figure(rows), rows


def measure(size, batch, seq_len, mode, accum):
    """One real training step per checkpointing setting, measured, beside the estimate."""
    size, b, t, mode, a = checked(size, batch, seq_len, mode, accum)
    rows = list(measured_rows(size, b, t, mode, a))
    return summary_md(rows, size, b, t, a), table_md(rows), figure(rows), rows


# ---- on a GPU -----------------------------------------------------------------------------------
GPU_SIZES = ("tiny", "mini", "small", "medium", "base")
GPU_LENGTHS = (128, 512)
GPU_BATCHES = (8, 32)
GPU_EXPLAIN = """### On a GPU
One click trains a fresh model on the server's GPU for a few steps and measures, in fp32 and in bf16:
the memory a training step needs (next to the estimate), the largest batch that fits, the time to
read one sequence, and how many sequences a second it reads at its best batch.
From a terminal: `python -m bertlab memory --device cuda --model base`"""


def gpu_available() -> bool:
    return torch.cuda.is_available()


def gpu_estimate_md(size: str, seq_len: int) -> str:
    """sizing's estimate of a GPU step's peak (bool dropout masks, fused attention) for both precisions."""
    config, _ = memory_measure.recipe_config(size, seq_len=seq_len)
    lines = ["| precision | batch × len | estimated peak |", "|---|---|---|"]
    for dtype in ("fp32", "bf16"):
        for b in GPU_BATCHES:
            est = sizing.memory(config, b, seq_len, dtype=dtype, training=True, sparse_mlm=True,
                                fused_attention=True, mask_bytes=1)
            lines.append(f"| {dtype} | {b} × {seq_len} | {est['total'] / MB:,.0f} MB |")
    return "\n".join(lines)


def no_gpu_md(size: str, seq_len: int) -> str:
    """What the section says on a server without a GPU: that plainly, the estimate, two GPUs' speeds."""
    v, a = compute.ACCELERATORS["v100"], compute.ACCELERATORS["a100"]
    return (f"**This server has no GPU**, so this measurement cannot run here. Here is the estimate "
            f"for BERT {size} instead:\n\n{gpu_estimate_md(size, seq_len)}\n\n"
            f"For scale, the published peak speeds: an {v['label']} computes {v['fp32'] / 1e12:g} TFLOP/s in "
            f"fp32 and {v['bf16'] / 1e12:g} in fp16; an {a['label']} {a['fp32'] / 1e12:g} in fp32 and "
            f"{a['bf16'] / 1e12:g} in bf16 (NVIDIA's figures). Run `python -m bertlab memory --device cuda` "
            f"on a machine with a GPU.")


def gpu_checked(size, seq_len) -> tuple[str, int]:
    if size not in GPU_SIZES:
        raise user_error(f"The model must be one of {', '.join(GPU_SIZES)} here, got {size!r}.")
    t = common.whole_number(seq_len, "sequence length", 8, max(GPU_LENGTHS))
    return size, t


@functools.lru_cache(maxsize=16)
def gpu_measured(size: str, seq_len: int) -> tuple[dict, ...]:
    """The device chapter in a child process on the GPU (`python -m bertlab memory --device cuda`)."""
    cmd = [sys.executable, "-m", "bertlab", "memory", "--device", "cuda", "--model", size, "--seq-len",
           str(seq_len), "--batch-size", *map(str, GPU_BATCHES), "--max-batch", "1024", "--json"]
    path = os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise user_error(f"The GPU measurement took over {TIMEOUT_S // 60} minutes: try a smaller model.") from None
    if done.returncode != 0:
        raise RuntimeError(f"the GPU measurement failed: {done.stderr.strip()[-500:]}")
    return tuple(json.loads(done.stdout))


def gpu_measure(size, seq_len):
    """The button: on a GPU, its measurement as tables; without one, the plain note."""
    size, t = gpu_checked(size, seq_len)
    if not gpu_available():
        return no_gpu_md(size, t), None
    (r,) = gpu_measured(size, t)
    return memory_measure.chapter_tables(r, f"BERT {size}"), r


def build_gpu() -> None:
    gr.Markdown(GPU_EXPLAIN)
    here = gpu_available()
    with gr.Row():
        size = gr.Dropdown(list(GPU_SIZES), value="base", label="Model (BERT preset)", min_width=120,
                           elem_id="memory-gpu-size")
        seq_len = gr.Dropdown(list(GPU_LENGTHS), value=128, label="Tokens per sequence", min_width=120,
                              elem_id="memory-gpu-len")
    btn = gr.Button("Measure on the GPU", variant="primary", visible=here, elem_id="memory-gpu-go")
    out = gr.Markdown(value="" if here else no_gpu_md("base", 128), elem_id="memory-gpu-out")
    with gr.Accordion("GPU numbers (JSON)", open=False, visible=here):
        raw = gr.JSON(label="every number")
    if here:
        btn.click(gpu_measure, [size, seq_len], [out, raw], api_name="scaling_memory_gpu", concurrency_limit=1,
                  concurrency_id="memory-measure")
    else:
        gr.on([size.change, seq_len.change], gpu_measure, [size, seq_len], [out, raw], api_name=False,
              show_progress="hidden")


def build() -> None:
    gr.Markdown("## Memory, measured")
    with common.form(EXPLAIN) as side:
        with gr.Row():
            size = gr.Dropdown(list(SIZES), value="tiny", label="Model (BERT preset)", min_width=120,
                               elem_id="memory-size")
            batch = gr.Slider(1, MAX_BATCH, value=32, step=1, label="Micro-batch (sequences)", min_width=160,
                              elem_id="memory-batch")
            seq_len = gr.Dropdown(list(LENGTHS), value=128, label="Tokens per sequence", min_width=120,
                                  elem_id="memory-len")
        with gr.Row():
            mode = gr.Radio(list(MODES), value="both", label="Activation checkpointing", min_width=160,
                            elem_id="memory-mode")
            accum = gr.Slider(1, 4, value=1, step=1, label="Micro-batches per step (--accum)", min_width=160,
                              elem_id="memory-accum")
        go_btn = gr.Button("Measure one training step", variant="primary", elem_id="memory-go")
        summary = gr.Markdown(elem_id="memory-summary")
    table = gr.Markdown(elem_id="memory-table")
    plot = gr.Plot(label="Estimated and measured peak", elem_id="memory-plot")
    gr.Markdown(NOTES)
    gr.Markdown(guides_md(), elem_id="memory-guides")
    with gr.Accordion("Numbers (JSON)", open=False):
        raw = gr.JSON(label="every byte")
    inputs, outputs = [size, batch, seq_len, mode, accum], [summary, table, plot, raw]
    common.examples(side, EXAMPLES, inputs, label="Examples: click one, then Measure",
                    example_labels=["tiny 32 × 128", "mini 16 × 128", "small 8 × 128", "tiny 8 × 128, accum 4"])
    gr.on([c.change for c in inputs], estimate, inputs, outputs, api_name=False, show_progress="hidden")
    common.on_open(estimate, inputs, outputs)
    go_btn.click(measure, inputs, outputs, api_name="scaling_memory", concurrency_limit=1,
                 concurrency_id="memory-measure")
    build_gpu()
