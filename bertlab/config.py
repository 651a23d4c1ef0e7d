"""One dataclass describes every model of the BERT family we build (BERT, ALBERT, ELECTRA, DistilBERT,
RoBERTa); field names are Hugging Face's so config.json round-trips. `model_type` says which family
member; the few fields only one member reads say so in their comment. A member with many fields of its
own has a subclass in its model file, named by its record (family.Member.config_class): from_dict and
preset build it."""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import asdict, dataclass, fields, replace

from . import family

# [PAD] [UNK] [CLS] [SEP] [MASK]: a vocabulary smaller than this cannot even hold its own markers.
NUM_SPECIAL_TOKENS = 5
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
MODEL_TYPES = family.MODEL_TYPES  # which members there are: family.MEMBERS
# What each family member's config.json carries beyond the fields every member has.
ONLY = {n: m.only for n, m in family.MEMBERS.items() if m.only}
OWNED = {k for keys in ONLY.values() for k in keys}  # fields some member has and the others must leave alone
SPECIFIC = {"embedding_size", "num_hidden_groups", "inner_group_num", "pre_ln", "model_type",
            "bos_token_id", "eos_token_id", "is_decoder"}


def read_json_config(path: str | os.PathLike) -> dict:
    """A config file's JSON object; any problem is one ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{path}: not a readable JSON config ({e})") from e
    except RecursionError:  # [[[[...]]]] nested deeper than the parser's stack
        raise ValueError(f"{path}: not a readable JSON config (nested too deeply)") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a config must be a JSON object")
    return d


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # Pre-LN (LayerNorm before attention and feed-forward, one after the last layer): trains stably at
    # higher learning rates. Not BERT's layout: saved as Hugging Face's MegatronBert, which computes it.
    pre_ln: bool = False
    model_type: str = "bert"  # which family member: one of MODEL_TYPES
    embedding_size: int | None = None  # ALBERT, ELECTRA: token vectors of this size, projected to hidden_size
    num_hidden_groups: int = 1  # ALBERT: distinct layer weights; the L layers share them in turn
    inner_group_num: int = 1  # ALBERT: layers per group, run one after another at every step
    bos_token_id: int | None = None  # RoBERTa's <s>, ALBERT's [CLS]: written for transformers, unused here
    eos_token_id: int | None = None
    # A causal (GPT-style) BERT: each token attends to itself and the tokens before it. transformers reads
    # the same key and applies the same mask (saved as BertLMHeadModel).
    is_decoder: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_dim(self) -> int:
        """The width of the token vectors: E where the model factorises its embeddings, else H."""
        return self.embedding_size or self.hidden_size

    @property
    def max_tokens(self) -> int:
        """The longest input: the position table less RoBERTa's unused rows."""
        return self.max_position_embeddings - self.position_offset

    @property
    def position_offset(self) -> int:
        """RoBERTa numbers positions from pad_token_id + 1 (rows below are never used); others from 0."""
        return self.pad_token_id + 1 if family.MEMBERS[self.model_type].pad_offset else 0

    def __post_init__(self):
        """Raise one ValueError naming the first impossible field, so a UI can show it as is."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.vocab_size < NUM_SPECIAL_TOKENS:
            raise ValueError(f"vocab_size must be at least {NUM_SPECIAL_TOKENS} to hold "
                             f"[PAD] [UNK] [CLS] [SEP] [MASK], got {self.vocab_size}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by "
                             f"num_attention_heads ({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {', '.join(ACTIVATIONS)}, got {self.hidden_act!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {v!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not isinstance(self.pre_ln, bool):
            raise ValueError(f"pre_ln must be true or false, got {self.pre_ln!r}")
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id must be in [0, vocab_size), got {self.pad_token_id!r}")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)}, got {self.model_type!r}")
        if self.pre_ln and self.model_type != "bert":
            raise ValueError("pre_ln is a BERT option (saved as MegatronBert); other model types are post-LN")
        if self.is_decoder is not False and (self.is_decoder is not True or self.model_type != "bert" or self.pre_ln):
            raise ValueError(f"is_decoder (left-to-right attention) is a post-LN BERT option, got {self.is_decoder!r} "
                             f"for {self.model_type}{' pre-LN' if self.pre_ln else ''}")
        for name in ("embedding_size",):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        own = family.MEMBERS[self.model_type]
        if self.embedding_size not in (None, self.hidden_size) and "embedding_size" not in own.only:
            raise ValueError(f"embedding_size differs from hidden_size only in "
                             f"{family.say(family.owners('embedding_size'))}, not in {self.model_type}")
        for name in ("num_hidden_groups", "inner_group_num"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
            if v != 1 and name not in own.only:
                raise ValueError(f"{name} is an {family.say(family.owners(name))} option; {self.model_type} has "
                                 f"one weight set per layer")
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(f"num_hidden_layers ({self.num_hidden_layers}) must be a multiple of "
                             f"num_hidden_groups ({self.num_hidden_groups})")
        if own.pad_offset and self.max_position_embeddings <= self.position_offset:
            raise ValueError(f"max_position_embeddings must exceed pad_token_id + 1 ({self.position_offset}): "
                             f"{own.label}'s positions start there")
        if not own.token_types and self.type_vocab_size != 2:
            raise ValueError(f"{own.label} has no token-type embeddings: leave type_vocab_size alone")

    # ---- Hugging Face config.json -------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def to_hf_dict(self, architecture: str = "BertForPreTraining") -> dict:
        """The config.json transformers reads for `architecture`: each family member's own fields and
        names. A pre-LN BERT is written as MegatronBert (same keys, LayerNorms moved), so transformers
        computes it correctly instead of loading it into a post-LN BERT."""
        d = {k: v for k, v in self.to_dict().items() if k not in SPECIFIC}
        kind, own = self.model_type, family.MEMBERS[self.model_type]
        d |= {k: getattr(self, k) for k in own.only}
        if "embedding_size" in own.only:
            d["embedding_size"] = self.embedding_dim
        d |= {k: v for k in ("bos_token_id", "eos_token_id") if (v := getattr(self, k)) is not None}
        if not own.token_types:
            d.pop("type_vocab_size")
        if own.config_json:  # its own key names (DistilBERT's)
            d = importlib.import_module(own.config_json).to_config_json(d)
        if self.pre_ln:
            return {"architectures": ["Megatron" + architecture], "model_type": "megatron-bert", **d}
        if self.is_decoder:  # transformers applies the same mask; a pre-trained one loads as its causal LM
            d["is_decoder"] = True
            architecture = "BertLMHeadModel" if architecture in ("BertForPreTraining", "BertForMaskedLM") else architecture
        return {"architectures": [architecture], "model_type": kind, **d}

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        """Keep the fields we know and ignore the rest (HF configs carry many we do not use)."""
        kind = d.get("model_type", "bert")
        if kind not in MODEL_TYPES + ("megatron-bert",):
            raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)} (or 'megatron-bert', "
                             f"a pre-LN BERT), got {kind!r}")
        klass = family.config_class(kind) if kind in MODEL_TYPES else BertConfig
        if klass is not cls and issubclass(klass, cls):  # a member with its own config class reads its own fields
            return klass.from_dict(d)
        own = family.MEMBERS["bert" if kind == "megatron-bert" else kind]
        if own.config_json:  # its own key names (DistilBERT's)
            d = importlib.import_module(own.config_json).from_config_json(d)
        if not own.token_types:
            d = {k: v for k, v in d.items() if k != "type_vocab_size"}
        known = {f.name for f in fields(cls)} - {"pre_ln", "model_type"}  # both said by model_type
        pre_ln = kind == "megatron-bert" or d.get("pre_ln") is True  # ... and our own to_dict() by the field
        kind = "bert" if kind == "megatron-bert" else kind
        kw = {k: v for k, v in d.items() if k in known and v is not None}
        for k in OWNED - set(own.only):
            kw.pop(k, None)
        return cls(**kw, pre_ln=pre_ln, model_type=kind)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        d = read_json_config(path)
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e

    def to_json_file(self, path: str | os.PathLike, architecture: str = "BertForPreTraining") -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_hf_dict(architecture), f, indent=2)
            f.write("\n")

    def replace(self, **changes) -> "BertConfig":
        return replace(self, **changes)


# Google's BERT miniatures (Turc et al. 2019) plus the paper's two sizes; FFN is always 4 × hidden.
PRESETS: dict[str, tuple[int, int, int]] = {  # name: (layers, hidden, heads)
    name: (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"])
    for name, c in family.MEMBERS["bert"].presets.items()}
# The other members' named sizes, by model_type (family.MEMBERS' records).
FAMILY_PRESETS: dict[str, dict[str, dict]] = {n: m.presets for n, m in family.MEMBERS.items() if n != "bert"}


def preset_names(model_type: str = "bert") -> list[str]:
    if model_type == "bert":
        return list(PRESETS)
    if model_type not in FAMILY_PRESETS:
        raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    return list(FAMILY_PRESETS[model_type])


def preset(name: str, model_type: str = "bert", **overrides) -> BertConfig:
    """A named size of a family member (BERT's PRESETS, or FAMILY_PRESETS[model_type]); overrides win."""
    names = preset_names(model_type)
    if name not in names:
        what = "preset" if model_type == "bert" else f"{model_type} preset"
        raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(names)}")
    kw = dict(family.MEMBERS[model_type].presets[name], model_type=model_type)
    return family.config_class(model_type)(**(kw | overrides))
