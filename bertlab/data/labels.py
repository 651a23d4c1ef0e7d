"""Labelled tables for fine-tuning: a .csv/.tsv/.json/.jsonl file's texts (and second texts) and
its label column read as one of three problems. When the problem is "auto", the labels decide:
  multi       any label is a JSON list (["comedy", "drama"]) or a text with "|" ("comedy|drama"): each
              row may carry any number of the labels (a JSON [] is none of them);
  regression  every label is a number, and some number is not a whole one or there are more than
              REGRESSION_VALUES distinct ones (ratings 1-5 stay five classes; a 0-5 similarity with
              halves is a score);
  single      otherwise: one label per row, strings or whole numbers.
Every error a user can cause is a ValueError naming the file."""
from __future__ import annotations

import math
from pathlib import Path

from .corpus import check_text_file, hf_load

CLASSIFICATION_FILES = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json"}
MIN_ROWS = 10  # below this, a 10 % validation split would be empty
MAX_CLASSES = 100
MULTI_SEP = "|"  # "comedy|drama": several labels in one CSV cell
REGRESSION_VALUES = 10  # whole-number labels with more distinct values than this are a regression


def load_labelled_file(path: str | Path, text_column: str = "text", label_column: str = "label"
                       ) -> tuple[list[str], list[int], list[str], list[str]]:
    """(texts, label ids, label names, notes) from a .csv/.tsv/.json/.jsonl file with one label per
    row. Labels may be strings or numbers; numbers are ordered numerically, strings alphabetically."""
    texts, _, raw, notes = read_table(path, text_column, label_column)
    ids, names = single_labels(Path(path), raw, label_column, len(texts))
    return texts, ids, names, notes


def read_table(path: str | Path, text_column: str = "text", label_column: str = "label",
               pair_column: str | None = None) -> tuple[list[str], list[str] | None, list, list[str]]:
    """(texts, second texts or None, raw labels, notes) from a .csv/.tsv/.json/.jsonl file; rows with an
    empty text, second text or label are skipped (and counted in a note)."""
    path = Path(path)
    builder = CLASSIFICATION_FILES.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} for text classification; "
                         f"use {', '.join(CLASSIFICATION_FILES)}")
    check_text_file(path)  # empty, whitespace-only, binary, not UTF-8
    kw = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
    try:
        ds = hf_load(builder, str(path), str(path), **kw)
    except ValueError as e:
        if "corresponds to no data" in str(e):
            raise ValueError(f"{path}: has no data rows (a header only?)") from None
        raise
    cols = list(ds.column_names)
    wanted = [("text", text_column), ("label", label_column)] + ([("pair", pair_column)] if pair_column else [])
    for what, col in wanted:
        if col not in cols:
            raise ValueError(f"{path}: has no {what} column {col!r}; its columns are {', '.join(map(repr, cols))}"
                             + (f" (pass --{what}-column)" if len(cols) > 1 else ""))
    if len({c for _, c in wanted}) < len(wanted):
        raise ValueError(f"{path}: the text, label and pair columns must differ; got "
                         + ", ".join(f"{w} {c!r}" for w, c in wanted))
    pairs_in = ds[pair_column] if pair_column else [""] * len(ds)
    texts, pairs, raw, skipped = [], [], [], 0
    for t, b, y in zip(ds[text_column], pairs_in, ds[label_column]):
        bad_y = y is None or (isinstance(y, float) and math.isnan(y)) or (isinstance(y, str) and not y.strip())
        bad_b = pair_column is not None and (not isinstance(b, str) or not b.strip())
        if not isinstance(t, str) or not t.strip() or bad_y or bad_b:
            skipped += 1
            continue
        texts.append(" ".join(t.split()))
        pairs.append(" ".join(b.split()))
        raw.append(y)
    what = "text, second text or label" if pair_column else "text or label"
    notes = [f"{path.name}: skipped {skipped} rows with an empty {what}"] if skipped else []
    if len(texts) < MIN_ROWS:
        raise ValueError(f"{path}: has {len(texts)} usable rows ({what.replace(' or ', ' and ')} filled); "
                         f"fine-tuning needs at least {MIN_ROWS}")
    return texts, pairs if pair_column else None, raw, notes


def _number(y) -> float | None:
    if isinstance(y, bool):
        return None
    if isinstance(y, (int, float)):
        return float(y)
    try:
        v = float(y) if isinstance(y, str) else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def label_problem(raw: list) -> str:
    """The problem the labels imply (module docstring): multi, regression or single."""
    if any(isinstance(y, list) or (isinstance(y, str) and MULTI_SEP in y) for y in raw):
        return "multi"
    nums = [_number(y) for y in raw]
    if all(v is not None for v in nums) and (any(not v.is_integer() for v in nums)
                                             or len(set(nums)) > REGRESSION_VALUES):
        return "regression"
    return "single"


def single_labels(path: Path, raw: list, column: str, n: int) -> tuple[list[int], list[str]]:
    """(ids, names) for one label per row."""
    if any(isinstance(y, list) for y in raw):
        raise ValueError(f"{path}: column {column!r} holds lists of labels; that is a multi-label task "
                         f"(problem multi)")
    # integral floats (pandas reads an int column with gaps as float) print as ints
    raw = [str(int(y)) if isinstance(y, float) and y.is_integer() else str(y).strip() for y in raw]
    names = order_labels(set(raw))
    if len(names) < 2:
        raise ValueError(f"{path}: every row has the same label ({names[0]!r}) in column {column!r}; "
                         f"a classifier needs at least two classes")
    if len(names) > MAX_CLASSES or (len(names) > 10 and len(names) > n // 2):
        raise ValueError(f"{path}: column {column!r} has {len(names)} distinct values in {n} "
                         f"rows; that looks like text or ids, not labels (pass --label-column)")
    to_id = {name: i for i, name in enumerate(names)}
    return [to_id[y] for y in raw], names


def multi_labels(path: Path, raw: list, column: str) -> tuple[list[list[float]], list[str]]:
    """(0/1 per label name, names) from JSON lists or "a|b" texts (a single value: one label)."""
    sets = []
    for y in raw:
        parts = y if isinstance(y, list) else str(int(y) if isinstance(y, float) and y.is_integer() else y).split(MULTI_SEP)
        if any(isinstance(x, (list, dict)) for x in parts):
            raise ValueError(f"{path}: column {column!r} holds a nested list ({y!r}); give a flat list of label names")
        sets.append({str(x).strip() for x in parts if str(x).strip()})
    names = order_labels(set().union(*sets))
    if len(names) < 2:
        raise ValueError(f"{path}: column {column!r} names {len(names)} label(s); a multi-label task needs at "
                         f"least two")
    if len(names) > MAX_CLASSES:
        raise ValueError(f"{path}: column {column!r} names {len(names)} distinct labels; at most {MAX_CLASSES}")
    return [[float(n in s) for n in names] for s in sets], names


def numeric_labels(path: Path, raw: list, column: str) -> list[float]:
    """Regression targets: every label a number."""
    nums = [_number(y) for y in raw]
    bad = next((y for y, v in zip(raw, nums) if v is None), None)
    if bad is not None:
        raise ValueError(f"{path}: column {column!r} holds {bad!r}, not a number; regression needs a number "
                         f"in every row")
    if len(set(nums)) < 2:
        raise ValueError(f"{path}: every row has the same value ({nums[0]}) in column {column!r}; nothing to learn")
    return nums


def order_labels(values: set[str]) -> list[str]:
    try:
        return sorted(values, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(values)
