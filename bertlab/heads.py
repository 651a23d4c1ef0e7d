"""Task heads on the encoder: the models that fine-tuning trains (bertlab.methods: what trains in them).

Every family member has a sequence classifier, a token classifier and an extractive question
answerer, named and computed as Hugging Face's (`BertForSequenceClassification`,
`AlbertForTokenClassification`, `ElectraForQuestionAnswering`, ..., `DistilBertFor*`): the encoder
under the member's base_model_prefix (`bert.*`, `electra.*`, ...) and the member's own head
(heads_family.py says how they differ). `save_classifier` writes a config.json with `architectures`,
`id2label`, `label2id` and `problem_type`, so `transformers.<that class>.from_pretrained(folder)`
loads what we save, and `load_classifier` reads the folders transformers saves.

Every model says what it predicts: `.problem` is "single" (one label: cross-entropy), "multi" (any
number of labels: a sigmoid per label, binary cross-entropy), "regression" (one number: MSE) or
"qa" (an answer span: cross-entropy over start and end positions); `.kind` is "sequence", "token" or
"qa". A sentence head may pool otherwise than its family (`pooling`: heads_family.py): cls (BERT,
ALBERT), mean and max are saved as the usual class plus `"bertlab_pooling"` in config.json, which
bertlab reads back; transformers ignores it and would pool as its class does (other logits). last4's
head is 4H wide, which transformers' class refuses to load.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import heads_family as fam
from .checkpoint import read_weights, resolve_folder, save_pretrained, to_pretraining_keys
from .config import BertConfig, read_json_config
from . import family
from .family import encoder_of
from .heads_family import ALBERT_LAYERWISE
from .tokenizer import SubwordTokenizer


@dataclass
class ClassifierOutput:
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (B, C) per sequence, or (B, T, C) per token
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    start_logits: torch.Tensor | None = None  # (B, T), question answering (logits: (B, T, 2))
    end_logits: torch.Tensor | None = None


PROBLEMS = ("single", "multi", "regression", "qa")
PROBLEM_TYPES = {"single": "single_label_classification", "multi": "multi_label_classification",
                 "regression": "regression"}  # config.json's problem_type, as transformers names them


def _labels(num_labels: int, id2label, problem: str = "single") -> list[str]:
    if problem == "regression" and num_labels != 1:
        raise ValueError(f"a regression head has one output (num_labels 1), got {num_labels!r}")
    if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < (problem == "regression" or 2):
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
    kind = "sequence"  # "token" where per_token, "qa" for the question answerers

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.per_token:
            cls.kind = "token"

    def __init__(self, config: BertConfig, num_labels: int = 2, id2label=None,
                 classifier_dropout: float | None = None, problem: str | None = None, pooling: str = "auto"):
        """`problem` None: "regression" for one label, else "single" (transformers' rule)."""
        super().__init__()
        if config.model_type != self.model_type:
            raise ValueError(f"{self.architecture} needs a {self.model_type} config, got model_type "
                             f"{config.model_type!r}: use {classifier_class(config, self.kind).__name__}")
        problem = problem or ("regression" if num_labels == 1 else "single")
        if problem not in PROBLEMS[:3] or (self.per_token and problem != "single"):
            raise ValueError(f"a {self.kind} classifier's problem is {' or '.join(PROBLEMS[:1 if self.per_token else 3])}, "
                             f"got {problem!r}")
        if self.per_token and pooling != "auto":
            raise ValueError(f"pooling is for sentence heads; a token classifier reads every token (got {pooling!r})")
        self.config, self.num_labels, self.problem = config, num_labels, problem
        self.id2label = _labels(num_labels, id2label, problem)
        self.classifier_dropout, self.pooling = classifier_dropout, pooling
        pooled = (fam.MEMBERS[config.model_type].pooled and not self.per_token
                  and fam.custom_pooling(config.model_type, pooling) is None)
        setattr(self, self.base_model_prefix, fam.encoder(config, pooler=pooled))
        fam.add_head(self, config, num_labels, self.per_token,
                     fam.head_dropout(config, self.per_token, classifier_dropout), pooling)

    def init_kwargs(self) -> dict:
        """What builds a twin: type(model)(model.config, **model.init_kwargs())."""
        return dict(num_labels=self.num_labels, id2label=self.id2label, classifier_dropout=self.classifier_dropout,
                    problem=self.problem, pooling=self.pooling)

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.id2label)}

    def hf_config(self) -> dict:
        """config.json for transformers: the encoder's fields plus the head's."""
        how = fam.custom_pooling(self.config.model_type, self.pooling) if self.kind == "sequence" else None
        return {**self.config.to_hf_dict(self.architecture), "num_labels": self.num_labels,
                "id2label": {str(i): n for i, n in enumerate(self.id2label)}, "label2id": self.label2id,
                **({"problem_type": PROBLEM_TYPES[self.problem]} if self.problem in ("multi", "regression") else {}),
                **({"bertlab_pooling": how} if how else {}),
                **fam.dropout_config(self.config, self.per_token, self.classifier_dropout)}

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                output_attentions=False, output_hidden_states=False) -> ClassifierOutput:
        """`labels`: class ids (B,) or (B, T) with -100 left out (single); 0/1 per label (B, C)
        (multi); numbers (B,) (regression)."""
        out = encoder_of(self)(input_ids, token_type_ids, attention_mask, output_attentions,
                               output_hidden_states or self.pooling == "last4")  # last4 reads the layers
        logits = fam.head_logits(self, out, self.per_token, attention_mask)  # (B, T, C) per token, (B, C)
        loss = None
        if labels is not None and self.problem == "regression":  # as transformers: MSE on the one output
            loss = F.mse_loss(logits.reshape(-1).float(), labels.reshape(-1).float())
        elif labels is not None and self.problem == "multi":  # a sigmoid per label
            loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
        elif labels is not None:  # labels of -100 are left out
            loss = F.cross_entropy(logits.reshape(-1, self.num_labels).float(), labels.reshape(-1),
                                   ignore_index=-100)
        return ClassifierOutput(loss, logits, out.hidden_states if output_hidden_states else None, out.attentions)


class _QuestionAnswering(_Classifier):
    """Extractive QA: every token's last hidden state -> qa_outputs Linear(H, 2) -> a start and an end
    logit per token (no pooler; DistilBERT's qa_dropout first). Question as segment A, context as B."""
    kind = "qa"

    def __init__(self, config: BertConfig, num_labels: int = 2, id2label=None,
                 classifier_dropout: float | None = None, problem: str | None = "qa", pooling: str = "auto"):
        nn.Module.__init__(self)
        if config.model_type != self.model_type:
            raise ValueError(f"{self.architecture} needs a {self.model_type} config, got model_type "
                             f"{config.model_type!r}: use {classifier_class(config, 'qa').__name__}")
        if problem not in (None, "qa") or num_labels != 2 or pooling != "auto":
            raise ValueError(f"a question answerer has two outputs per token (start, end), problem qa and no "
                             f"pooling; got num_labels {num_labels!r}, problem {problem!r}, pooling {pooling!r}")
        self.config, self.num_labels, self.problem, self.pooling = config, 2, "qa", "auto"
        self.id2label, self.classifier_dropout = _labels(2, id2label), classifier_dropout
        setattr(self, self.base_model_prefix, fam.encoder(config, pooler=False))
        fam.add_qa_head(self, config, classifier_dropout)

    def hf_config(self) -> dict:
        return {**self.config.to_hf_dict(self.architecture), "num_labels": 2,
                "id2label": {str(i): n for i, n in enumerate(self.id2label)}, "label2id": self.label2id,
                **fam.qa_dropout_config(self.config, self.classifier_dropout)}

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, start_positions=None,
                end_positions=None, output_attentions=False, output_hidden_states=False) -> ClassifierOutput:
        """`start_positions`, `end_positions` (B,): the answer's first and last token; positions
        past the input are left out of the loss, as in transformers."""
        out = encoder_of(self)(input_ids, token_type_ids, attention_mask, output_attentions,
                               output_hidden_states)
        start, end = fam.qa_logits(self, out)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            T = start.size(1)
            loss = (F.cross_entropy(start.float(), start_positions.clamp(0, T), ignore_index=T)
                    + F.cross_entropy(end.float(), end_positions.clamp(0, T), ignore_index=T)) / 2
        return ClassifierOutput(loss, torch.stack([start, end], -1), out.hidden_states, out.attentions, start, end)


def _member_heads() -> dict[str, type[_Classifier]]:
    """Each member's three heads, from its record: Hugging Face's names (<stem>ForSequenceClassification,
    <stem>ForTokenClassification, <stem>ForQuestionAnswering) over the shared classes above, the encoder
    under its full model's base_model_prefix (heads_family.py: how the members' heads differ)."""
    out = {}
    for m in family.RECORDS:
        own = dict(model_type=m.name, base_model_prefix=family.model_class_named(m.name).base_model_prefix,
                   __module__=__name__)
        for what, base, per_token in (("SequenceClassification", _Classifier, False),
                                      ("TokenClassification", _Classifier, True),
                                      ("QuestionAnswering", _QuestionAnswering, False)):
            name = f"{m.stem}For{what}"
            out[name] = type(name, (base,), own | dict(architecture=name, per_token=per_token, __qualname__=name))
    return out


globals().update(_member_heads())  # BertForSequenceClassification, ..., DebertaV2ForQuestionAnswering
HEADS = {c.architecture: c for c in [*_Classifier.__subclasses__(), *_QuestionAnswering.__subclasses__()]
         if c.architecture}
ARCHITECTURES = tuple(HEADS)
KINDS = ("sequence", "token", "qa")


def classifier_class(config: BertConfig, kind: str) -> type[_Classifier]:
    """The model of `kind` ("sequence", "token" or "qa") for the config's family member."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    what = "QuestionAnswering" if kind == "qa" else f"{kind.title()}Classification"
    return HEADS[f"{fam.MEMBERS[config.model_type].stem}For{what}"]


# ---- training helpers ------------------------------------------------------------------------------

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
    """A Hugging Face folder (atomically) with a config.json that names the architecture and the
    labels. A model with LoRA, IA3, adapters or virtual tokens is refused: bertlab.methods saves those."""
    if any(".base." in k or k.endswith((".prompt", ".prefix")) for k in model.state_dict()):  # bertlab.methods'
        raise ValueError("this model has wrapped layers or virtual tokens (LoRA, IA3, adapters, prefix or prompt "
                         "tuning): save it with bertlab.methods.save_finetuned, which merges what can be merged")
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
    <Member>ForSequenceClassification / <Member>ForTokenClassification / <Member>ForQuestionAnswering
    (Bert, Albert, Electra, Roberta, DistilBert); config.json's problem_type (or one label:
    regression, as transformers) gives `.problem`, and "bertlab_pooling" the pooling."""
    folder = resolve_folder(path_or_hub_id)
    arch, labels, raw = read_head_config(folder)
    if arch is None:
        raise ValueError(f"{folder}: not a fine-tuned classifier (config.json names no "
                         f"*ForSequenceClassification, *ForTokenClassification or *ForQuestionAnswering "
                         f"of the BERT family); "
                         f"fine-tune it first")
    try:
        config = BertConfig.from_dict(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{folder}/config.json: {e}") from e
    cls = HEADS[arch]
    n = len(labels) if labels else int(raw.get("num_labels", 2))
    problem = {v: k for k, v in PROBLEM_TYPES.items()}.get(raw.get("problem_type"))
    if cls.kind == "qa":
        key = family.MEMBERS[config.model_type].qa_dropout_key  # DistilBERT's qa_dropout
        model = cls(config, 2, labels, classifier_dropout=raw.get(key) if key else None)
    else:
        pooling = raw.get("bertlab_pooling") if cls.kind == "sequence" else None
        model = cls(config, n, labels, classifier_dropout=fam.dropout_from_config(raw, config.model_type, cls.per_token),
                    problem=problem if cls.kind == "sequence" else None,
                    pooling=pooling if pooling in fam.POOLINGS else "auto")
    sd = {k: v for k, v in to_pretraining_keys(read_weights(folder), cls.base_model_prefix).items()
          if not k.endswith(("position_ids", "token_type_ids"))}
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not fit a {arch} with {n} labels "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    tok = SubwordTokenizer.from_pretrained(folder)
    tok.model_max_length = min(tok.model_max_length, config.max_tokens)
    return model.eval(), tok
