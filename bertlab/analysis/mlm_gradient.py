"""The gradient of the masked-LM loss at the logits, worked out by hand and checked against autograd.

With z the logits at a labelled position, p = softmax(z) and y the original piece, the cross-entropy
-log p_y has dL/dz = p - onehot(y). Pre-training averages it over the M labelled positions, so each of
them gets (p - onehot(y)) / M and every position labelled -100 gets exactly 0: only the selected
positions teach the output layer. Everything here runs the model's own forward and its own loss
(model.py's `pretraining_heads`, the one the trainer minimises); analysis sees ids and labels only.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import family
from ..model import device_of

IGNORE_INDEX = -100  # the label cross-entropy skips (data/masking)


def analytic_grad(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """dL/dz (T, V) of the mean cross-entropy over the labelled positions, from the formula alone:
    (softmax(z) - onehot(y)) / M where labels != -100, 0 elsewhere."""
    keep = labels != IGNORE_INDEX  # (T,)
    M = int(keep.sum())
    if M == 0:
        raise ValueError("no position has a label: select at least one piece to guess")
    g = torch.zeros_like(logits)
    p = logits[keep].softmax(-1)  # (M, V)
    p[torch.arange(M), labels[keep]] -= 1.0  # p - onehot(y)
    g[keep] = p / M
    return g


def mlm_gradient(model, input_ids: list[int], labels: list[int], token_type_ids: list[int] | None = None) -> dict:
    """One corrupted sequence through the model with its labels: the loss the trainer uses, autograd's
    gradient at the logits beside the formula's, and what reaches the word table (tied to the output
    layer in BERT): the output layer's share, found by holding the hidden states fixed, and the input's.
    Tensors stay on the CPU in fp32; no parameter's .grad is touched."""
    if not len(input_ids) == len(labels):
        raise ValueError(f"{len(input_ids)} input ids but {len(labels)} labels")
    dev = device_of(model)
    ids = torch.tensor([list(input_ids)], device=dev)  # (1, T)
    y = torch.tensor([list(labels)], device=dev)  # (1, T)
    types = torch.zeros_like(ids) if token_type_ids is None else torch.tensor([list(token_type_ids)], device=dev)
    if not bool((y != IGNORE_INDEX).any()):
        raise ValueError("no position has a label: select at least one piece to guess")
    table = family.encoder_of(model).embeddings.word_embeddings.weight  # (V, H) or (V, E)
    was = model.training
    model.eval()  # no dropout: the same numbers every time
    try:
        with torch.enable_grad():
            out = model(ids, types, labels=y)
            z = out.mlm_logits
            if z is None or out.mlm_loss is None:
                raise ValueError("this model has no masked-LM head (an ELECTRA discriminator, a fine-tuned "
                                 "classifier?), so it has no masked-word loss: pick a BERT-style model")
            g_z, g_table = torch.autograd.grad(out.mlm_loss, [z, table])  # (1, T, V), (V, H)
            # the output layer's share of the table's gradient: the same loss, the hidden states held fixed
            z_out = model.token_logits(out.last_hidden_state.detach())  # (1, T, V)
            loss_out = F.cross_entropy(z_out.reshape(-1, z_out.size(-1)).float(), y.reshape(-1),
                                       ignore_index=IGNORE_INDEX)
            (g_out,) = torch.autograd.grad(loss_out, [table], allow_unused=True)
    finally:
        model.train(was)
    z, g_z, y = z[0].detach().float().cpu(), g_z[0].float().cpu(), y[0].cpu()
    keep = y != IGNORE_INDEX
    mine = analytic_grad(z, y)
    res = {"loss": float(out.mlm_loss.detach()), "logits": z, "labels": y, "autograd": g_z, "analytic": mine,
           "selected": keep.nonzero().flatten().tolist(), "M": int(keep.sum()), "T": z.size(0), "V": z.size(1),
           "max_abs_diff": float((g_z - mine).abs().max()),
           "unselected_max": float(g_z[~keep].abs().max()) if bool((~keep).any()) else 0.0,
           "norms": g_z.norm(dim=-1).tolist(),  # (T,)
           "row_sums": g_z[keep].double().sum(-1).tolist(),  # (M,) each p sums to 1, each onehot to 1
           "tied": g_out is not None}
    if g_out is not None:
        g_out, g_table = g_out.float().cpu(), g_table.float().cpu()
        g_in = g_table - g_out  # what the input side (the embedding lookup) adds
        seen = sorted(set(int(i) for i in input_ids))
        outside = torch.ones(g_in.size(0), dtype=torch.bool)
        outside[seen] = False
        res |= {"table_out": g_out, "out_rows": int((g_out != 0).any(-1).sum()),
                "out_row_norms": g_out.norm(dim=-1),  # (V,)
                "out_column_sum": float(g_out.sum(0).abs().max()),  # every p - onehot sums to 0, so the rows do
                "in_rows": int((g_in != 0).any(-1).sum()), "input_pieces": len(seen),
                "in_outside_input": float(g_in[outside].abs().max()) if bool(outside.any()) else 0.0}
    return res


def top_entries(res: dict, position: int, k: int = 8) -> list[dict]:
    """The k largest entries |p - onehot| at one labelled position, the original piece (p_y - 1 < 0)
    first, then the model's favourites (p > 0), each with the formula's gradient (/M) and autograd's."""
    if position not in res["selected"]:
        raise ValueError(f"position {position} has no label: pick one of {res['selected']}")
    p = res["logits"][position].softmax(-1)  # (V,) fp32, as the loss computes it
    y = int(res["labels"][position])
    diff = p.clone()
    diff[y] -= 1.0
    # the original's entry is always the largest: the others add up to 1 - p_y = |p_y - 1|
    idx = [y] + [j for j in diff.abs().topk(min(k, diff.numel())).indices.tolist() if j != y][:k - 1]
    return [{"id": j, "p": float(p[j]), "onehot": int(j == y), "p_minus_onehot": float(diff[j]),
             "grad": float(res["analytic"][position, j]), "autograd": float(res["autograd"][position, j])}
            for j in idx]


def top_rows(res: dict, k: int = 8) -> list[dict]:
    """The k word-table rows the output layer pushes hardest: id, gradient norm, and the summed
    coefficient sum_i dL/dz_i,w (negative: the row is pulled toward the hidden states, as for the right
    answers; positive: pushed away, as for the wrong favourites)."""
    if not res.get("tied"):
        raise ValueError("this model's output layer does not share the word table")
    top = res["out_row_norms"].topk(min(k, res["V"]))
    coef = res["autograd"].sum(0)  # (V,)
    return [{"id": j, "norm": float(n), "coefficient": float(coef[j])}
            for n, j in zip(top.values.tolist(), top.indices.tolist())]
