"""BERT's WordPiece tokenizer: Hugging Face `tokenizers` does the work; we pin BERT's conventions
and turn every load error into one ValueError naming the file, so a UI can show it as is."""
from __future__ import annotations

import itertools
import json
import os
import re
import weakref
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import torch
from tokenizers import Encoding as RawEncoding
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from .config import read_json_config

# Trained vocabularies put these at ids 0..4; loaded ones anywhere (bert-base: 0, 100..103): ask
# `special_token_ids(tok)` for their ids, never assume them.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = SPECIAL_TOKENS
_SURROGATES = re.compile("[\ud800-\udfff]")
_UNUSED = re.compile(r"\[unused\d+\]")  # Google's placeholder slots (bert-base: ids 1..99, 104..998)


@dataclass
class Encoding:
    """One encoded text (or text pair); every list has one entry per token."""
    ids: list[int]
    tokens: list[str]
    token_type_ids: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]]  # char span in the text that sequence_ids names; (0, 0) for specials
    sequence_ids: list[int | None]  # None for [CLS]/[SEP], 0 for the text, 1 for the pair
    special_tokens_mask: list[int]
    word_ids: list[int | None]  # counted within each text separately
    truncated: bool

    def __len__(self) -> int:
        return len(self.ids)


def _pipeline(model: models.Model, lowercase: bool, strip_accents: bool | None = None) -> Tokenizer:
    """Original BERT: clean, space out CJK chars, (lowercase, strip accents), split on space/punct."""
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _longest_first(n1: int, n2: int, budget: int) -> tuple[int, int]:
    """Keep the shorter text whole if it fits in half the budget, else halve the budget (odd token to
    the longer text, or the pair on a tie): the rule of `tokenizers`, so we cut where Hugging Face does."""
    if n1 + n2 <= budget:
        return n1, n2
    a = min(n1, n2)
    a, b = (a, budget - a) if 2 * a <= budget else (budget // 2, budget - budget // 2)
    return (b, a) if n1 > n2 else (a, b)


@dataclass(frozen=True, eq=False)
class SpecialIds:
    """A vocabulary's special token ids, as `special_token_ids` reads them from its tokenizer."""
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int
    all: frozenset[int]  # every special id: never selected for masking, never a random replacement
    random: torch.Tensor  # (n,) long, ascending: the ids a masked position may be replaced by at random


_special_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def special_token_ids(tok: WordPieceTokenizer) -> SpecialIds:
    """The one place that says which ids are special: the five markers and any other special added token.
    Random replacements may be any other id but [unusedN] placeholders, which never occur in text.
    Read once per tokenizer (a 30k vocabulary scan)."""
    found = _special_ids.get(tok)
    if found is None:
        five = (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id)
        every = frozenset(five) | {i for i, t in tok.backend.get_added_tokens_decoder().items() if t.special}
        ordinary = sorted(i for t, i in tok.get_vocab().items() if i not in every and not _UNUSED.fullmatch(t))
        found = _special_ids[tok] = SpecialIds(*five, every, torch.tensor(ordinary, dtype=torch.long))
    return found


class WordPieceTokenizer:
    """BERT tokenizer; make one with `train`, `from_file`, `from_vocab` or `from_pretrained`."""

    def __init__(self, tokenizer: Tokenizer, model_max_length: int = 512):
        if not isinstance(tokenizer.model, models.WordPiece):
            raise ValueError(f"expected a WordPiece model, got {type(tokenizer.model).__name__}")
        missing = [t for t in SPECIAL_TOKENS if tokenizer.token_to_id(t) is None]
        if missing:
            raise ValueError(f"the vocabulary lacks special token(s) {' '.join(missing)}")
        tokenizer.add_special_tokens(list(SPECIAL_TOKENS))  # match them whole in text, drop them in decode
        self.pad_token_id, self.unk_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = (
            tokenizer.token_to_id(t) for t in SPECIAL_TOKENS)
        # We truncate ourselves (thread-safe, and we learn what was cut), so a loaded file's settings go.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
            special_tokens=[(CLS, self.cls_token_id), (SEP, self.sep_token_id)])
        tokenizer.decoder = decoders.WordPiece(prefix="##")
        self._tok = tokenizer
        # Probe the normalizer rather than trust flags, so any loaded tokenizer.json reports right.
        norm = tokenizer.normalizer.normalize_str if tokenizer.normalizer else str
        self.lowercase, self._strip_accents = norm("A") == "a", norm("\u00e9") == "e"
        self.model_max_length = model_max_length

    @classmethod
    def train(cls, texts_or_files: Iterable[str | os.PathLike], vocab_size: int = 8192,
              lowercase: bool = True, min_frequency: int = 2) -> WordPieceTokenizer:
        """Learn a vocabulary from a list of file paths or from any iterable of strings."""
        _check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS))
        _check_int(min_frequency, "min_frequency", 0)
        if isinstance(texts_or_files, (str, bytes, os.PathLike)):
            raise TypeError("pass a list of texts or file paths, not a single string or path")
        texts = _iter_texts(texts_or_files)
        first = next((t for t in texts if t.strip()), None)  # blank texts teach nothing anyway
        if first is None:
            raise ValueError("no text to train on: the input is empty or only whitespace")
        tok = _pipeline(models.WordPiece(unk_token=UNK, continuing_subword_prefix="##"), lowercase)
        # Each kept char costs two entries (c and ##c); capping the alphabet keeps len(tok) <= vocab_size.
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=min(1000, (vocab_size - len(SPECIAL_TOKENS)) // 2),
            continuing_subword_prefix="##", show_progress=False)
        tok.train_from_iterator(itertools.chain([first], texts), trainer)
        return cls(tok)

    @classmethod
    def from_file(cls, path: str | os.PathLike, model_max_length: int = 512) -> WordPieceTokenizer:
        """Load a Hugging Face `tokenizer.json` (ours, or e.g. bert-base-uncased's)."""
        path = os.fspath(path)
        try:
            return cls(Tokenizer.from_file(path), model_max_length)
        except Exception as e:  # the Rust side raises bare Exceptions with terse messages
            raise ValueError(f"{path}: not a usable BERT tokenizer.json ({e})") from None

    @classmethod
    def from_vocab(cls, path: str | os.PathLike, lowercase: bool = True, strip_accents: bool | None = None,
                   model_max_length: int = 512) -> WordPieceTokenizer:
        """Load a BERT `vocab.txt`: one token per line, the line number is the id."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                lines = f.read().removesuffix("\n").split("\n")  # the last newline ends the last token
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read the vocabulary ({e})") from None
        if lines == [""]:
            raise ValueError(f"{path}: the vocabulary file is empty")
        tokens = [t.rstrip("\r") for t in lines]
        vocab = {t: i for i, t in enumerate(tokens)}
        if len(vocab) < len(tokens):
            twice = next(t for i, t in enumerate(tokens) if vocab[t] != i)
            raise ValueError(f"{path}: token {twice!r} is listed twice")
        model = models.WordPiece(vocab, unk_token=UNK, continuing_subword_prefix="##")
        try:
            return cls(_pipeline(model, lowercase, strip_accents), model_max_length)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> WordPieceTokenizer:
        """Load a folder saved by us or by `transformers`: tokenizer.json if there, else vocab.txt."""
        folder = os.fspath(folder)
        if not os.path.isdir(folder):
            raise ValueError(f"{folder}: no such folder")
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        cfg = read_json_config(cfg_path) if os.path.isfile(cfg_path) else {}
        max_len = cfg.get("model_max_length")  # transformers writes ~1e30 for "no limit"
        max_len = max_len if type(max_len) is int and 3 <= max_len <= 1_000_000 else 512
        tok_json, vocab_txt = os.path.join(folder, "tokenizer.json"), os.path.join(folder, "vocab.txt")
        if os.path.isfile(tok_json):
            return cls.from_file(tok_json, max_len)
        if not os.path.isfile(vocab_txt):
            raise ValueError(f"{folder}: holds neither tokenizer.json nor vocab.txt")
        lower, strip = cfg.get("do_lower_case", True), cfg.get("strip_accents")
        if not isinstance(lower, bool) or not isinstance(strip, (bool, type(None))):
            raise ValueError(f"{cfg_path}: do_lower_case and strip_accents must be true or false")
        return cls.from_vocab(vocab_txt, lower, strip, max_len)

    def save_pretrained(self, folder: str | os.PathLike) -> None:
        """Write a folder that we and `transformers` (BertTokenizer, AutoTokenizer) both load."""
        vocab = sorted(self.get_vocab().items(), key=lambda kv: kv[1])
        if [i for _, i in vocab] != list(range(len(vocab))):
            raise ValueError("vocab.txt needs token ids 0..n-1 without gaps")
        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        self._tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.writelines(token + "\n" for token, _ in vocab)
        special = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase,
                  "strip_accents": self._strip_accents, "tokenize_chinese_chars": True,
                  "model_max_length": self.model_max_length, **special}
        for name, obj in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2)

    @property
    def backend(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer`, for fast batch work (read-only use, please)."""
        return self._tok

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def special_ids(self) -> set[int]:
        return set(special_token_ids(self).all)

    @property
    def model_max_length(self) -> int:
        return self._model_max_length

    @model_max_length.setter
    def model_max_length(self, value: int) -> None:
        self._model_max_length = _check_int(value, "model_max_length", 3)  # room for [CLS] [SEP] [SEP]

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, i: int) -> str:
        if not 0 <= int(i) < self.vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
        return self._tok.id_to_token(int(i))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.id_to_token(i) for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=True)

    def encode(self, text: str, pair: str | None = None, max_length: int | None = None) -> Encoding:
        """[CLS] text [SEP] (pair [SEP]), cut longest-first to max_length (default model_max_length)."""
        a = self._tok.encode(_text(text, "text"), add_special_tokens=False)
        b = None if pair is None else self._tok.encode(_text(pair, "pair"), add_special_tokens=False)
        return self._finish(a, b, max_length)

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     max_length: int | None = None, pad_to: int | None = None) -> dict:
        """Encode many texts into (B, T) long tensors, padded on the right with [PAD]."""
        if isinstance(texts, str) or not texts:
            raise ValueError("texts must be a non-empty list of strings")
        if pairs is not None and (isinstance(pairs, str) or len(pairs) != len(texts)):
            raise ValueError(f"pairs must be a list as long as texts ({len(texts)})")
        texts = [_text(t, "every text") for t in texts]
        pairs = None if pairs is None else [_text(p, "every pair") for p in pairs]
        raw = self._tok.encode_batch(texts, add_special_tokens=False)  # in parallel, in Rust
        raw2 = self._tok.encode_batch(pairs, add_special_tokens=False) if pairs else [None] * len(raw)
        encs = [self._finish(a, b, max_length) for a, b in zip(raw, raw2)]
        T = max(len(e) for e in encs)
        if pad_to is not None:
            if _check_int(pad_to, "pad_to", 1) < T:
                raise ValueError(f"pad_to={pad_to} is less than the longest encoding ({T}); set max_length")
            T = pad_to

        def pad(field: str, fill: int) -> torch.Tensor:
            return torch.tensor([getattr(e, field) + [fill] * (T - len(e)) for e in encs], dtype=torch.long)
        return {"input_ids": pad("ids", self.pad_token_id), "token_type_ids": pad("token_type_ids", 0),
                "attention_mask": pad("attention_mask", 0), "truncated": [e.truncated for e in encs]}

    def _finish(self, a: RawEncoding, b: RawEncoding | None, max_length: int | None) -> Encoding:
        """Truncate the bare pieces, then let the template add [CLS]/[SEP] and token types."""
        n_special = 2 if b is None else 3
        max_length = _check_int(self.model_max_length if max_length is None else max_length,
                                "max_length", n_special)
        n1, n2 = len(a), 0 if b is None else len(b)
        k1, k2 = _longest_first(n1, n2, max_length - n_special)
        for enc, n, k in ((a, n1, k1), (b, n2, k2)):
            if k < n:
                enc.truncate(k)
        e = self._tok.post_process(a, b, add_special_tokens=True)
        # post_process drops the pair's sequence_ids (tokenizers 0.23); for BERT they are the token types.
        seq = [None if s else t for s, t in zip(e.special_tokens_mask, e.type_ids)]
        return Encoding(e.ids, e.tokens, e.type_ids, e.attention_mask, e.offsets, seq,
                        e.special_tokens_mask, e.word_ids, truncated=(k1, k2) != (n1, n2))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Ids back to text, gluing ## pieces on; case and accents removed by lowercasing stay lost."""
        ids = [int(i) for i in ids]  # lists and 1-D tensors alike
        self.convert_ids_to_tokens(ids)  # raises on a bad id, which tokenizers would silently drop
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
                f"model_max_length={self.model_max_length})")


def _iter_texts(src: Iterable[str | os.PathLike]) -> Iterator[str]:
    """A list whose first item is a Path or an existing file is a list of files; anything else, texts."""
    if isinstance(src, (list, tuple)) and src and (
            isinstance(src[0], os.PathLike) or (isinstance(src[0], str) and os.path.isfile(src[0]))):
        for path in map(os.fspath, src):
            try:
                with open(path, encoding="utf-8") as f:
                    yield from f
            except (OSError, ValueError) as e:
                raise ValueError(f"{path}: cannot read the training file ({e})") from None
        return
    for text in src:
        yield _text(text, "every training text")


def _text(x: object, what: str) -> str:
    """Check for str, and swap lone surrogates (Rust strings cannot hold them) for U+FFFD, char for char."""
    if not isinstance(x, str):
        raise TypeError(f"{what} must be a str, got {type(x).__name__}")
    return _SURROGATES.sub("\ufffd", x)


def _check_int(x: object, what: str, low: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < low:
        raise ValueError(f"{what} must be an integer >= {low}, got {x!r}")
    return x


_CLITIC = re.compile(r"(?i)^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$")


def ptb_words(text: str) -> list[str]:
    """Whitespace tokens with Penn Treebank clitics split off: "isn't" -> "is n't", "film's" -> "film 's"."""
    out = []
    for w in text.split():
        m = _CLITIC.match(w)
        out.extend([m.group(1), m.group(2)] if m and m.group(1) != "'" else [w])
    return out
