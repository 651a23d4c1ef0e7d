"""The head finder's annotated sentences (examples/heads.jsonl, examples/README.md says how they were
made): whole words, subject–verb pairs and long-range links marked by word index, checked on load."""
from __future__ import annotations

import json
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "heads.jsonl"
MIN_LONG = 4  # a long-range link spans at least this many words (as analysis.head_finder counts)
MAX_SENTENCES = 1000


def check(item: dict, where: str = "") -> dict:
    """One sentence with its pairs in range, or ValueError naming the line."""
    words = item.get("words")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w and " " not in w for w in words):
        raise ValueError(f"{where}'words' must be a non-empty list of words without spaces")
    n = len(words)
    for key in ("subject_verb", "long_range"):
        pairs = item.get(key, [])
        if not isinstance(pairs, list):
            raise ValueError(f"{where}'{key}' must be a list of [i, j] word indices")
        for p in pairs:
            if not (isinstance(p, list) and len(p) == 2 and all(isinstance(i, int) and 0 <= i < n for i in p)
                    and p[0] != p[1]):
                raise ValueError(f"{where}'{key}' pair {p!r} is not two different word indices from 0 to {n - 1}")
            if key == "long_range" and abs(p[0] - p[1]) < MIN_LONG:
                raise ValueError(f"{where}long-range pair {p!r} spans fewer than {MIN_LONG} words")
    return {"words": words, "subject_verb": item.get("subject_verb", []), "long_range": item.get("long_range", [])}


def load(path: str | Path | None = None) -> list[dict]:
    """The sentences of a heads.jsonl file (the shipped one by default)."""
    path = Path(path) if path is not None else SHIPPED
    if not path.is_file():
        raise ValueError(f"the annotated sentence set {path.name} is missing (it ships in examples/)")
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if not lines or len(lines) > MAX_SENTENCES:
        raise ValueError(f"{path.name} must hold 1 to {MAX_SENTENCES} sentences, one JSON object a line")
    out = []
    for k, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path.name} line {k}: not JSON ({e.msg})") from None
        if not isinstance(item, dict):
            raise ValueError(f"{path.name} line {k}: expected a JSON object")
        out.append(check(item, f"{path.name} line {k}: "))
    return out
