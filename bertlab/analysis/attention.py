"""Numbers that say what attention heads do: entropy, where the mass goes, and rollout. They serve
the attention tab and the trainer's diagnostics: near-uniform attention with no previous/next-token
mass is the signature of a model that has not yet learned to use word order."""
from __future__ import annotations

import torch


def _valid(attn: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B, 1, T) float weights of the query rows that count (real tokens)."""
    B, _, T, _ = attn.shape
    if mask is None:
        return attn.new_ones(B, 1, T)
    return mask[:, None, :].to(attn.device, attn.dtype)  # a mask may come from the CPU


def _mean_over_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (B, A, T) averaged over valid rows and the batch → (A,)."""
    return (x * w).sum((0, 2)) / w.sum((0, 2)).clamp_min(1e-12)


def entropy(attn: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean entropy (nats) of each head's attention rows: (B, A, T, T) → (A,). Uniform over T keys = log T."""
    p = attn.float()
    h = -(p * p.clamp_min(1e-12).log()).sum(-1)  # (B, A, T)
    return _mean_over_rows(h, _valid(attn, mask))


def offset_mass(attn: torch.Tensor, offset: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean attention from token i to token i+offset (-1 previous, +1 next, 0 itself): → (A,)."""
    T = attn.size(-1)
    nb = torch.arange(T, device=attn.device) + offset  # each row's neighbour
    rows = attn.float().gather(-1, nb.clamp(0, T - 1).expand(attn.shape[:3])[..., None])[..., 0]  # (B, A, T)
    w = _valid(attn, mask) * ((nb >= 0) & (nb < T)).to(attn.dtype)  # rows with no such neighbour count 0
    if mask is not None:  # the neighbour must be a real token too
        w = w * torch.roll(mask, -offset, dims=1).to(w.device, w.dtype)[:, None, :]
    return _mean_over_rows(rows, w)


def token_mass(attn: torch.Tensor, is_target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean attention mass on the keys where `is_target` (B, T) is True, e.g. [CLS] or [SEP]: → (A,)."""
    m = (attn.float() * is_target[:, None, None, :].to(attn.device, torch.float32)).sum(-1)  # (B, A, T)
    return _mean_over_rows(m, _valid(attn, mask))


def head_stats(attentions, input_ids, attention_mask=None, *, cls_id: int, sep_id: int) -> list[dict]:
    """One row per (layer, head) with the shares of attention to [CLS], [SEP], previous, next and
    same token, and the entropy — the table of Clark et al. (2019), "What does BERT look at?"."""
    rows = []
    for li, a in enumerate(attentions):
        stats = {
            "cls": token_mass(a, input_ids == cls_id, attention_mask),
            "sep": token_mass(a, input_ids == sep_id, attention_mask),
            "prev": offset_mass(a, -1, attention_mask),
            "next": offset_mass(a, 1, attention_mask),
            "self": offset_mass(a, 0, attention_mask),
            "entropy": entropy(a, attention_mask),
        }
        for h in range(a.shape[1]):
            rows.append({"layer": li, "head": h, **{k: float(v[h]) for k, v in stats.items()}})
    return rows


def layer_diagnostics(attentions, attention_mask=None) -> dict[str, list[float]]:
    """Per layer, averaged over heads: entropy and previous/next-token mass (the trainer logs these)."""
    return {"attn_entropy": [float(entropy(a, attention_mask).mean()) for a in attentions],
            "attn_prev": [float(offset_mass(a, -1, attention_mask).mean()) for a in attentions],
            "attn_next": [float(offset_mass(a, 1, attention_mask).mean()) for a in attentions]}


def rollout(attentions, residual: bool = True, attention_mask=None) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each token's final vector draws on each
    input token, multiplying head-averaged maps through the layers. (L of (B, A, T, T)) → (B, T, T)."""
    result = None
    for a in attentions:
        m = a.float().mean(1)  # (B, T, T)
        if residual:  # the skip connection carries half of each token's own vector forward
            m = 0.5 * m + 0.5 * torch.eye(m.size(-1), device=m.device)
            m = m / m.sum(-1, keepdim=True)
        result = m if result is None else m @ result
    if attention_mask is not None:
        result = result * attention_mask[:, None, :].to(result.device, result.dtype)
    return result
