"""What BERT knows: factual cloze prompts ("the capital of france is [MASK] .") scored as LAMA scored
BERT (Petroni et al., 2019): is the gold word the model's first guess (precision@1), among its first ten
(precision@10), and at what rank and probability. A model can only say a word its vocabulary holds as
one piece, so a gold answer that is not one piece counts as a miss and is counted apart."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..model import device_of
from .predict import MASK_RE, need_mlm_head, with_masks

FACTS_FILE = Path(__file__).resolve().parents[1] / "data" / "facts.jsonl"  # written for bertlab, shipped
KS = (1, 10)  # precision@k reported
SHOWN = 5  # top guesses kept per prompt


def load(path: str | Path | None = None) -> tuple[dict[str, str], list[dict]]:
    """({relation: what it asks}, [{relation, prompt, answer}]) from a facts file, checked: each prompt
    has exactly one [MASK], each answer is one word, each relation is described in the header line."""
    path = Path(path) if path is not None else FACTS_FILE
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    head = json.loads(lines[0])
    relations, facts = dict(head["relations"]), []
    for k, line in enumerate(lines[1:], 2):
        f = json.loads(line)
        where = f"{path.name} line {k}"
        if f.get("relation") not in relations:
            raise ValueError(f"{where}: relation {f.get('relation')!r} is not described in the header line")
        if len(MASK_RE.findall(f["cloze"])) != 1:
            raise ValueError(f"{where}: a prompt holds exactly one [MASK]")
        if not f["answer"].isalpha():
            raise ValueError(f"{where}: the answer must be one word, got {f['answer']!r}")
        facts.append({"relation": f["relation"], "cloze": f["cloze"], "answer": f["answer"]})
    return relations, facts


def check_relation(relation: str | None, relations: dict) -> str | None:
    """None (all of them) or a relation of the file; else ValueError naming the ones there are."""
    if relation in (None, "", "all"):
        return None
    if relation not in relations:
        raise ValueError(f"no relation {relation!r}: pick one of {', '.join(relations)} (or all)")
    return relation


def gold_id(tok, prompt: str, answer: str) -> int | None:
    """The answer's token id where this vocabulary writes it as one piece, else None. Asked of the tokenizer
    itself: the prompt with the answer in place must be the masked prompt with only the [MASK] changed
    (so WordPiece's '##', BPE's leading space and SentencePiece's '▁' are all handled as the model reads)."""
    text, _ = with_masks(tok, prompt)
    masked = tok.encode(text).ids
    filled = tok.encode(MASK_RE.sub(answer, prompt)).ids
    if len(filled) != len(masked):
        return None
    changed = [i for i, (a, b) in enumerate(zip(masked, filled)) if a != b]
    ok = len(changed) == 1 and masked[changed[0]] == tok.mask_token_id
    return filled[changed[0]] if ok else None


@torch.no_grad()
def score(model, tok, relation: str | None = None, path: str | Path | None = None) -> dict:
    """Every prompt's top guesses, the gold answer's rank and probability (None and 0 where the vocabulary
    lacks it as one piece), and precision@1 and @10 per relation and over all: the share of prompts whose
    gold answer is the first guess, or among the first ten. [CLS], [SEP] and the like are never guesses,
    as in fill_mask."""
    need_mlm_head(model, "fill in facts")
    relations, facts = load(path)
    relation = check_relation(relation, relations)
    facts = [f for f in facts if relation in (None, f["relation"])]
    dev = device_of(model)
    special = torch.tensor(sorted(tok.special_ids), device=dev)
    batch = tok.encode_batch([with_masks(tok, f["cloze"])[0] for f in facts])  # one pass for all prompts
    ids = batch["input_ids"].to(dev)  # (B, T)
    out = model(ids, batch["token_type_ids"].to(dev), attention_mask=batch["attention_mask"].to(dev))
    where = (ids == tok.mask_token_id).float().argmax(-1)  # (B,) each prompt's one [MASK]
    probs = out.mlm_logits[torch.arange(len(facts), device=dev), where].float().softmax(-1)  # (B, V)
    probs[:, special] = 0.0
    top = probs.topk(max(max(KS), SHOWN), dim=-1)
    rows = []
    for i, f in enumerate(facts):
        g = gold_id(tok, f["cloze"], f["answer"])
        rank = None if g is None else 1 + int((probs[i] > probs[i, g]).sum())  # ties go the gold's way
        rows.append({**f, "in_vocab": g is not None, "rank": rank, "prob": 0.0 if g is None else probs[i, g].item(),
                     "guesses": [tok.piece_text(t) for t in top.indices[i, :SHOWN].tolist()],
                     "guess_probs": top.values[i, :SHOWN].tolist()})
    names = [r for r in relations if any(f["relation"] == r for f in facts)]
    return {"relations": [{"relation": r, "about": relations[r], **summary([x for x in rows if x["relation"] == r])}
                          for r in names],
            "overall": summary(rows), "rows": rows, "vocab_size": tok.vocab_size}


def summary(rows: list[dict]) -> dict:
    """Prompts, precision@k (a miss where the answer is out of the vocabulary) and how many answers are."""
    n = len(rows)
    hits = {k: sum(1 for r in rows if r["rank"] is not None and r["rank"] <= k) for k in KS}
    return {"prompts": n, **{f"p_at_{k}": hits[k] / n if n else 0.0 for k in KS},
            "out_of_vocab": sum(1 for r in rows if not r["in_vocab"])}


def table(res: dict) -> str:
    """score()'s result as the text the CLI and examples/facts.py print: per relation, then per prompt."""
    def share(p):
        return f"{p:.1%}".replace(".0%", "%")
    lines = [f"{'relation':<12} {'prompts':>7} {'P@1':>6} {'P@10':>6} {'not in vocab':>13}"]
    every = [{"relation": "all", **res["overall"]}] if len(res["relations"]) > 1 else []
    for r in [*res["relations"], *every]:
        lines.append(f"{r['relation']:<12} {r['prompts']:>7} {share(r['p_at_1']):>6} {share(r['p_at_10']):>6} "
                     f"{r['out_of_vocab']:>13}")
    lines += ["", f"{'cloze sentence':<52} {'answer':<11} {'rank':>6} {'prob':>8}  top guesses"]
    for r in res["rows"]:
        prob = f"{r['prob']:.2%}" if r["prob"] >= 1e-4 else "<0.01%"
        rank, prob = (f"{r['rank']:,}", prob) if r["in_vocab"] else ("-", "-")
        lines.append(f"{r['cloze']:<52} {r['answer']:<11} {rank:>6} {prob:>8}  {', '.join(r['guesses'])}")
    n, oov = res["overall"]["prompts"], res["overall"]["out_of_vocab"]
    if oov:
        lines.append(f"-: the answer is not one piece of this {res['vocab_size']:,}-piece vocabulary "
                     f"({oov} of the {n}), so the model cannot say it")
    return "\n".join(lines)
