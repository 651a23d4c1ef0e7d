"""Probe tasks: labelled words, tokens or sentences, read once and sampled with a fixed seed.

  "pos"        every word of Rotten Tomatoes sentences, silver Penn Treebank tags (TextBlob)
  "polarity"   the evaluative words of Rotten Tomatoes sentences, negative/positive *in their sentence*
               (silver, see `silver_polarity`); every other word is unlabelled (IGNORE) and left out
  "sentiment"  Rotten Tomatoes sentences, negative/positive
  "position"   every WordPiece token's index in its sentence (1..MAX_POSITION)
  a file       .conll/.txt/... ("token tag" per line), .jsonl/.json with "tokens" + "tags" lists,
               or .csv/.tsv/.json/.jsonl with a text and a label column
The readers and their ValueErrors are tasks.py's and labels.py's: a file that fine-tunes also probes,
or fails alike.
"""
from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import labels as tables
from . import tasks as fd
from .corpus import check_text_file

TASKS = ("pos", "polarity", "sentiment", "position")
# sentences: ~35 s a model on one thread of the reference machine (probe_tab.PROBE_S); polarity: all of them (~1 polar word a sentence)
DEFAULT_SAMPLE = {"pos": 1000, "polarity": 8530, "sentiment": 4000, "position": 500}
DEFAULT_FILE_SAMPLE = 2000
MIN_SENTENCES = tables.MIN_ROWS
MAX_POSITION = 16  # position task: tokens 1..16 (after [CLS]); later ones are left out
TAG_KEYS = ("tags", "pos_tags", "ner_tags", "labels")
IGNORE = -1  # a word task's label for a word that has none: no item, not counted as dropped
# polarity: a negator flips the words after it, up to NEGATION_SCOPE words and never across a clause break
NEGATORS = frozenset(("not", "n't", "no", "never", "cannot", "nor", "without"))  # textblob's 4 + 3
CLAUSE_BREAKS = frozenset((",", ".", ";", ":", "!", "?", "--", "but"))
NEGATION_SCOPE = 3
# textblob's lexicon scores these quantifiers and fillers (more +0.5, own +0.6 ...): not an opinion in a review
NOT_OPINIONS = frozenset(("more", "most", "many", "much", "own", "few", "less", "least", "mostly", "sure", "kind",
                          "first", "other", "full", "light", "past", "exactly"))


@dataclass
class ProbeData:
    """Sentences and labels. kind "word": a label per word; "sentence": per text; "token": labels
    are positions, so `y` is None."""
    name: str
    kind: str
    sentences: list  # list[list[str]] for "word", list[str] otherwise
    y: list | None  # list[list[int]] for "word", list[int] for "sentence"
    labels: list[str]
    key: tuple  # identifies the data for the feature cache
    notes: list[str] = field(default_factory=list)
    subset: tuple[str, list] | None = None  # word tasks: (what it is, a flag per word like y), scored apart

    def summary(self) -> str:
        n = sum(y != IGNORE for ys in self.y for y in ys) if self.kind == "word" else len(self.sentences)
        unit = {"word": "words", "sentence": "texts"}.get(self.kind, "tokens")
        return f"{self.name}: {len(self.sentences)} sentences" + (f", {n} {unit}" if self.kind != "token" else "")


def read_tagged_jsonl(path: Path) -> tuple[list[list[str]], list[list[str]]] | None:
    """Sentences from JSON lines {"tokens": [...], "tags": [...]} (Hugging Face style), or None when
    the file holds texts instead. Tag ids (ints) are kept as their string form."""
    check_text_file(path)
    text = path.read_text(encoding="utf-8")
    try:
        rows = json.loads(text) if path.suffix.lower() == ".json" else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None  # let the CSV/JSON reader give its own message
    if isinstance(rows, dict):
        rows = [rows]
    if not rows or not all(isinstance(r, dict) for r in rows) or "tokens" not in rows[0]:
        return None
    tag_key = next((k for k in TAG_KEYS if k in rows[0]), None)
    if tag_key is None:
        raise ValueError(f"{path}: rows have 'tokens' but no labels; add one of {', '.join(TAG_KEYS)} "
                         f"(a list with one tag per token)")
    sents, tags = [], []
    for n, r in enumerate(rows, 1):
        words, ts = r.get("tokens"), r.get(tag_key)
        if not isinstance(words, list) or not isinstance(ts, list):
            raise ValueError(f"{path}, row {n}: 'tokens' and {tag_key!r} must be lists")
        if len(words) != len(ts):
            raise ValueError(f"{path}, row {n}: {len(words)} tokens but {len(ts)} tags; "
                             f"give exactly one tag per token")
        if words:
            sents.append([str(w) for w in words])
            tags.append([str(t) for t in ts])
    return sents, tags


def _word_task(name, sents, tags, sample, seed, key) -> ProbeData:
    keep = fd.sample_indices(len(sents), sample, seed)
    sents, tags = [sents[i] for i in keep], [tags[i] for i in keep]
    if len(sents) < MIN_SENTENCES:
        raise ValueError(f"{name}: has {len(sents)} tagged sentences; a probe needs at least {MIN_SENTENCES}")
    names = tables.order_labels({t for ts in tags for t in ts})
    if len(names) < 2:
        raise ValueError(f"{name}: every token has the same tag ({names[0]!r}); a probe needs at least two classes")
    to_id = {t: i for i, t in enumerate(names)}
    return ProbeData(name, "word", sents, [[to_id[t] for t in ts] for ts in tags], names, key)


def silver_polarity(texts) -> tuple[list[list[str]], list[list[int]], list[list[bool]]]:
    """(words, labels, flipped) per sentence. Silver labels, no human read them: a word gets one when
    TextBlob's own opinion lexicon (en-sentiment.xml, De Smedt & Daelemans' Pattern, shipped with textblob,
    read offline) rates it |polarity| >= 0.25 at plain intensity (not an intensifier like "very"),
    outside NOT_OPINIONS: 0 negative, 1 positive by its lexicon sign, *flipped* when a NEGATORS word stands
    at most NEGATION_SCOPE words before it in the same clause ("not funny" -> negative). Every other word
    is IGNORE. The embeddings see only the word, so only context can get a flipped one right."""
    try:
        from textblob.en import sentiment as lexicon
    except ImportError:
        raise ValueError("the polarity task needs the `textblob` package (pip install textblob)") from None
    sents, ys, flips = [], [], []
    for t in texts:
        words = fd.ptb_words(t)
        y, flip = [IGNORE] * len(words), [False] * len(words)
        for i, w in enumerate(words):
            p, _, intensity = (lexicon.get(w) or {}).get(None, (0, 0, 0))
            if abs(p) < 0.25 or intensity != 1 or w in NOT_OPINIONS or w in NEGATORS:
                continue
            for j in range(i - 1, max(-1, i - 1 - NEGATION_SCOPE), -1):
                if words[j] in CLAUSE_BREAKS:
                    break
                if words[j] in NEGATORS:
                    flip[i] = True
                    break
            y[i] = int((p > 0) != flip[i])
        if any(v != IGNORE for v in y):
            sents.append(words), ys.append(y), flips.append(flip)
    return sents, ys, flips


@functools.lru_cache(maxsize=8)
def _load(task: str, stamp, sample: int | None, seed: int, text_column: str, label_column: str) -> ProbeData:
    key = (task, stamp, sample, seed, text_column, label_column)
    if task in TASKS:
        texts, labels = fd.rotten_tomatoes()
        keep = fd.sample_indices(len(texts), sample, seed)  # pos: tag only what we keep
        texts = [texts[i] for i in keep]
        if task == "position":
            return ProbeData("position", "token", texts, None,
                             [str(p) for p in range(1, MAX_POSITION + 1)], key)
        if task == "sentiment":
            return ProbeData("sentiment", "sentence", texts, [labels[i] for i in keep],
                             ["negative", "positive"], key)
        if task == "polarity":
            sents, ys, flips = silver_polarity(texts)
            n, k = sum(v != IGNORE for y in ys for v in y), sum(map(sum, flips))
            return ProbeData("polarity", "word", sents, ys, ["negative", "positive"], key,
                             [f"{k} of {n} evaluative words ({100 * k / max(1, n):.1f} %) are flipped by a negator"],
                             ("flipped by a negator", flips))
        with warnings.catch_warnings():  # textblob opens its lexicon without closing it
            warnings.simplefilter("ignore", ResourceWarning)
            sents, tags = fd.silver_pos(texts)
        return _word_task("pos", sents, tags, None, seed, key)
    path = Path(task).expanduser()
    if not path.is_file():
        raise ValueError(f"{task}: not a task ({', '.join(TASKS)}) and no such file")
    kind = fd.task_kind(str(path))  # ValueError for unsupported extensions
    if kind == "token":
        sents, tags = fd.read_conll(path)
        return _word_task(path.name, sents, tags, sample, seed, key)
    tagged = read_tagged_jsonl(path) if path.suffix.lower() in (".json", ".jsonl") else None
    if tagged is not None:
        return _word_task(path.name, *tagged, sample, seed, key)
    texts, ys, names, notes = tables.load_labelled_file(path, text_column, label_column)
    keep = fd.sample_indices(len(texts), sample, seed)
    texts, ys = [texts[i] for i in keep], [ys[i] for i in keep]
    if len(set(ys)) < 2:
        raise ValueError(f"{path.name}: the sample holds only one class; give more rows of each label")
    return ProbeData(path.name, "sentence", texts, ys, names, key, notes)


def load(task: str, sample: int | None = None, seed: int = 0, text_column: str = "text",
         label_column: str = "label") -> ProbeData:
    """A probe task by name or file path; `sample` = how many sentences (None: the task default).
    Cached: the same arguments (and an unchanged file) return the same object."""
    if not isinstance(task, str) or not task.strip():
        raise ValueError(f"task must be one of {', '.join(TASKS)} or a file path")
    task = task.strip()
    if sample is None:
        sample = DEFAULT_SAMPLE.get(task, DEFAULT_FILE_SAMPLE)
    elif isinstance(sample, bool) or not isinstance(sample, int) or sample < MIN_SENTENCES:
        raise ValueError(f"sample must be an integer >= {MIN_SENTENCES} (sentences), got {sample!r}")
    stamp = None
    if task not in TASKS:
        p = Path(task).expanduser()
        if p.is_file():
            st = p.stat()
            stamp, task = (st.st_size, st.st_mtime_ns), str(p.resolve())
    return _load(task, stamp, sample, int(seed), text_column, label_column)
