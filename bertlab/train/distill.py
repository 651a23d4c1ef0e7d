"""DistilBERT's recipe (Sanh et al. 2019): a BERT teacher taught to a DistilBertForMaskedLM student of the
same width and fewer layers, started from the teacher's own layers (one in every `L / n`: 0, 2, 4, ...
for half) and trained on three losses: the teacher's softened predictions (KL at temperature T, scaled
by T² so its gradients keep their size as T changes), the masked-LM labels, and the cosine between the
two models' last hidden states. DistilBERT weighted them 5 : 2 : 1.

A plain loop, not the resumable Trainer: a distillation is short here, and its product is one model
folder (save_pretrained, atomic, with the teacher's tokenizer) that transformers loads as
DistilBertForMaskedLM.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

from ..checkpoint import is_model_folder, load_pretrained, save_pretrained
from ..data.corpus import load_documents, make_pretraining_examples, tokenize_documents
from ..data.masking import Batcher
from ..model import BertForPreTraining
from ..variants.distilbert import LN_EPS, DistilBertForMaskedLM
from .loop import lr_lambda, param_groups, resolve_device
from .specs import MAX_STEPS, MAX_TOKENS, NON_NEGATIVE, POSITIVE, POSITIVE_NUM, Spec, between, opt


@dataclass
class DistillSpec(Spec):
    """Distil a BERT into a DistilBERT: teacher, student depth, the three loss weights, corpus, schedule."""
    KIND: ClassVar[str] = "distill"
    teacher: str = opt("default", "the BERT to distil: model folder, run folder or hub id ('default': the shipped model)")
    layers: int | None = opt(None, "student layers (default: half the teacher's, as DistilBERT)", between(1, 128))
    temperature: float = opt(2.0, "softmax temperature of the soft targets", POSITIVE_NUM)
    alpha_kl: float = opt(5.0, "weight of the soft-target loss (KL to the teacher at the temperature, x T^2)",
                          NON_NEGATIVE)
    alpha_mlm: float = opt(2.0, "weight of the masked-LM cross-entropy on the true tokens", NON_NEGATIVE)
    alpha_cos: float = opt(1.0, "weight of the cosine loss between student and teacher last hidden states",
                           NON_NEGATIVE)
    corpus: str = opt("imdb", "imdb | a .txt/.csv/.jsonl file or folder | a hub dataset")
    text_column: str = opt("text", "column holding the text in .csv/.jsonl")
    max_docs: int | None = opt(None, "use only the first N documents", POSITIVE)
    max_len: int = opt(32, "tokens per example", between(8, MAX_TOKENS))
    mask_rate: float = opt(0.15, "share of tokens to predict", (lambda v: 0 < v < 1, "between 0 and 1"))
    batch_size: int = opt(32, "examples per batch", POSITIVE)
    steps: int = opt(500, "optimizer steps", between(1, MAX_STEPS))
    lr: float = opt(5e-4, "peak learning rate (AdamW)", POSITIVE_NUM)
    warmup: float = opt(0.05, "warm-up: a fraction of the steps if below 1, else a number of steps", NON_NEGATIVE)
    weight_decay: float = opt(0.01, "AdamW weight decay, on matrices only", NON_NEGATIVE)
    clip: float = opt(1.0, "largest global gradient norm; 0 = no clipping", NON_NEGATIVE)
    seed: int = opt(0, "random seed (data order, masks, dropout)")
    log_every: int = opt(10, "steps between progress lines", POSITIVE)
    device: str = opt("cpu", "cpu | cuda | cuda:N | auto")
    threads: int | None = opt(None, "torch CPU threads", POSITIVE)

    def check(self) -> None:
        if self.alpha_kl + self.alpha_mlm + self.alpha_cos == 0:
            raise ValueError("alpha_kl, alpha_mlm and alpha_cos are all 0: nothing to learn from")

    @property
    def warmup_steps(self) -> int:
        return min(self.steps, int(round(self.warmup * self.steps)) if self.warmup < 1 else int(self.warmup))


# ---- the student, from the teacher's weights ------------------------------------------------------

LAYER_KEYS = {  # BERT layer key -> DistilBERT layer key (both after "layer.N.")
    "attention.self.query": "attention.q_lin", "attention.self.key": "attention.k_lin",
    "attention.self.value": "attention.v_lin", "attention.output.dense": "attention.out_lin",
    "attention.output.LayerNorm": "sa_layer_norm", "intermediate.dense": "ffn.lin1",
    "output.dense": "ffn.lin2", "output.LayerNorm": "output_layer_norm"}
HEAD_KEYS = {"cls.predictions.transform.dense": "vocab_transform",
             "cls.predictions.transform.LayerNorm": "vocab_layer_norm"}


def check_teacher(teacher) -> None:
    c = teacher.config
    if not isinstance(teacher, BertForPreTraining) or c.model_type != "bert":
        raise ValueError(f"the teacher must be a BERT (BertForPreTraining); got a {c.model_type} model "
                         f"({type(teacher).__name__})")
    if c.pre_ln:
        raise ValueError("the teacher is pre-LN; DistilBERT's blocks are post-LN, so its layers do not carry over")


def teacher_layers(teacher_n: int, n: int) -> list[int]:
    """Which teacher layers start the student: evenly spaced from 0 (half: 0, 2, 4, ...; all: each)."""
    if not 1 <= n <= teacher_n:
        raise ValueError(f"layers must be from 1 to the teacher's {teacher_n}, got {n}")
    return [i * teacher_n // n for i in range(n)]


def student_from_teacher(teacher: BertForPreTraining, layers: int) -> DistilBertForMaskedLM:
    """A DistilBertForMaskedLM of the teacher's width with `layers` of its layers. Segment 0's token-type
    vector is folded into the position table (DistilBERT has no token types), so with every layer kept the
    student computes exactly what the teacher does on one-segment inputs."""
    check_teacher(teacher)
    c = teacher.config
    picks = teacher_layers(c.num_hidden_layers, layers)
    student = DistilBertForMaskedLM(c.replace(model_type="distilbert", num_hidden_layers=layers, layer_norm_eps=LN_EPS))
    t = teacher.state_dict()
    new = {"distilbert.embeddings.word_embeddings.weight": t["bert.embeddings.word_embeddings.weight"],
           "distilbert.embeddings.position_embeddings.weight": t["bert.embeddings.position_embeddings.weight"]
           + t["bert.embeddings.token_type_embeddings.weight"][0],  # (P, H) + (H,)
           "vocab_projector.bias": t["cls.predictions.bias"]}
    for p in ("weight", "bias"):
        new[f"distilbert.embeddings.LayerNorm.{p}"] = t[f"bert.embeddings.LayerNorm.{p}"]
        for src, dst in HEAD_KEYS.items():
            new[f"{dst}.{p}"] = t[f"{src}.{p}"]
        for i, j in enumerate(picks):
            for src, dst in LAYER_KEYS.items():
                new[f"distilbert.transformer.layer.{i}.{dst}.{p}"] = t[f"bert.encoder.layer.{j}.{src}.{p}"]
    missing, unexpected = student.load_state_dict({k: v.clone() for k, v in new.items()}, strict=False)
    assert not unexpected and set(missing) <= set(student.tied_keys), (missing, unexpected)
    student.tie_weights()
    return student


# ---- the three losses -----------------------------------------------------------------------------

def distill_losses(student, teacher, batch: dict, temperature: float) -> dict[str, torch.Tensor]:
    """Soft-target KL (x T²) and cosine over every real token, MLM cross-entropy on the masked ones."""
    with torch.no_grad():
        t = teacher(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    s = student(batch["input_ids"], None, batch["attention_mask"], labels=batch["labels"])
    keep = batch["attention_mask"].bool()  # (B, T)
    s_logits, t_logits = s.mlm_logits[keep].float(), t.mlm_logits[keep].float()  # (N, V)
    kl = F.kl_div(F.log_softmax(s_logits / temperature, -1), F.log_softmax(t_logits / temperature, -1),
                  reduction="batchmean", log_target=True) * temperature ** 2
    s_h, t_h = s.last_hidden_state[keep].float(), t.last_hidden_state[keep].float()  # (N, H)
    cos = (1 - F.cosine_similarity(s_h, t_h, dim=-1)).mean()
    return {"kl": kl, "mlm": s.mlm_loss, "cos": cos}


# ---- data -----------------------------------------------------------------------------------------

def make_batcher(spec: DistillSpec, tok) -> Batcher:
    """Masked one-segment examples in the teacher's own vocabulary (the pre-training corpus options)."""
    docs = load_documents(spec.corpus, spec.text_column, spec.max_docs)
    examples = make_pretraining_examples(tokenize_documents(docs, tok), max_len=spec.max_len, objective="mlm",
                                         seed=spec.seed, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
    if not examples:
        raise ValueError(f"{spec.corpus}: no examples could be built (is the text too short?)")
    return Batcher.from_tokenizer(examples, min(spec.batch_size, len(examples)), tok, rate=spec.mask_rate,
                                  seed=spec.seed, drop_last=True)


def check_out(out: str | os.PathLike) -> None:
    """Refuse a target save_pretrained would refuse, before any training time is spent."""
    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not is_model_folder(folder):
        raise ValueError(f"{folder} exists and is not a model folder bertlab wrote: choose a new or empty folder")


# ---- the whole run --------------------------------------------------------------------------------

def distill(spec: DistillSpec, out: str | os.PathLike | None, log=print, teacher=None, tok=None) -> dict:
    """Distil spec.teacher (or the given teacher + tokenizer) into a student saved at `out` (None: not
    saved); returns the student and the per-step losses."""
    if out is not None:
        check_out(out)
    threads = torch.get_num_threads()
    try:
        if spec.threads:
            torch.set_num_threads(spec.threads)
        return _distill(spec, out, log, teacher, tok)
    finally:
        torch.set_num_threads(threads)  # a caller's own setting, e.g. a test process's


def _distill(spec: DistillSpec, out, log, teacher, tok) -> dict:
    if teacher is None:
        teacher, tok = load_pretrained(spec.teacher)
    check_teacher(teacher)
    c = teacher.config
    layers = spec.layers or max(1, c.num_hidden_layers // 2)
    teacher_layers(c.num_hidden_layers, layers)  # the range check, before the data is read
    if spec.max_len > c.max_tokens:
        raise ValueError(f"max_len {spec.max_len} exceeds the teacher's {c.max_tokens} positions")
    tok = copy.copy(tok)  # a caller's tokenizer keeps its own length limit
    tok.model_max_length = spec.max_len
    device = resolve_device(spec.device)
    torch.manual_seed(spec.seed)
    batcher = make_batcher(spec, tok)
    student = student_from_teacher(teacher, layers).to(device).train()
    teacher = teacher.to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt_ = torch.optim.AdamW(param_groups(student, spec.weight_decay), lr=spec.lr, betas=(0.9, 0.98), eps=1e-6)
    sched = LambdaLR(opt_, lr_lambda(spec.steps, spec.warmup_steps))
    log(f"distilling {c.num_hidden_layers} teacher layers into {layers} (from teacher layers "
        f"{teacher_layers(c.num_hidden_layers, layers)}), {spec.steps} steps on {len(batcher.examples)} examples")
    history, step, t0 = [], 0, time.time()
    while step < spec.steps:
        for batch in batcher:
            batch = {k: v.to(device) for k, v in batch.items()}
            parts = distill_losses(student, teacher, batch, spec.temperature)
            loss = spec.alpha_kl * parts["kl"] + spec.alpha_mlm * parts["mlm"] + spec.alpha_cos * parts["cos"]
            opt_.zero_grad(set_to_none=True)
            loss.backward()
            if spec.clip:
                torch.nn.utils.clip_grad_norm_(student.parameters(), spec.clip)
            opt_.step()
            sched.step()
            step += 1
            row = {"step": step, "loss": loss.item(), **{k: v.item() for k, v in parts.items()}}
            history.append(row)
            if step % spec.log_every == 0 or step == spec.steps:
                log(f"step {step}/{spec.steps}: loss {row['loss']:.4f}  kl {row['kl']:.4f}  mlm {row['mlm']:.4f}  "
                    f"cos {row['cos']:.4f}")
            if step >= spec.steps:
                break
    student = student.cpu().eval()
    if out is not None:
        save_pretrained(student, tok, out)
    return {"student": student, "history": history, "layers": layers, "seconds": time.time() - t0,
            "model_dir": str(out) if out is not None else None}
