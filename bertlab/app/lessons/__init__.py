"""The course inside the app: the lessons in order, each a short explanation with its key formula,
"Try it" links that open a tab with its inputs filled (ui/shared/links.py), what to expect and why, an
example script, and a question the model in use answers (checks.py), never a fixed key.

The texts are Python strings (course_a.py, course_b.py, course_c.py): the package is used from the repository,
and strings need no package data."""
from __future__ import annotations

from .course_a import LESSONS as _FIRST
from .course_b import LESSONS as _SECOND
from .course_c import LESSONS as _THIRD
from .lesson import Lesson, TryIt

LESSONS: list[Lesson] = [*_FIRST, *_SECOND, *_THIRD]
__all__ = ["LESSONS", "Lesson", "TryIt"]
