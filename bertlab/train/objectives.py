"""Pre-training losses: the extension point for a new objective. A loss is one function

    loss(model, batch) -> (loss tensor, {metric name: 0-d tensor})

over a masked batch (`input_ids` as the model sees them, `labels` = the original id where a token was
picked for prediction, -100 elsewhere, and `next_sentence_label` where the run has a pair task), decorated
with `@objective(name, label)`. Registering it is all it takes: it becomes a choice of `--loss` for
`python -m bertlab pretrain`, of the Pre-train form's *Loss*, of spec.json, and a race recipe named
`loss-<name>` (BERT's masking and shape, MLM only), raced like the others. Every loss is judged the same
way: the held-out masked-word accuracy on fixed masks (train/pretrain.Evaluator), whatever it trains on.

Write yours in this file (the app, the race's side-by-side children and the CLI then all see it), or
register it from a script before you build a spec (examples/custom_objective.py does that). Return
`mlm_loss` and `mlm_acc` on the picked tokens, so your runs' charts sit beside the others'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

IGNORE = -100


@dataclass(frozen=True)
class Objective:
    name: str
    label: str  # a few words for menus and the race table
    fn: Callable  # (model, batch) -> (loss, metrics)
    note: str  # the function's docstring: why it might help, shown beside the choice


REGISTRY: dict[str, Objective] = {}
ON_REGISTER: list[Callable[[Objective], None]] = []  # specs.py adds each one's race recipe


def objective(name: str, label: str):
    """Register `fn` under `name`; names are unique (registering one again replaces it, for a notebook)."""
    if not name or not name.replace("-", "").isalnum() or name != name.lower():
        raise ValueError(f"an objective's name is lowercase letters, digits and '-', got {name!r}")

    def add(fn):
        REGISTRY[name] = Objective(name, label, fn, " ".join((fn.__doc__ or "").split()))
        for hook in ON_REGISTER:
            hook(REGISTRY[name])
        return fn
    return add


def masked_scores(out, batch) -> dict:
    """mlm_loss / mlm_acc on the picked tokens (and the pair task's), from a sparse or a full forward."""
    picked = batch["labels"] != IGNORE
    targets = batch["labels"][picked]
    logits = out.mlm_logits if out.mlm_logits.dim() == 2 else out.mlm_logits[picked]  # (N, V)
    m = {"mlm_loss": out.mlm_loss.detach() if out.mlm_loss is not None else F.cross_entropy(logits.float(), targets),
         "mlm_acc": (logits.argmax(-1) == targets).float().mean()}
    if out.nsp_loss is not None:
        y = batch["next_sentence_label"]
        m.update(nsp_loss=out.nsp_loss.detach(), nsp_acc=(out.nsp_logits.argmax(-1) == y).float().mean())
    return m


@objective("mlm", "masked words (BERT's)")
def masked_words(model, batch):
    """BERT's: cross-entropy on the ~15 % of tokens picked for prediction, plus next sentence or sentence
    order where the run has a pair task. Vocabulary logits are computed only at the picked tokens."""
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                labels=batch["labels"], next_sentence_label=batch.get("next_sentence_label"), sparse_mlm=True)
    with torch.no_grad():  # tensors, read once per log row (a float() here would make a GPU wait every step)
        m = masked_scores(out, batch)
    return out.loss, m


@objective("all-tokens", "every token: masked words + copying the rest")
def all_tokens(model, batch):
    """Every real token teaches, not only the picked 15 %: the loss is the picked tokens' cross-entropy
    plus that of every other token, predicting itself (ELECTRA's All-Tokens MLM ablation, without its
    copy mechanism). The unpicked tokens are easy (the answer is in the input) and cost a full
    vocabulary projection at every position; does the extra signal help the masked words?"""
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                next_sentence_label=batch.get("next_sentence_label"))  # full logits (B, T, V)
    picked = batch["labels"] != IGNORE  # (B, T)
    rest = batch["attention_mask"].bool() & ~picked
    truth = torch.where(picked, batch["labels"], batch["input_ids"])  # (B, T): every token's own id
    ce = F.cross_entropy(out.mlm_logits.float().transpose(1, 2), truth, reduction="none")  # (B, T)
    out.mlm_loss = ce[picked].mean()
    loss = out.mlm_loss + ce[rest].mean()
    if out.nsp_loss is not None:
        loss = loss + out.nsp_loss
    with torch.no_grad():
        m = masked_scores(out, batch)
        m["copy_loss"] = ce[rest].mean().detach()
    return loss, m


def next_token(model, batch):
    """GPT's objective on BERT's backbone (`--objective causal`): the unmasked text, a causal attention mask
    (the model's config says is_decoder), and at every position the cross-entropy of the token after it,
    through the same tied output layer as the masked words. Not a `--loss`: it needs unmasked batches and
    that mask, so the objective chooses it. Metrics keep the masked words' names so the charts sit beside
    theirs: here the predicted tokens are every next token."""
    ids, keep = batch["input_ids"], batch["attention_mask"][:, 1:].bool()  # (B, T), (B, T-1): a real next token
    out = getattr(model, model.base_model_prefix)(ids, batch["token_type_ids"], batch["attention_mask"], causal=True)
    h = out.last_hidden_state[:, :-1][keep]  # (N, H): the positions that have a next token
    targets = ids[:, 1:][keep]  # (N,)
    logits = model.token_logits(h)  # (N, V)
    loss = F.cross_entropy(logits.float(), targets)
    with torch.no_grad():
        m = {"mlm_loss": loss.detach(), "mlm_acc": (logits.argmax(-1) == targets).float().mean()}
    return loss, m


def get(name: str) -> Objective:
    if name not in REGISTRY:
        raise ValueError(f"no pre-training loss {name!r}: choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]
