"""A lesson and its "Try it" links, as data."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"


@dataclass(frozen=True)
class TryIt:
    """A link into a tab: `tab` and `params` are ui/shared/links.py's keys and input names."""
    label: str
    tab: str
    params: dict


@dataclass(frozen=True)
class Lesson:
    number: int
    check: str  # its question's checker: a key of checks.CHECKS
    title: str
    explain: str  # Markdown with $$ LaTeX $$: the idea and its key formula
    try_its: tuple[TryIt, ...]
    expect: str  # what the student should see, and why
    question: str
    placeholder: str  # the form an answer takes, e.g. "a number"

    def script(self) -> Path | None:
        """The lesson's example script (examples/lessonNN_*.py), if the repository has it."""
        found = sorted(EXAMPLES_DIR.glob(f"lesson{self.number:02d}_*.py"))
        return found[0] if found else None

