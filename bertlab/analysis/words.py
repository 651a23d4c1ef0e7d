"""Where a typed word sits among a sentence's tokens, for any tokenizer of the family. Matching the
word's own pieces fails for byte-level BPE (RoBERTa spells a word differently after a space), so
the word is found in the text, as a whole word, and mapped to the tokens its characters fall in."""
from __future__ import annotations

import re


def occurrences(text: str, word: str, lowercase: bool) -> list[tuple[int, int]]:
    """Character spans of `word` in `text` as a whole word (not inside a longer one)."""
    pattern = re.compile(r"(?<!\w)" + re.escape(word.strip()) + r"(?!\w)", re.IGNORECASE if lowercase else 0)
    return [m.span() for m in pattern.finditer(text)]


def token_positions(offsets, special, span: tuple[int, int]) -> list[int]:
    """The (non-special) tokens whose characters overlap `span`."""
    a, b = span
    return [i for i, ((s, e), sp) in enumerate(zip(offsets, special)) if not sp and s < b and e > a]


def find(tok, text: str, word: str, enc) -> tuple[list[list[int]], bool]:
    """(token positions of each occurrence within the encoding `enc` of `text`, whether the word is in
    the text at all): an occurrence past a truncated encoding's end is in the text but has no tokens."""
    spans = occurrences(text, word, getattr(tok, "lowercase", False))
    found = [p for p in (token_positions(enc.offsets, enc.special_tokens_mask, s) for s in spans) if p]
    return found, bool(spans)
