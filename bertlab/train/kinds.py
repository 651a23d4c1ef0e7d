"""Every job kind, one record each: its spec class, the function that runs it into a run folder, the run
list it is shown in, and its command (help line, flags, what it prints). `python -m bertlab run DIR`, each
training command and the web's job manager all go through `execute`; the command line builds one
subcommand per record that names a command. A new kind is its spec class (specs.py), its module, and one
record here."""
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
from .specs import CompareSpec, DistillSpec, FinetuneSpec, PretrainSpec, ProbeSpec, RaceSpec, ScalingSpec, Spec


@dataclass(frozen=True)
class Kind:
    spec: type[Spec]
    run: Callable[..., dict] | None  # run(out, spec, resume, log=, stop_event=, callbacks=) -> final status; None: no run folder
    help: str = ""  # its subcommand's line in `python -m bertlab --help`; "": no command of its own
    command: str = ""  # "module:function" the command line calls with the parsed flags: runs it, prints the result
    flags: str = ""  # "module:function" adding every flag itself; "": the spec's fields, --out/--resume, --json
    json: bool = False  # its command can print the results as JSON (--json)
    listed_with: str = ""  # the kind whose run list (and web tab) shows these runs; "" = its own

    @property
    def name(self) -> str:
        return self.spec.KIND


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(PretrainSpec, lambda out, spec, resume, **kw: pretrain(out, spec, resume=resume, **kw),
         "pre-train a BERT or another family member (MLM, NSP/SOP, RTD) into a run folder", "bertlab.app.cli:cmd_pretrain"),
    Kind(FinetuneSpec, lambda out, spec, resume, **kw: finetune(out, spec, resume=resume, **kw),
         "fine-tune a model on sentiment, POS tagging or your own CSV/CoNLL file", "bertlab.app.cli:cmd_finetune",
         flags="bertlab.app.cli:finetune_flags", json=True),
    # a comparison always goes on from its finished parts; its folder sits among the fine-tune runs; its
    # command is `finetune --compare`
    Kind(CompareSpec, lambda out, spec, resume, **kw: run_compare(out, spec, **kw), listed_with="finetune"),
    Kind(ProbeSpec, None, "per-layer probes (POS, sentiment, position, your file) with control tasks",
         "bertlab.app.cli:cmd_probe", json=True),
    Kind(RaceSpec, lambda out, spec, resume, **kw: race(out, spec, resume=resume, **kw),
         "pre-train several recipes for the same minutes, fine-tune each: one table", "bertlab.app.cli:cmd_race"),
    Kind(DistillSpec, lambda out, spec, resume, **kw: distill(out, spec, resume=resume, **kw),
         "distil a BERT into a DistilBERT (soft targets + MLM + cosine)", "bertlab.app.cli:cmd_distill"),
    Kind(ScalingSpec, lambda out, spec, resume, **kw: sweep(out, spec, **kw),  # reuses its finished runs
         "a scaling sweep: several sizes (or token budgets), one recipe; fits L(N) = a·N^-α + c",
         "bertlab.app.scaling_cli:cmd_scaling", flags="bertlab.app.scaling_cli:add_arguments", json=True),
)}
RUN_KINDS = tuple(k for k, rec in KINDS.items() if rec.run)  # the kinds the job manager accepts


def listed_in(kind: str) -> set[str]:
    """The kinds a run list of `kind` shows: its own and those listed with it."""
    return {k for k, rec in KINDS.items() if k == kind or rec.listed_with == kind}


def execute(spec: Spec, out: str, resume: bool, log, stop, callbacks=()) -> dict:
    """Train one run-folder job in this process; what `run DIR`, the commands and the web's jobs share."""
    rec = KINDS.get(spec.KIND)
    if rec is None or rec.run is None or type(spec) is not rec.spec:
        raise ValueError(f"a {spec.KIND or type(spec).__name__} job does not train a run folder")
    if getattr(spec, "threads", None):
        torch.set_num_threads(spec.threads)
    return rec.run(out, spec, resume, log=log, stop_event=stop, callbacks=callbacks)
