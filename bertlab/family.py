"""The BERT family in one place: one `Member` record per model type holds every fact the rest of bertlab
tables about it (its classes, its sizes, its tokenizer's markers and pair layout, its heads, where LoRA
and IA3 go, how it pre-trains here), and the few things every member's model exposes in the same way
(its encoder, its attention projections), so that loading, saving and every view work for all of them.
Model code stays in one plain file per member (model.py, variants/). A new member is its model file
plus one record here (README, "How it fits together").

This module imports nothing of bertlab at load time: config.py and tokenizer.py read their tables from it.
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field


def shape(layers: int, hidden: int, heads: int, **kw) -> dict:
    """A preset's config fields: BERT's 4 x hidden feed-forward, and the member's own fields."""
    return dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                intermediate_size=4 * hidden, **kw)


BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # pad unk cls sep mask, in that order
# LoRA's targets inside one layer (the path after its index): BERT's names, shared by ELECTRA and RoBERTa.
# "dense" is the old "every dense layer" of runs made before the named targets (BERT's pooler included).
_WORDS = ("embeddings.word_embeddings",)  # the word table of every member
BERT_LORA = {"query": ("attention.self.query",), "key": ("attention.self.key",), "value": ("attention.self.value",),
             "attention_output": ("attention.output.dense",), "ffn": ("intermediate.dense", "output.dense"),
             "embeddings": _WORDS, "dense": ("attention.output.dense", "intermediate.dense", "output.dense",
                                             "pooler.dense")}
# IA3 as peft's IA3Config puts it on BERT (target_modules key, value, output.dense, which also matches
# attention.output.dense; both dense layers scale their input): path -> scales the input?
BERT_IA3 = {"attention.self.key": False, "attention.self.value": False, "attention.output.dense": True,
            "output.dense": True}
# What each member's published configs share (Hugging Face's config.json of the released models).
_ALBERT = dict(vocab_size=30000, embedding_size=128, hidden_act="gelu_new", hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, bos_token_id=2, eos_token_id=3)  # v2: no dropout
_ROBERTA = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)  # 512 tokens after 2 unused rows
# DeBERTa-v3: relative positions only (256 log buckets), shared keys, c2p + p2c, no token types
_DEBERTA_V3 = dict(vocab_size=128100, type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True,
                   position_buckets=256, max_relative_positions=-1, pos_att_type=("p2c", "c2p"), share_att_key=True,
                   norm_rel_ebd="layer_norm", position_biased_input=False)


@dataclass(frozen=True)
class Member:
    name: str  # model_type, as config.json says it
    label: str  # how people write it: "DistilBERT"
    stem: str  # the class-name stem of its Hugging Face classes (and ours): "DistilBert"
    model_class: str  # "module:Class" of our fullest class of it (Hugging Face's fullest pre-training class)
    architectures: dict  # its Hugging Face classes -> what they hold besides the encoder (pooler, mlm, nsp, rtd)
    presets: dict  # its named sizes: config fields (tiny/mini train on a CPU, the rest are published sizes)
    only: tuple = ()  # config.json fields only this member writes
    specials: tuple = BERT_SPECIALS  # its tokenizer's pad unk cls sep mask
    layout: str = "bert"  # pairs: "bert" = [CLS] A [SEP] B [SEP] (token types 0, 1); "roberta" = <s> A </s></s> B </s>
    pooled: bool = False  # its sequence head reads the encoder's pooler
    dropout_key: str = "classifier_dropout"  # config.json key of its classifier's dropout
    lora: dict = field(default_factory=lambda: BERT_LORA)  # LoRA target -> module paths inside one layer
    ia3: dict = field(default_factory=lambda: BERT_IA3)  # IA3's module paths -> scales the input?
    adapters: tuple = ("attention.output.dense", "output.dense")  # Houlsby adapters' places: the two output projections
    no_virtual: str = ""  # why prompt and prefix tuning (virtual tokens) do not work on it; "": they do
    objective: str | None = None  # its pair task when pre-trained here (nsp | sop | mlm = none); None: not here
    pretrain_note: str = ""  # the Pre-train form's word on it
    arch: str = ""  # a shorter name `--arch` also takes ("deberta" for "deberta-v2")
    config_class: str = "bertlab.config:BertConfig"  # "module:Class" of its config: BertConfig or its subclass
    # its sequence head past the encoder (the pooled members' is the pooler): "classifier.dense" = dropout, dense,
    # act, dropout, out_proj (ELECTRA, RoBERTa); "pre_classifier" = dense, ReLU, dropout, classifier (DistilBERT);
    # "pooler.dense" = DeBERTa's ContextPooler (dense, act), then dropout, classifier
    seq_head: str = "classifier.dense"
    head_act: str = "tanh"  # that head's activation: gelu, tanh, relu (heads_family.HEAD_ACTS)
    colour: str = "#7f7f7f"  # its colour in the family charts
    sizing: str = ""  # "module:function" (config, tokens) -> (parameters, FLOPs) by part that BERT's formulas miss
    always_projects: bool = False  # maps its E-wide token vectors to H even when E = H (ALBERT)
    hidden_dropouts: int = 2  # dropouts on a layer's hidden path (after attention output, after FFN); 1: one of them
    token_types: bool = True  # False: no token-type table, and its forward takes no token_type_ids (DistilBERT)
    pad_offset: bool = False  # numbers positions from pad_token_id + 1; the rows below are never used (RoBERTa)
    config_json: str = ""  # a module whose to_config_json / from_config_json rename its config.json's keys
    head_dropout: float | None = None  # its heads' dropout by default (transformers'), written; None: the hidden one
    qa_dropout_key: str = ""  # config.json key of its QA head's dropout (0.1); its token head then uses the hidden one
    published: dict = field(default_factory=dict)  # published sizes: name -> (preset, encoder parameters, source)
    first_preset: str = "base"  # the preset the Architecture tab opens it on
    # pre-training here: the vocabulary it trains ("wordpiece", "byte-level-bpe": no [UNK], case kept; "unigram":
    # SentencePiece's, '▁' starts a word, case kept; train/pretrain.py's TOKENIZERS); whether a run may
    # continue one of its saved models; the class pre-training builds around its config (ELECTRA's pair of
    # generator and discriminator) and that pair's generator class, "module:Class"
    tokenizer: str = "wordpiece"
    pretrain_e: int | None = None  # the E a new model gets (at most hidden) where not its preset's (ALBERT's 128)
    continues: bool = False
    trainer: str = ""
    generator: str = ""
    trainer_objective: str = ""  # the objective that trains it with `trainer` (DeBERTa-v3's "rtd"); "": every run
    own_classes: tuple = ()  # classes of ours a saved folder may name that transformers lacks (v3's discriminator)
    # its race recipes: name -> (label, PretrainSpec fields beyond arch, (colour, marker) in the race's charts or None)
    recipes: dict = field(default_factory=dict)
    mask_rule: tuple | None = None  # --mask-rule NAME: its code's shares of picked tokens made [MASK], random words

    @property
    def encoder_class(self) -> str:
        return self.stem + "Model"

    def pair(self, objective: str | None) -> str:
        """The `trainer` (generator + discriminator) a run with `objective` builds around it; "": one model."""
        return self.trainer if self.trainer_objective in ("", objective) else ""

    @property
    def pair_head(self) -> bool:
        """Its fullest class scores sentence pairs (BERT's next sentence, ALBERT's sentence order)."""
        return "nsp" in self.architectures[self.model_class.split(":")[1]]


RECORDS = (
    Member("bert", "BERT", "Bert", "bertlab.model:BertForPreTraining",
           {"BertModel": {"pooler"}, "BertForPreTraining": {"pooler", "mlm", "nsp"}, "BertForMaskedLM": {"mlm"}},
           {name: shape(L, H, A) for name, (L, H, A) in {
               "tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
               "base": (12, 768, 12), "large": (24, 1024, 16)}.items()},  # Turc et al. 2019's small BERTs
           pooled=True, objective="nsp", colour="#1f77b4", continues=True, mask_rule=(0.8, 0.1),
           published={"BERT-base": ("base", 110_000_000, "Devlin et al. 2019"),
                      "BERT-large": ("large", 340_000_000, "Devlin et al. 2019")}),
    Member("albert", "ALBERT", "Albert", "bertlab.variants.albert:AlbertForPreTraining",
           {"AlbertModel": {"pooler"}, "AlbertForPreTraining": {"pooler", "mlm", "nsp"}, "AlbertForMaskedLM": {"mlm"}},
           # one layer's weights shared across all layers (num_hidden_groups = 1)
           {"tiny": shape(2, 128, 2, **_ALBERT | {"embedding_size": 64}), "mini": shape(4, 256, 4, **_ALBERT),
            "base": shape(12, 768, 12, **_ALBERT), "large": shape(24, 1024, 16, **_ALBERT),
            "xlarge": shape(24, 2048, 16, **_ALBERT), "xxlarge": shape(12, 4096, 64, **_ALBERT)},
           only=("embedding_size", "num_hidden_groups", "inner_group_num"),
           specials=("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"), pooled=True, dropout_key="classifier_dropout_prob",
           lora={"query": ("attention.query",), "key": ("attention.key",), "value": ("attention.value",),
                 "attention_output": ("attention.dense",), "ffn": ("ffn", "ffn_output"), "embeddings": _WORDS,
                 "dense": ("attention.dense", "ffn", "ffn_output")},
           ia3={"attention.key": False, "attention.value": False, "attention.dense": True, "ffn_output": True},
           adapters=("attention.dense", "ffn_output"), always_projects=True, hidden_dropouts=1, head_dropout=0.1,
           continues=True, pretrain_e=128,
           published={f"ALBERT-{p}": (p, n, "Lan et al. 2020") for p, n in (
               ("base", 12_000_000), ("large", 18_000_000), ("xlarge", 60_000_000), ("xxlarge", 235_000_000))},
           recipes={"albert": ("ALBERT: one shared layer, sentence order", {}, ("#8c564b", "star")),
                    # layer_groups 0: a weight set per layer, as many as the race's shape has
                    "albert-unshared": ("ALBERT's shape, every layer its own weights", dict(layer_groups=0),
                                        ("#e377c2", "pentagon"))},
           colour="#2ca02c", objective="sop", pretrain_note="factorised embeddings, shared layers; WordPiece, not SentencePiece"),
    Member("electra", "ELECTRA", "Electra", "bertlab.variants.electra:ElectraForPreTraining",  # the discriminator
           {"ElectraModel": set(), "ElectraForPreTraining": {"rtd"}, "ElectraForMaskedLM": {"mlm"}},  # + generator
           # discriminators; the *-generator entries are the released generators: the paper's 1/4 width for
           # small (Clark et al. 2020), but the released small generator is as wide as its discriminator
           {"tiny": shape(2, 128, 2, embedding_size=64), "mini": shape(4, 256, 4, embedding_size=128),
            "small": shape(12, 256, 4, embedding_size=128), "base": shape(12, 768, 12), "large": shape(24, 1024, 16),
            "small-generator": shape(12, 256, 4, embedding_size=128),
            "base-generator": shape(12, 256, 4, embedding_size=768),
            "large-generator": shape(24, 256, 4, embedding_size=1024)},
           only=("embedding_size",), objective="mlm", head_act="gelu",
           colour="#d62728", first_preset="small", mask_rule=(0.85, 0.0), trainer="bertlab.train.electra:ElectraPair",
           generator="bertlab.variants.electra:ElectraForMaskedLM",
           published={f"ELECTRA-{p}": (p, n, "Clark et al. 2020") for p, n in (
               ("small", 14_000_000), ("base", 110_000_000), ("large", 335_000_000))},
           recipes={"electra": ("ELECTRA: discriminator of the same shape, 1/4-width generator", {},
                                ("#d62728", "square"))},
           pretrain_note="a 1/4-width generator fills the masks, the discriminator spots its replacements"),
    Member("distilbert", "DistilBERT", "DistilBert", "bertlab.variants.distilbert:DistilBertForMaskedLM",
           {"DistilBertModel": set(), "DistilBertForMaskedLM": {"mlm"}},
           {"tiny": shape(2, 128, 2), "mini": shape(4, 256, 4), "base": shape(6, 768, 12)},
           dropout_key="seq_classif_dropout", seq_head="pre_classifier", head_act="relu",
           lora={"query": ("attention.q_lin",), "key": ("attention.k_lin",), "value": ("attention.v_lin",),
                 "attention_output": ("attention.out_lin",), "ffn": ("ffn.lin1", "ffn.lin2"), "embeddings": _WORDS,
                 "dense": ("attention.out_lin", "ffn.lin1", "ffn.lin2")},
           ia3={"attention.k_lin": False, "attention.v_lin": False, "attention.out_lin": True, "ffn.lin2": True},
           adapters=("attention.out_lin", "ffn.lin2"), colour="#9467bd", hidden_dropouts=1, token_types=False,
           config_json="bertlab.variants.distilbert", qa_dropout_key="qa_dropout", head_dropout=0.2,
           published={"DistilBERT": ("base", 66_000_000, "Sanh et al. 2019")}),
    Member("roberta", "RoBERTa", "Roberta", "bertlab.variants.roberta:RobertaForMaskedLM",
           {"RobertaModel": {"pooler"}, "RobertaForMaskedLM": {"mlm"}},
           {"tiny": shape(2, 128, 2, **_ROBERTA), "mini": shape(4, 256, 4, **_ROBERTA),
            "base": shape(12, 768, 12, **_ROBERTA), "large": shape(24, 1024, 16, **_ROBERTA)},
           specials=("<pad>", "<unk>", "<s>", "</s>", "<mask>"), layout="roberta", objective="mlm",
           pretrain_note="byte-level BPE, MLM only", colour="#ff7f0e", pad_offset=True, tokenizer="byte-level-bpe",
           continues=True, recipes={"roberta": ("RoBERTa: byte-level BPE, MLM only", {}, ("#9467bd", "triangle-up"))},
           published={f"RoBERTa-{p}": (p, n, "Liu et al. 2019") for p, n in (
               ("base", 125_000_000), ("large", 355_000_000))}),
    Member("deberta-v2", "DeBERTa-v3", "DebertaV2", "bertlab.variants.deberta:DebertaV2ForMaskedLM",
           {"DebertaV2Model": set(), "DebertaV2ForMaskedLM": {"mlm"}},
           # the released v3 sizes (microsoft/deberta-v3-*); tiny and mini train on a CPU
           {name: shape(L, H, A, **_DEBERTA_V3) for name, (L, H, A) in {
               "tiny": (2, 128, 2), "mini": (4, 256, 4), "xsmall": (12, 384, 6), "small": (6, 768, 12),
               "base": (12, 768, 12), "large": (24, 1024, 16)}.items()},
           dropout_key="cls_dropout", seq_head="pooler.dense", head_act="gelu",
           lora={"query": ("attention.self.query_proj",), "key": ("attention.self.key_proj",),
                 "value": ("attention.self.value_proj",), "attention_output": ("attention.output.dense",),
                 "ffn": ("intermediate.dense", "output.dense"), "embeddings": _WORDS,
                 "dense": ("attention.output.dense", "intermediate.dense", "output.dense")},
           ia3={"attention.self.key_proj": False, "attention.self.value_proj": False, "attention.output.dense": True,
                "output.dense": True},
           no_virtual="its relative positions have no place for virtual tokens (not implemented)",
           objective="mlm", arch="deberta", config_class="bertlab.variants.deberta:DebertaV2Config",
           sizing="bertlab.variants.deberta:sizing",
           recipes={"deberta": ("DeBERTa: disentangled attention over relative positions, MLM only", {}, None),
                    "deberta-rtd": ("DeBERTa-v3: replaced-token detection, half-depth generator, "
                                    "gradient-disentangled embedding sharing", {"objective": "rtd"}, None)},
           colour="#8c564b", trainer="bertlab.train.deberta:DebertaPair", trainer_objective="rtd",
           own_classes=("DebertaV2ForReplacedTokenDetection",),
           pretrain_note="disentangled attention, relative positions; MLM, or v3's RTD with objective rtd; "
                         "a Unigram vocabulary, case kept, as v3's SentencePiece", tokenizer="unigram"),
)
MEMBERS: dict[str, Member] = {m.name: m for m in RECORDS}
MODEL_TYPES = tuple(MEMBERS)
PRETRAINED_HERE = tuple(n for n, m in MEMBERS.items() if m.objective)  # the Pre-train tab's; DistilBERT distils
ARCHS = {m.arch: n for n, m in MEMBERS.items() if m.arch}  # short names -> model_type
PAIR_OBJECTIVES = tuple(dict.fromkeys(m.trainer_objective for m in RECORDS if m.trainer_objective))  # "rtd"
MASK_RULES = {n: m.mask_rule for n, m in MEMBERS.items() if m.mask_rule}  # pre-training's --mask-rule choices
# the tables other modules read, each from the records
CLASSES = {n: m.model_class for n, m in MEMBERS.items()}
NAMES = {n: m.label for n, m in MEMBERS.items()}


def load(where: str) -> type:
    """What a "module:name" string names: the records name classes and hooks so, imported when first used."""
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def own_sizing(config, tokens: int = 128) -> tuple[dict, dict]:
    """A member's (parameters, FLOPs) by part beyond BERT's formulas (its record's `sizing`); none for most."""
    where = MEMBERS[config.model_type].sizing
    return load(where)(config, tokens) if where else ({}, {})


def config_class(model_type: str) -> type:
    """The config dataclass of a member: BertConfig, or the subclass its record names."""
    return load(MEMBERS[model_type].config_class)


def bare_class(model_type: str) -> type:
    """Our bare encoder of a member (BertModel, DebertaV2Model, ...), beside its fullest class."""
    m = MEMBERS[model_type]
    return load(m.model_class.split(":")[0] + ":" + m.encoder_class)


def model_class_named(model_type: str) -> type:
    """Our fullest class of a member (its record's model_class)."""
    return load(CLASSES[model_type])


def model_class(config, architectures=()) -> type:
    """Our class for a config.json: the pre-training class its `architectures` names where we have that class
    (ELECTRA's generator, DeBERTa-v3's discriminator), else the member's fullest class (a bare encoder's
    folder, or a head we lack: BertForMaskedLM loads into BertForPreTraining)."""
    m = MEMBERS[config.model_type]
    module = m.model_class.split(":")[0]
    for a in map(str, architectures or ()):
        if a in m.own_classes or (a in m.architectures and a != m.encoder_class):
            with contextlib.suppress(AttributeError):
                return load(f"{module}:{a}")
    return load(CLASSES[config.model_type])


def build(config, architectures=()):
    return model_class(config, architectures)(config)


def encoder_of(model):
    """The bare encoder (BertModel, AlbertModel, ...) of a full model; an encoder is its own."""
    return getattr(model, getattr(model, "base_model_prefix", ""), model)


def attention_projections(model, layer: int):
    """(pre-norm, query, key, value) modules of attention layer `layer`, counted from 1."""
    return encoder_of(model).attention_projections(layer)


def has_mlm_head(model) -> bool:
    return callable(getattr(model, "token_logits", None))


def trains_generator(arch: str) -> bool:
    """Pre-training `arch` (a model_type or its short name) trains a generator beside it (ELECTRA)."""
    return bool(getattr(MEMBERS.get(ARCHS.get(arch, arch)), "generator", ""))


def is_discriminator(model) -> bool:
    """A replaced-token discriminator (ELECTRA's, DeBERTa-v3's): a pre-training class that says it has no
    vocabulary predictions (`token_logits = None`), unlike a bare encoder, which has no such attribute."""
    return getattr(model, "token_logits", 0) is None


def owners(key: str) -> list[Member]:
    """The members whose config.json carries `key` of their own (embedding_size: ALBERT, ELECTRA)."""
    return [m for m in RECORDS if key in m.only]


def say(members) -> str:
    """Names in words: "ALBERT", "ALBERT and ELECTRA", "BERT, RoBERTa and ALBERT"."""
    labels = [m.label for m in members]
    return " and ".join(labels) if len(labels) < 3 else ", ".join(labels[:-1]) + " and " + labels[-1]


def family_name(config) -> str:
    return NAMES[config.model_type] + (" (pre-LN)" if config.pre_ln else "")
