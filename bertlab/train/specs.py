"""One dataclass per kind of job: the only schema. An option is one field (type, default, help text,
range check); the command line's flags, the web form's checks and a run folder's spec.json all
follow from these fields, so adding an option means adding a field and the code that uses it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from .. import family
from ..config import PRESETS, preset, preset_names
from ..data.corpus import OBJECTIVES
from ..methods import registry as method_registry
from ..methods.registry import NAMES as METHOD_NAMES
from ..methods.registry import REGISTRY as METHOD_RECORDS
from . import objectives
from .spec_base import (  # noqa: F401  (re-exported: the job kinds' shared vocabulary)
    DROPOUT, MAX_STEPS, MAX_TOKENS, NON_NEGATIVE, POSITIVE, POSITIVE_NUM, SHARE, Check, Spec, TrainArgs, between, opt)


PRESET_CHOICES = ("tiny", "mini", "small", "medium", "base", "large")
# the members that own an option (their records), as the help names them
_OWN_E, _OWN_GROUPS = (" and ".join(m.name for m in family.owners(k)) for k in ("embedding_size", "num_hidden_groups"))
_OWN_GENERATOR = " and ".join(m.name for m in family.RECORDS if m.generator)
CAUSAL = "causal"  # GPT's objective on BERT's backbone: next token, left to right (objectives.next_token)


@dataclass
class PretrainSpec(TrainArgs):
    """Pre-train a BERT, RoBERTa, ALBERT, ELECTRA or DeBERTa (family.PRETRAINED_HERE): model, corpus, objective, and the CPU recipe's
    defaults (bench/RECIPE.md). Distillation is another job."""
    KIND: ClassVar[str] = "pretrain"
    ARCHS: ClassVar[tuple[str, ...]] = family.PRETRAINED_HERE  # the members with a pre-training objective
    # each architecture's own pair task (its family record): RoBERTa dropped NSP, ALBERT replaced it by
    # sentence order
    DEFAULT_OBJECTIVE: ClassVar[dict] = {n: family.MEMBERS[n].objective for n in family.PRETRAINED_HERE}
    # model
    arch: str = opt("bert", "architecture: " + " | ".join(
        f"{n}{f' (or {m.arch})' if m.arch else ''} ({m.label}, {m.objective}"
        f"{'; ' + m.pretrain_note if m.pretrain_note else ''})" for n, m in family.MEMBERS.items() if m.objective)
        + ". Distillation is another command", choices=ARCHS, label='Architecture', spellings=family.ARCHS)
    preset: str = opt("mini", "model size (roberta, albert: tiny mini base large; electra: tiny mini small base "
                              "large, the discriminator's)",
                      choices=PRESET_CHOICES, label='Size preset')
    layers: int | None = opt(None, "override the preset's number of layers", between(1, 128), label='Layers')
    hidden: int | None = opt(None, "override the preset's hidden size", between(1, 16_384), label='Hidden size')
    heads: int | None = opt(None, "override the preset's attention heads", between(1, 256), label='Heads')
    intermediate: int | None = opt(None, "override the feed-forward size (default: 4 x hidden)",
                                   between(1, 65_536), label='Feed-forward size')
    vocab_size: int = opt(8192, "vocabulary size (the member's own kind: WordPiece, byte-level BPE or Unigram)", between(1, 1_000_000), label='Vocabulary')
    embedding_size: int | None = opt(None, f"{_OWN_E}: token-vector size E, projected up to hidden "
                                           "(default: albert 128, electra the preset's; at most hidden)",
                                     between(1, 16_384), label='Token-vector size E (ALBERT, ELECTRA)')
    layer_groups: int = opt(1, f"{_OWN_GROUPS} only: distinct layer weight sets, shared in turn by the layers "
                               "(1 = every layer the same weights)", POSITIVE, label='Layer weight sets (ALBERT)')
    generator_size: float = opt(0.25, f"{_OWN_GENERATOR} only: the generator's width as a share of the discriminator's "
                                      "(the paper's 1/4; same depth, shared embeddings)",
                                Check(lambda v: 0 < v <= 1, "in (0, 1]", 0, 1), label="ELECTRA generator width (share of the discriminator's)")
    rtd_weight: float = opt(50.0, f"{_OWN_GENERATOR} only: weight lambda of the replaced-token loss against the "
                                  "generator's MLM loss (the paper's 50)", POSITIVE_NUM, label='ELECTRA weight of the replaced-token loss (λ)')
    max_position: int | None = opt(None, "position table size (default: max(128, --max-len)), so a later stage "
                                         "can train longer texts", between(1, MAX_TOKENS))
    positions: str = opt("learned", "position vectors: learned (BERT's: one trained vector a position) | sinusoidal "
                                    "(fixed sines and cosines, the Transformer paper's, at the size of BERT's new "
                                    "word vectors; never trained)",
                         choices=("learned", "sinusoidal"), label="Position vectors")
    # Dropout 0 learns faster in short runs, far from overfitting (bench/RECIPE.md; Cramming does the same).
    dropout: float | None = opt(0.0, "hidden and attention dropout while pre-training (BERT used 0.1)", DROPOUT, label='Dropout')
    pre_ln: bool = opt(False, "LayerNorm before each block (stable at higher learning rates; not BERT's post-LN: "
                              "transformers loads it as MegatronBert)", label="Pre-LN: LayerNorm before each block (stable at higher learning rates; not BERT's layout, saved as MegatronBert)")
    init_from: str | None = opt(None, "continue pre-training this model (keeps its vocabulary and shape)")
    # data
    corpus: str = opt("imdb", "imdb | a .txt/.csv/.jsonl file or folder | a hub dataset | task:NAME (a fine-tuning "
                              "task's own texts but those it holds out: task-adaptive pre-training)")
    text_column: str = opt("text", "column holding the text in .csv/.jsonl", label='Text column (.csv/.jsonl)')
    max_docs: int | None = opt(None, "use only the first N documents", POSITIVE, label='Use the first N documents')
    # The CPU recipe: 32-token examples leave the unigram plateau far sooner than 128.
    max_len: int = opt(32, "tokens per example", between(8, MAX_TOKENS), label='Tokens per example')
    objective: str | None = opt(None, "the pair task besides MLM: nsp | sop | mlm (none) (default: the "
                                      "architecture's own: nsp for bert, mlm for roberta, sop for albert); "
                                      + "; ".join(f"{m.trainer_objective} for {m.name}: {m.pretrain_note}"
                                                  for m in family.RECORDS if m.trainer_objective)
                                      + "; causal for bert: no masks, no pair task, each token sees only those "
                                        "before it and predicts the next (GPT's objective)",
                                choices=OBJECTIVES + family.PAIR_OBJECTIVES + (CAUSAL,), label='Objective')
    loss: str = opt("mlm", "the masked-word loss, a function registered in bertlab/train/objectives.py: mlm = "
                           "BERT's (the picked tokens) | all-tokens = every token teaches, the rest by copying "
                           "(ELECTRA's All-Tokens MLM ablation)",
                    Check(lambda v: v in objectives.REGISTRY, "the name of a loss registered in bertlab/train/objectives.py "
                                                               f"(shipped: {', '.join(objectives.REGISTRY)})"),
                    label="Loss")
    mask_rate: float = opt(0.15, "share of tokens to predict", SHARE, label='Mask rate')
    mask_rule: str = opt("bert", "what a token picked for prediction becomes: bert = 80 % [MASK], 10 % a random "
                                 "word, 10 % kept; electra = 85 % [MASK], 15 % kept, no random words (the official "
                                 "ELECTRA code's rule)", choices=tuple(family.MASK_RULES), label="Masking rule")
    whole_word: bool = opt(False, "mask all pieces of a word together", label='Whole-word masking')
    span_masking: bool = opt(False, "mask runs of whole words (SpanBERT: lengths geometric, p = 0.2, 1 to 10 words, "
                                    "mean 3.8) instead of single tokens, until the mask rate's share of each "
                                    "example is spent",
                             label="Span masking (SpanBERT)")
    static_masks: int = opt(0, "0 = draw new masks every time an example is seen (dynamic, RoBERTa's); N = draw N "
                               "masked copies per example once and cycle through them by epoch (static, original "
                               "BERT's data pipeline)", NON_NEGATIVE, label='Static masks (copies per example)')
    heldout: float = opt(0.02, "share of documents held out for evaluation", Check(lambda v: 0 < v < 0.5, "in (0, 0.5)", 0, 0.5), label='Held-out share')
    batch_size: int = opt(128, "examples per micro-batch", POSITIVE, label='Batch size')
    grad_checkpointing: bool = opt(False, "activation checkpointing: keep only each layer's input and recompute "
                                          "the layer in backward (same numbers, about a third more compute, far "
                                          "less memory; with --accum, bigger batches fit)", label='Gradient checkpointing')
    eval_batches: int = opt(16, "held-out batches per evaluation", POSITIVE, label='Held-out batches per evaluation')
    threads: int | None = opt(None, "torch CPU threads", POSITIVE)
    # the recipe's schedule
    steps: int = opt(2000, "optimizer steps", between(1, MAX_STEPS), label='Steps')
    lr: float = opt(1e-3, "peak learning rate (AdamW)", POSITIVE_NUM, label='Learning rate')
    # a first run shows guesses, attention and the unigram line within seconds, not at step eval_every
    eval_early: int = opt(100, "also evaluate at steps 10, 25, 50, 100, ... up to this step, before the first "
                               "regular evaluation (0 = off)", NON_NEGATIVE, label='Early evaluations up to step')
    RESUMABLE: ClassVar[tuple[str, ...]] = TrainArgs.RESUMABLE + ("threads", "grad_checkpointing")
    DATA: ClassVar[tuple[str, ...]] = ("corpus", "text_column", "max_docs", "vocab_size", "max_len", "objective",
                                       "heldout", "init_from", "seed", "arch")

    def check(self) -> None:
        own = family.MEMBERS[self.arch]
        if self.objective is None:
            self.objective = self.DEFAULT_OBJECTIVE[self.arch]
        if self.hidden and self.heads and self.hidden % self.heads:
            raise ValueError(f"hidden_size ({self.hidden}) must be divisible by num_attention_heads ({self.heads})")
        if self.objective == CAUSAL and (wrong := [k for k, v in (
                ("arch " + self.arch, self.arch != "bert"), ("pre_ln", self.pre_ln), (f"loss {self.loss}", self.loss != "mlm"),
                ("whole_word", self.whole_word), ("span_masking", self.span_masking),
                ("static_masks", self.static_masks)) if v]):
            raise ValueError(f"objective causal predicts each next token of the unmasked text, left to right, on "
                             f"a post-LN bert: it has no masks, no other loss and no pair task to set; drop "
                             f"{', '.join(wrong)}")
        pair = own.pair(self.objective)  # trains a generator and a discriminator
        if self.objective in family.PAIR_OBJECTIVES and self.objective != own.trainer_objective:
            raise ValueError(f"objective {self.objective} is "
                             f"{family.say(m for m in family.RECORDS if m.trainer_objective == self.objective)}'s, "
                             f"not {self.arch}'s")
        if pair and self.loss != "mlm":
            raise ValueError(f"{self.arch} trains its own pair of losses (the generator's masked words, the "
                             f"discriminator's replaced tokens); loss {self.loss!r} is for bert, roberta and albert")
        if own.objective == "mlm" and self.objective not in ("mlm", own.trainer_objective or "mlm"):
            raise ValueError(f"objective must be mlm for {self.arch} (it has no pair task"
                             f"{'; or ' + own.trainer_objective if own.trainer_objective else ''}), "
                             f"got {self.objective!r}")
        if "num_hidden_groups" not in own.only and self.layer_groups != 1:
            raise ValueError(f"layer_groups is an albert option, not {self.arch}'s")
        if "embedding_size" not in own.only and self.embedding_size is not None:
            raise ValueError(f"embedding_size is an albert and electra option, not {self.arch}'s")
        if pair and self.init_from is not None:
            raise ValueError(f"{self.arch} pre-training starts from scratch (a generator and a discriminator); "
                             f"resume an {own.label} run to train it longer")
        if self.positions == "sinusoidal" and self.init_from is not None:
            raise ValueError("sinusoidal positions replace a new model's position table; a continued model keeps "
                             "the positions it learnt (leave positions at learned)")
        if not own.generator and (self.generator_size != 0.25 or (self.rtd_weight != 50.0 and not pair)):
            raise ValueError(f"generator_size and rtd_weight are {_OWN_GENERATOR} options "
                             f"(rtd_weight also objective {', '.join(family.PAIR_OBJECTIVES)}'s), not {self.arch}'s")
        if self.arch != "bert" and self.pre_ln:
            raise ValueError(f"pre_ln is a bert option; {self.arch} is post-LN")
        if own.tokenizer == "byte-level-bpe" and self.vocab_size < 261:
            raise ValueError(f"vocab_size must be at least 261 for roberta (256 bytes and 5 markers), "
                             f"got {self.vocab_size}")
        if self.arch != "bert" and self.init_from is None:
            if self.preset not in preset_names(self.arch):
                raise ValueError(f"preset {self.preset!r} has no {self.arch} size; choose one of "
                                 f"{', '.join(n for n in preset_names(self.arch) if n in PRESET_CHOICES)}")
            preset(self.preset, self.arch, **self.config_overrides())  # impossible shapes fail here, named

    def config_overrides(self) -> dict:
        """BertConfig fields this spec sets on top of its preset (a continued model keeps its shape). The
        tokenizer's ids (vocabulary, padding, RoBERTa's position offset) come later, in build_model."""
        c, own = self._overrides(), family.MEMBERS[self.arch]
        if "embedding_size" in own.only and self.init_from is None:  # the record's E or the preset's, at most hidden
            p = preset(self.preset, self.arch)
            c["embedding_size"] = self.embedding_size or min(own.pretrain_e or p.embedding_dim,
                                                             c.get("hidden_size", p.hidden_size))
        if "num_hidden_groups" in own.only and self.init_from is None:
            c["num_hidden_groups"] = self.layer_groups
        if self.objective == CAUSAL:  # the model reads left to right (a continued causal model stays so)
            c["is_decoder"] = True
        return c

    def _overrides(self) -> dict:
        c = {}
        if self.dropout is not None:
            c = {"hidden_dropout_prob": self.dropout, "attention_probs_dropout_prob": self.dropout}
        if self.init_from is not None:
            return c
        for name, key in (("layers", "num_hidden_layers"), ("hidden", "hidden_size"),
                          ("heads", "num_attention_heads"), ("intermediate", "intermediate_size")):
            if getattr(self, name) is not None:
                c[key] = getattr(self, name)
        if "hidden_size" in c and "intermediate_size" not in c:
            c["intermediate_size"] = 4 * c["hidden_size"]  # BERT's ratio, not the preset's width
        c["max_position_embeddings"] = self.max_position or max(128, self.max_len)
        if self.pre_ln:
            c["pre_ln"] = True
        return c


@dataclass
class FinetuneSpec(Spec):
    """Fine-tune a model on a labelled task with a method; epochs decide the Trainer's steps."""
    KIND: ClassVar[str] = "finetune"
    METHODS: ClassVar[tuple[str, ...]] = METHOD_NAMES
    DEFAULT_LR: ClassVar[dict] = {n: m.lr for n, m in METHOD_RECORDS.items()}  # methods/registry.py
    # where LoRA and IA3 may go: BERT's names (heads_family maps each member's own)
    TARGETS: ClassVar[tuple[str, ...]] = ("query", "key", "value", "attention_output", "ffn", "embeddings", "dense")
    # LoRA's best set on the shipped model + sentiment (bench/FINETUNE.md): the word table is most of what full
    # fine-tuning gains on a small model; the paper's default is query, value
    LORA_DEFAULT: ClassVar[tuple[str, ...]] = ("query", "key", "value", "attention_output", "ffn", "embeddings")
    PROBLEMS: ClassVar[tuple[str, ...]] = ("auto", "single", "multi", "regression", "qa")
    POOLINGS: ClassVar[tuple[str, ...]] = ("auto", "pooler", "cls", "mean", "max", "last4")
    INITS: ClassVar[tuple[str, ...]] = ("pretrained", "random")
    model: str = opt("default", "model folder, run folder or hub id ('default': the shipped model)")
    task: str = opt("sentiment", "sentiment | pos | a .csv/.tsv/.json/.jsonl of texts and labels | a CoNLL file "
                                 "| a SQuAD-format .json (extractive QA)", label='Task')
    method: str = opt(method_registry.DEFAULT, " | ".join(f"{m.name} ({m.hint})" if m.hint else m.name for m in method_registry.RECORDS),
                      choices=METHODS, label='Method')
    epochs: int = opt(2, "passes over the training examples", POSITIVE)
    lr: float | None = opt(None, "learning rate (default: per method, FinetuneSpec.DEFAULT_LR)", POSITIVE_NUM, label='Learning rate')
    batch_size: int = opt(32, "examples per batch", POSITIVE, label='Batch size')
    grad_checkpointing: bool = opt(False, "activation checkpointing: recompute each layer in backward instead of "
                                          "keeping its activations (same numbers, less memory, more compute)", label='Gradient checkpointing')
    lora_rank: int = opt(8, "LoRA rank r", POSITIVE, label='LoRA rank r')
    lora_alpha: float = opt(16.0, "LoRA alpha (updates are scaled by alpha / r)", POSITIVE_NUM, label='LoRA alpha')
    lora_targets: tuple[str, ...] = opt(LORA_DEFAULT, "layers LoRA wraps: query key value attention_output "
                                                            "ffn embeddings (the word table; dense = every dense "
                                                            "layer)", label='Layers LoRA adapts')
    lora_dropout: float = opt(0.0, "dropout on LoRA's input", DROPOUT, label='LoRA dropout')
    virtual_tokens: int = opt(20, f"{' / '.join(method_registry.readers('virtual_tokens'))} tuning: learned virtual tokens",
                              between(1, 512), label='Virtual tokens')
    adapter_size: int = opt(64, f"{', '.join(method_registry.readers('adapter_size'))}: bottleneck width of each Houlsby adapter",
                            POSITIVE, label='Adapter size (bottleneck width)')
    train_pooler: bool = opt(False, f"{', '.join(method_registry.readers('train_pooler'))}: also train BERT's and ALBERT's pooler "
                                    "(dense + tanh on [CLS]; peft: modules_to_save classifier + pooler)", label='Also train the pooler (BERT, ALBERT)')
    problem: str = opt("auto", "single (one label) | multi (several labels per text) | regression (a number) | "
                               "qa (SQuAD) ; auto: from the task", choices=PROBLEMS, label='Problem')
    pooling: str = opt("auto", "sentence heads: pooler | cls | mean | max | last4 (the last 4 layers' [CLS] side by side) "
                               "(auto: the family's own head)",
                       choices=POOLINGS, label='Sentence vector (pooling)')
    init: str = opt("pretrained", "pretrained | random: the encoder's own weights, or fresh random ones of the same "
                                  "shape (the baseline that shows what pre-training is worth)", choices=INITS,
                    label='Start the encoder from')
    layer_decay: float = opt(1.0, "layer-wise LR decay (e.g. 0.8); 1 = off", Check(lambda v: 0 < v <= 1, "in (0, 1]", 0, 1), label='Layer-wise LR decay (1 = off)')
    gradual_unfreeze: bool = opt(False, f"{', '.join(method_registry.readers('gradual_unfreeze'))} only: the head first, then one more layer from the top per stage", label='Gradual unfreezing (the head first, then a layer more per stage)')
    max_len: int = opt(64, "WordPiece tokens per text, [CLS] and [SEP] included", between(4, MAX_TOKENS), label='Tokens per text')
    seed: int = opt(0, "random seed (split, head, data order)")
    text_column: str = opt("text", "CSV/JSON column holding the text", label='Text column')
    label_column: str = opt("label", "CSV/JSON column holding the label", label='Label column')
    pair_column: str | None = opt(None, "CSV/JSON column holding a second text: sentence pairs (segments A and B)", label='Second text column (sentence pairs)')
    val_frac: float = opt(0.1, "share held out for validation", Check(lambda v: 0 < v < 0.5, "in (0, 0.5)", 0, 0.5), label='Validation share')
    max_examples: int | None = opt(None, "use a seeded random subset of N examples", POSITIVE, label='Use N examples')
    train_examples: int | None = opt(None, "train on a seeded N of the training split, the held-out split unchanged "
                                           "(a learning curve's points: each N's examples hold the smaller N's)",
                                     POSITIVE, label='Labelled examples to train on')
    warmup: float = opt(0.1, "warm-up share of the steps", NON_NEGATIVE, label='Warm-up share')
    weight_decay: float = opt(0.01, "AdamW weight decay, on matrices only", NON_NEGATIVE, label='Weight decay')
    classifier_dropout: float | None = opt(None, "dropout before the head (default: the model's)", DROPOUT, label='Dropout before the head')
    bf16: bool = opt(False, "bfloat16 autocast if the hardware has native bf16", label='bfloat16 where the hardware computes it natively')
    device: str = opt("auto", "cpu | cuda | cuda:N | auto (a GPU where PyTorch sees one, else the CPU)")
    threads: int | None = opt(None, "torch CPU threads", POSITIVE)
    log_every: int | None = opt(None, "steps between training rows (default: about 4 per epoch)", POSITIVE)
    RESUMABLE: ClassVar[tuple[str, ...]] = ("bf16", "device", "threads", "log_every", "grad_checkpointing")

    def check(self) -> None:
        if self.lr is None:
            self.lr = self.DEFAULT_LR[self.method]
        if self.gradual_unfreeze and not method_registry.reads(self.method, "gradual_unfreeze"):
            with_it = " or ".join(METHOD_RECORDS[m].label.lower() for m in method_registry.readers("gradual_unfreeze"))
            raise ValueError(f"gradual unfreezing goes with {with_it} (the other methods keep the encoder fixed)")
        bad = [t for t in self.lora_targets if t not in self.TARGETS]
        if bad or not self.lora_targets:
            raise ValueError(f"lora_targets must be some of {', '.join(self.TARGETS)}, got {' '.join(bad) or 'none'}")

    def train_args(self, per_epoch: int) -> TrainArgs:
        return TrainArgs(steps=self.epochs * per_epoch, lr=self.lr, warmup=self.warmup, weight_decay=self.weight_decay,
                         betas=(0.9, 0.999), eps=1e-8, clip=1.0, bf16=self.bf16, seed=self.seed,
                         log_every=self.log_every or max(1, min(50, per_epoch // 4)), eval_every=per_epoch,
                         save_every=per_epoch, keep_last=1, device=self.device)


@dataclass
class CompareSpec(FinetuneSpec):
    """A comparison: the fine-tuning settings every method shares, the methods and the seeds, trained one
    run after another by train/compare.py. `lr` None = each method's default."""
    KIND: ClassVar[str] = "compare"
    methods: tuple[str, ...] = opt(METHOD_NAMES, "methods to compare: " + " ".join(METHOD_NAMES))
    seeds: int = opt(1, "runs per method, with seeds seed, seed + 1, ... (the table gives mean and spread)",
                     between(1, 10))

    def check(self) -> None:
        lr = self.lr
        bad = [m for m in self.methods if m not in METHOD_NAMES]
        if bad or not self.methods or len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods must be distinct names from {', '.join(METHOD_NAMES)}; got "
                             f"{', '.join(self.methods) or 'none'}")
        self.method = self.methods[0]
        saved, self.gradual_unfreeze = self.gradual_unfreeze, False  # a method's own option: checked per method
        super().check()
        self.lr, self.gradual_unfreeze = lr, saved

    def base(self) -> FinetuneSpec:
        return FinetuneSpec(**{f.name: getattr(self, f.name) for f in fields(FinetuneSpec)})

    def run_spec(self, method: str, seed: int) -> FinetuneSpec:
        """One run's spec: the shared settings, this method (at its default learning rate unless one was
        given) and this seed; gradual unfreezing only where it applies (the methods that read it)."""
        return FinetuneSpec(**{**{f.name: getattr(self, f.name) for f in fields(FinetuneSpec)}, "method": method,
                               "seed": seed, "gradual_unfreeze": self.gradual_unfreeze
                               and method_registry.reads(method, "gradual_unfreeze")})

    def runs(self) -> list[tuple[str, int]]:
        return [(m, self.seed + i) for m in self.methods for i in range(self.seeds)]


@dataclass
class ProbeSpec(Spec):
    """Per-layer probes of a model's frozen vectors, each with its control task."""
    KIND: ClassVar[str] = "probe"
    model: str | None = opt(None, "model folder, run folder or hub id (default: the shipped model)")
    task: str = opt("pos", "pos | polarity | sentiment | position, or a file: .conll/.txt (token tag per line), .jsonl "
                           "with tokens+tags lists, .csv/.tsv/.jsonl with text,label")
    feature: str | None = opt(None, "a word's vector: first piece or mean of its pieces (default first); a "
                                    "sentence's: cls or mean (default cls)", choices=("cls", "first", "mean"),
                              aliases=("--pooling",))
    mlp: bool = opt(False, "a 1-hidden-layer MLP probe instead of a linear one")
    sample: int | None = opt(None, "sentences to use (default 600; files 2000)", POSITIVE)
    seed: int = opt(0, "random seed (sample, split, control labels)")
    compare_random: bool = opt(False, "also probe a randomly initialised model of the same config (the baseline)")
    device: str = opt("auto", "cpu | cuda | cuda:N | auto (a GPU where PyTorch sees one, else the CPU)")
    layer: int | None = opt(None, "per-label table at this layer (default: the best)", NON_NEGATIVE)
    per_tag: bool = opt(False, "print the per-label accuracy table")
    story: bool = opt(False, "the layer story: pos, polarity and sentiment at every layer on one table, each task's "
                             "center of gravity (Tenney et al. 2019); task, sample, feature and layer are not used")
    text_column: str = opt("text", "CSV/JSON column holding the text")
    label_column: str = opt("label", "CSV/JSON column holding the label")


# The race's recipes: name -> (what it is, PretrainSpec fields on top of the race's shared settings)
RECIPES: dict[str, tuple[str, dict]] = {
    "bert": ("BERT: MLM + next sentence", dict(arch="bert", objective="nsp")),
    "mlm": ("BERT: MLM only", dict(arch="bert", objective="mlm")),
    # the starkest static case: every epoch sees the same masks (BERT drew 10 copies for 40 epochs)
    "static": ("BERT MLM only, masks drawn once per example", dict(arch="bert", objective="mlm", static_masks=1)),
    "span": ("BERT MLM only, spans of whole words (SpanBERT's masking)", dict(arch="bert", objective="mlm",
                                                                          span_masking=True)),
    "sinusoidal": ("BERT MLM only, fixed sinusoidal positions", dict(arch="bert", objective="mlm", positions="sinusoidal")),
    "causal": ("BERT's shape trained as GPT: next token, left to right (fine-tuned on its tokens' mean: its "
               "[CLS] sees only itself)", dict(arch="bert", objective=CAUSAL)),
}
RECIPES |= {name: (label, dict(arch=n, **fields)) for n, m in family.MEMBERS.items()  # the records' own
            for name, (label, fields, _) in m.recipes.items()}
# the race's default: BERT's MLM against the member that trains a generator (ELECTRA)
DEFAULT_RACE = ("mlm", *(name for m in family.RECORDS if m.generator for name in m.recipes))


def _race_objective(o: objectives.Objective) -> None:
    """Every registered loss but BERT's own is a recipe: BERT's masking and shape, MLM only, that loss."""
    if o.name != "mlm":
        RECIPES[f"loss-{o.name}"] = (f"BERT MLM only, loss: {o.label}", dict(arch="bert", objective="mlm", loss=o.name))


for _o in objectives.REGISTRY.values():
    _race_objective(_o)
objectives.ON_REGISTER.append(_race_objective)


@dataclass
class RaceSpec(Spec):
    """Pre-train several recipes for the same wall-clock time on one corpus, then fine-tune each."""
    KIND: ClassVar[str] = "race"
    recipes: tuple[str, ...] = opt(DEFAULT_RACE, "recipes to race: " + ", ".join(RECIPES))
    minutes: float = opt(3.0, "pre-training wall-clock per recipe, in minutes",
                         (lambda v: 0 < v <= 24 * 60, "above 0 and at most a day"))
    side_by_side: bool = opt(False, "train the recipes at the same time, one CPU thread each (default: one after "
                                    "another, each with every thread)")
    preset: str = opt("mini", "the shape every recipe shares (BERT's preset; small is ELECTRA-Small's 12 layers "
                              "of 256, for a GPU)", choices=("tiny", "mini", "small"))
    corpus: str = opt("imdb", "imdb | a .txt/.csv/.jsonl file or folder | a hub dataset")
    max_docs: int | None = opt(12_000, "use only the first N documents", POSITIVE)
    max_len: int = opt(32, "tokens per pre-training example", between(8, MAX_TOKENS))
    batch_size: int = opt(128, "pre-training examples per batch", POSITIVE)
    lr: float = opt(1e-3, "peak pre-training learning rate", POSITIVE_NUM)
    task: str = opt("sentiment", "the fine-tuning task every recipe is scored on (as fine-tune's --task)")
    seeds: int = opt(1, "fine-tuning runs per recipe (the table gives their mean and spread)", between(1, 10))
    epochs: int = opt(1, "fine-tuning epochs", between(1, 10))
    layer_decay: float = opt(1.0, "fine-tuning's layer-wise learning-rate decay (ELECTRA's paper: 0.8); 1 = off",
                             Check(lambda v: 0 < v <= 1, "in (0, 1]", 0, 1))
    bf16: bool = opt(False, "bfloat16 autocast for pre-training where the hardware computes it natively")
    threads: int | None = opt(None, "torch CPU threads (default: all; side by side: one per recipe)", POSITIVE)
    device: str = opt("auto", "cpu | cuda | cuda:N | auto (a GPU where PyTorch sees one, else the CPU)")
    seed: int = opt(0, "random seed of the pre-training runs")
    RESUMABLE: ClassVar[tuple[str, ...]] = ("threads", "device")

    def check(self) -> None:
        unknown = [r for r in self.recipes if r not in RECIPES]
        if unknown or not self.recipes or len(set(self.recipes)) != len(self.recipes):
            raise ValueError(f"recipes must be distinct names from {', '.join(RECIPES)}; got {', '.join(self.recipes)}")


@dataclass
class DistillSpec(TrainArgs):
    """Distil a BERT into a DistilBERT: teacher, student depth, the three loss weights, corpus; the
    Trainer's schedule, checkpoints and resume as for pre-training."""
    KIND: ClassVar[str] = "distill"
    teacher: str = opt("default", "the BERT to distil: model folder, run folder or hub id ('default': the shipped model)")
    layers: int | None = opt(None, "student layers (default: half the teacher's, as DistilBERT)", between(1, 128))
    temperature: float = opt(2.0, "softmax temperature of the soft targets", POSITIVE_NUM, label='Temperature T')
    alpha_kl: float = opt(5.0, "weight of the soft-target loss (KL to the teacher at the temperature, x T^2)",
                          NON_NEGATIVE, label='Soft targets')
    alpha_mlm: float = opt(2.0, "weight of the masked-LM cross-entropy on the true tokens", NON_NEGATIVE, label='Masked words')
    alpha_cos: float = opt(1.0, "weight of the cosine loss between student and teacher last hidden states",
                           NON_NEGATIVE, label='Hidden states')
    corpus: str = opt("imdb", "imdb | a .txt/.csv/.jsonl file or folder | a hub dataset")
    text_column: str = opt("text", "column holding the text in .csv/.jsonl")
    max_docs: int | None = opt(None, "use only the first N documents", POSITIVE)
    max_len: int = opt(32, "tokens per example", between(8, MAX_TOKENS))
    mask_rate: float = opt(0.15, "share of tokens to predict", SHARE)
    batch_size: int = opt(32, "examples per batch", POSITIVE)
    eval_batches: int = opt(8, "held-out batches per evaluation", POSITIVE)
    threads: int | None = opt(None, "torch CPU threads", POSITIVE)
    steps: int = opt(500, "optimizer steps", between(1, MAX_STEPS))
    eval_every: int = opt(100, "steps between evaluations", POSITIVE)
    save_every: int = opt(250, "steps between checkpoints", POSITIVE)
    RESUMABLE: ClassVar[tuple[str, ...]] = TrainArgs.RESUMABLE + ("threads",)

    def check(self) -> None:
        if self.alpha_kl + self.alpha_mlm + self.alpha_cos == 0:
            raise ValueError("alpha_kl, alpha_mlm and alpha_cos are all 0: nothing to learn from")


def parse_size(text: str) -> tuple[int, int, int]:
    """(layers, hidden, heads) of a BERT preset name (tiny, mini, ...), LxH (heads: hidden / 64, at least 1,
    BERT's head width) or LxHxA."""
    t = str(text).strip().lower()
    if t in PRESETS:
        return PRESETS[t]
    try:
        parts = [int(v) for v in t.split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3):
        raise ValueError(f"size {text!r:.40} is no preset ({', '.join(PRESETS)}) nor LxH like 2x128 (or LxHxA)")
    L, H, A = parts[0], parts[1], parts[2] if len(parts) == 3 else max(1, parts[1] // 64)
    if not (1 <= L <= 48 and 8 <= H <= 4096 and 1 <= A <= H and H % A == 0):
        raise ValueError(f"size {text!r:.40}: layers 1 to 48, hidden 8 to 4,096, and heads dividing hidden")
    return L, H, A


@dataclass
class ScalingSpec(Spec):
    """A scaling sweep: one pre-training recipe (MLM only, same corpus, seed and held-out examples) at
    several model sizes with one token budget, or at one size with several budgets (train/scaling.py)."""
    KIND: ClassVar[str] = "scaling"
    # the sweep measured in bench/SCALING.md: one shape family (64 wide per layer), 1.8 decades of
    # non-embedding parameters, enough tokens that every size leaves the unigram plateau
    sizes: tuple[str, ...] = opt(("1x64", "2x128", "3x192", "4x256"), "model shapes: presets (tiny, mini, "
                                 "...), LxH (heads = hidden / 64) or LxHxA")
    tokens: tuple[float, ...] = opt((4e6,), "training tokens of each run (steps x batch x max_len); several "
                                            "with one size sweep the data")
    corpus: str = opt("imdb", "imdb | a .txt/.csv/.jsonl file or folder | a hub dataset")
    max_docs: int | None = opt(None, "use only the first N documents", POSITIVE)
    vocab_size: int = opt(8192, "WordPiece vocabulary size", between(64, 1_000_000))
    max_len: int = opt(32, "tokens per example", between(8, MAX_TOKENS))
    batch_size: int = opt(128, "examples per batch", POSITIVE)
    lr: float = opt(1e-3, "peak learning rate (AdamW), the same for every size", POSITIVE_NUM)
    eval_batches: int = opt(16, "held-out batches per evaluation (the same examples and masks for every run)",
                            POSITIVE)
    seed: int = opt(0, "random seed (the same for every run)")
    bf16: bool = opt(True, "bfloat16 autocast for every run where the hardware computes it natively (else fp32)")
    threads: int | None = opt(None, "torch CPU threads", POSITIVE)
    device: str = opt("auto", "cpu | cuda | cuda:N | auto (a GPU where PyTorch sees one, else the CPU)")
    RESUMABLE: ClassVar[tuple[str, ...]] = ("threads", "device")

    @property
    def mode(self) -> str:
        return "data" if len(self.tokens) > 1 else "size"

    def check(self) -> None:
        if not self.sizes or not self.tokens:
            raise ValueError("give at least one size and one token budget")
        if len(self.sizes) > 1 and len(self.tokens) > 1:
            raise ValueError("sweep either sizes (several sizes, one token budget) or data (one size, several "
                             "token budgets), not both at once")
        shapes = [parse_size(s) for s in self.sizes]
        if len(set(shapes)) != len(shapes) or len(set(self.tokens)) != len(self.tokens):
            raise ValueError("the sizes and the token budgets must each be distinct")
        if max(len(self.sizes), len(self.tokens)) < 3:
            raise ValueError("a sweep needs at least 3 sizes or 3 token budgets to fit a power law (4 for one "
                             "with an irreducible loss)")
        bad = [t for t in self.tokens if not 100 <= t <= 1e11]
        if bad:
            raise ValueError(f"tokens must be from 100 to 1e11 per run, got {bad[0]:g}")


def _with_kind(cls: type[Spec]):
    """Every spec class below `cls` that names a job kind: the classes are the registry."""
    for c in cls.__subclasses__():
        yield from ([c] if c.KIND else []) + list(_with_kind(c))


KINDS: dict[str, type[Spec]] = {c.KIND: c for c in _with_kind(Spec)}  # what a spec.json's "kind" reads into


def spec_from_dict(d: dict) -> Spec:
    kind = d.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind!r}; choose from {', '.join(KINDS)}")
    return KINDS[kind].from_dict(d)
