"""A text box with max_length cuts a longer paste in the browser without a word: a text that fills
its box exactly was most likely cut, and the result says so."""
from __future__ import annotations

from . import common


def cut(text, what: str = "text", limit: int = common.MAX_INPUT_CHARS) -> str:
    """A notice when `text` fills its box (`limit` characters), else ""."""
    if not isinstance(text, str) or len(text) < limit:
        return ""
    return (f"The {what} fills its box: {limit:,} characters, the most it takes. If you pasted more, "
            f"your browser cut the rest off at character {limit:,}.")
