"""Score one masking draw: the corrupted sentence goes through the model once, and at every selected
position (masked, random and kept alike) we read the loss pre-training would add there and the top
guesses. The draw itself comes from data/masking (pre-training's own function), handed in by the UI:
analysis sees only ids, labels and rule codes, so this module needs the model and nothing else."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model import device_of

IGNORE_INDEX = -100  # as in data/masking: the label cross-entropy skips
RULES = {1: "[MASK]", 2: "random", 3: "kept"}  # data.masking's MASKED, RANDOM, KEPT
MAX_TOP_K = 20


@torch.no_grad()
def draw_logits(model, input_ids: list[int], token_type_ids: list[int] | None = None) -> torch.Tensor:
    """The masked-LM logits (T, V) for one corrupted sequence, or ValueError for a model without them."""
    ids = torch.tensor([list(input_ids)], device=device_of(model))
    types = torch.zeros_like(ids) if token_type_ids is None else torch.tensor([list(token_type_ids)], device=ids.device)
    out = model(ids, types)
    logits = getattr(out, "mlm_logits", None)
    if logits is None:
        raise ValueError("this model has no masked-LM head (an ELECTRA discriminator, a fine-tuned "
                         "classifier?), so it cannot guess the selected tokens: pick a BERT-style model")
    return logits[0].float().cpu()


def score_positions(logits: torch.Tensor, labels: list[int], rule: list[int], top_k: int = 5) -> list[dict]:
    """Per selected position (label != -100): its rule, the loss -log p(original), p(original), the
    original's rank (1 = first guess) and the top-k guesses as (id, probability). The loss is the
    same cross-entropy pre-training averages over these positions."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
    if not len(labels) == len(rule) == logits.shape[0]:
        raise ValueError(f"{len(labels)} labels and {len(rule)} rules for {logits.shape[0]} positions")
    logp = F.log_softmax(logits.double(), -1)  # (T, V)
    rows = []
    for i, (y, r) in enumerate(zip(labels, rule)):
        if y == IGNORE_INDEX:
            continue
        if r not in RULES:
            raise ValueError(f"position {i} has a label but rule {r}: expected one of {sorted(RULES)}")
        top = logp[i].topk(min(top_k, logp.shape[1]))
        rows.append({"position": i, "rule": RULES[r], "label_id": int(y), "loss": float(-logp[i, y]),
                     "prob": float(logp[i, y].exp()), "rank": int((logp[i] > logp[i, y]).sum()) + 1,
                     "top": [(int(j), float(v)) for v, j in zip(top.values.exp().tolist(), top.indices.tolist())]})
    return rows


def summary(rows: list[dict]) -> dict:
    """Mean loss over all selected positions (pre-training's MLM loss for this draw) and per rule."""
    out = {"selected": len(rows), "mean_loss": sum(r["loss"] for r in rows) / len(rows) if rows else None,
           "by_rule": {}}
    for name in RULES.values():
        mine = [r for r in rows if r["rule"] == name]
        out["by_rule"][name] = {"count": len(mine), "mean_loss": sum(r["loss"] for r in mine) / len(mine)
                                if mine else None,
                                "top1_right": sum(r["rank"] == 1 for r in mine)}
    return out


def score_draw(model, input_ids: list[int], labels: list[int], rule: list[int],
               token_type_ids: list[int] | None = None, top_k: int = 5) -> dict:
    """One forward pass of the corrupted input; {"positions": score_positions(...), "summary": ...}."""
    logits = draw_logits(model, input_ids, token_type_ids)
    rows = score_positions(logits, labels, rule, top_k)
    return {"positions": rows, "summary": summary(rows)}
