"""The fine-tuning methods, one record each: everything the rest of bertlab says about a method (its name,
label, one-line blurb, note for students, default learning rate, chart style, how it is applied and
saved) is read from here. A new method is its own module (what it adds to a model) plus one record."""
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
    peft: bool = False  # saved in peft's adapter format
    mergeable: bool = False  # folded into a plain classifier when saved


def _lora(model, spec):
    return add_lora(model, spec.lora_rank, spec.lora_alpha, tuple(spec.lora_targets), getattr(spec, "lora_dropout", 0.0))


def _prompt(model, spec):
    return add_prompt(model, spec.virtual_tokens, per_token=getattr(model, "kind", "sequence") != "sequence")


def _frozen(model, spec):
    freeze_encoder(model)
    return []


RECORDS = (
    Method("full", "Full fine-tuning", "every weight",
           "Every weight may change. Usually the best score, but each task keeps a whole copy of the model.",
           3e-4, ("#1f77b4", "circle"), lambda model, spec: []),
    Method("frozen", "Frozen encoder (head only)", "the head only",
           "BERT stays as it is; only the new head on top learns. It shows what the pre-trained vectors "
           "already hold.", 1e-2, ("#7f7f7f", "x"), _frozen),
    Method("bitfit", "BitFit (biases only)", "biases only",
           "Only the biases (the *+ b* of every layer) and the head learn: about a thousandth of the "
           "weights (Ben Zaken et al., 2022).", 3e-3, ("#bcbd22", "triangle-down"),
           lambda model, spec: add_bitfit(model)),
    Method("lora", "LoRA", "low-rank updates",
           "Beside each chosen weight matrix *W*, a small low-rank update *B·A* (rank *r*, scaled by alpha / r) "
           "learns; *B* starts at zero, so training starts from BERT itself. It merges into *W* afterwards: "
           "no extra cost when predicting (Hu et al., 2021).", 1e-3, ("#d62728", "diamond"), _lora,
           peft=True, mergeable=True),
    Method("ia3", "IA³", "learned rescaling",
           "One learned scale per channel multiplies what BERT computes: on the keys, the values and the "
           "feed-forward layer's inner activations, as in the paper (Liu et al., 2022), and, as peft does for "
           "BERT, on the input of the attention's output layer too: four vectors a layer. That is fewer "
           "than BitFit, LoRA, prefix tuning or adapters train. Prompt tuning at its default 20 virtual "
           "tokens trains fewer still on the shipped model and on BERT-base (not on the 2-layer tiny "
           "shapes), and the frozen encoder fewest of all.", 1e-2, ("#9467bd", "star"),
           lambda model, spec: add_ia3(model), peft=True, mergeable=True),
    Method("prefix", "Prefix tuning", "prefix tuning",
           "Every layer gets keys and values of a few learned *virtual tokens* that each real token can "
           "attend to; BERT's weights stay fixed (Li and Liang, 2021).", 1e-2, ("#2ca02c", "triangle-right"),
           lambda model, spec: add_prefix(model, spec.virtual_tokens), peft=True),
    Method("prompt", "Prompt tuning", "prompt tuning",
           "A few learned *virtual token* embeddings go in front of the text, at the input only: the "
           "smallest change, and the slowest to learn on a small model (Lester et al., 2021).", 3e-2,
           ("#17becf", "triangle-up"), _prompt, peft=True),
    Method("adapter", "Adapters (Houlsby)", "Houlsby adapters",
           "A small bottleneck (down to the adapter size, then up) after the attention and after the "
           "feed-forward block of every layer; its up-projection starts at zero, so the model starts "
           "exactly as the base (Houlsby et al., 2019).", 1e-3, ("#ff7f0e", "square"),
           lambda model, spec: add_adapters(model, spec.adapter_size)),
)
REGISTRY: dict[str, Method] = {m.name: m for m in RECORDS}
NAMES = tuple(REGISTRY)


def method(name: str) -> Method:
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}: choose from {', '.join(NAMES)}")
    return REGISTRY[name]
