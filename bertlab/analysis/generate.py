"""Continuing a text token by token: what a causal (left-to-right) model does, and what a masked-word
model does when asked the same (it was never trained to), with the two attention masks."""
from __future__ import annotations

import torch

from ..model import attention_bias, device_of
from .predict import check_text, need_mlm_head

MAX_NEW = 40  # new tokens at most: one forward pass each
TOP = 5  # runners-up shown per step


def attention_masks(n: int) -> dict[str, list[list[int]]]:
    """The (n, n) masks the model's own attention_bias builds: 1 where query row i may look at key j."""
    ones = torch.ones(1, n, dtype=torch.long)
    return {name: (attention_bias(ones, n, torch.float32, causal)[0, 0] == 0).expand(n, n).long().tolist()
            for name, causal in (("bidirectional", False), ("causal", True))}


@torch.no_grad()
def generate(model, tok, prompt: str, new_tokens: int = 10, top_k: int = 0, seed: int = 0) -> dict:
    """Continue `prompt` by `new_tokens` tokens, one forward pass each: greedy (`top_k` 0: the likeliest
    token) or sampled from the `top_k` likeliest with `seed`. A causal model (config.is_decoder) reads
    [CLS] + prompt and predicts the token after the last position; it stops at [SEP], its end of text.
    A masked-word model has no such position: it gets the prompt + [MASK] + [SEP], fills the [MASK],
    and a new [MASK] goes after it, the best a bidirectional model can do. Each step: the token, its
    probability and the runners-up."""
    need_mlm_head(model, "continue a text")
    check_text(prompt, "opening")
    for name, v, lo, hi in (("new_tokens", new_tokens, 1, MAX_NEW), ("top_k", top_k, 0, 100)):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}")
    causal = bool(model.config.is_decoder)
    enc = tok.encode(prompt)
    sep = tok.sep_token_id
    ids = [i for i in enc.ids if i not in (sep, tok.pad_token_id)]  # [CLS] + the prompt's pieces
    if len(ids) < 2:
        raise ValueError("the prompt has no tokens this model knows: type a few words")
    room = model.config.max_tokens - len(ids) - (0 if causal else 2)  # a masked model also needs [MASK] [SEP]
    if new_tokens > room:
        raise ValueError(f"the prompt takes {len(ids)} of this model's {model.config.max_tokens} positions: "
                         f"at most {max(0, room)} new tokens fit; shorten the prompt or ask for fewer")
    dev, g = device_of(model), torch.Generator().manual_seed(int(seed))
    banned = sorted(tok.special_ids - ({sep} if causal else set()))  # a causal model may end the text
    steps, stopped = [], False
    for _ in range(new_tokens):
        x = ids if causal else ids + [tok.mask_token_id, sep]
        logits = model(torch.tensor([x], device=dev)).mlm_logits[0, len(ids) - 1 if causal else len(ids)]  # (V,)
        probs = logits.float().softmax(-1).cpu()
        probs[banned] = 0.0
        probs /= probs.sum()
        top = probs.topk(max(top_k, TOP))
        if top_k:
            pick = int(top.indices[torch.multinomial(top.values[:top_k], 1, generator=g)])
        else:
            pick = int(top.indices[0])
        steps.append({"id": pick, "token": tok.id_to_token(pick), "p": float(probs[pick]),
                      "top": [[tok.id_to_token(int(i)), float(p)] for p, i in zip(top.values[:TOP], top.indices[:TOP])]})
        if pick == sep:
            stopped = True
            break
        ids.append(pick)
    new = [s["id"] for s in steps if s["id"] != sep]
    prompt_ids = ids[:len(ids) - len(new)]
    return {"mode": "causal" if causal else "masked", "prompt_tokens": [tok.id_to_token(i) for i in prompt_ids],
            "text": tok.decode(new), "steps": steps, "stopped": stopped, "sampling": f"top-{top_k}" if top_k else "greedy",
            "seed": int(seed) if top_k else None, "masks": attention_masks(min(len(prompt_ids), 12))}
