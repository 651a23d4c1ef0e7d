"""The peak memory of one real training step on CPU, set beside sizing.memory's estimate.

How it is measured: torch.profiler with profile_memory=True records every allocation and every free
of PyTorch's CPU allocator, in order; their running sum is what tensors hold at each moment, and
its maximum (plus what existed before: weights, optimizer state) is the step's peak. Process RSS
is too coarse for this: the C allocator keeps freed pages and the interpreter has its own. The
profiler's memory timeline also files every tensor under parameters, gradients, optimizer state,
activations (kept for backward) or temporaries (gradients of activations, scratch), so the peak
comes split. The step is the Trainer's: `accum` micro-batches of forward (masked-LM logits at the
masked 15 % only) and backward, clipping, AdamW, zero_grad(set_to_none=True), measured after a first
step that creates AdamW's state."""
from __future__ import annotations

import math
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from .. import family
from ..config import BertConfig
from ..model import set_gradient_checkpointing
from . import sizing

PHASES = ("forward", "backward", "optimizer")
CPU_MASK_BYTES = 4  # PyTorch's CPU dropout keeps its mask as floats
# the profiler's categories -> ours (torch.profiler._memory_profiler.Category names)
SPLIT = {"PARAMETER": "weights", "GRADIENT": "gradients", "OPTIMIZER_STATE": "optimizer", "ACTIVATION": "activations",
         "INPUT": "activations", "TEMPORARY": "temporaries", "AUTOGRAD_DETAIL": "temporaries", None: "temporaries"}


def _batch(c: BertConfig, parts: frozenset, B: int, T: int, g: torch.Generator) -> dict:
    """Random token ids with exactly ceil(15 %) masked-LM targets (as sizing counts them), a pair label
    where the model has a pair head, ELECTRA's replaced/original labels."""
    ids = torch.randint(5, c.vocab_size, (B, T), generator=g)
    kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if c.model_type != "distilbert":
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
                 accum: int = 1, optimizer: str = "adamw", seed: int = 0, split: bool = True) -> dict:
    """Peak bytes of one training step of config's pre-training model (family.build) at micro-batch
    `batch_size` x `seq_len`, with `accum` micro-batches per optimizer step, beside sizing.memory's
    estimate for the same step. Returns {"measured": {"peak", "weights", "gradients", "optimizer",
    "activations", "temporaries", "phase"}, "estimate": sizing.memory(...), "ratio": estimate / measured,
    "seconds", and the settings}; the split (`split`: it takes the profiler's shapes and stacks, several
    seconds more) is at the profiler timeline's peak, and absent where torch cannot give it."""
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
            with record_function("forward"):
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
    estimate = sizing.memory(config, batch_size, seq_len, training=True, optimizer=optimizer, sparse_mlm=True,
                             checkpointing=checkpointing, accum=accum, mask_bytes=CPU_MASK_BYTES)
    return {"model_type": config.model_type, "architecture": arch, "layers": config.num_hidden_layers,
            "hidden": config.hidden_size, "batch_size": batch_size, "seq_len": seq_len, "accum": accum,
            "checkpointing": checkpointing, "optimizer": optimizer, "measured": measured, "estimate": estimate,
            "ratio": estimate["total"] / measured["peak"], "seconds": round(seconds, 2)}
