"""The parts the family's tokenizers are built from, none of which needs a tokenizer object: each
member's five markers and pair layout, reading a saved folder's configs and a vocab.txt, finding the
markers in a vocabulary, the `tokenizers` pipelines we build, byte-level pieces made readable, and the
checks every input passes. Kept apart so tokenizer.py holds the classes; it re-exports the public
names, so import them from `bertlab.tokenizer`."""
from __future__ import annotations

import itertools
import os
import re
import unicodedata
from typing import Iterable, Iterator, Mapping, Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from .config import read_json_config

# Trained vocabularies put these at ids 0..4; loaded ones anywhere (bert-base: 0, 100..103): ask
# `special_token_ids(tok)` for their ids, never assume them.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = SPECIAL_TOKENS
ROLES = ("pad", "unk", "cls", "sep", "mask")  # the order of every specials tuple here
ROBERTA_SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>", "<mask>")
FAMILY_SPECIAL_TOKENS = {"bert": SPECIAL_TOKENS, "electra": SPECIAL_TOKENS, "distilbert": SPECIAL_TOKENS,
                         "albert": ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
                         "roberta": ROBERTA_SPECIAL_TOKENS}
# Pair layout: "bert" = [CLS] A [SEP] B [SEP], token types 0 then 1; "roberta" = <s> A </s> </s> B </s>, all 0.
FAMILY_LAYOUT = {"bert": "bert", "electra": "bert", "distilbert": "bert", "albert": "bert", "roberta": "roberta"}
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
