"""Padding and the attention mask, measured on the model's own forward pass.

A batch is one (B, T) tensor, so shorter sentences are filled with [PAD] up to the longest. The mask
(1 = real token, 0 = pad) becomes a huge negative number added to the attention scores of pad keys,
so their softmax weight is exactly 0. We run the padded batch with and without its mask, and each
sentence alone, and report what the mask changes: attention on pads, the last-layer vectors, and the
guess at a [MASK]."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model import device_of
from .predict import check_text, with_masks

MIN_SENTENCES, MAX_SENTENCES = 2, 3
CHARS = 2000  # per sentence: a batch to look at, not a document


def split_sentences(text) -> list[str]:
    """One sentence per non-empty line, 2 to 3 of them, or ValueError saying what to type."""
    if text is not None and not isinstance(text, str):
        raise TypeError(f"the sentences must be text, got {type(text).__name__}")
    lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
    if not MIN_SENTENCES <= len(lines) <= MAX_SENTENCES:
        raise ValueError(f"type {MIN_SENTENCES} or {MAX_SENTENCES} sentences, one per line (got {len(lines)})")
    long = next((i for i, s in enumerate(lines, 1) if len(s) > CHARS), None)
    if long:
        raise ValueError(f"sentence {long} has {len(lines[long - 1]):,} characters; at most {CHARS:,} here")
    return lines


@torch.no_grad()
def _run(model, ids, types, mask):
    """(last hidden state (B, T, H), L of (B, A, T, T) attention, masked-LM logits (B, T, V) or None)."""
    dev = device_of(model)
    out = model(ids.to(dev), types.to(dev), None if mask is None else mask.to(dev), output_attentions=True)
    logits = getattr(out, "mlm_logits", None)
    return (out.last_hidden_state.float().cpu(), [a.float().cpu() for a in out.attentions],
            None if logits is None else logits.float().cpu())


def _guess(logits, specials: list[int]) -> torch.Tensor:
    """Probabilities (V,) at one position, markers excluded as fill-mask does."""
    p = logits.softmax(-1)
    p[specials] = 0.0
    return p


def padding_study(model, tok, sentences: list[str]) -> dict:
    """The padded batch, its mask, and what leaving the mask out changes, as plain numbers (JSON):
    `pad_max_masked` (L, A): the largest weight a real token gives a [PAD] with the mask (0.0);
    `pad_share_unmasked` (L, A) and `pad_share_layers` (L,): without it, the share of a real token's
    attention that lands on pads (mean over real tokens of the sentences that have pads);
    per sentence, max |Δ| of its last-layer vectors against its run alone, with and without the mask,
    the lowest cosine without it, and the guess at its first [MASK] alone / masked / unmasked."""
    if not MIN_SENTENCES <= len(sentences) <= MAX_SENTENCES:
        raise ValueError(f"give {MIN_SENTENCES} or {MAX_SENTENCES} sentences (got {len(sentences)})")
    sentences = [with_masks(tok, check_text(s, "sentence"))[0] for s in sentences]
    max_len = min(tok.model_max_length, model.config.max_tokens)
    batch = tok.encode_batch(sentences, max_length=max_len)
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]  # (B, T) each
    lengths = mask.sum(1).tolist()
    if len(set(lengths)) == 1:
        raise ValueError(f"every sentence has {lengths[0]} tokens, so nothing is padded: make one shorter or longer")
    h_on, att_on, logits_on = _run(model, ids, types, mask)
    h_off, att_off, logits_off = _run(model, ids, types, None)  # the same batch, pads visible
    real = mask.bool()  # (B, T)
    pad_key = (~real)[:, None, None, :].float()  # (B, 1, 1, T)
    real_to_pad = real[:, None, :, None].float() * pad_key  # (B, 1, T, T): a real query's weight on a pad key
    pad_max = torch.stack([(a * real_to_pad).amax((0, 2, 3)) for a in att_on])  # (L, A)
    padded = [b for b, n in enumerate(lengths) if n < ids.size(1)]  # sentences that have pads
    w = real[padded].float()[:, None, :]  # (P, 1, T): real query rows count
    share = torch.stack([((a[padded] * pad_key[padded]).sum(-1) * w).sum((0, 2)) / w.sum((0, 2))
                         for a in att_off])  # (L, A)
    specials = sorted(tok.special_ids)
    rows = []
    for b, text in enumerate(sentences):
        n = lengths[b]
        h_alone, _, logits_alone = _run(model, ids[b:b + 1, :n], types[b:b + 1, :n], None)
        alone = h_alone[0]  # (n, H)
        cos = F.cosine_similarity(h_off[b, :n], alone, dim=-1)  # (n,)
        row = {"text": text, "tokens": n, "pads": ids.size(1) - n, "truncated": batch["truncated"][b],
               "max_diff_masked": float((h_on[b, :n] - alone).abs().max()),
               "max_diff_unmasked": float((h_off[b, :n] - alone).abs().max()),
               "min_cos_unmasked": float(cos.min()), "mask": None}
        where = (ids[b, :n] == tok.mask_token_id).nonzero().flatten().tolist()
        if where and logits_alone is not None:
            i = where[0]
            p_alone, p_on, p_off = (_guess(x[k, i], specials) for x, k in ((logits_alone, 0), (logits_on, b),
                                                                          (logits_off, b)))
            top = int(p_alone.argmax())
            off = int(p_off.argmax())
            row["mask"] = {"position": i, "guess": tok.id_to_token(top), "prob_alone": float(p_alone[top]),
                           "prob_masked": float(p_on[top]), "prob_unmasked": float(p_off[top]),
                           "guess_unmasked": tok.id_to_token(off), "prob_guess_unmasked": float(p_off[off])}
        rows.append(row)
    pads = h_on[~real]  # (N, H): vectors the model computes at [PAD] positions, which nothing reads
    return {"tokens": [tok.convert_ids_to_tokens(r) for r in ids.tolist()], "ids": ids.tolist(),
            "attention_mask": mask.tolist(), "lengths": lengths, "pad_token": tok.pad_token,
            "num_layers": len(att_on), "num_heads": att_on[0].size(1),
            "pad_max_masked": pad_max.tolist(), "pad_share_unmasked": share.tolist(),
            "pad_share_layers": share.mean(1).tolist(), "sentences": rows,
            "pad_vector_norm": float(pads.norm(dim=-1).mean()),
            "real_vector_norm": float(h_on[real].norm(dim=-1).mean())}
