"""Every job kind that trains into a run folder: its spec class and the function that runs it, in one table.
`python -m bertlab run DIR`, each training command and the web's job manager all go through `execute`.
A new kind is its spec class (specs.py), its module, and one row here."""
from __future__ import annotations

from typing import Callable

import torch

from .compare import CompareSpec, run_compare
from .distill import distill
from .finetune import finetune
from .pretrain import pretrain
from .race import race
from .scaling import sweep
from .specs import DistillSpec, FinetuneSpec, PretrainSpec, RaceSpec, ScalingSpec, Spec

# spec class -> run(out, spec, resume, log=, stop_event=, callbacks=) -> final status. A comparison is a
# fine-tune spec with methods and seeds (its folder is a fine-tune job's), run by its own runner.
RUNNERS: dict[type[Spec], Callable[..., dict]] = {
    PretrainSpec: lambda out, spec, resume, **kw: pretrain(out, spec, resume=resume, **kw),
    FinetuneSpec: lambda out, spec, resume, **kw: finetune(out, spec, resume=resume, **kw),
    CompareSpec: lambda out, spec, resume, **kw: run_compare(out, spec, **kw),  # always goes on from its parts
    RaceSpec: lambda out, spec, resume, **kw: race(out, spec, resume=resume, **kw),
    DistillSpec: lambda out, spec, resume, **kw: distill(out, spec, resume=resume, **kw),
    ScalingSpec: lambda out, spec, resume, **kw: sweep(out, spec, **kw),  # reuses its finished runs
}
RUN_KINDS = tuple(dict.fromkeys(c.KIND for c in RUNNERS))  # the kinds the job manager accepts


def execute(spec: Spec, out: str, resume: bool, log, stop, callbacks=()) -> dict:
    """Train one run-folder job in this process; what `run DIR`, the commands and the web's jobs share."""
    runner = RUNNERS.get(type(spec))
    if runner is None:
        raise ValueError(f"a {spec.KIND or type(spec).__name__} job does not train a run folder")
    if getattr(spec, "threads", None):
        torch.set_num_threads(spec.threads)
    return runner(out, spec, resume, log=log, stop_event=stop, callbacks=callbacks)
