"""What the training tabs share: who this browser is, the job manager, and how a run's state reads.

A job belongs to the browser that started it. The id lives in the browser's localStorage
(gr.BrowserState), not in the server session, so a reloaded page still owns (and finds) its job; the
server mints and signs it (identity.py), so a page cannot choose one.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import html
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import gradio as gr

from ....train.kinds import listed_in
from ....train.runs import list_runs
from ... import classroom, identity, jobs
from ...limits import limits
from ..shared import common, links
from ..shared.common import user_error

LIVE = ("queued", "starting", "running", "stopping")
ENDED = ("finished", "stopped", "failed")
TICK_S = 1.5


def manager() -> jobs.JobManager:
    return jobs.default_manager()


TEACHER = "teacher:"


def _teacher_token() -> str:
    return os.environ.get("BERTLAB_TEACHER_TOKEN", "").strip()


def _client(request) -> str:
    return getattr(getattr(request, "client", None), "host", None) or "unknown"


def teacher_id(token: str, nonce: str | None = None) -> str:
    """A teacher page's stored id: a random nonce and its HMAC under the token. The token itself never
    sits in a browser, and a forged id is a 256-bit guess, so only ?teacher= needs a rate limit."""
    nonce = nonce if nonce is not None else uuid.uuid4().hex
    mac = hmac.new(token.encode(), f"bertlab-teacher:{nonce}".encode(), hashlib.sha256).hexdigest()
    return f"{TEACHER}{nonce}:{mac}"


async def browser_id(current: str | None, request: gr.Request | None = None) -> str | None:
    """This browser's id: the stored one, or a new one the server signs (identity.py) on its first visit.
    A page opened with ?teacher=<BERTLAB_TEACHER_TOKEN> acts as the teacher from then on. A wrong token
    is said, and answered only after the guard's delay (classroom.Guard: an await, so a guesser holds
    no thread); the page goes on as a student's."""
    token, asked = _teacher_token(), (request.query_params.get("teacher") if request is not None else None)
    if token and isinstance(asked, str):
        try:
            classroom.check_token(asked, _client(request), classroom.GUARD)
            return teacher_id(token)
        except classroom.WrongToken as e:
            await asyncio.sleep(e.delay)
            common.warn(f"{e}: this page opens as a student's. Check the link your host gave you.")
    if is_teacher(current) or identity.valid_id(current, manager().root):
        return current  # (an old teacher id, after the token changed, is no id: a new one follows)
    if identity.MINTS.take(_client(request), 1, limits().new_ids_per_hour) is None:
        return identity.new_id(manager().root)
    common.warn(f"This network was given {limits().new_ids_per_hour} new browser ids within the hour, the most "
                f"this server gives one network (BERTLAB_NEW_IDS_PER_HOUR): the views work, but training from "
                f"this page waits until an hour after the first of them.")
    return None


def is_teacher(owner) -> bool:
    token = _teacher_token()
    if not (token and isinstance(owner, str) and owner.startswith(TEACHER)):
        return False
    nonce = owner[len(TEACHER):].partition(":")[0]
    return hmac.compare_digest(owner.encode(), teacher_id(token, nonce).encode())


def session():
    """(owner, opened): the one BrowserState holding this browser's id, shared by every training tab,
    and the page-load event that fills it in. Tabs run their own opening work with
    `common.on_open(..., after=opened)`, so on the first tab it runs once the id is known. Create it at the page's top level: a component inside a tab that
    was never opened is not mounted, and would never reach localStorage."""
    root = gr.context.Context.root_block
    if getattr(root, "_bertlab_session", None) is None:
        # a fixed secret, so a restarted server still reads the stored id (which is random, not personal)
        owner = gr.BrowserState(None, storage_key="bertlab-owner", secret=os.environ.get("BERTLAB_SECRET", "bertlab"))
        opened = root.load(browser_id, owner, owner, api_name=False, show_progress="hidden", concurrency_limit=None)
        root._bertlab_views = gr.Textbox("{}", visible=False)  # filled from localStorage by the events that read it
        root._bertlab_session = (owner, opened)
    return root._bertlab_session


VIEWS_KEY = "bertlab-views"  # localStorage: {tab kind: {"run": name, "overlay": [names]}}


def views_box() -> gr.Textbox:
    """A hidden box that carries what this browser stored of the training tabs' views (the run each
    showed and the runs overlaid on it) to the events that read it, so a reloaded page shows them again.
    The browser keeps it in localStorage, written by a browser-only event (`remember_js`): a
    BrowserState written by the server on each pick set the overlay picker off again, in a loop."""
    session()
    return gr.context.Context.root_block._bertlab_views


def remember_js(kind: str) -> str:
    """The browser-only event (run, overlay) that stores what a tab shows."""
    return f"""(run, overlay) => {{ try {{
        const all = JSON.parse(localStorage.getItem({VIEWS_KEY!r}) || "{{}}");
        all[{kind!r}] = {{run: run, overlay: overlay}};
        localStorage.setItem({VIEWS_KEY!r}, JSON.stringify(all));
    }} catch (e) {{}} }}"""


MAX_OVERLAID = 16


def remembered(views, kind: str) -> tuple[str | None, list[str]]:
    """(run, overlay) a tab showed, from what the browser stored (JSON text): anything else a browser
    sends is nothing."""
    if isinstance(views, str):
        try:
            views = json.loads(views[:20_000])
        except ValueError:
            views = None
    kept = views.get(kind) if isinstance(views, dict) else None
    if not isinstance(kept, dict) or not valid(kept.get("run")):
        return None, []
    overlay = kept.get("overlay") if isinstance(kept.get("overlay"), list) else []
    return kept["run"], [n for n in overlay[:MAX_OVERLAID] if valid(n) and n != kept["run"]]


def run_watcher(label: str, elem_id: str, log_lines: int):
    """(watch, overlay, log, timer) of a job that is one whole (a race, a sweep): a picker of the job
    shown, an overlay picker that stays hidden (such a job overlays nothing), its log, its timer."""
    watch = gr.Dropdown([], label=label, allow_custom_value=True, elem_id=elem_id,
                        info=f"the {label.lower()} shown above (yours or anyone's)")
    overlay = gr.Dropdown([], multiselect=True, allow_custom_value=True, visible=False)
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=log_lines, max_lines=30, show_label=False, autoscroll=True)
    return watch, overlay, log, gr.Timer(TICK_S, active=False)


def wire_run_view(kind, session, watch, overlay, timer, view, outs, shown=None) -> None:
    """What the training tabs do with their run picker: redraw on a pick, on each tick while a shown
    run is live, refresh the run lists when opened, remember what is shown in the browser, and when the
    tab opens show this browser's last run (with the runs started together with it, or those it had
    overlaid). `shown`: (fn(run), outputs) that also runs when a run is picked or reopened (the
    Pre-train form takes the settings of the run it shows). `session`: `session()`'s (owner, opened)."""
    owner, opened = session
    views = views_box()
    gr.on([watch.change, overlay.change], view, [watch, overlay, owner], outs, api_name=False)
    gr.on([watch.change, overlay.change], None, [watch, overlay], None, api_name=False, js=remember_js(kind))
    timer.tick(view, [watch, overlay, owner], outs, api_name=False, show_progress="hidden")
    for dd in (watch, overlay):
        dd.focus(lambda: gr.Dropdown(choices=runs_of(kind)), None, dd, api_name=False)
    reopened = common.on_open(reopen(kind), [owner, watch, views], [watch, overlay], after=opened,
                              js=f"(owner, run, views) => [owner, run, localStorage.getItem({VIEWS_KEY!r}) || '{{}}']")
    reopened.then(view, [watch, overlay, owner], outs, api_name=False, show_progress="hidden")
    if shown is not None:
        fn, outputs = shown
        reopened.then(fn, watch, outputs, api_name=False, show_progress="hidden")
        watch.input(fn, watch, outputs, api_name=False, show_progress="hidden")


class Controls:
    """A training tab's Start / Stop / Resume / Delete row and its copy-link button, built where the tab
    puts it; `between()` adds widgets after Start (fine-tuning's comparison). Element ids are ID-start,
    ID-stop, ... and API names API_stop, ... (`ids`, `api`: the kind's own name by default). `wire`
    connects Stop, Resume and Delete, which act on the run shown (`watch`) and redraw it; Start is the
    tab's own (each starts from its own form)."""

    def __init__(self, kind: str, resume: bool = True, delete: bool = True, link: bool = True,
                 min_width: int | None = 80, between=None, start: str = "Start", ids: str = "", api: str = ""):
        self.kind, self.api, ids = kind, api or kind, ids or kind
        with gr.Row():
            self.start = gr.Button(start, variant="primary", elem_id=f"{ids}-start",
                                   min_width=min_width and max(min_width, 20 + 10 * len(start)))
            self.extra = between() if between else None
            self.stop = gr.Button("Stop", variant="stop", elem_id=f"{ids}-stop", min_width=min_width)
            self.resume = gr.Button("Resume", elem_id=f"{ids}-resume", min_width=min_width) if resume else None
            self.delete = gr.Button("Delete", elem_id=f"{ids}-delete", min_width=min_width) if delete else None
        if link:
            links.copy_button(kind)

    def wire(self, owner, watch, overlay, outs, view, stop, resume=None, resume_inputs=()) -> None:
        """Stop(owner, run, overlay), Resume(owner, run, *resume_inputs, overlay) -> outs; Delete removes
        the shown run (one's own, ended) and redraws."""
        a = self.api
        self.stop.click(stop, [owner, watch, overlay], outs, api_name=f"{a}_stop", show_progress="minimal")
        if self.resume is not None:
            self.resume.click(resume, [owner, watch, *resume_inputs, overlay], outs, api_name=f"{a}_resume",
                              show_progress="minimal")
        if self.delete is not None:
            self.delete.click(delete, [owner, watch, gr.State(self.kind)], [watch, overlay], api_name=f"{a}_delete",
                              show_progress="minimal").then(view, [watch, overlay, owner], outs, api_name=False)


def runs_of(kind: str) -> list[str]:
    """Run names a tab of `kind` lists (fine-tune: comparisons too), newest first."""
    kinds = listed_in(kind)
    return [r.name for r in list_runs(manager().root) if valid(r.name) and r.kind in kinds]


def _mine(st: dict, owner) -> bool:
    who = st.get("owner")
    return who is not None and (who == owner or (who == jobs.TEACHER and is_teacher(owner)))


def my_last_run(owner: str, kind: str) -> dict | None:
    """The status of what a reloaded page shows again: this browser's newest queued or running job,
    else its newest ended run."""
    kinds = listed_in(kind)
    rows = [st for st in manager().list() if st.get("kind") in kinds and _mine(st, owner)]
    return next((st for st in rows if is_live(st)), rows[0] if rows else None)


def my_live_run(owner: str, kind: str) -> str | None:
    """The newest queued or running job of this browser."""
    st = my_last_run(owner, kind)
    return st["name"] if is_live(st) else None


def reopen(kind: str):
    """A training tab's page-load handler (owner, current, views) -> (run picker, overlay picker): this
    browser's live run, else the run the page showed before (with what it overlaid, from `views`), else
    this browser's last run, finished too; for a comparison its other runs as the overlay. A run
    picked while the page loaded stays, unless one of this browser's runs is live."""
    def on_open(owner, current, views=None):
        choices, st = runs_of(kind), my_last_run(owner, kind)
        kept, kept_overlay = remembered(views, kind)
        if current in choices and not is_live(st):
            # no value: a slow page-load must not clear a run picked meanwhile
            return gr.update(choices=choices), gr.update(choices=choices)
        shown_before = kept in choices and not is_live(st)  # no live run of this browser comes first
        if kept is not None and (shown_before or (st is not None and kept == st["name"])):
            return (gr.update(choices=choices, value=kept),
                    gr.update(choices=choices, value=[n for n in kept_overlay if n in choices]))
        if st is None:
            return gr.update(choices=choices), gr.update(choices=choices)
        group = [n for n in st.get("group") or [] if valid(n) and (run_dir(n).exists() or is_live(status(n)))]
        group = group if st["name"] in group else [st["name"]]
        choices += [n for n in group if n not in choices]  # a queued run has no folder yet
        # updates, not Dropdowns: a list value for the overlay is checked only against a multiselect one
        return gr.update(choices=choices, value=group[0]), gr.update(choices=choices, value=group[1:])
    return on_open


def valid(name) -> bool:
    return jobs.valid_name(name)


def shown_runs(name, overlay) -> list[str]:
    """The watched run, then the overlaid ones: valid names only (an API caller may type anything)."""
    return list(dict.fromkeys(n for n in [name, *(overlay or [])] if valid(n)))


def stage_upload(src: Path) -> Path:
    """A private copy of an uploaded file under the runs folder: Gradio's temporary copy may be
    cleaned up while a queued run still waits to read it."""
    staged = manager().root / jobs.UPLOADS / f"{uuid.uuid4().hex}{src.suffix.lower()}"
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, staged)
    return staged


def visitor(owner) -> str:
    """The owner a web call acts as: a browser's id, or jobs.TEACHER (any run, no per-visitor caps)
    for the teacher's page only."""
    if is_teacher(owner):
        return jobs.TEACHER
    if not identity.valid_id(owner, manager().root):  # ids are the server's own: a made-up one owns nothing
        raise ValueError("this page has no browser id yet (or an old teacher link): reload it, then try again")
    return owner


@contextlib.contextmanager
def upload_named(upload: Path, *copies: Path):
    """A ValueError about an uploaded file (or its staged copies) names the file as the visitor knows
    it, not where the server keeps it."""
    try:
        yield
    except ValueError as e:
        msg = str(e)
        for p in (*copies, upload):
            msg = msg.replace(str(p), upload.name)
        raise ValueError(msg) from None


def discard_staged(spec) -> None:
    """A refused start leaves no staged upload behind."""
    for v in spec.to_dict().values():
        if isinstance(v, str) and Path(v).parent == manager().root / jobs.UPLOADS:
            Path(v).unlink(missing_ok=True)


def launch(owner: str, name: str, spec, group: list[str] | None = None) -> None:
    """Start (or queue) a form's job (one of `group`, the runs started together); say it when the
    start removed old runs to free disk."""
    try:
        job = manager().start(name, spec, owner=visitor(owner), group=group)
    except BaseException:
        discard_staged(spec)
        raise
    if job.notice:
        common.warn(job.notice)


def delete(owner: str, name: str | None, kind: str):
    """The Delete button: one's own ended run, for good; the run pickers drop it."""
    if not valid(name):
        raise user_error("No run selected: pick one of your runs under 'Run'.")
    try:
        manager().delete(name, visitor(owner))
    except (ValueError, PermissionError, OSError) as e:
        raise owner_error(e) from None
    common.info(f"Run {name} is deleted.")
    return gr.Dropdown(choices=runs_of(kind), value=None), gr.Dropdown(choices=runs_of(kind), value=[])


def default_name(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%m%d-%H%M%S')}"


def status(name: str | None) -> dict | None:
    if not name:
        return None
    try:
        return manager().status(name, log_lines=30)
    except ValueError:
        return None


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def status_html(st: dict | None, owner: str | None, compact: bool = False) -> str:
    """A status line with a progress bar: state, step, ETA, whose run it is. `compact` (one of several
    runs): a thin bar, and neither whose run it is nor a message unless it failed."""
    if not st:
        return "<div class='bl-status'>No run selected. Start one, or pick a run to watch.</div>"
    state, step, total = st.get("state", "unknown"), st.get("step") or 0, st.get("total_steps")
    color = {"running": "#2563eb", "finished": "#16a34a", "failed": "#dc2626", "stopped": "#ca8a04",
             "queued": "#6b7280", "starting": "#6b7280", "stopping": "#ca8a04"}.get(state, "#6b7280")
    pct = 100 * float(st.get("progress") or 0)
    parts = [f"<b>{html.escape(st['name'])}</b>", f"<span style='color:{color};font-weight:600'>{state}</span>"]
    if state == "queued":
        parts.append(f"number {st.get('queue_position')} in the queue (one run trains at a time here)")
    elif total:
        parts.append(f"step {step:,} of {total:,}")
    if state == "running" and st.get("eta_s") is not None:
        parts.append(f"about {_duration(st['eta_s'])} left")
    if st.get("elapsed"):
        parts.append(f"ran {_duration(st['elapsed'])}")
    if st.get("owner") is not None and not compact:
        parts.append("started in this browser" if _mine(st, owner) else "a student's run: as the teacher you may "
                     "stop or delete it" if is_teacher(owner) else "another visitor's run: you can watch, not stop it")
    msg = f"<div style='color:#4b5563;margin-top:4px'>{html.escape(st['message'])}</div>" \
        if st.get("message") and (state == "failed" or not compact) else ""
    h, gap = (4, 2) if compact else (8, 6)
    bar = (f"<div style='background:#e5e7eb;border-radius:4px;height:{h}px;margin-top:{gap}px'>"
           f"<div style='background:{color};width:{pct:.1f}%;height:{h}px;border-radius:4px'></div></div>")
    return f"<div class='bl-status'>{' · '.join(parts)}{bar}{msg}</div>"


def runs_status_html(shown: list[dict | None], owner: str | None) -> str:
    """The status of the shown runs: with several (a comparison, an overlay), first how many have
    finished, then a line for each. They are done only when every one of them has ended."""
    sts = [st for st in shown if st]
    if len(sts) < 2:
        return status_html(sts[0] if sts else None, owner)
    done, live = sum(st.get("state") == "finished" for st in sts), sum(is_live(st) for st in sts)
    other = len(sts) - done - live
    head = [f"<b>{done} of {len(sts)} runs finished</b>"] + ([f"{other} stopped or failed"] if other else []) + (
        [f"{live} still queued or training: this page follows them until they end"] if live else []) + (
        ["all started in this browser"] if all(_mine(st, owner) for st in sts) else [])
    return f"<div class='bl-status'>{' · '.join(head)}</div>" + "".join(status_html(st, owner, True) for st in sts)


def owner_error(e: Exception) -> gr.Error:
    if isinstance(e, PermissionError) and "read-only" in str(e):
        return user_error("This run was not started from the web page (e.g. from the command line), so it "
                          "is read-only here: you can watch it and load its model. Start your own run.")
    if isinstance(e, PermissionError):
        return user_error("This run was started in another browser: you can watch it, but only its owner "
                          "can stop, resume or delete it. Start your own run under a new name.")
    return user_error(e)


def is_live(st: dict | None) -> bool:
    return bool(st) and st.get("state") in LIVE


def run_dir(name: str) -> Path:
    return manager().root / jobs.check_name(name)


def finished_model(name: str) -> Path | None:
    d = run_dir(name) / "model"
    return d if (d / "config.json").exists() else None
