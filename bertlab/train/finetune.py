"""Fine-tuning: a pre-trained encoder + a task head, trained in full, head-only (frozen) or with
LoRA, on the shared Trainer, so runs are folders that can be watched, stopped and resumed (runs.py).
Any family member fine-tunes (BERT, ALBERT, ELECTRA's discriminator, RoBERTa, DistilBERT), into that
member's own Hugging Face class (heads.py), for any problem: one label, several labels, a number, a
text pair, or an answer span (data/tasks.py, data/qa.py); finetune_metrics.py scores each.
The method (bertlab.methods) decides what trains. Checkpoints keep LoRA, IA3, virtual tokens and
adapters as they train (what a resume needs); <run>/model/ is what bertlab.methods.load_finetuned and
the app read: a plain transformers folder for full, frozen and bitfit, and for lora and ia3 merged
(their peft adapter folder is <run>/adapter/); peft's adapter folder for prefix and prompt; a bertlab
folder for Houlsby adapters.
"""
from __future__ import annotations

import random
import time
import warnings
from pathlib import Path

import torch

from .. import family
from ..checkpoint import load_pretrained, read_weights, resolve_folder
from ..config import BertConfig, read_json_config
from ..data.tasks import IGNORE_INDEX, TASK_CORPUS, TaskBatcher, load_task, task_kind
from ..heads import (
    ALBERT_LAYERWISE,
    classifier_class,
    layer_index,
    read_head_config,
    trainable_parameters,
)
from ..methods import apply_method, save_finetuned
from ..methods.registry import method
from ..methods.saving import RUN_ADAPTER
from ..model import set_gradient_checkpointing
from ..tokenizer import SubwordTokenizer
from . import runs
from .finetune_metrics import CONFUSION_FILE, Evaluator, classification_metrics  # noqa: F401 (re-exported)
from .loop import Trainer
from .pretrain import task_documents
from .specs import FinetuneSpec, PretrainSpec

METHODS = FinetuneSpec.METHODS


# ---- model -------------------------------------------------------------------------------------------

def check_source(folder: Path, spec: FinetuneSpec | None = None) -> BertConfig:
    """The config of a model folder fine-tuning can start from, or one ValueError saying why not:
    an ELECTRA generator (fine-tune the discriminator), or ALBERT with layer-wise options."""
    raw = read_json_config(folder / "config.json")
    try:
        config = BertConfig.from_dict(raw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{folder.name}/config.json: {e}") from e
    architectures = raw.get("architectures") if isinstance(raw.get("architectures"), list) else ()
    if family.model_class(config, architectures).__name__ == "ElectraForMaskedLM":
        raise ValueError(f"{folder.name}: an ELECTRA generator (ElectraForMaskedLM); fine-tune the "
                         f"discriminator (ElectraForPreTraining) instead: it is the model ELECTRA trains for tasks")
    if spec is not None:
        check_layerwise(config, spec)
    return config


def check_layerwise(config: BertConfig, spec: FinetuneSpec) -> None:
    """Shared layers (ALBERT's one weight set) have no layer to give its own rate or to unfreeze first:
    layer-wise learning rates and gradual unfreezing are refused."""
    shared = "num_hidden_groups" in family.MEMBERS[config.model_type].only
    if shared and (spec.layer_decay < 1 or spec.gradual_unfreeze):
        raise ValueError(ALBERT_LAYERWISE)


def first_of_shuffled(items: list, n: int, seed: int) -> list:
    """The first n of a seeded shuffle, in their order: a smaller n's examples are in every larger n's."""
    keep = sorted(random.Random(seed).sample(range(len(items)), len(items))[:n])
    return [items[i] for i in keep]


def build_classifier(source: str | None, kind: str, labels: list[str], spec: FinetuneSpec, log=print,
                     problem: str | None = None):
    """A fresh head of the right kind ("sequence", "token", "qa") and problem (heads.PROBLEMS; None: from
    the labels) with spec.pooling, on the encoder of `source` (any family member's folder, run or hub id).
    A source that is already a classifier of this kind with these labels keeps its own head. spec.init
    "random" keeps the encoder as built (BERT's initialisation, from the seed), only its shape from source."""
    folder = resolve_folder(None if source in (None, "", "default") else source)
    check_source(folder)
    arch, old_labels, _ = read_head_config(folder)
    with warnings.catch_warnings(record=True) as caught:  # missing MLM/NSP heads: irrelevant here
        warnings.simplefilter("always")
        pre, tok = load_pretrained(folder)
    cls = classifier_class(pre.config, kind)
    model = cls(pre.config, len(labels), labels, classifier_dropout=spec.classifier_dropout, problem=problem,
                **({"pooling": spec.pooling} if kind == "sequence" else {}))
    uses_pooler = any(".pooler." in k for k in model.state_dict())
    if uses_pooler and any("pooler" in str(w.message) for w in caught):
        log(f"note: {folder} has no trained pooler; the classifier starts from a random one")
    if spec.init == "random":
        log("the encoder starts from random weights (init random): the baseline without pre-training")
        return model, tok
    mine, theirs = family.encoder_of(model), family.encoder_of(pre)
    own = mine.state_dict()
    mine.load_state_dict({k: v for k, v in theirs.state_dict().items() if k in own})
    if arch == cls.architecture and old_labels == labels:
        sd = read_weights(folder)
        head = {k: v for k, v in model.state_dict().items() if not k.startswith(cls.base_model_prefix + ".")}
        if all(k in sd for k in head):
            model.load_state_dict({k: sd[k].float() for k in head}, strict=False)
            log(f"continuing with the head of {folder} (same labels)")
    return model, tok


def trainable_estimate(config: BertConfig, kind: str, num_labels: int, spec: FinetuneSpec) -> tuple[int, int]:
    """(trainable, total) for a method before any weights load: the model is built on the meta device."""
    check_layerwise(config, spec)
    cls = classifier_class(config, kind)
    with torch.device("meta"):  # BERT's and ALBERT's cls/mean/max pooling skip the pooler: it is not built
        net = cls(config, num_labels, pooling=spec.pooling) if kind == "sequence" else cls(config, num_labels)
    apply_method(net, spec)
    return trainable_parameters(net)


def layer_decay_groups(model, lr: float, weight_decay: float, decay: float) -> list[dict]:
    """AdamW groups with layer-wise LR decay (ULMFiT/ELECTRA): the head and top layer at lr, each
    layer below at `decay` times the one above, the embeddings lowest. Matrices get weight decay."""
    L = model.config.num_hidden_layers
    groups: dict[tuple[int, bool], dict] = {}
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth, matrix = layer_index(n, L), p.ndim >= 2
        g = groups.setdefault((depth, matrix), {"params": [], "lr": lr * decay ** (L - depth),
                                                "weight_decay": weight_decay if matrix else 0.0})
        g["params"].append((n, p))
    return [groups[k] for k in sorted(groups, key=lambda k: (-k[0], not k[1]))]  # group 0: the top


def unfrozen_depth(step: int, steps: int, num_layers: int) -> int:
    """Gradual unfreezing: the lowest depth (heads.layer_index) that trains at `step`. The run is cut
    into L + 1 equal stages: the head alone, then one more encoder layer (with the pooler) per stage
    from the top; the embeddings join with the bottom layer."""
    stage = min(num_layers, step * (num_layers + 1) // max(steps, 1))
    return num_layers + 1 - stage if stage < num_layers else 0


STOP_EVAL_BATCHES = 8  # held-out batches scored after a Stop (a few seconds, whatever the upload)


class FinetuneTrainer(Trainer):
    """The shared Trainer with per-layer learning rates (layer_decay < 1) and gradual unfreezing.
    Unfreezing is a function of the step alone, so a resumed run freezes exactly as before."""

    def __init__(self, *args, layer_decay: float = 1.0, gradual_unfreeze: bool = False, **kw):
        self.layer_decay, self.gradual_unfreeze = layer_decay, gradual_unfreeze
        super().__init__(*args, **kw)

    def param_groups(self) -> list[dict]:
        a = self.args
        if self.layer_decay < 1:
            return layer_decay_groups(self.model, a.lr, a.weight_decay, self.layer_decay)
        return super().param_groups()

    def before_step(self) -> None:
        if not self.gradual_unfreeze:
            return
        L = self.model.config.num_hidden_layers
        lowest = unfrozen_depth(self.step, self.args.steps, L)
        prefix = self.model.base_model_prefix + "."
        for n, p in self.model.named_parameters():  # AdamW skips parameters without a gradient
            p.requires_grad_(layer_index(n, L) >= lowest if n.startswith(prefix) else True)


# ---- loss and metrics --------------------------------------------------------------------------------

def compute_loss(model, batch):
    """The model's own loss and a training accuracy: the label right (single), the whole label set right
    (multi), both answer boundaries right (qa); none for regression (the loss is its MSE)."""
    problem = getattr(getattr(model, "module", model), "problem", "single")  # DDP wraps the model
    ids, tt, am = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    if problem == "qa":
        sp, ep = batch["start_positions"], batch["end_positions"]
        out = model(ids, tt, am, start_positions=sp, end_positions=ep)
        with torch.no_grad():
            acc = ((out.start_logits.argmax(-1) == sp) & (out.end_logits.argmax(-1) == ep)).float().mean()
        return out.loss, {"acc": acc.detach()}
    out = model(ids, tt, am, labels=batch["labels"])
    if problem == "regression":
        return out.loss, {}
    with torch.no_grad():
        y = batch["labels"]
        if problem == "multi":
            acc = ((out.logits > 0) == (y > 0.5)).all(-1).float().mean()
        else:
            keep = y != IGNORE_INDEX
            acc = (out.logits.argmax(-1)[keep] == y[keep]).float().mean()
    return out.loss, {"acc": acc.detach()}  # a tensor: read once per log row


# ---- the whole run -----------------------------------------------------------------------------------

def held_out_seen(folder: Path, val_texts: list) -> int:
    """How many held-out texts the model's own pre-training run read, when that run adapted it to a task
    (corpus "task:..."): 0 for any other model. Catches a fine-tuning split other than the adaptation's."""
    for d in (folder, folder.parent):
        spec = runs.Run(d).spec() if (d / runs.SPEC).is_file() else None
        if isinstance(spec, PretrainSpec) and spec.corpus.startswith(TASK_CORPUS):
            read = set(task_documents(spec))
            return sum(isinstance(t, str) and t in read for t in val_texts)
    return 0


def finetune(run_dir, spec: FinetuneSpec | None = None, *, resume: bool = False, log=print, stop_event=None,
             callbacks=(), **fields) -> dict:
    """Fine-tune `spec.model` ("default" = the shipped one, a folder, a run or a hub id) on `spec.task`
    ("sentiment", "pos", a .csv/.tsv/.json(l) of texts (and pairs) and labels, a CoNLL file, or a SQuAD
    .json) with `spec.method`; or give the spec's fields as keywords. Evaluates on the validation split
    after every epoch; returns the final validation metrics (finetune_metrics.EVAL_KEYS[problem] and
    more: loss, accuracy, macro_f1, confusion, ...; micro_f1; pearson, spearman; exact_match, f1), the
    state and the model's folder."""
    t0 = time.time()
    run = runs.Run(run_dir)
    spec = spec if spec is not None else FinetuneSpec(**fields)
    if resume and (saved := run.spec()) is not None:
        spec, _ = saved.resumed({k: getattr(spec, k) for k in spec.RESUMABLE})  # the run's own
    kind = task_kind(spec.task, spec.problem)
    if spec.pooling != "auto" and kind != "sequence":
        raise ValueError(f"pooling ({spec.pooling}) is for sentence heads; a {kind} head reads every token")

    # The tokenizer comes with the model, and the labels with the data: read the model's config first.
    folder = resolve_folder(None if spec.model == "default" else spec.model)
    config = check_source(folder, spec)
    tok = SubwordTokenizer.from_pretrained(folder)
    n_pos = min(tok.model_max_length, config.max_tokens)
    if spec.max_len > n_pos:
        log(f"max_len {spec.max_len} exceeds the model's {n_pos} positions; using {n_pos}")
    log(f"loading task {spec.task!r} ...")
    data = load_task(spec.task, tok, min(spec.max_len, n_pos), text_column=spec.text_column,
                     label_column=spec.label_column, pair_column=spec.pair_column, problem=spec.problem,
                     val_frac=spec.val_frac, seed=spec.seed, max_examples=spec.max_examples)
    if spec.train_examples is not None:
        data.train = first_of_shuffled(data.train, spec.train_examples, spec.seed)
    if seen := held_out_seen(folder, data.val_texts):
        data.notes.append(f"{seen} of the {len(data.val_texts)} held-out texts are among the texts this model was "
                          f"adapted on (its pre-training read the task): the score is optimistic. Fine-tune "
                          f"with the adaptation's split (validation share 0.1, seed 0, all examples)")
    for note in data.notes:
        log(note)
    log(data.summary())
    run.write_spec(spec)  # only now: a typo in the task leaves no empty run behind
    run.write_facts(kind=kind, problem=data.problem, labels=data.labels, train_examples=len(data.train),
                    val_examples=len(data.val))

    torch.manual_seed(spec.seed)  # the head's initial weights, and LoRA's A
    net, tok = build_classifier(str(folder), kind, data.labels, spec, log, problem=data.problem)
    wrapped = apply_method(net, spec)
    set_gradient_checkpointing(net, spec.grad_checkpointing)
    trainable, total = trainable_parameters(net)
    run.write_facts(trainable_params=trainable, total_params=total)
    record = method(spec.method)
    log(f"{spec.method}: training {trainable:,} of {total:,} parameters ({trainable / total:.2%})"
        + (record.log(spec, wrapped) if record.log else "") + ("; the pooler trains too" if spec.train_pooler else ""))

    batcher = TaskBatcher.from_tokenizer(data.train, spec.batch_size, tok, mask=False, seed=spec.seed,
                                         problem=data.problem)
    evaluate = Evaluator(data, 2 * spec.batch_size, tok.pad_token_id, run.path)
    args = spec.train_args(len(batcher))
    trainer = FinetuneTrainer(net, batcher, args, run.path, compute_loss, evaluate, log_fn=log,
                              stop_event=stop_event, layer_decay=spec.layer_decay,
                              gradual_unfreeze=spec.gradual_unfreeze, callbacks=callbacks)
    status = trainer.fit(resume=resume)
    model_dir = None
    if status.get("state") in ("finished", "stopped"):
        if evaluate.last is None or status.get("state") == "stopped":  # e.g. resumed an already finished run
            net.eval()
            stopped = status.get("state") == "stopped"  # stop means stop: a sample, not the whole split
            evaluate(net, STOP_EVAL_BATCHES if stopped else None)
            if evaluate.last.get("sample"):
                log(f"stopped: scored on the first {evaluate.last.get('count')} held-out examples only; "
                    f"resume to train and score on all {len(data.val):,}")
        model_dir = save_finetuned(net, tok, run.path / "model", spec, folder if spec.model == "default" else spec.model,
                                   adapter_folder=run.path / RUN_ADAPTER)
        log(f"saved the fine-tuned model to {model_dir}"
            + (f" (merged; peft's adapter folder: {run.path / RUN_ADAPTER})" if record.mergeable else ""))
    adapter_dir = run.path / RUN_ADAPTER if model_dir and record.mergeable else None
    res = {k: v for k, v in (evaluate.last or {}).items() if k != "count"}
    return {"state": status.get("state"), "message": status.get("message", ""), "step": status.get("step"),
            "total_steps": status.get("total_steps"), "task": data.name, "kind": kind, "problem": data.problem,
            "method": spec.method,
            "train_examples": len(data.train), "val_examples": len(data.val),
            "trainable_params": trainable, "total_params": total, **res,
            "model_dir": str(model_dir) if model_dir else None,
            "adapter_dir": str(adapter_dir) if adapter_dir else None, "seconds": round(time.time() - t0, 1)}
