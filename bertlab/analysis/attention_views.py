"""Attention numbers for one sentence, shaped for display: the forward pass, unique token labels,
hiding [CLS]/[SEP] with row renormalisation, and a one-word name for what each head mostly does.
The attention tab and the bertviz views all draw from one `AttentionRun`, so they agree."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model import device_of
from .attention import head_stats, rollout
from .predict import check_text

# What a head "mostly does", in the order the overview's colour bar lists them (Clark et al. 2019).
PATTERNS = ("[CLS]", "[SEP]", "previous", "next", "self", "broad", "mixed")
_STAT_OF = {"[CLS]": "cls", "[SEP]": "sep", "previous": "prev", "next": "next", "self": "self"}
DOMINANT_SHARE = 0.5  # a head "looks at X" when more than half of its attention goes there
BROAD_ENTROPY = 0.75  # ... and is "broad" when its rows are at least this close to uniform
CHARS_PER_TOKEN = 200  # cut absurdly long input before tokenising: no token run needs more characters


@dataclass(frozen=True)
class AttentionRun:
    """One forward pass: tokens and every head's attention map (L, A, T, T), rows summing to 1."""
    tokens: list[str]
    ids: list[int]
    token_type_ids: list[int]
    attentions: torch.Tensor  # (L, A, T, T) float32 on the CPU
    special: list[bool]  # True at [CLS] and [SEP] (the tokens "hide specials" drops)
    truncated: bool
    max_length: int
    cls_id: int
    sep_id: int

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1]

    @property
    def sentence_b_start(self) -> int | None:
        """Index of the second sentence's first token, or None for a single sentence."""
        return next((i for i, t in enumerate(self.token_type_ids) if t == 1), None)


@torch.no_grad()
def run_attention(model, tok, text: str, pair: str | None = None) -> AttentionRun:
    """Encode `text` (and `pair`), cut to what the model can read, and collect every head's map."""
    text = check_text(text)
    pair = check_text(pair, "second sentence", required=False)
    max_len = min(tok.model_max_length, model.config.max_tokens)
    cut = CHARS_PER_TOKEN * max_len
    pre_cut = len(text) > cut or (pair is not None and len(pair) > cut)
    text, pair = text[:cut], None if pair is None else pair[:cut]
    enc = tok.encode(text, pair, max_length=max_len)
    if 0 not in enc.sequence_ids:
        raise ValueError("the text has no tokens the model can read (only spaces or control characters?)")
    att, _ = forward(model, enc.ids, enc.token_type_ids)
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    return AttentionRun(tokens=list(enc.tokens), ids=list(enc.ids), token_type_ids=list(enc.token_type_ids),
                        attentions=att, special=[i in (cls_id, sep_id) for i in enc.ids],
                        truncated=enc.truncated or pre_cut, max_length=max_len, cls_id=cls_id, sep_id=sep_id)


@torch.no_grad()
def forward(model, ids: list[int], token_type_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Every head's map (L, A, T, T) and the masked-LM logits (T, V), or None for a model without them;
    both on the CPU whatever the model's device."""
    dev = device_of(model)
    out = model(torch.tensor([ids], device=dev), torch.tensor([token_type_ids], device=dev), output_attentions=True)
    att = torch.stack([a[0] for a in out.attentions]).float().cpu()  # (L, A, T, T)
    logits = getattr(out, "mlm_logits", None)
    return att, None if logits is None else logits[0].float().cpu()  # (T, V)


def unique_labels(tokens: list[str], positions: list[int] | None = None) -> list[str]:
    """'3 bank': the position makes repeated tokens distinct on a plot axis."""
    positions = range(len(tokens)) if positions is None else positions
    return [f"{p} {t}" for p, t in zip(positions, tokens)]


def kept_positions(run: AttentionRun, hide_specials: bool) -> list[int]:
    """Positions a view shows: all, or all but [CLS]/[SEP]."""
    keep = [i for i, s in enumerate(run.special) if not (hide_specials and s)]
    if not keep:
        raise ValueError("nothing is left to show once [CLS] and [SEP] are hidden")
    return keep


def restrict(m: torch.Tensor, keep: list[int], renormalise: bool = True) -> torch.Tensor:
    """Keep rows/columns `keep` of (..., T, T) maps and (by default) rescale each row to sum to 1,
    so the view shows how a token splits the attention it gives to the tokens still shown."""
    idx = torch.tensor(keep, device=m.device)
    sub = m.index_select(-2, idx).index_select(-1, idx)
    if renormalise:
        sub = sub / sub.sum(-1, keepdim=True).clamp_min(1e-12)
    return sub


def stats_table(run: AttentionRun) -> list[dict]:
    """`head_stats` over all tokens, layers and heads counted from 1, with each head's pattern and its
    entropy as a share of the uniform maximum (0 = one token gets everything, 1 = all equally)."""
    att = [a[None] for a in run.attentions]  # L of (1, A, T, T)
    rows = head_stats(att, torch.tensor([run.ids], device=run.attentions.device), cls_id=run.cls_id, sep_id=run.sep_id)
    T = len(run.ids)
    out = []
    for r in rows:
        norm = r["entropy"] / math.log(T) if T > 1 else 0.0
        # the head's one-word summary: where most of its attention goes, or 'broad'/'mixed'
        pattern, share = max(((p, r[k]) for p, k in _STAT_OF.items()), key=lambda x: x[1])
        if share <= DOMINANT_SHARE:
            pattern = "broad" if norm >= BROAD_ENTROPY else "mixed"
        out.append({**r, "layer": r["layer"] + 1, "head": r["head"] + 1, "entropy_norm": norm,
                    "pattern": pattern, "pattern_share": share})
    return out


def rollout_map(run: AttentionRun) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) with the residual term: (T, T), rows sum to 1."""
    return rollout([a[None] for a in run.attentions], residual=True)[0]


def layer_average(run: AttentionRun, layer: int) -> torch.Tensor:
    """The map of one layer (from 1) averaged over its heads: (T, T), rows sum to 1. What the layer as a
    whole mixes in, one step; rollout chains these steps through every layer."""
    return run.attentions[layer - 1].mean(0)


def strongest_pair(m: torch.Tensor, special: list[bool]) -> tuple[int, int, float]:
    """(query, key, weight) of the largest weight in a (T, T) map between two different word pieces
    ([CLS]/[SEP] and a token looking at itself left out: they dominate most maps and say little)."""
    word = torch.tensor([not s for s in special], device=m.device)
    allowed = word[:, None] & word[None, :] & ~torch.eye(len(special), dtype=torch.bool, device=m.device)
    if not allowed.any():
        raise ValueError("the text needs at least two word pieces to pair")
    i, j = divmod(int(m.masked_fill(~allowed, -1.0).argmax()), m.size(-1))
    return i, j, float(m[i, j])


def check_index(value, what: str, n: int) -> int:
    """A 1-based layer/head number as an int, or ValueError naming the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and (
            not math.isfinite(value) or value != int(value)):
        raise ValueError(f"{what} must be a whole number from 1 to {n}, got {value!r}")
    if not 1 <= int(value) <= n:
        raise ValueError(f"{what} {int(value)} does not exist: this model has {what}s 1 to {n}")
    return int(value)
