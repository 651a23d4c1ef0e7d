"""The class chart: every student's pre-training curves on one figure, one colour per student, and a
ranking by held-out masked-token accuracy; the teacher clears the class's runs with the server's token.

One section, built by whichever tab hosts it (`build()`); its data come from app/classroom.py.
"""
from __future__ import annotations

import asyncio
import html
import re
import threading

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ... import classroom
from ...limits import limits
from ..shared import common
from ..shared.common import PERCENT_AXIS, user_error
from . import jobs_ui
from .train_charts import DASHES, empty_figure

MAX_CHART = 30  # runs drawn (the best ranked); the table lists every run of the class list
REFRESH_S = 15
PALETTE = qualitative.Dark24  # one colour per student; a student's second run is dashed

LEAD = """Every pre-training run on this server, one colour per student, ranked by how well its model
guesses masked words in text it never trained on. Type your name to put it on your runs."""
EXPLAIN = """**Reading the chart.** The top panel ranks the class: the share of masked words the model guesses
right on **held-out text**, sentences no run ever trained on, so a model cannot score by memorising.
Below it, the masked-word loss while training: it falls for everyone, but a low training loss alone
can be memorised text. A student's second run has the same colour, dashed.

Why do runs differ? The recipe (size, tokens per example, learning rate), how many steps it has had,
and luck (the random start). A model that only learned which words are common sits near the *unigram
guess* (about 4 % on movie reviews); climbing away from it means the model reads the context. Runs on
other text or another vocabulary are not strictly comparable, and an ELECTRA run's accuracy is its
small generator's."""
OFF = ("Clearing is **off** on this server. Its host turns it on by starting the app with "
       "`BERTLAB_TEACHER_TOKEN` set to a secret and giving that token to the teacher.")
ON = ("Deletes **every run started from a web page** on this server (every student's, and the teacher "
      "page's): queued ones leave the queue, training ones are stopped at once. Runs made from the command "
      "line and the shipped model stay. Wrong tokens are counted per network: after a few, each wrong answer "
      "comes more slowly; the right token always works at once.")


def _md(text: str) -> str:
    """Typed text inside a Markdown note, shown as typed: no link, no emphasis, no HTML."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def _label(row: dict) -> str:
    """Legend text: escaped, so a name typed as HTML shows as typed (plotly reads a few tags)."""
    return f"{html.escape(row['student'] or '(no name)')} · {html.escape(row['run'])}"


def class_figure(rows: list[dict]) -> go.Figure:
    """Held-out accuracy (top) and training masked-word loss (bottom) against step, one colour a student."""
    shown = [r for r in rows if r["curves"]["held_out_acc"] or r["curves"]["train_loss"]][:MAX_CHART]
    if not shown:
        return empty_figure("No pre-training run has measured itself yet.<br>Start one in the Pre-train tab:<br>"
                            "its first points appear within a minute.", height=160)  # lines that fit a phone
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.14, subplot_titles=[
        "Held-out masked-token accuracy (ranks the class)", "Masked-word loss while training"])
    runs_of, traces, where = {}, [], []
    for r in shown:
        color = PALETTE[(r["group"] - 1) % len(PALETTE)]
        k = runs_of[r["group"]] = runs_of.get(r["group"], -1) + 1
        for row, key, fmt in ((1, "held_out_acc", ".1%"), (2, "train_loss", ".3f")):
            pts = r["curves"][key]
            if not pts:
                continue
            where.append(row)
            traces.append(go.Scatter(
                x=np.array([p[0] for p in pts]), y=np.array([p[1] for p in pts], dtype=float),  # arrays: fast to check
                name=_label(r), legendgroup=r["run"],
                mode="lines+markers" if row == 1 else "lines",
                showlegend=row == 1 or not r["curves"]["held_out_acc"],
                line=dict(color=color, dash=DASHES[k % len(DASHES)], width=2.5 if row == 1 else 1.5),
                marker=dict(size=6, color=color), opacity=1 if row == 1 else 0.8,
                hovertemplate=f"%{{fullData.name}}<br>step %{{x}}: %{{y:{fmt}}}<extra></extra>"))
    fig.add_traces(traces, rows=where, cols=[1] * len(where))  # at once: ~10x faster than one by one
    fig.update_xaxes(title_text="step", title_standoff=2, rangemode="tozero", matches="x")
    fig.update_yaxes(tickformat=PERCENT_AXIS, rangemode="tozero", row=1, col=1)
    fig.update_annotations(font_size=14)
    n = len(shown)
    fig.update_layout(height=600 + 22 * n, margin=dict(l=50, r=12, t=50, b=40), uirevision="keep",
                      legend=dict(orientation="h", yanchor="top", y=-0.06 - 0.25 / max(n, 4), x=0, font_size=12,
                                  title_text="student · run"))
    return fig


HEADERS = ["#", "student", "run", "held-out acc.", "held-out loss", "step", "state"]


def ranking(rows: list[dict]) -> list[list]:
    """The ranking table: text as typed (the table shows it as text, never as HTML)."""
    return [[r["rank"] or "–", r["student"] or "(no name)", r["run"],
             "–" if r["held_out_acc"] is None else f"{r['held_out_acc']:.1%}",
             "–" if r["held_out_loss"] is None else f"{r['held_out_loss']:.3f}",
             f"{r['step']:,}" + (f" of {r['total_steps']:,}" if r.get("total_steps") else ""), r["state"]]
            for r in rows]


_drawn: tuple = (None, None, None)  # (the class list drawn, its figure, its table): one drawing for every page


def view():
    """(chart, table) of the class as it is now; drawn once per class list (classroom caches it)."""
    global _drawn
    rows = classroom.class_runs(jobs_ui.manager())
    if _drawn[0] is not rows:
        body = ranking(rows) or [["–", "No pre-training runs on this server yet.", "", "", "", "", ""]]
        _drawn = (rows, class_figure(rows), body)
    return _drawn[1], _drawn[2]  # the table as a plain value: the API returns {"headers", "data"}


def set_name(owner, name):
    """Put the typed name on every pre-training run this browser started."""
    try:
        done = classroom.name_my_runs(jobs_ui.manager(), jobs_ui.visitor(owner), name)
    except (ValueError, PermissionError) as e:
        raise user_error(e) from None
    shown = _md(classroom.check_display_name(name) or "(no name)")
    note = (f"Your {len(done)} pre-training run{'s' if len(done) != 1 else ''} now show as **{shown}**."
            if done else "You have no pre-training runs yet: type your name in the Pre-train tab when you start one, "
                         "or come back here afterwards.")
    return note, *view()


async def clear(token, confirm, request: gr.Request):
    """The teacher's button: the token (a wrong one answered after the guard's delay), the tick that says
    'for good', then the clearing (in a thread: it waits for killed jobs)."""
    client = getattr(getattr(request, "client", None), "host", None) or "?"
    try:
        classroom.check_token(token, client)
    except classroom.WrongToken as e:
        await asyncio.sleep(e.delay)
        raise user_error(e) from None
    except ValueError as e:
        raise user_error(e) from None
    return await asyncio.to_thread(_clear, confirm)


_CLEARING = threading.Lock()


def _clear(confirm):
    if not confirm:
        raise user_error("Tick 'delete them for good' first: runs cannot be brought back.")
    with _CLEARING:
        out = classroom.clear_class(jobs_ui.manager())
    parts = [f"Removed {len(out['removed'])} run{'s' if len(out['removed']) != 1 else ''}"
             + (f" ({out['stopped']} queued or training, stopped first)" if out["stopped"] else "") + "."]
    if out["kept"]:
        parts.append(f"{out['kept']} run{'s' if out['kept'] != 1 else ''} made from the command line "
                     f"{'stay' if out['kept'] != 1 else 'stays'}.")
    if out["failed"]:
        parts.append("Not removed: " + "; ".join(f"{_md(n)} ({_md(why)})"
                                                  for n, why in out["failed"].items()) + ".")
    return " ".join(parts), gr.Checkbox(value=False), *view()


def keep_rule() -> str:
    """How long finished runs stay, as this server is set (the host changes it with the two settings)."""
    lim = limits()
    return (f"**How long runs stay.** A finished run started from a web page is kept "
            f"{lim.keep_days:g} days (`BERTLAB_KEEP_DAYS`), then goes at the next start. When all runs "
            f"together pass {lim.disk_budget_mb:,.0f} MB (`BERTLAB_DISK_BUDGET_MB`), a student's start "
            f"removes only that student's own oldest finished runs, and is refused if that is not enough: "
            f"no one's start removes another student's run. Clearing below removes them all at once.")


def build() -> None:
    """The section: explanation, your name, chart, ranking, refresh, and the teacher's clearing."""
    owner, opened = jobs_ui.session()
    gr.Markdown("## The class chart", elem_id="class-title")
    gr.Markdown(LEAD, elem_id="class-lead")
    with gr.Row(equal_height=True):
        name = gr.Textbox(label="Your name on the class chart", max_length=classroom.MAX_NAME, min_width=240,
                          placeholder="e.g. Ada L.", scale=3, elem_id="class-name")
        name_btn = gr.Button("Put it on my runs", min_width=160, scale=1, elem_id="class-name-btn")
        refresh_btn = gr.Button("Refresh", min_width=120, scale=1, elem_id="class-refresh")
        live = gr.Checkbox(False, label=f"refresh every {REFRESH_S} s", min_width=160, scale=1)
    note = gr.Markdown(elem_id="class-note")
    # no figure until the runs are read: a figure on the page as it arrives makes a phone fetch and start
    # plotly (1.3 MB) before it shows the first lesson
    plot = gr.Plot(None, show_label=False, elem_id="class-plot")
    table = gr.Dataframe(headers=HEADERS, interactive=False, wrap=False, label="Ranking by held-out accuracy",
                         elem_id="class-table")
    timer = gr.Timer(REFRESH_S, active=False)
    gr.Markdown(EXPLAIN, elem_id="class-explain")
    with gr.Accordion("For the teacher: clear the class's runs", open=False, elem_id="class-teacher"):
        gr.Markdown(keep_rule(), elem_id="class-keep")
        if classroom.teacher_token():
            gr.Markdown(ON)
            with gr.Row(equal_height=True):
                token = gr.Textbox(label="Teacher token", type="password", max_length=classroom.MAX_TOKEN,
                                   min_width=240, elem_id="class-token")
                confirm = gr.Checkbox(False, label="delete them for good", min_width=160, elem_id="class-confirm")
                clear_btn = gr.Button("Clear the class's runs", variant="stop", min_width=200, elem_id="class-clear")
            cleared = gr.Markdown(elem_id="class-cleared")
            # no concurrency limit: a guesser's delayed answers must not queue the teacher's click behind
            # them (the clearing itself takes _CLEARING, one at a time)
            clear_btn.click(clear, [token, confirm], [cleared, confirm, plot, table], api_name="class_clear",
                            concurrency_limit=None)
        else:
            gr.Markdown(OFF, elem_id="class-off")
    refresh_btn.click(view, None, [plot, table], api_name="class_runs", show_progress="minimal")
    timer.tick(view, None, [plot, table], api_name=False, show_progress="hidden")
    live.change(lambda on: gr.Timer(active=on), live, timer, api_name=False)
    name_btn.click(set_name, [owner, name], [note, plot, table], api_name="class_name")
    common.on_open(view, None, [plot, table], after=opened)
