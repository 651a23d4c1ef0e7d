"""The app's views on a model that lives on a device: each analysis the tabs call, on the shipped model (and on
models a GPU run wrote, when `--runs` names that folder), must give the CPU's answer. Run by gpu_jobs.py;
alone: `python bench/gpu_views.py --device cuda`."""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bertlab  # noqa: E402
from bertlab.analysis import attention_views, classify, contexts, embeddings, head_finder, lens, predict, qkv  # noqa: E402

SENTENCES = ["the river bank was muddy .", "the bank raised its rates .", "i sat on the bank of the river ."]


def views(model, tok) -> dict:
    """name -> a function of the model giving plain numbers (compared between devices)."""
    enc = tok.encode("the cat sat on the mat .")
    return {
        "fill_mask": lambda m: [[c["token"] for c in r] for r in predict.fill_mask(m, tok, "the acting was [MASK] .")],
        "nsp": lambda m: predict.nsp_scores(m, tok, "the film was long .", ["it was also dull .", "cats eat fish ."]),
        "logit_lens": lambda m: json.loads(json.dumps(lens.logit_lens(m, tok, "the plot was [MASK] ."), default=str)),
        "attention": lambda m: attention_views.stats_table(attention_views.run_attention(m, tok, "the cat sat .")),
        "qkv": lambda m: qkv.head_math(m, enc.ids, enc.token_type_ids, 1, 1, 1).__dict__,
        "embeddings": lambda m: json.loads(json.dumps(embeddings.analyze(m, tok, SENTENCES, word="bank"),
                                                      default=lambda x: x.tolist() if torch.is_tensor(x) else str(x))),
        "contexts": lambda m: contexts.nearest(contexts.build_index(m, tok, SENTENCES * 4),
                                               contexts.query_vector(m, tok, SENTENCES[0], "bank", 2)[0], 2, k=3),
        "head_finder": lambda m: head_finder.rankings(head_finder.run_set(
            m, tok, [json.loads(x) for x in (Path(__file__).resolve().parents[1] / "examples" / "heads.jsonl")
                     .read_text().splitlines()[:4]])),
    }


def close(a, b, tol=1e-3) -> bool:
    """Same structure, numbers within tol (bf16-free fp32 on both devices, different kernels)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.shape == b.shape and bool(torch.allclose(a.float().cpu(), b.float().cpu(), atol=tol, rtol=tol))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tol * (1 + abs(a))
    return a == b


def run_views(device: str, runs: Path | None = None) -> dict:
    res = {}
    model, tok = bertlab.load_pretrained()
    cpu = model.eval()
    dev = bertlab.load_pretrained()[0].to(device).eval()
    for name, fn in views(model, tok).items():
        try:
            a, b = fn(cpu), fn(dev)
            res[name] = "same" if close(a, b) else "DIFFERENT"
        except Exception as e:  # noqa: BLE001
            res[name] = f"{type(e).__name__}: {e}"[:300]
            traceback.print_exc()
    for folder in sorted(Path(runs).glob("ft-*/model")) if runs else []:
        try:
            m, t = classify.load(str(folder))
            kw = {"question": "who directed it?"} if classify.kind_of(m) == "qa" else \
                {"pair": "it was great ."} if "pair" in str(folder) else {}
            text = "the film was directed by ana lopez ." if kw.get("question") else "a gripping, funny film"
            a = classify.predict(m.eval(), t, text, **kw)
            b = classify.predict(m.to(device).eval(), t, text, **kw)
            res[f"classify:{folder.parent.name}"] = "same" if close(a, b, 1e-3) else "DIFFERENT"
        except Exception as e:  # noqa: BLE001
            res[f"classify:{folder.parent.name}"] = f"{type(e).__name__}: {e}"[:300]
            traceback.print_exc()
    return res


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--runs", default=None)
    a = p.parse_args()
    out = run_views(a.device, Path(a.runs) if a.runs else None)
    print(json.dumps(out, indent=2))
    sys.exit(0 if all(v == "same" for v in out.values()) else 1)
