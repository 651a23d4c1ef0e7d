"""Task heads on the encoder, and LoRA: the models that fine-tuning trains.

Every family member has a sequence and a token classifier, named and computed as Hugging Face's
(`BertForSequenceClassification`, `AlbertForTokenClassification`, ..., `DistilBertFor*`): the
encoder under the member's base_model_prefix (`bert.*`, `electra.*`, ...) and the member's own head
(heads_family.py says how they differ). `save_classifier` writes a config.json with `architectures`,
`id2label` and `label2id`, so `transformers.<that class>.from_pretrained(folder)` loads what we save,
and `load_classifier` reads the folders transformers saves.

LoRA (Hu et al. 2021) learns a low-rank change to a frozen weight: W' = W + (alpha / r) · B A with
A (r × in) and B (out × r). B starts at zero, so training starts from exactly the pre-trained model.
`merge_lora` folds B A into W, after which the model is a plain classifier again (no extra cost at all).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import heads_family as fam
from .checkpoint import read_weights, resolve_folder, save_pretrained, to_pretraining_keys
from .config import BertConfig, read_json_config
from .family import encoder_of
from .heads_family import ALBERT_LAYERWISE
from .tokenizer import SubwordTokenizer


@dataclass
class ClassifierOutput:
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (B, C) per sequence, or (B, T, C) per token
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def _labels(num_labels: int, id2label) -> list[str]:
    if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
        raise ValueError(f"num_labels must be an integer >= 2, got {num_labels!r}")
    if id2label is None:
        return [f"LABEL_{i}" for i in range(num_labels)]
    names = [str(id2label[i]) for i in range(num_labels)] if isinstance(id2label, dict) else [str(x) for x in id2label]
    if len(names) != num_labels or len(set(names)) != num_labels:
        raise ValueError(f"id2label must name {num_labels} distinct labels, got {names}")
    return names


class _Classifier(nn.Module):
    """Shared plumbing: config, label names, the member's encoder and head, HF-style config.json, loss.
    `classifier_dropout`: the dropout before the head (None: the member's default, as transformers')."""
    architecture = ""
    model_type = "bert"
    base_model_prefix = "bert"
    per_token = False  # a label per token rather than one per sequence

    def __init__(self, config: BertConfig, num_labels: int = 2, id2label=None,
                 classifier_dropout: float | None = None):
        super().__init__()
        if config.model_type != self.model_type:
            raise ValueError(f"{self.architecture} needs a {self.model_type} config, got model_type "
                             f"{config.model_type!r}: use {classifier_class(config, self.kind).__name__}")
        self.config, self.num_labels = config, num_labels
        self.id2label = _labels(num_labels, id2label)
        self.classifier_dropout = classifier_dropout
        pooled = fam.MEMBERS[config.model_type].pooled and not self.per_token
        setattr(self, self.base_model_prefix, fam.encoder(config, pooler=pooled))
        fam.add_head(self, config, num_labels, self.per_token,
                     fam.head_dropout(config, self.per_token, classifier_dropout))

    @property
    def kind(self) -> str:
        return "token" if self.per_token else "sequence"

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.id2label)}

    def hf_config(self) -> dict:
        """config.json for transformers: the encoder's fields plus the head's."""
        return {**self.config.to_hf_dict(self.architecture), "num_labels": self.num_labels,
                "id2label": {str(i): n for i, n in enumerate(self.id2label)}, "label2id": self.label2id,
                **fam.dropout_config(self.config, self.per_token, self.classifier_dropout)}

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                output_attentions=False, output_hidden_states=False) -> ClassifierOutput:
        out = encoder_of(self)(input_ids, token_type_ids, attention_mask, output_attentions,
                               output_hidden_states)
        logits = fam.head_logits(self, out, self.per_token)  # (B, T, C) per token, (B, C) per sequence
        loss = None
        if labels is not None:  # labels of -100 are left out
            loss = F.cross_entropy(logits.reshape(-1, self.num_labels).float(), labels.reshape(-1),
                                   ignore_index=-100)
        return ClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class BertForSequenceClassification(_Classifier):
    """[CLS] -> pooler (dense + tanh) -> dropout -> linear: one label per text (or text pair)."""
    architecture = "BertForSequenceClassification"


class BertForTokenClassification(_Classifier):
    """Every token's last hidden state -> dropout -> linear: one label per token (no pooler, as in HF).
    Labels of -100 (padding, specials, a word's later pieces) are left out of the loss."""
    architecture = "BertForTokenClassification"
    per_token = True


class AlbertForSequenceClassification(_Classifier):
    """As BERT's: the pooled [CLS] -> dropout (classifier_dropout_prob) -> linear."""
    architecture, model_type, base_model_prefix = "AlbertForSequenceClassification", "albert", "albert"


class AlbertForTokenClassification(_Classifier):
    architecture, model_type, base_model_prefix = "AlbertForTokenClassification", "albert", "albert"
    per_token = True


class ElectraForSequenceClassification(_Classifier):
    """Token 0 -> dropout -> dense -> gelu -> dropout -> out_proj (no pooler)."""
    architecture, model_type, base_model_prefix = "ElectraForSequenceClassification", "electra", "electra"


class ElectraForTokenClassification(_Classifier):
    architecture, model_type, base_model_prefix = "ElectraForTokenClassification", "electra", "electra"
    per_token = True


class RobertaForSequenceClassification(_Classifier):
    """Token 0 (<s>) -> dropout -> dense -> tanh -> dropout -> out_proj (no pooler)."""
    architecture, model_type, base_model_prefix = "RobertaForSequenceClassification", "roberta", "roberta"


class RobertaForTokenClassification(_Classifier):
    architecture, model_type, base_model_prefix = "RobertaForTokenClassification", "roberta", "roberta"
    per_token = True


class DistilBertForSequenceClassification(_Classifier):
    """Token 0 -> pre_classifier -> ReLU -> dropout (seq_classif_dropout) -> classifier."""
    architecture, model_type, base_model_prefix = ("DistilBertForSequenceClassification", "distilbert",
                                                   "distilbert")


class DistilBertForTokenClassification(_Classifier):
    """Token head with DistilBERT's `dropout` (transformers saves no classifier dropout for it)."""
    architecture, model_type, base_model_prefix = "DistilBertForTokenClassification", "distilbert", "distilbert"
    per_token = True


HEADS = {c.architecture: c for c in _Classifier.__subclasses__()}
ARCHITECTURES = tuple(HEADS)


def classifier_class(config: BertConfig, kind: str) -> type[_Classifier]:
    """The classifier of `kind` ("sequence" or "token") for the config's family member."""
    if kind not in ("sequence", "token"):
        raise ValueError(f"kind must be 'sequence' or 'token', got {kind!r}")
    return HEADS[f"{fam.MEMBERS[config.model_type].name}For{kind.title()}Classification"]


# ---- LoRA ------------------------------------------------------------------------------------------

class LoRALinear(nn.Module):
    """y = x Wᵀ + b + (alpha/r) · x Aᵀ Bᵀ, with W and b frozen and only A and B trained."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16):
        super().__init__()
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"LoRA rank must be a positive integer, got {rank!r}")
        if not alpha > 0:
            raise ValueError(f"LoRA alpha must be positive, got {alpha!r}")
        if rank > min(base.in_features, base.out_features):
            raise ValueError(f"LoRA rank {rank} exceeds the layer's size ({base.out_features} x {base.in_features})")
        self.base, self.rank, self.alpha, self.scaling = base, rank, alpha, alpha / rank
        self.in_features, self.out_features = base.in_features, base.out_features
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear and PEFT do

    def delta(self) -> torch.Tensor:
        return (self.lora_B @ self.lora_A) * self.scaling  # (out, in)

    @property
    def weight(self) -> torch.Tensor:
        """The effective weight W + (alpha/r) B A (gradients reach A and B)."""
        return self.base.weight + self.delta()

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scaling

    def merged_linear(self) -> nn.Linear:
        """The base Linear with B A folded in (the base module itself is updated and returned)."""
        with torch.no_grad():
            self.base.weight.add_(self.delta().to(self.base.weight.dtype))
        return self.base

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, rank={self.rank}, alpha={self.alpha}"


def add_lora(model: nn.Module, rank: int = 8, alpha: float = 16,
             targets: tuple[str, ...] = ("query", "value")) -> list[str]:
    """Freeze the encoder (`model.bert`, `model.electra`, ...: family.encoder_of; or the model itself if
    it has none) and wrap its nn.Linear layers named in `targets` with LoRA. Targets are BERT's
    attribute names (query, key, value, dense); DistilBERT's q_lin/k_lin/v_lin and out_lin/lin1/lin2 and
    ALBERT's ffn/ffn_output answer to them too (heads_family.LORA_NAMES). Parameters outside the
    encoder (the classifier head) stay trainable. Returns the wrapped modules' names."""
    if isinstance(targets, str):
        targets = (targets,)
    encoder = encoder_of(model)
    prefix = model.base_model_prefix + "." if encoder is not model else ""
    names = fam.lora_names(encoder.config.model_type, tuple(targets)) if hasattr(encoder, "config") else set(targets)
    for p in encoder.parameters():
        p.requires_grad_(False)
    wrapped = []
    for name, module in list(encoder.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in names and type(child) is nn.Linear:
                setattr(module, child_name, LoRALinear(child, rank, alpha))
                wrapped.append(prefix + (f"{name}.{child_name}" if name else child_name))
    if not wrapped:
        raise ValueError(f"no nn.Linear layers named {', '.join(targets)} in the encoder to wrap with LoRA")
    return wrapped


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every LoRA module into its base Linear and put that back: a plain model (in place)."""
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, LoRALinear):
                setattr(module, child_name, child.merged_linear())
    return model


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict `merge_lora(model)` would have, without changing `model`."""
    lora = {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    sd = {}
    for k, v in model.state_dict().items():
        mod, _, leaf = k.rpartition(".")
        if mod in lora:  # lora_A, lora_B
            continue
        owner = lora.get(mod.removesuffix(".base")) if mod.endswith(".base") else None
        if owner is not None:  # the wrapped Linear's weight and bias go back under its own name
            k = f"{mod.removesuffix('.base')}.{leaf}"
            v = v + owner.delta().to(v.dtype) if leaf == "weight" else v
        sd[k] = v
    return sd


def has_lora(model: nn.Module) -> bool:
    return any(isinstance(m, LoRALinear) for m in model.modules())


def freeze_encoder(model: nn.Module) -> nn.Module:
    """Train the head only: every encoder parameter (embeddings, layers, pooler) is frozen."""
    for p in encoder_of(model).parameters():
        p.requires_grad_(False)
    return model


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts; shared tensors are counted once (`parameters()` yields
    each once)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def layer_index(name: str, num_layers: int) -> int:
    """Depth of a parameter for layer-wise LR decay: embeddings 0 (ELECTRA's projection to H with
    them), encoder layer i -> i + 1 (`encoder.layer.i`, DistilBERT's `transformer.layer.i`), and the
    pooler and head num_layers (the top: full learning rate). ALBERT's shared layer has no depth: a
    ValueError (heads_family.ALBERT_LAYERWISE)."""
    parts = name.split(".")
    if "albert_layer_groups" in parts or "embedding_hidden_mapping_in" in parts:
        raise ValueError(ALBERT_LAYERWISE)
    if "embeddings" in parts or "embeddings_project" in parts:
        return 0
    if "layer" in parts:
        i = parts.index("layer")
        if i + 1 < len(parts) and parts[i + 1].isdigit():
            return int(parts[i + 1]) + 1
    return num_layers


# ---- saving and loading ----------------------------------------------------------------------------

def save_classifier(model: _Classifier, tokenizer, folder: str | os.PathLike,
                    dtype: torch.dtype = torch.float32) -> Path:
    """A Hugging Face folder (atomically): LoRA merged (on a copy; `model` is left as it is), and a
    config.json that names the architecture and the labels."""
    if has_lora(model):  # a plain twin loaded with the merged weights
        with torch.random.fork_rng(devices=[]):  # building it draws initial weights: leave the RNG alone
            plain = type(model)(model.config, model.num_labels, model.id2label, model.classifier_dropout)
        plain.load_state_dict(merged_state_dict(model))
        model = plain
    config = json.dumps(model.hf_config(), indent=2) + "\n"
    # write_model_files writes extra files last, so this config.json replaces the pre-training one.
    return save_pretrained(model, tokenizer, folder, dtype=dtype, extra_files={"config.json": config})


def read_head_config(folder: str | os.PathLike) -> tuple[str | None, list[str] | None, dict]:
    """(architecture, label names or None, raw dict) from a folder's config.json."""
    d = read_json_config(Path(folder) / "config.json")
    names = [str(a).removeprefix("Megatron") for a in d.get("architectures") or []]  # pre-LN heads
    arch = next((a for a in names if a in HEADS), None)
    labels = None
    id2label = d.get("id2label")
    if isinstance(id2label, dict) and id2label:
        try:
            labels = [str(id2label[k]) for k in sorted(id2label, key=int)]
        except (TypeError, ValueError):
            labels = None
    return arch, labels, d


def load_classifier(path_or_hub_id: str | os.PathLike):
    """(model, tokenizer) from a folder saved by `save_classifier` or by transformers' own
    <Member>ForSequenceClassification / <Member>ForTokenClassification (Bert, Albert, Electra,
    Roberta, DistilBert)."""
    folder = resolve_folder(path_or_hub_id)
    arch, labels, raw = read_head_config(folder)
    if arch is None:
        raise ValueError(f"{folder}: not a fine-tuned classifier (config.json names no "
                         f"*ForSequenceClassification or *ForTokenClassification of the BERT family); "
                         f"fine-tune it first")
    try:
        config = BertConfig.from_dict(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{folder}/config.json: {e}") from e
    cls = HEADS[arch]
    n = len(labels) if labels else int(raw.get("num_labels", 2))
    model = cls(config, n, labels, classifier_dropout=fam.dropout_from_config(raw, config.model_type, cls.per_token))
    sd = {k: v for k, v in to_pretraining_keys(read_weights(folder), cls.base_model_prefix).items()
          if not k.endswith(("position_ids", "token_type_ids"))}
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not fit a {arch} with {n} labels "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    tok = SubwordTokenizer.from_pretrained(folder)
    tok.model_max_length = min(tok.model_max_length, config.max_tokens)
    return model.eval(), tok
