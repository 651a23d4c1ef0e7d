"""Reading a student's typed answer tolerantly: case, spaces, quotes, `##`, thousands separators and
"11.7M" all count; a number is right when it agrees with the truth to the digits the student gave."""
from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ANSWER_CHARS = 300  # an answer is a word, a number or a sentence; a pasted essay is cut here
SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "mio": 1e6, "b": 1e9, "billion": 1e9, "g": 1e9}
NUMBER_RE = re.compile(r"([-+]?\d[\d,_' ]*(?:\.\d+)?|[-+]?\.\d+)\s*(thousand|million|billion|mio|k|m|b|g)?(?![a-z])",
                       re.IGNORECASE)


@dataclass
class Verdict:
    """A checked answer: right (True/False, None when the model cannot answer this question), what the
    model says (Markdown: the evidence, shown whether the student was right or not), and the answer."""
    correct: bool | None
    evidence: str
    answer: str = ""


def clean(text) -> str:
    """Lower case, no quotes, no `##`, single spaces, no trailing full stop or punctuation."""
    s = str(text or "")[:MAX_ANSWER_CHARS].lower()
    s = re.sub(r"[\"'`“”‘’«»]", "", s).replace("##", "")
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"(\s*[.!?,;:])+$", "", s).strip()


def words(text) -> str:
    """The words only: "The plot , however ." and "the plot however" read the same."""
    return " ".join(re.findall(r"[^\W_]+", clean(text)))


def numbers(text) -> list[tuple[float, float]]:
    """(value, half of the last digit's unit) for each number in the text: "11.7M" -> (11.7e6, 0.05e6)."""
    out = []
    for m in NUMBER_RE.finditer(str(text or "")[:MAX_ANSWER_CHARS]):
        digits = re.sub(r"[,_' ]", "", m.group(1))
        try:
            x = float(digits)
        except ValueError:
            continue
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        scale = SCALE.get((m.group(2) or "").lower(), 1.0)
        out.append((x * scale, 0.5 * scale * 10 ** -decimals))
    return out


def integers(text) -> list[int]:
    """The whole numbers written in the text: "L2H4" and "layer 2, head 4" both give [2, 4]."""
    return [int(x) for x in re.findall(r"\d+", str(text or "")[:MAX_ANSWER_CHARS])]


def same_number(text, truth: float, coarsest: float = 0.05) -> bool | str:
    """True when the first number in `text` rounds to `truth` at the precision it was given; a
    string (a hint) when it is too coarse to say (more than `coarsest` of the truth per half digit)."""
    found = numbers(text)
    if not found:
        return False
    x, half = found[0]
    if half > coarsest * abs(truth) and abs(x - truth) <= half:
        return "give one more digit: that is too rough to tell"
    return abs(x - truth) <= half + 1e-9 * abs(truth)
