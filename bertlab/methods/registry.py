"""The fine-tuning methods, one record each: everything the rest of bertlab says about a method (its name,
label, one-line blurb, note for students, default learning rate, chart style, how it is applied and
saved, the spec options it reads) is read from here, so no other file tests a method's name. A new
method is its own module (what it adds to a model) plus one record (and peft_format's peft type if
peft has one for it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch.nn as nn

from ..heads import freeze_encoder
from .adapters import add_adapters
from .lowrank import add_bitfit, add_ia3, add_lora
from .virtual import add_prefix, add_prompt


@dataclass(frozen=True)
class Method:
    name: str
    label: str  # the form's and the tables' name for it
    blurb: str  # what it trains, in a few words (the comparison's table)
    note: str  # the form's plain explanation, with its paper
    lr: float  # its default learning rate, measured on the shipped model + sentiment (bench/FINETUNE.md)
    style: tuple[str, str]  # (colour, marker), the same in every chart of the Fine-tune tab
    apply: Callable[[nn.Module, object], list[str]]  # freeze and wrap in place; names of what it adds
    saves: str = "plain"  # how its fine-tuned model is written (methods/saving.py): one of SAVES
    mergeable: bool = False  # saved folded into a plain classifier, with its peft adapter folder beside
    keeps_base: bool = False  # adds modules of its own and keeps every pre-trained weight as it was
    options: tuple[str, ...] = ()  # the FinetuneSpec fields it reads: the form shows exactly these
    hint: str = ""  # the --method help's word on it, in brackets after its name
    log: Callable[[object, list[str]], str] | None = None  # (spec, what apply added) -> the run log's word on it

    def __post_init__(self):
        if self.saves not in SAVES:
            raise ValueError(f"method {self.name}: saves {self.saves!r}, not one of {', '.join(SAVES)}")
        if self.mergeable and self.saves != "peft":
            raise ValueError(f"method {self.name}: only a peft adapter is merged (and written beside) when saved")

    def reads(self, option: str) -> bool:
        return option in self.options


# plain: a transformers folder; peft: peft's adapter folder; adapters: a plain folder + adapters.safetensors
SAVES = ("plain", "peft", "adapters")
POOLER = ("train_pooler",)  # the option of every method that freezes what BERT's pooler sits in
LORA_OPTIONS = ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")


def _lora(model, spec):
    return add_lora(model, spec.lora_rank, spec.lora_alpha, tuple(spec.lora_targets), getattr(spec, "lora_dropout", 0.0))


def _prompt(model, spec):
    return add_prompt(model, spec.virtual_tokens, per_token=getattr(model, "kind", "sequence") != "sequence")


def _lora_log(spec, added):
    return f"; LoRA rank {spec.lora_rank} on {sum(not w.endswith('.pooler') for w in added)} layers"


def _frozen(model, spec):
    freeze_encoder(model)
    return []


RECORDS = (
    Method("full", "Full fine-tuning", "every weight",
           "Every weight may change. Usually the best score, but each task keeps a whole copy of the model.",
           3e-4, ("#1f77b4", "circle"), lambda model, spec: [], options=("gradual_unfreeze",)),
    Method("frozen", "Frozen encoder (head only)", "the head only",
           "BERT stays as it is; only the new head on top learns. It shows what the pre-trained vectors "
           "already hold.", 1e-2, ("#7f7f7f", "x"), _frozen, hint="head only"),
    Method("bitfit", "BitFit (biases only)", "biases only",
           "Only the biases (the *+ b* of every layer) and the head learn: about a thousandth of the "
           "weights (Ben Zaken et al., 2022).", 3e-3, ("#bcbd22", "triangle-down"),
           lambda model, spec: add_bitfit(model), options=POOLER, hint="biases"),
    Method("lora", "LoRA", "low-rank updates",
           "Beside each chosen weight matrix *W*, a small low-rank update *B·A* (rank *r*, scaled by alpha / r) "
           "learns; *B* starts at zero, so training starts from BERT itself. It merges into *W* afterwards: "
           "no extra cost when predicting (Hu et al., 2021).", 1e-3, ("#d62728", "diamond"), _lora,
           saves="peft", mergeable=True, options=LORA_OPTIONS + POOLER, log=_lora_log),
    Method("ia3", "IA³", "learned rescaling",
           "One learned scale per channel multiplies what BERT computes: on the keys, the values and the "
           "feed-forward layer's inner activations, as in the paper (Liu et al., 2022), and, as peft does for "
           "BERT, on the input of the attention's output layer too: four vectors a layer. That is fewer "
           "than BitFit, LoRA, prefix tuning or adapters train. Prompt tuning at its default 20 virtual "
           "tokens trains fewer still on the shipped model and on BERT-base (not on the 2-layer tiny "
           "shapes), and the frozen encoder fewest of all.", 1e-2, ("#9467bd", "star"),
           lambda model, spec: add_ia3(model), saves="peft", mergeable=True, options=POOLER),
    Method("prefix", "Prefix tuning", "prefix tuning",
           "Every layer gets keys and values of a few learned *virtual tokens* that each real token can "
           "attend to; BERT's weights stay fixed (Li and Liang, 2021).", 1e-2, ("#2ca02c", "triangle-right"),
           lambda model, spec: add_prefix(model, spec.virtual_tokens), saves="peft", keeps_base=True,
           options=("virtual_tokens", *POOLER)),
    Method("prompt", "Prompt tuning", "prompt tuning",
           "A few learned *virtual token* embeddings go in front of the text, at the input only: the "
           "smallest change, and the slowest to learn on a small model (Lester et al., 2021).", 3e-2,
           ("#17becf", "triangle-up"), _prompt, saves="peft", keeps_base=True, options=("virtual_tokens", *POOLER)),
    Method("adapter", "Adapters (Houlsby)", "Houlsby adapters",
           "A small bottleneck (down to the adapter size, then up) after the attention and after the "
           "feed-forward block of every layer; its up-projection starts at zero, so the model starts "
           "exactly as the base (Houlsby et al., 2019).", 1e-3, ("#ff7f0e", "square"),
           lambda model, spec: add_adapters(model, spec.adapter_size), saves="adapters", keeps_base=True,
           options=("adapter_size", *POOLER), hint="Houlsby"),
)
REGISTRY: dict[str, Method] = {m.name: m for m in RECORDS}
NAMES = tuple(REGISTRY)
DEFAULT = NAMES[0]  # the form's and the command line's method when none is picked


def readers(option: str) -> tuple[str, ...]:
    """The methods that read spec field `option` (its help names them)."""
    return tuple(m.name for m in RECORDS if m.reads(option))


def reads(name: str, option: str) -> bool:
    """Does method `name` read `option`? False for a name that is no method (the spec's check says why)."""
    return name in REGISTRY and REGISTRY[name].reads(option)


def method(name: str) -> Method:
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}: choose from {', '.join(NAMES)}")
    return REGISTRY[name]
