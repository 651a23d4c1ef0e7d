"""Lessons: the course inside the app. One lesson at a time: the idea and its formula, "Try it" links
that open a tab with the inputs filled (in a new browser tab, so the lesson stays open), what to
expect and why, the example script, and a question the model in use answers (lessons/checks.py).

Progress lives in the student's own browser (gr.BrowserState): nothing about a student is kept on
the server, and a reload or a return the next day finds the answered lessons again."""
from __future__ import annotations

import html

import gradio as gr

from ...lessons import LESSONS, Lesson
from ...lessons.answers import MAX_ANSWER_CHARS, clean
from ...lessons.checks import CHECKS
from ..shared import common, links
from ..shared.common import mistakes, user_error
from ..training import class_view

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]
BY_NUMBER = {x.number: x for x in LESSONS}
MAX_SCRIPT_CHARS = 20_000  # an example script is short; a bigger file is not shown whole
STORAGE_KEY = "bertlab-lessons"
INTRO = (f"**The course.** {len(LESSONS)} short lessons, in order: each explains one idea, opens the tab where you "
         "can see it (**Try it** opens a new browser tab, so this one stays here), and asks a question "
         "that the **model picked at the top** answers — so the answer is checked against what the model "
         "really does, not a fixed key.")
CSS = """
.bl-try {display:inline-block;margin:4px 8px 4px 0;padding:6px 12px;border-radius:8px;background:#eef2ff;
  border:1px solid #6366f1;color:#3730a3 !important;text-decoration:none !important;font-weight:600}
.bl-try:hover {background:#e0e7ff}
"""


def _number(n) -> int:
    """A lesson number from the selector or a link: a lesson's, anything else the first lesson."""
    try:
        n = int(n)
    except (TypeError, ValueError):
        return LESSONS[0].number
    return n if n in BY_NUMBER else LESSONS[0].number


def _done(progress) -> dict:
    """{lesson number (str): {"answer", "correct"}} from the browser's store, whatever it holds."""
    got = (progress or {}).get("answered", {}) if isinstance(progress, dict) else {}
    return {str(k): v for k, v in got.items() if isinstance(v, dict) and str(k).isdigit() and int(k) in BY_NUMBER}


def progress_md(progress) -> str:
    done = _done(progress)
    right = sorted(int(k) for k, v in done.items() if v.get("correct"))
    tried = sorted(int(k) for k, v in done.items() if not v.get("correct"))
    bar = "".join("●" if x.number in right else "◐" if x.number in tried else "○" for x in LESSONS)
    line = f"**Progress: {len(right)} of {len(LESSONS)} lessons answered right** <span>{bar}</span>"
    if tried:
        line += f" · tried, not yet right: {', '.join(map(str, tried))}"
    return line


def choices(progress) -> list[tuple[str, int]]:
    done = _done(progress)
    mark = {k: " ✓" if v.get("correct") else " ·" for k, v in done.items()}
    return [(f"{x.number}. {x.title}{mark.get(str(x.number), '')}", x.number) for x in LESSONS]


def try_html(lesson: Lesson) -> str:
    items = "".join(f'<a class="bl-try" href="{html.escape(links.url(t.tab, **t.params))}" target="_blank" '
                    f'rel="noopener" data-tab="{html.escape(t.tab)}">Try it: {html.escape(t.label)} ↗</a>'
                    for t in lesson.try_its)
    return f'<style>{CSS}</style><div class="bl-try-its">{items}</div>'


def script_parts(lesson: Lesson) -> tuple[str, str]:
    """(pointer Markdown, the script's text) for the lesson's examples/ script, if there is one."""
    path = lesson.script()
    if path is None:
        return (f"**Do it in Python:** the repository's `examples/lesson{lesson.number:02d}_*.py` does this "
                "lesson through the library."), ""
    text = path.read_text(encoding="utf-8", errors="replace")[:MAX_SCRIPT_CHARS]
    return (f"**Do it in Python:** `python examples/{path.name}` does this lesson through the library "
            "(the code is below)."), text


def show(n, progress):
    """Everything the lesson view shows for lesson n, with this browser's progress."""
    lesson = BY_NUMBER[_number(n)]
    pointer, code = script_parts(lesson)
    mine = _done(progress).get(str(lesson.number), {})
    first, last = lesson.number == LESSONS[0].number, lesson.number == LESSONS[-1].number
    return (f"## Lesson {lesson.number} of {len(LESSONS)}: {lesson.title}\n\n{lesson.explain}",
            try_html(lesson),
            f"**What to expect, and why.** {lesson.expect}",
            pointer, gr.update(value=code, visible=bool(code)),
            f"**Question.** {lesson.question}",
            gr.update(value=mine.get("answer", ""), placeholder=lesson.placeholder),
            mine.get("feedback", ""),
            progress_md(progress),
            gr.update(choices=choices(progress), value=lesson.number),
            gr.update(interactive=not first), gr.update(interactive=not last))


def step(n, delta: int):
    numbers = [x.number for x in LESSONS]
    i = numbers.index(_number(n)) + delta
    return numbers[max(0, min(len(numbers) - 1, i))]


def check(answer, n, choice, progress):
    """(feedback, progress, progress line, selector): the model in use answers the lesson's question."""
    lesson = BY_NUMBER[_number(n)]
    if not isinstance(answer, str) or not clean(answer):
        raise user_error("Type an answer first.")
    answer = answer[:MAX_ANSWER_CHARS]
    with mistakes(ValueError):
        verdict = CHECKS[lesson.check](answer, choice)
    if verdict.correct is None:
        feedback = f"**Cannot check with this model.** {verdict.evidence}"
    elif verdict.correct:
        feedback = f"✓ **Right.** {verdict.evidence}"
    else:
        feedback = f"✗ **Not quite.** What the model says: {verdict.evidence}"
    progress = dict(progress) if isinstance(progress, dict) else {}
    done = _done(progress)
    was_right = done.get(str(lesson.number), {}).get("correct", False)
    if verdict.correct is not None:  # a right answer stays right; a later slip does not undo it
        done[str(lesson.number)] = {"answer": answer, "correct": bool(verdict.correct) or was_right,
                                    "feedback": feedback[:4000]}
    progress["answered"] = done
    return feedback, progress, progress_md(progress), gr.update(choices=choices(progress))


def build(model: gr.Textbox) -> None:
    progress = gr.BrowserState({"answered": {}}, storage_key=STORAGE_KEY)
    # the first lesson is on the page as it arrives (a phone shows it at once); the page's load event
    # then moves to where this browser's progress says
    first = show(LESSONS[0].number, None)
    gr.Markdown(INTRO, elem_id="lesson-intro")
    bar = gr.Markdown(progress_md(None), elem_id="lesson-progress")
    with gr.Row(elem_id="lesson-nav"):  # on a phone: the lesson's whole name, then the two buttons below
        pick = gr.Dropdown(choices(None), value=LESSONS[0].number, label="Lesson", scale=3, min_width=300,
                           elem_id="lesson-pick")
        with gr.Column(scale=1, min_width=240):
            with gr.Row():
                prev_btn = gr.Button("← Previous", min_width=100, elem_id="lesson-prev", interactive=False)
                next_btn = gr.Button("Next →", min_width=100, variant="primary", elem_id="lesson-next")
    links.copy_button("lessons")  # the teacher's link to the lesson on the projector
    body = gr.Markdown(first[0], latex_delimiters=LATEX, elem_id="lesson-body")
    tries = gr.HTML(first[1], elem_id="lesson-try")
    expect = gr.Markdown(first[2], elem_id="lesson-expect")
    pointer = gr.Markdown(first[3], elem_id="lesson-script")
    with gr.Accordion("The example script", open=False, elem_id="lesson-code-box"):
        code = gr.Code(first[4]["value"], language="python", interactive=False, show_label=False,
                       elem_id="lesson-code", visible=first[4]["visible"])
    question = gr.Markdown(first[5], elem_id="lesson-question")
    with gr.Row(equal_height=True):
        answer = gr.Textbox(label="Your answer", max_length=MAX_ANSWER_CHARS, scale=4, min_width=200,
                            elem_id="lesson-answer", placeholder=first[6]["placeholder"])
        check_btn = gr.Button("Check with the model", variant="primary", scale=1, min_width=160,
                              elem_id="lesson-check")
    feedback = gr.Markdown(elem_id="lesson-feedback")
    links.register("lessons", lesson=pick)

    view = [body, tries, expect, pointer, code, question, answer, feedback, bar, pick, prev_btn, next_btn]
    pick.change(show, [pick, progress], view, api_name=False, show_progress="hidden")
    common.on_open(show, [pick, progress], view)
    prev_btn.click(lambda n: step(n, -1), pick, pick, api_name=False)
    next_btn.click(lambda n: step(n, +1), pick, pick, api_name=False)
    gr.on([check_btn.click, answer.submit], check, [answer, pick, model, progress],
          [feedback, progress, bar, pick], api_name="lesson_check", concurrency_limit=4)

    # ---- the class view (its own module) goes below this line: one call, e.g. class_view.build(model) ----
    class_view.build()
