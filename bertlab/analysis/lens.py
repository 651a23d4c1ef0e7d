"""The logit lens: what the model would guess for a [MASK] if it stopped after each layer. The masked-LM
head (transform + decoder), which pre-training only ever applied after the last layer, is applied to
the [MASK] position's hidden state after the embeddings and after every layer."""
from __future__ import annotations

import torch

from .. import family
from ..model import device_of
from .predict import masked_text


@torch.no_grad()
def logit_lens(model, tok, text: str, top_k: int = 5, mask_index: int = 0, causal: bool = False) -> dict:
    """{"position", "layers": ["embeddings", "layer 1", ...], "top": per layer a list of
    {token, token_str, score}}: the top-k pieces for the `mask_index`-th [MASK] (0-based) after each
    layer. The last row is exactly fill_mask's answer (same head, same hidden state)."""
    text, n = masked_text(model, tok, text, top_k, "read its layers")
    if not isinstance(mask_index, int) or not 0 <= mask_index < n:
        raise ValueError(f"the text has {n} [MASK]{'s' * (n > 1)}: pick one from 1 to {n}")
    enc = tok.encode(text)
    where = [i for i, t in enumerate(enc.ids) if t == tok.mask_token_id]
    if mask_index >= len(where):
        raise ValueError(f"the text is longer than the model's {tok.model_max_length} tokens and "
                         f"that [MASK] was cut off: shorten it")
    pos = where[mask_index]
    enc_model = family.encoder_of(model)
    dev = device_of(model)  # inputs go where the weights are
    out = enc_model(torch.tensor([enc.ids], device=dev), torch.tensor([enc.token_type_ids], device=dev),
                    output_hidden_states=True, causal=causal)
    hs = out.hidden_states  # L+1 of (1, T, H); the last is already through the encoder's final norm
    # Pre-LN models normalise the residual stream once, at the end: do the same to earlier layers.
    ln = getattr(getattr(enc_model, "encoder", None), "ln", torch.nn.Identity())
    h = torch.stack([ln(x[0, pos]) for x in hs[:-1]] + [hs[-1][0, pos]])  # (L+1, H)
    probs = model.token_logits(h).float().softmax(-1)  # (L+1, V)
    probs[:, torch.tensor(sorted(tok.special_ids), device=dev)] = 0.0  # as fill_mask: [SEP] / [PAD] never answer
    top = probs.topk(min(top_k, probs.size(-1)), dim=-1)
    layers = ["embeddings"] + [f"layer {i}" for i in range(1, len(hs))]
    return {"position": pos, "layers": layers,
            "top": [[{"token": t, "token_str": tok.id_to_token(t), "score": p}
                     for p, t in zip(top.values[i].tolist(), top.indices[i].tolist())]
                    for i in range(len(layers))]}
