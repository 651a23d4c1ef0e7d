"""Every job kind that trains into a run folder, one record each: its spec class, the function that runs
it, and the run list it is shown in. `python -m bertlab run DIR`, each training command and the web's job
manager all go through `execute`. A new kind is its spec class (specs.py), its module, and one record here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .compare import run_compare
from .distill import distill
from .finetune import finetune
from .pretrain import pretrain
from .race import race
from .scaling import sweep
from .specs import CompareSpec, DistillSpec, FinetuneSpec, PretrainSpec, RaceSpec, ScalingSpec, Spec


@dataclass(frozen=True)
class Kind:
    spec: type[Spec]
    run: Callable[..., dict]  # run(out, spec, resume, log=, stop_event=, callbacks=) -> final status
    listed_with: str = ""  # the kind whose run list (and web tab) shows these runs; "" = its own

    @property
    def name(self) -> str:
        return self.spec.KIND


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(PretrainSpec, lambda out, spec, resume, **kw: pretrain(out, spec, resume=resume, **kw)),
    Kind(FinetuneSpec, lambda out, spec, resume, **kw: finetune(out, spec, resume=resume, **kw)),
    # a comparison always goes on from its finished parts; its folder sits among the fine-tune runs
    Kind(CompareSpec, lambda out, spec, resume, **kw: run_compare(out, spec, **kw), listed_with="finetune"),
    Kind(RaceSpec, lambda out, spec, resume, **kw: race(out, spec, resume=resume, **kw)),
    Kind(DistillSpec, lambda out, spec, resume, **kw: distill(out, spec, resume=resume, **kw)),
    Kind(ScalingSpec, lambda out, spec, resume, **kw: sweep(out, spec, **kw)),  # reuses its finished runs
)}
RUN_KINDS = tuple(KINDS)  # the kinds the job manager accepts


def listed_in(kind: str) -> set[str]:
    """The kinds a run list of `kind` shows: its own and those listed with it."""
    return {k for k, rec in KINDS.items() if k == kind or rec.listed_with == kind}


def execute(spec: Spec, out: str, resume: bool, log, stop, callbacks=()) -> dict:
    """Train one run-folder job in this process; what `run DIR`, the commands and the web's jobs share."""
    rec = KINDS.get(spec.KIND)
    if rec is None or type(spec) is not rec.spec:
        raise ValueError(f"a {spec.KIND or type(spec).__name__} job does not train a run folder")
    if getattr(spec, "threads", None):
        torch.set_num_threads(spec.threads)
    return rec.run(out, spec, resume, log=log, stop_event=stop, callbacks=callbacks)
