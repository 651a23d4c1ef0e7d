"""Fine-tuning's validation: each problem's metrics and the Evaluator the Trainer calls after every epoch.

  single      loss (cross-entropy), accuracy, macro-F1; a confusion matrix
  multi       loss (binary cross-entropy), accuracy (the whole label set right: subset accuracy),
              micro-F1 and macro-F1 with a label predicted where its sigmoid >= 0.5; per-label table
  regression  loss (MSE), Pearson and Spearman correlation, RMSE; the MSE of always answering the
              mean (`baseline_mse`, the labels' variance): a model must beat it to have learnt anything
  qa          loss (start and end cross-entropy), exact match and F1 as the SQuAD v1.1 script defines
              them (answers normalised: lower case, no punctuation, no a/an/the, single spaces; the best
              over a question's gold answers), as fractions (the script prints them x 100)
The scalars (EVAL_KEYS) go to the Trainer's eval rows (metrics.jsonl, the charts); the whole result
goes to <run>/confusion.json (CONFUSION_FILE) and `.last`. Pearson and Spearman are written with torch
(scipy is not a dependency); a constant prediction has no correlation: 0.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

from ..data.qa import predict_answers
from ..data.tasks import IGNORE_INDEX, TaskData, collate_task
from ..model import device_of
from . import runs

CONFUSION_FILE = "confusion.json"
EVAL_KEYS = {"single": ("loss", "accuracy", "macro_f1"), "multi": ("loss", "accuracy", "micro_f1", "macro_f1"),
             "regression": ("loss", "pearson", "spearman", "rmse"), "qa": ("loss", "exact_match", "f1")}
THRESHOLD = 0.5  # multi-label: a label is predicted where its probability reaches this
PUNCTUATION = set(string.punctuation)


# ---- metrics ---------------------------------------------------------------------------------------

def classification_metrics(confusion: torch.Tensor) -> dict:
    """Accuracy, macro-F1 (over the classes that occur as truth or prediction, as scikit-learn
    does) and per-class precision/recall/F1 from a confusion matrix (rows true, columns predicted)."""
    c = confusion.double()
    tp, pred, true = c.diag(), c.sum(0), c.sum(1)
    f1 = 2 * tp / (pred + true).clamp(min=1)
    present = (pred + true) > 0
    n = float(c.sum())
    return {"accuracy": float(tp.sum()) / max(n, 1.0),
            "macro_f1": float(f1[present].mean()) if bool(present.any()) else 0.0,
            "precision": (tp / pred.clamp(min=1)).tolist(), "recall": (tp / true.clamp(min=1)).tolist(),
            "f1": f1.tolist(), "support": true.long().tolist()}


def multilabel_metrics(pred: torch.Tensor, true: torch.Tensor) -> dict:
    """From 0/1 matrices (N, C): subset accuracy; micro-F1 (every decision pooled); macro-F1 (the mean
    of the labels' F1, over the labels that occur as truth or prediction, as the single-label one);
    per-label precision, recall, F1 and support."""
    p, t = pred.bool(), true.bool()
    tp, fp, fn = (p & t).sum(0).double(), (p & ~t).sum(0).double(), (~p & t).sum(0).double()  # (C,)
    f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
    present = (tp + fp + fn) > 0
    micro = 2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum()).clamp(min=1)
    return {"accuracy": float((p == t).all(1).double().mean()) if len(p) else 0.0, "micro_f1": float(micro),
            "macro_f1": float(f1[present].mean()) if bool(present.any()) else 0.0,
            "precision": (tp / (tp + fp).clamp(min=1)).tolist(), "recall": (tp / (tp + fn).clamp(min=1)).tolist(),
            "f1": f1.tolist(), "support": t.sum(0).long().tolist()}


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson's r of two 1-D series (0 where either is constant)."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    d = float((x.square().sum() * y.square().sum()).sqrt())
    return float((x * y).sum()) / d if d > 0 else 0.0


def ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks 1..n, ties given their mean rank (scipy.stats.rankdata's "average")."""
    order = torch.argsort(x, stable=True)
    _, inverse, counts = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    mean_rank = counts.cumsum(0).double() - (counts.double() - 1) / 2  # the mean of each tie group's ranks
    r = torch.empty(len(x), dtype=torch.float64, device=x.device)
    r[order] = mean_rank[inverse]
    return r


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's rho: Pearson's r of the ranks."""
    return pearson(ranks(x), ranks(y))


def regression_metrics(pred: torch.Tensor, true: torch.Tensor) -> dict:
    pred, true = pred.double().reshape(-1), true.double().reshape(-1)
    mse = float((pred - true).square().mean()) if len(true) else 0.0
    return {"mse": mse, "rmse": mse ** 0.5, "mae": float((pred - true).abs().mean()) if len(true) else 0.0,
            "pearson": pearson(pred, true), "spearman": spearman(pred, true),
            "baseline_mse": float((true - true.mean()).square().mean()) if len(true) else 0.0}


def normalize_answer(s: str) -> str:
    """The SQuAD v1.1 script's: lower case, no punctuation, no articles, single spaces."""
    s = "".join(ch for ch in s.lower() if ch not in PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def squad_f1(prediction: str, truth: str) -> float:
    """Overlap of the normalised words (a bag: repeated words count as often as both have them)."""
    p, t = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(predictions: list[str], answers: list[list[str]]) -> dict:
    """Exact match and F1 (fractions), each the best over a question's gold answers, averaged."""
    em = [max(float(normalize_answer(p) == normalize_answer(a)) for a in golds) for p, golds in zip(predictions, answers)]
    f1 = [max(squad_f1(p, a) for a in golds) for p, golds in zip(predictions, answers)]
    return {"exact_match": sum(em) / max(len(em), 1), "f1": sum(f1) / max(len(f1), 1)}


# ---- evaluation -------------------------------------------------------------------------------------

class Evaluator:
    """Validation loss and the problem's metrics (module docstring) over the task's validation split;
    the Trainer logs the scalars, the full result (confusion matrix, per-label table, ...) is kept in
    `.last` and written to <run>/confusion.json."""

    def __init__(self, data: TaskData, batch_size: int, pad_id: int, run_dir: Path | None = None):
        self.data, self.labels, self.run_dir, self.problem = data, data.labels, run_dir, data.problem
        ex = data.val
        self.batches = [collate_task(ex[i:i + batch_size], pad_id, data.problem) for i in range(0, len(ex), batch_size)]
        self.last: dict | None = None
        self.majority = None
        if self.problem == "single":
            counts = torch.zeros(len(self.labels), dtype=torch.long)
            for b in self.batches:
                y = b["labels"][b["labels"] != IGNORE_INDEX]
                counts += torch.bincount(y, minlength=len(self.labels))
            self.majority = float(counts.max()) / max(float(counts.sum()), 1.0)

    @torch.no_grad()
    def __call__(self, model, max_batches: int | None = None) -> dict[str, float]:
        """`max_batches`: score only the first so many batches (after a Stop: the whole held-out split of
        a big upload took minutes, holding the job slot); `.last` then says "sample": True."""
        dev = device_of(model)  # batches are collated on the CPU
        run = {"single": self._single, "multi": self._multi, "regression": self._regression, "qa": self._qa}
        self._limit = max_batches
        self.last = {"problem": self.problem, **run[self.problem](model, dev),
                     "sample": max_batches is not None and max_batches < len(self.batches)}
        if self.run_dir is not None:
            runs.write_json_atomic(self.run_dir / CONFUSION_FILE, self.last)
        return {k: self.last[k] for k in EVAL_KEYS[self.problem]}

    def _outputs(self, model, dev):
        for b in self.batches[:getattr(self, "_limit", None)]:
            b = {key: v.to(dev) for key, v in b.items()}
            yield b, model(b["input_ids"], b["token_type_ids"], b["attention_mask"])

    def _single(self, model, dev) -> dict:
        k = len(self.labels)
        confusion = torch.zeros(k, k, dtype=torch.long)
        loss_sum, n = 0.0, 0
        for b, out in self._outputs(model, dev):
            logits, y = out.logits.float(), b["labels"]
            keep = y != IGNORE_INDEX
            logits, y = logits[keep] if logits.dim() == 3 else logits, y[keep]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            n += len(y)
            confusion += torch.bincount(y.cpu() * k + logits.argmax(-1).cpu(), minlength=k * k).view(k, k)
        return {"loss": loss_sum / max(n, 1), **classification_metrics(confusion), "confusion": confusion.tolist(),
                "labels": self.labels, "majority_baseline": self.majority, "count": n}

    def _multi(self, model, dev) -> dict:
        logits, y = self._collect(model, dev)
        loss = float(F.binary_cross_entropy_with_logits(logits, y)) if len(y) else 0.0
        return {"loss": loss, **multilabel_metrics(logits.sigmoid() >= THRESHOLD, y > 0.5), "labels": self.labels,
                "threshold": THRESHOLD, "count": len(y)}

    def _regression(self, model, dev) -> dict:
        pred, y = self._collect(model, dev)
        pred = pred.reshape(-1)
        m = regression_metrics(pred, y)
        show = torch.linspace(0, len(y) - 1, min(len(y), 300)).long().tolist()  # a sample for a scatter plot
        return {"loss": m["mse"], **m, "label": self.labels[0], "count": len(y),
                "points": [[float(y[i]), float(pred[i])] for i in show]}

    def _collect(self, model, dev) -> tuple[torch.Tensor, torch.Tensor]:
        outs, ys = [], []
        for b, out in self._outputs(model, dev):
            outs.append(out.logits.float().cpu())
            ys.append(b["labels"].float().cpu())
        return torch.cat(outs), torch.cat(ys)

    def _qa(self, model, dev) -> dict:
        items, windows = self.data.qa_val
        starts, ends, loss_sum, n = [], [], 0.0, 0
        for b, out in self._outputs(model, dev):
            s, e = out.start_logits.float(), out.end_logits.float()
            loss_sum += float(F.cross_entropy(s, b["start_positions"], reduction="sum")
                              + F.cross_entropy(e, b["end_positions"], reduction="sum")) / 2
            n += len(s)
            starts += list(s.cpu())
            ends += list(e.cpu())
        preds = predict_answers(starts, ends, windows, items)
        m = squad_metrics([p["answer"] for p in preds], [it.answers for it in items])
        shown = [{"question": it.question, "prediction": p["answer"], "answers": it.answers}
                 for it, p in zip(items[:20], preds)]
        return {"loss": loss_sum / max(n, 1), **m, "count": len(items), "windows": n, "examples": shown}
