"""DistilBERT's recipe (Sanh et al. 2019): a BERT teacher taught to a DistilBertForMaskedLM student of the
same width and fewer layers, started from the teacher's own layers (one in every `L / n`: 0, 2, 4, ...
for half) and trained on three losses: the teacher's softened predictions (KL at temperature T, scaled
by T² so its gradients keep their size as T changes), the masked-LM labels, and the cosine between the
two models' last hidden states. DistilBERT weighted them 5 : 2 : 1.

Teacher and student train as one module (`DistillPair`, the teacher frozen and always in eval mode)
through the shared Trainer, so a distillation is a run folder like a pre-training: curves, checkpoints
of the student, exact resume, and `model/`, which transformers loads as DistilBertForMaskedLM.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..analysis.predict import fill_mask
from ..checkpoint import load_pretrained, load_weights, save_pretrained, write_model_files
from ..data.corpus import load_documents, make_pretraining_examples, split_heldout, tokenize_documents
from ..data.masking import Batcher
from ..model import BertForPreTraining, device_of
from ..variants.distilbert import LN_EPS, MODEL_TYPE, DistilBertForMaskedLM
from . import runs
from .loop import Trainer
from .specs import DistillSpec

PROBES = ["the acting was [MASK] .", "i would [MASK] recommend this film .", "the [MASK] was slow but the ending was great ."]


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
    student = DistilBertForMaskedLM(c.replace(model_type=MODEL_TYPE, num_hidden_layers=layers, layer_norm_eps=LN_EPS))
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

def make_batchers(spec: DistillSpec, tok) -> tuple[Batcher, list[dict]]:
    """Masked one-segment examples in the teacher's own vocabulary, and fixed held-out batches (2 % of
    the documents) on which every evaluation scores teacher and student alike."""
    docs = load_documents(spec.corpus, spec.text_column, spec.max_docs)
    train_docs, held_docs = split_heldout(docs, 0.02, spec.seed) if len(docs) >= 3 else (docs, docs[:1])
    kw = dict(max_len=spec.max_len, objective="mlm", cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
    train = make_pretraining_examples(tokenize_documents(train_docs, tok), seed=spec.seed, **kw)
    held = make_pretraining_examples(tokenize_documents(held_docs, tok), seed=spec.seed + 1, **kw)
    if not train or not held:
        raise ValueError(f"{spec.corpus}: no examples could be built (is the text too short?)")
    batcher = Batcher.from_tokenizer(train, min(spec.batch_size, len(train)), tok, rate=spec.mask_rate,
                                     seed=spec.seed, drop_last=True)
    bs = batcher.batch_size
    fixed = [batcher.make_batch(held[i:i + bs], torch.Generator().manual_seed(1234 + i))
             for i in range(0, min(len(held), spec.eval_batches * bs), bs)]
    return batcher, fixed


# ---- the run ----------------------------------------------------------------------------------------

class DistillPair(nn.Module):
    """The student learning and the frozen teacher it learns from; only the student is trained and saved."""

    def __init__(self, teacher: BertForPreTraining, student: DistilBertForMaskedLM):
        super().__init__()
        self.teacher, self.student = teacher.eval(), student
        self.teacher.requires_grad_(False)

    def train(self, mode: bool = True):
        self.student.train(mode)
        self.training = mode
        return self  # the teacher stays in eval mode: its targets must not carry dropout noise


class Evaluator:
    """Held-out losses, each model's masked-token accuracy, how often the student's top guess is the
    teacher's, and both models' guesses for a few sentences (probes.jsonl: the tab's side by side)."""

    def __init__(self, spec: DistillSpec, batches: list[dict], tok, run_dir: Path | None):
        self.spec, self.batches, self.tok, self.run_dir = spec, batches, tok, run_dir

    @torch.no_grad()
    def __call__(self, pair: DistillPair) -> dict[str, float]:
        sums, n = {"kl": 0.0, "mlm": 0.0, "cos": 0.0}, 0
        right = {"student_acc": 0.0, "teacher_acc": 0.0, "agreement": 0.0}
        dev = device_of(pair.student)
        for b in self.batches:
            b = {k: v.to(dev) for k, v in b.items()}
            parts = distill_losses(pair.student, pair.teacher, b, self.spec.temperature)
            for k in sums:
                sums[k] += float(parts[k])
            y = b["labels"][b["labels"] != -100]
            s = pair.student(b["input_ids"], None, b["attention_mask"], labels=b["labels"], sparse_mlm=True)
            t = pair.teacher(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"],
                             sparse_mlm=True)
            ps, pt = s.mlm_logits.argmax(-1), t.mlm_logits.argmax(-1)
            right["student_acc"] += float((ps == y).sum())
            right["teacher_acc"] += float((pt == y).sum())
            right["agreement"] += float((ps == pt).sum())
            n += len(y)
        res = {f"{k}_loss": v / len(self.batches) for k, v in sums.items()} | {k: v / n for k, v in right.items()}
        res["mlm_acc"] = res["student_acc"]  # the name every training chart reads
        if self.run_dir is not None:
            step = int(runs.read_status(self.run_dir).get("step", 0))
            self._probe(pair, step)
            if step >= self.spec.steps:  # the last evaluation, before the run says it finished
                runs.Run(self.run_dir).write_facts(**against_the_paper(pair, self.batches[0], res))
        return res

    def _probe(self, pair: DistillPair, step: int) -> None:
        rows = {}
        for s in PROBES:
            try:
                rows[s] = {who: [c["token_str"] for c in fill_mask(m, self.tok, s, top_k=3)[0]]
                           for who, m in (("teacher", pair.teacher), ("student", pair.student))}
            except ValueError:
                continue
        with open(self.run_dir / "probes.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "guesses": rows}) + "\n")


def distill(run_dir: str | os.PathLike, spec: DistillSpec, resume: bool = False, log=print, stop_event=None,
            callbacks=(), teacher=None, tok=None) -> dict:
    """Distil spec.teacher (or the given teacher + tokenizer) into a student, in the run folder `run_dir`;
    returns the final status with the student's folder and depth."""
    run = runs.Run(run_dir)
    if resume and (saved := run.spec()) is not None:
        spec, _ = saved.resumed({k: getattr(spec, k) for k in spec.RESUMABLE})
    threads = torch.get_num_threads()
    try:
        if spec.threads:
            torch.set_num_threads(spec.threads)
        return _distill(run, spec, resume, log, stop_event, callbacks, teacher, tok)
    finally:
        torch.set_num_threads(threads)  # a caller's own setting, e.g. a test process's


def _distill(run, spec, resume, log, stop_event, callbacks, teacher, tok) -> dict:
    if teacher is None:
        teacher, tok = load_pretrained(spec.teacher)
    check_teacher(teacher)
    c = teacher.config
    layers = spec.layers or max(1, c.num_hidden_layers // 2)
    picks = teacher_layers(c.num_hidden_layers, layers)  # the range check, before the data is read
    if spec.max_len > c.max_tokens:
        raise ValueError(f"max_len {spec.max_len} exceeds the teacher's {c.max_tokens} positions")
    tok = copy.copy(tok)  # the caller's tokenizer keeps its own length limit
    tok.model_max_length = spec.max_len
    batcher, held = make_batchers(spec, tok)
    run.write_spec(spec)
    torch.manual_seed(spec.seed)
    pair = DistillPair(teacher, student_from_teacher(teacher, layers))
    log(f"distilling {c.num_hidden_layers} teacher layers into {layers} (from teacher layers {picks}), "
        f"{spec.steps} steps on {len(batcher.examples)} examples")
    run.write_facts(teacher=str(spec.teacher), layers=layers, teacher_layers=picks)

    def loss(model: DistillPair, batch):
        parts = distill_losses(model.student, model.teacher, batch, spec.temperature)
        total = spec.alpha_kl * parts["kl"] + spec.alpha_mlm * parts["mlm"] + spec.alpha_cos * parts["cos"]
        return total, {k: v.detach() for k, v in parts.items()}  # read once per log row
    trainer = Trainer(pair, batcher, spec, run.path, loss, Evaluator(spec, held, tok, run.path),
                      on_save=lambda m, folder: write_model_files(folder, m.student, tok),
                      on_load=lambda m, folder: load_weights(m.student, folder), log_fn=log,
                      stop_event=stop_event, callbacks=callbacks)
    status = trainer.fit(resume=resume)
    model_dir = None
    if status.get("state") in ("finished", "stopped"):
        model_dir = save_pretrained(pair.student.eval(), tok, run.path / runs.MODEL)
    return {**status, "layers": layers, "model_dir": str(model_dir) if model_dir else None}


# DistilBERT's claims (Sanh et al. 2019): 40 % fewer parameters, 60 % faster, 97 % of BERT's GLUE score
PAPER = {"fewer_params": 0.40, "faster": 0.60, "kept": 0.97}


@torch.no_grad()
def forward_ms(model, batch: dict, repeats: int = 7) -> float:
    """Median milliseconds of one eval-mode forward of `batch` (after one warm-up) on the model's device."""
    was = model.training
    model.eval()
    dev = device_of(model)
    b = {k: v.to(dev) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
    times = []
    for i in range(repeats + 1):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t = time.perf_counter()
        model(b["input_ids"], None, b["attention_mask"])
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if i:
            times.append(1000 * (time.perf_counter() - t))
    model.train(was)
    return statistics.median(times)


def against_the_paper(pair: DistillPair, batch: dict, last: dict | None) -> dict:
    """What the paper claims, measured on this run: parameters saved, how much faster a forward of one
    held-out batch is here (median of 7), and the share of the teacher's masked-word accuracy kept."""
    n_t, n_s = (sum(p.numel() for p in m.parameters()) for m in (pair.teacher, pair.student))
    t_ms, s_ms = forward_ms(pair.teacher, batch), forward_ms(pair.student, batch)
    kept = last["student_acc"] / last["teacher_acc"] if last and last.get("teacher_acc") else None
    return {"measured": {"teacher_params": n_t, "student_params": n_s, "fewer_params": 1 - n_s / n_t,
                         "teacher_ms": t_ms, "student_ms": s_ms, "faster": t_ms / s_ms - 1, "kept": kept,
                         "batch": list(batch["input_ids"].shape)}}
