"""Tokenizers of the BERT family: Hugging Face `tokenizers` does the work; we pin each family's
conventions (its five special markers by role, its pair layout) and turn every load error into one
ValueError naming the file, so a UI can show it as is. WordPiece (BERT, ELECTRA, DistilBERT),
byte-level BPE (RoBERTa) and Unigram/SentencePiece (ALBERT; DeBERTa-v3, trained here) share one class,
`SubwordTokenizer`."""
from __future__ import annotations

import itertools
import json
import os
import re
import unicodedata
import weakref
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Encoding as RawEncoding

from . import family
from .config import read_json_config


# ---- each member's markers, saved folders, the pipelines we build, readable pieces, input checks ----
# Trained vocabularies put these at ids 0..4; loaded ones anywhere (bert-base: 0, 100..103): ask
# `special_token_ids(tok)` for their ids, never assume them.
SPECIAL_TOKENS = family.BERT_SPECIALS
PAD, UNK, CLS, SEP, MASK = SPECIAL_TOKENS
ROLES = ("pad", "unk", "cls", "sep", "mask")  # the order of every specials tuple here
ROBERTA_SPECIAL_TOKENS = family.MEMBERS["roberta"].specials
FAMILY_SPECIAL_TOKENS = {n: m.specials for n, m in family.MEMBERS.items()}  # each member's record
# Pair layout: "bert" = [CLS] A [SEP] B [SEP], token types 0 then 1; "roberta" = <s> A </s> </s> B </s>, all 0.
FAMILY_LAYOUT = {n: m.layout for n, m in family.MEMBERS.items()}
_ROBERTA_LIKE = ("Roberta", "XLMRoberta", "Camembert", "Longformer", "Bart")  # tokenizer_class prefixes
_SURROGATES = re.compile("[\ud800-\udfff]")
_UNUSED = re.compile(r"\[unused\d+\]")  # Google's placeholder slots (bert-base: ids 1..99, 104..998)


def read_folder(folder: str) -> tuple[dict[str, str], dict, int, dict]:
    """A saved folder's file paths by name, its tokenizer_config.json, its length limit, and the keywords
    for `SubwordTokenizer.__init__` that its configs imply (markers they name, layout, tokenizer_class)."""
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: no such folder")
    path = {n: os.path.join(folder, n) for n in ("tokenizer_config.json", "special_tokens_map.json",
                                                  "tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")}
    cfg, smap = (read_json_config(path[n]) if os.path.isfile(path[n]) else {}
                 for n in ("tokenizer_config.json", "special_tokens_map.json"))
    max_len = cfg.get("model_max_length")  # transformers writes ~1e30 for "no limit"
    max_len = max_len if type(max_len) is int and 3 <= max_len <= 1_000_000 else 512
    named = {r: _content(cfg.get(f"{r}_token", smap.get(f"{r}_token"))) for r in ROLES}
    tclass = cfg.get("tokenizer_class") if isinstance(cfg.get("tokenizer_class"), str) else None
    layout = None if tclass is None else "roberta" if tclass.startswith(_ROBERTA_LIKE) else \
        "bert" if tclass.startswith(("Bert", "Electra", "DistilBert", "Albert")) else None
    return path, cfg, max_len, dict(specials={r: t for r, t in named.items() if t}, layout=layout,
                                    tokenizer_class=tclass)


def read_vocab_txt(path: str) -> dict[str, int]:
    """A BERT `vocab.txt`: one token per line, the line number is the id."""
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
    return vocab


def _find_specials(tok: Tokenizer, given: Sequence[str] | Mapping[str, str] | None) -> tuple[str, ...]:
    """The markers' strings by role: as given, else the family's string the vocabulary holds (BPE
    vocabularies try RoBERTa's first, the others BERT's)."""
    given = _given(given)
    if set(given) - set(ROLES):
        raise ValueError(f"unknown special token role(s) {sorted(set(given) - set(ROLES))}; roles are {ROLES}")
    bpe = isinstance(tok.model, models.BPE)
    found, missing = [], []
    for role, bert, roberta in zip(ROLES, SPECIAL_TOKENS, ROBERTA_SPECIAL_TOKENS):
        names = [given[role]] if role in given else [roberta, bert] if bpe else [bert, roberta]
        name = next((n for n in names if tok.token_to_id(n) is not None), None)
        (missing if name is None else found).append(names[0] if name is None else name)
    if missing:
        raise ValueError(f"the vocabulary lacks special token(s) {' '.join(missing)}")
    return tuple(found)


def _given(specials: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    return dict(zip(ROLES, specials)) if isinstance(specials, (list, tuple)) else dict(specials or {})


def _content(x: object) -> str | None:
    """A marker as tokenizer_config.json writes it: a string, or an AddedToken's {"content": ...}."""
    x = x.get("content") if isinstance(x, dict) else x
    return x if isinstance(x, str) and x else None


def _pipeline(model: models.Model, lowercase: bool, strip_accents: bool | None = None) -> Tokenizer:
    """Original BERT: clean, space out CJK chars, (lowercase, strip accents), split on space/punct."""
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _roberta_mask() -> AddedToken:
    """roberta-base's <mask>: it swallows the space before it, so 'a <mask>' masks the word ' x'."""
    return AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)


def _byte_level_pipeline(model: models.Model, add_prefix_space: bool = False) -> Tokenizer:
    """RoBERTa/GPT-2: text to bytes, split with GPT-2's regex, no normalizer."""
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    return tok


def _metaspace_pipeline(model: models.Model) -> Tokenizer:
    """DeBERTa-v3's SentencePiece text handling, as transformers' DebertaV2Tokenizer rebuilds it from a saved
    vocabulary (so both cut alike): whitespace runs to one space, NFC, case kept; '▁' for every space."""
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC(),
                                           normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace("\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace("\u2581", prepend_scheme="always")
    return tok


def _default_decoder(tok: Tokenizer) -> decoders.Decoder | None:
    """For a tokenizer.json without one: the decoder its model and pre-tokenizer imply."""
    if isinstance(tok.model, models.WordPiece):
        return decoders.WordPiece(prefix=tok.model.continuing_subword_prefix)
    if isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel):
        return decoders.ByteLevel()
    if isinstance(tok.pre_tokenizer, pre_tokenizers.Metaspace):
        return decoders.Metaspace(tok.pre_tokenizer.replacement, tok.pre_tokenizer.prepend_scheme)
    return None


def _byte_table() -> dict[str, int]:
    """ByteLevel's reversible byte -> printable char map, inverted: printable Latin-1 bytes stand for
    themselves, the other 68 bytes take the chars from U+0100 on, in byte order (space is 'Ġ')."""
    kept = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    others = (b for b in range(256) if b not in kept)
    return {chr(b): b for b in kept} | {chr(0x100 + n): b for n, b in enumerate(others)}


_BYTE_OF = _byte_table()


def _byte_piece_text(token: str) -> str:
    """A byte-level piece turned back into text (see `SubwordTokenizer.piece_text`); a token that is not
    made of byte-level chars is returned as it is."""
    if any(c not in _BYTE_OF for c in token):
        return token
    out = []
    for ch in bytes(_BYTE_OF[c] for c in token).decode("utf-8", "surrogateescape"):
        if "\udc80" <= ch <= "\udcff":  # a byte that is not a whole char
            out.append(f"<0x{ord(ch) - 0xDC00:02X}>")
        elif ch == " ":
            out.append("\u2581")
        elif ch.isspace() or unicodedata.category(ch) == "Cc":
            out.extend(f"<0x{b:02X}>" for b in ch.encode())
        else:
            out.append(ch)
    return "".join(out)


def _longest_first(n1: int, n2: int, budget: int) -> tuple[int, int]:
    """Keep the shorter text whole if it fits in half the budget, else halve the budget (odd token to
    the longer text, or the pair on a tie): the rule of `tokenizers`, so we cut where Hugging Face does."""
    if n1 + n2 <= budget:
        return n1, n2
    a = min(n1, n2)
    a, b = (a, budget - a) if 2 * a <= budget else (budget // 2, budget - budget // 2)
    return (b, a) if n1 > n2 else (a, b)


def _training_texts(src: Iterable[str | os.PathLike]) -> Iterator[str]:
    """The texts to train on, refusing a lone string and input with no text at all."""
    if isinstance(src, (str, bytes, os.PathLike)):
        raise TypeError("pass a list of texts or file paths, not a single string or path")
    texts = _iter_texts(src)
    first = next((t for t in texts if t.strip()), None)  # blank texts teach nothing anyway
    if first is None:
        raise ValueError("no text to train on: the input is empty or only whitespace")
    return itertools.chain([first], texts)


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


def special_token_ids(tok: SubwordTokenizer) -> SpecialIds:
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


def exact_unigram(path: str) -> models.Unigram:
    """A Unigram model with the file's scores to the last bit. The Rust JSON reader can land a score one
    unit in the last place off; where two segmentations tie ("word" * 30) that picks another one than
    `transformers`, which reads the scores in Python."""
    with open(path, encoding="utf-8") as f:
        m = json.load(f)["model"]
    return models.Unigram([(p, float(s)) for p, s in m["vocab"]], m.get("unk_id"), m.get("byte_fallback", False))


class SubwordTokenizer:
    """Any BERT-family tokenizer: five markers by role (pad unk cls sep mask), the family's pair layout,
    longest-first truncation. Load one with `from_pretrained` or `from_file`; train one with
    `WordPieceTokenizer.train`, `BPETokenizer.train` or `UnigramTokenizer.train`. A loaded Unigram tokenizer
    (ALBERT's, DeBERTa-v3's) is this class."""
    model_class: type | None = None  # the `tokenizers` model a subclass insists on
    default_class = "PreTrainedTokenizerFast"  # tokenizer_class written when none was loaded

    def __init__(self, tokenizer: Tokenizer, model_max_length: int = 512, *,
                 specials: Sequence[str] | Mapping[str, str] | None = None, layout: str | None = None,
                 tokenizer_class: str | None = None):
        """`specials`: the markers' strings, as a (pad, unk, cls, sep, mask) tuple or a {role: string}
        dict (missing roles are found in the vocabulary); `layout`: "bert" or "roberta" (default: RoBERTa's
        when the cls marker is <s> or the file's post-processor is RoBERTa's)."""
        if self.model_class and not isinstance(tokenizer.model, self.model_class):
            raise ValueError(f"expected a {self.model_class.__name__} model, got {type(tokenizer.model).__name__}")
        self.special_tokens = _find_specials(tokenizer, specials)  # (pad, unk, cls, sep, mask)
        added = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
        # Match the markers whole in text, drop them in decode; a loaded one keeps its flags (RoBERTa's
        # <mask> takes the space before it).
        tokenizer.add_special_tokens([t for t in dict.fromkeys(self.special_tokens) if t not in added])
        self.pad_token, self.unk_token, self.cls_token, self.sep_token, self.mask_token = self.special_tokens
        self.pad_token_id, self.unk_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = (
            tokenizer.token_to_id(t) for t in self.special_tokens)
        self.layout = layout or ("roberta" if self.cls_token == "<s>" or isinstance(
            tokenizer.post_processor, processors.RobertaProcessing) else "bert")
        if self.layout not in ("bert", "roberta"):
            raise ValueError(f"layout must be 'bert' or 'roberta', got {layout!r}")
        self.tokenizer_class = tokenizer_class
        self._byte_level = isinstance(tokenizer.pre_tokenizer, pre_tokenizers.ByteLevel) or isinstance(
            tokenizer.decoder, decoders.ByteLevel)
        # We truncate ourselves (thread-safe, and we learn what was cut), so a loaded file's settings go.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        tokenizer.post_processor = self._template(tokenizer)
        if tokenizer.decoder is None:
            tokenizer.decoder = _default_decoder(tokenizer)
        self._tok = tokenizer
        # Probe the normalizer rather than trust flags, so any loaded tokenizer.json reports right.
        norm = tokenizer.normalizer.normalize_str if tokenizer.normalizer else str
        self.lowercase, self._strip_accents = norm("A") == "a", norm("\u00e9") == "e"
        self.model_max_length = model_max_length

    @property
    def pair_seps(self) -> int:
        """Separators between a pair's two texts: one ([SEP]), or the doubled </s> </s> of RoBERTa's layout."""
        return 1 if self.layout == "bert" else 2

    def _template(self, tokenizer: Tokenizer) -> processors.PostProcessor:
        c, s = self.cls_token, self.sep_token
        ids = [(c, self.cls_token_id), (s, self.sep_token_id)]
        if self.layout == "bert":
            return processors.TemplateProcessing(single=f"{c} $A {s}", pair=f"{c} $A {s} $B:1 {s}:1",
                                                 special_tokens=ids)
        if self._byte_level:  # RoBERTa's own: it also trims the space a byte-level piece carries off its offsets
            return processors.RobertaProcessing(ids[1], ids[0], trim_offsets=True, add_prefix_space=getattr(
                tokenizer.pre_tokenizer, "add_prefix_space", False))
        return processors.TemplateProcessing(single=f"{c} $A {s}", pair=f"{c} $A {s} {s} $B {s}", special_tokens=ids)

    @classmethod
    def from_file(cls, path: str | os.PathLike, model_max_length: int = 512, **kw) -> SubwordTokenizer:
        """Load a Hugging Face `tokenizer.json` of any kind (ours, bert-base's, roberta-base's, albert's):
        the result is a WordPieceTokenizer, a BPETokenizer or (Unigram) a SubwordTokenizer, whichever
        class this is called on. `kw` as for `__init__`."""
        path = os.fspath(path)
        try:
            raw = Tokenizer.from_file(path)
            if isinstance(raw.model, models.Unigram):
                raw.model = exact_unigram(path)
            kind = {"WordPiece": WordPieceTokenizer, "BPE": BPETokenizer}.get(type(raw.model).__name__)
            return (kind or SubwordTokenizer)(raw, model_max_length, **kw)
        except Exception as e:  # the Rust side raises bare Exceptions with terse messages
            raise ValueError(f"{path}: not a usable tokenizer.json ({e})") from None

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> SubwordTokenizer:
        """Load a folder saved by us or by `transformers`, of any family member: tokenizer.json if there,
        else vocab.txt (BERT), else vocab.json + merges.txt (RoBERTa). Markers come from
        tokenizer_config.json / special_tokens_map.json where they name them, else from the vocabulary.
        Like `from_file`, returns the kind the folder holds (so old `WordPieceTokenizer.from_pretrained`
        callers load RoBERTa too)."""
        folder = os.fspath(folder)
        path, cfg, max_len, kw = read_folder(folder)
        if os.path.isfile(path["tokenizer.json"]):
            return SubwordTokenizer.from_file(path["tokenizer.json"], max_len, **kw)
        if os.path.isfile(path["vocab.txt"]):
            lower, strip = cfg.get("do_lower_case", True), cfg.get("strip_accents")
            if not isinstance(lower, bool) or not isinstance(strip, (bool, type(None))):
                raise ValueError(f"{path['tokenizer_config.json']}: do_lower_case and strip_accents must be true or false")
            return WordPieceTokenizer.from_vocab(path["vocab.txt"], lower, strip, max_len, **kw)
        if os.path.isfile(path["vocab.json"]) and os.path.isfile(path["merges.txt"]):
            prefix = cfg.get("add_prefix_space", False)
            if not isinstance(prefix, bool):
                raise ValueError(f"{path['tokenizer_config.json']}: add_prefix_space must be true or false")
            return BPETokenizer.from_vocab_merges(path["vocab.json"], path["merges.txt"], prefix, max_len, **kw)
        raise ValueError(f"{folder}: holds neither tokenizer.json nor vocab.txt (nor vocab.json + merges.txt)")

    def save_pretrained(self, folder: str | os.PathLike) -> None:
        """Write a folder that we and `transformers` (AutoTokenizer, and the family's class) both load."""
        self._check_saveable()
        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        self._tok.save(os.path.join(folder, "tokenizer.json"))
        extra = self._write_vocab(folder)
        special = {f"{r}_token": t for r, t in zip(ROLES, self.special_tokens)}
        if not isinstance(self._tok.model, models.WordPiece):  # RoBERTa and ALBERT also name bos/eos
            special = {"bos_token": self.cls_token, "eos_token": self.sep_token, **special}
        config = {"tokenizer_class": self.tokenizer_class or self._default_class(), **extra,
                  "model_max_length": self.model_max_length, **special}
        for name, obj in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2)

    def _check_saveable(self) -> None:
        """Raise before anything is written (subclasses)."""

    def _write_vocab(self, folder: str) -> dict:
        """Write the slow tokenizer's files, return what tokenizer_config.json says about them."""
        return {"do_lower_case": self.lowercase, "keep_accents": not self._strip_accents}  # AlbertTokenizer's

    def _default_class(self) -> str:
        if isinstance(self._tok.model, models.Unigram):
            return "XLMRobertaTokenizer" if self.layout == "roberta" else "AlbertTokenizer"
        return self.default_class

    @property
    def backend(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer`, for fast batch work (read-only use, please)."""
        return self._tok

    @property
    def kind(self) -> str:
        """'wordpiece', 'bpe' or 'unigram' (the `tokenizers` model's name, lowercased)."""
        return type(self._tok.model).__name__.lower()

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

    def piece_text(self, i: int) -> str:
        """A piece as a person should read it. WordPiece's '##' and SentencePiece's '▁' stay as they are.
        Byte-level BPE pieces are turned back into text, the space a piece starts with shown as '▁' (so
        RoBERTa's and ALBERT's word starts look alike: 'Ġgreat' -> '▁great'); other whitespace/control
        chars, and the bytes of a char split across pieces, as <0xNN> (SentencePiece's byte notation).
        Special tokens are shown as they are."""
        token = self.id_to_token(i)
        if not self._byte_level or int(i) in special_token_ids(self).all:
            return token
        return _byte_piece_text(token)

    def encode(self, text: str, pair: str | None = None, max_length: int | None = None) -> Encoding:
        """[CLS] text [SEP] (pair [SEP]) in the family's layout, cut longest-first to max_length
        (default model_max_length)."""
        a = self._tok.encode(_text(text, "text"), add_special_tokens=False)
        b = None if pair is None else self._tok.encode(_text(pair, "pair"), add_special_tokens=False)
        return self._finish(a, b, max_length)

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     max_length: int | None = None, pad_to: int | None = None) -> dict:
        """Encode many texts into (B, T) long tensors, padded on the right with the pad marker."""
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
        """Truncate the bare pieces, then let the template add the markers and token types."""
        n_special = self._tok.post_processor.num_special_tokens_to_add(b is not None)
        max_length = _check_int(self.model_max_length if max_length is None else max_length,
                                "max_length", n_special)
        n1, n2 = len(a), 0 if b is None else len(b)
        k1, k2 = _longest_first(n1, n2, max_length - n_special)
        for enc, n, k in ((a, n1, k1), (b, n2, k2)):
            if k < n:
                enc.truncate(k)
        e = self._tok.post_process(a, b, add_special_tokens=True)
        # post_process drops the pair's sequence_ids (tokenizers 0.23), and RobertaProcessing trims the
        # offsets that encode() already trimmed once more: the layout gives both.
        seq, offsets = [None, *[0] * k1, None], [(0, 0), *a.offsets, (0, 0)]
        if b is not None:
            extra = self.pair_seps - 1  # </s> </s>
            seq += [*[None] * extra, *[1] * k2, None]
            offsets += [*[(0, 0)] * extra, *b.offsets, (0, 0)]
        tokens = [self._tok.id_to_token(i) for i in e.ids]  # e.tokens shows " <mask>" where <mask> took a space
        return Encoding(e.ids, tokens, e.type_ids, e.attention_mask, offsets, seq,
                        e.special_tokens_mask, e.word_ids, truncated=(k1, k2) != (n1, n2))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Ids back to text (## pieces glued on, byte-level bytes decoded); case and accents removed by
        the normalizer stay lost."""
        ids = [int(i) for i in ids]  # lists and 1-D tensors alike
        self.convert_ids_to_tokens(ids)  # raises on a bad id, which tokenizers would silently drop
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
                f"model_max_length={self.model_max_length})")


class WordPieceTokenizer(SubwordTokenizer):
    """BERT's (also ELECTRA's and DistilBERT's) tokenizer; make one with `train`, `from_file`,
    `from_vocab` or `from_pretrained`."""
    model_class = models.WordPiece
    default_class = "BertTokenizer"

    @classmethod
    def train(cls, texts_or_files: Iterable[str | os.PathLike], vocab_size: int = 8192,
              lowercase: bool = True, min_frequency: int = 2) -> WordPieceTokenizer:
        """Learn a vocabulary from a list of file paths or from any iterable of strings."""
        _check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS))
        _check_int(min_frequency, "min_frequency", 0)
        texts = _training_texts(texts_or_files)
        tok = _pipeline(models.WordPiece(unk_token=UNK, continuing_subword_prefix="##"), lowercase)
        # Each kept char costs two entries (c and ##c); capping the alphabet keeps len(tok) <= vocab_size.
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=min(1000, (vocab_size - len(SPECIAL_TOKENS)) // 2),
            continuing_subword_prefix="##", show_progress=False)
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    @classmethod
    def from_vocab(cls, path: str | os.PathLike, lowercase: bool = True, strip_accents: bool | None = None,
                   model_max_length: int = 512, **kw) -> WordPieceTokenizer:
        """Load a BERT `vocab.txt`: one token per line, the line number is the id."""
        path = os.fspath(path)
        vocab = read_vocab_txt(path)
        unk = _given(kw.get("specials")).get("unk", UNK)
        model = models.WordPiece(vocab, unk_token=unk, continuing_subword_prefix="##")
        try:
            return cls(_pipeline(model, lowercase, strip_accents), model_max_length, **kw)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def _check_saveable(self) -> None:
        if sorted(self.get_vocab().values()) != list(range(len(self))):
            raise ValueError("vocab.txt needs token ids 0..n-1 without gaps")

    def _write_vocab(self, folder: str) -> dict:
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.writelines(token + "\n" for token in self.convert_ids_to_tokens(range(len(self))))
        return {"do_lower_case": self.lowercase, "strip_accents": self._strip_accents,
                "tokenize_chinese_chars": True}


class BPETokenizer(SubwordTokenizer):
    """RoBERTa's byte-level BPE: the 256 bytes are base pieces, so no text is ever <unk>; 'Ġ' marks a
    piece that follows a space. Trained here: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4."""
    model_class = models.BPE
    default_class = "RobertaTokenizer"

    @classmethod
    def train(cls, texts_or_files: Iterable[str | os.PathLike], vocab_size: int = 8192,
              min_frequency: int = 2) -> BPETokenizer:
        """Learn merges from a list of file paths or any iterable of strings. The same input gives the
        same vocabulary (ties do not follow hash order: tests/test_tokenizer_family.py checks it)."""
        _check_int(vocab_size, "vocab_size", 256 + 5)  # every byte, and the five markers
        _check_int(min_frequency, "min_frequency", 0)
        texts = _training_texts(texts_or_files)
        tok = _byte_level_pipeline(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", _roberta_mask()],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    @classmethod
    def from_vocab_merges(cls, vocab_path: str | os.PathLike, merges_path: str | os.PathLike,
                          add_prefix_space: bool = False, model_max_length: int = 512, **kw) -> BPETokenizer:
        """Load RoBERTa's slow files: vocab.json ({piece: id}) and merges.txt (one 'a b' merge a line)."""
        vocab_path, merges_path = os.fspath(vocab_path), os.fspath(merges_path)
        try:
            vocab, merges = models.BPE.read_file(vocab_path, merges_path)
            tok = _byte_level_pipeline(models.BPE(vocab, merges), add_prefix_space)
        except Exception as e:
            raise ValueError(f"{vocab_path}, {merges_path}: not a usable BPE vocabulary ({e})") from None
        if "<mask>" in vocab:
            tok.add_special_tokens([_roberta_mask()])
        try:
            return cls(tok, model_max_length, **kw)
        except ValueError as e:
            raise ValueError(f"{vocab_path}: {e}") from None

    def _write_vocab(self, folder: str) -> dict:
        self._tok.model.save(folder)  # vocab.json and merges.txt
        return {"add_prefix_space": getattr(self._tok.pre_tokenizer, "add_prefix_space", False),
                "trim_offsets": True, "errors": "replace"}


class UnigramTokenizer(SubwordTokenizer):
    """DeBERTa-v3's SentencePiece-style Unigram vocabulary: '▁' starts a word's first piece, case is kept and
    a character never seen in training is [UNK]. Trained here: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3 and [MASK]
    last, as in DeBERTa-v3. A saved folder loads back as a SubwordTokenizer of kind 'unigram' (as ALBERT's)."""
    model_class = models.Unigram

    @classmethod
    def train(cls, texts_or_files: Iterable[str | os.PathLike], vocab_size: int = 8192) -> UnigramTokenizer:
        """Learn pieces and their log-probabilities (EM, pruning the least useful) from a list of file paths or
        any iterable of strings. Every character seen is kept as a piece; a small corpus may give fewer pieces
        than asked (a candidate longer than a character must occur twice among its distinct words)."""
        _check_int(vocab_size, "vocab_size", len(SPECIAL_TOKENS) + 1)
        texts = _training_texts(texts_or_files)
        tok = _metaspace_pipeline(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size - 1, special_tokens=[PAD, CLS, SEP, UNK],
                                          unk_token=UNK, show_progress=False)  # [MASK] comes after the pieces
        try:
            tok.train_from_iterator(texts, trainer)
            fits = tok.get_vocab_size() < vocab_size  # just above the characters' count it overshoots
        except Exception as e:  # the Rust side's terse "The vocabulary is not large enough to contain all chars"
            if "not large enough" not in str(e):
                raise
            fits = False
        if not fits:
            raise ValueError(f"vocab_size {vocab_size} is too small for this text: a Unigram vocabulary keeps every "
                             f"character it has as a piece, besides the 5 markers; give a larger vocab_size")
        tok.add_special_tokens([AddedToken(MASK, special=True, normalized=False)])
        return cls(tok, tokenizer_class="DebertaV2Tokenizer")

    def _write_vocab(self, folder: str) -> dict:
        return {"do_lower_case": self.lowercase, "split_by_punct": False, "add_prefix_space": True}  # DebertaV2Tokenizer's
