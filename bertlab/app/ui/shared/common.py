"""What every tab shares. A visitor's mistake leaves through `user_error`: a message on the page and
nothing in the server log (Gradio logs a traceback for every other exception: those are bugs)."""
from __future__ import annotations

import contextlib
import functools
import html
import json
import math
import re
import time

import gradio as gr
from gradio.exceptions import ComponentProcessingError
from pydantic import ValidationError

from ...limits import hide_paths, limits
from . import models

SEG_TINT = {0: "#dbeafe", 1: "#ede9fe"}  # segment A blue, B violet
SPECIAL_STYLE = "background:#4b5563;color:#fff;border-color:#374151"
UNK_STYLE = "background:#fde2e2;color:#b91c1c;border-color:#d62728;font-weight:600"
CHIP = ("display:inline-block;padding:2px 6px;margin:0;border:1px solid #94a3b8;border-radius:6px;"
        "font-family:ui-monospace,Menlo,monospace;font-size:14px;line-height:1.5;color:#111")
# Percentage axes: up to 3 decimals, trailing zeros dropped ("4.2%", "5%"). ".0%" wrote "5% 5% 4%" for
# ticks 0.2 points apart, so a race's or a run's gap could not be read.
PERCENT_AXIS = ".3~%"


def si(v: float) -> str:
    """A count as a tick says it: 2M, 500k, 1.5G."""
    for unit, f in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= f:
            return f"{v / f:g}{unit}"
    return f"{v:g}"


_PLACES = {"top center": (0.0, 0.05), "bottom center": (0.0, -0.05), "middle right": (0.07, 0.0),
           "middle left": (-0.07, 0.0)}  # where a label's middle sits, in spans of the axes


def away_from_neighbours(points: list[tuple[float, float]]) -> list[str]:
    """A text position for each point's label, as far as it can be from the other points and the labels
    placed before it (each axis scaled to its span, as drawn): close points' labels no longer cover each
    other (BERT-base's "base" hid RoBERTa-base's and ELECTRA-base's; the S3 star's label hid under S4's)."""
    if len(points) < 2:
        return ["top center"] * len(points)
    xs, ys = zip(*points)
    sx, sy = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    pts = [(x / sx, y / sy) for x, y in points]
    placed: list[tuple[float, float]] = []
    out = []
    for i, (x, y) in enumerate(pts):
        others = [q for k, q in enumerate(pts) if k != i] + placed

        def room(place: str) -> float:
            lx, ly = x + _PLACES[place][0], y + _PLACES[place][1]
            return min(((lx - qx) / 1.4) ** 2 + (ly - qy) ** 2 for qx, qy in others)  # labels are wide
        best = max(_PLACES, key=room)  # ties: the order of _PLACES (above first)
        out.append(best)
        placed.append((x + _PLACES[best][0], y + _PLACES[best][1]))
    return out


def log_ticks(lo: float, hi: float, fmt=lambda v: f"{v:g}") -> dict:
    """tickvals and ticktext for a log axis over [lo, hi], every label in full: plotly's own labels its
    minor ticks with a bare digit (the learning curve's 50 read "5", 200 read "2"). 1 to 9 of a decade
    on a short axis, 1, 2 and 5 on a longer one, decades only on a long one."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (lo > 0 and math.isfinite(hi)):
        return {}
    span = math.log10(hi / lo)
    marks = range(1, 10) if span < 1.2 else (1, 2, 5) if span < 4 else (1,)
    vals = [float(f"{m * 10.0 ** k:.6g}") for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for m in marks]
    vals = [v for v in vals if lo * 0.999 <= v <= hi * 1.001]
    return {"tickvals": vals, "ticktext": [fmt(v) for v in vals]} if len(vals) >= 2 else {}
MAX_INPUT_CHARS = 200_000  # beyond this, tokenizing alone would stall the shared CPU
MODEL_ERRORS = (ValueError, OSError)  # what models.get raises for a choice that cannot be loaded


def user_error(e: Exception | str) -> gr.Error:
    """The visitor's mistake as one clear line on the page, with no traceback in the server log;
    where the web may not name the server's folders, the message names none either."""
    msg = str(e).strip() or type(e).__name__
    return gr.Error(shown(msg if limits().allow_local_paths else hide_paths(msg)), print_exception=False)


def shown(msg: str) -> str:
    """A message as the page may show it: Gradio's toasts render HTML, and a message can quote what a
    stranger typed or put in a link (`?model=<img src=/pixel>` made every reader's browser fetch it)."""
    return html.escape(str(msg), quote=False)


def said(e: gr.Error) -> str:
    """The plain text of a user_error (its message is escaped for the page), to quote it elsewhere."""
    return html.unescape(str(e.message))


def warn(msg: str) -> None:
    gr.Warning(shown(msg))


def info(msg: str) -> None:
    gr.Info(shown(msg))


@contextlib.contextmanager
def mistakes(*kinds: type[Exception], prefix: str = ""):
    """Exceptions of `kinds` (ValueError, TypeError by default) raised inside leave as user_error."""
    try:
        yield
    except kinds or (ValueError, TypeError) as e:
        raise user_error(prefix + str(e) if prefix else e) from None


def whole_number(x, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """int(x), from lo to hi when given, or a user_error naming the field."""
    try:
        n = int(x)
    except (TypeError, ValueError, OverflowError):
        raise user_error(f"The {what} must be a whole number, got {x!r}.") from None
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        if hi is None or hi >= 2**31:  # a bound no one types ("from 0 to 4611686018427387904") goes unsaid
            raise user_error(f"The {what} must be {lo:,} or more, got {n:,}." if n < lo else
                             f"The {what} is too large: {n:,}.")
        if lo is None:
            raise user_error(f"The {what} must be at most {hi:,}, got {n:,}.")
        raise user_error(f"The {what} must be from {lo:,} to {hi:,}, got {n:,}.")
    return n


def config_of(choice):
    """The picked model's config, or None when it cannot load."""
    with contextlib.suppress(*MODEL_ERRORS):
        return models.get(choice)[0].config


def load_model(choice, failed: str = ""):
    """(model, tokenizer) for a picker value, or a user_error saying why it cannot load."""
    with mistakes(*MODEL_ERRORS, prefix=failed):
        return models.get(choice)


def quiet_gradio_checks(demo: gr.Blocks) -> gr.Blocks:
    """Gradio's own checks of the inputs (a choice not offered, a number out of range, text in a
    number box) are the visitor's mistakes too: say them through user_error, without a traceback."""
    preprocess = demo.preprocess_data

    async def preprocess_data(block_fn, inputs, *args, **kwargs):
        try:
            return await preprocess(block_fn, inputs, *args, **kwargs)
        except gr.Error as e:
            raise user_error(_name_the_field(e.message, block_fn.inputs, inputs)) from None
        except (ValidationError, ComponentProcessingError) as e:  # text in a number box, a path for an upload
            if isinstance(e, ComponentProcessingError) and not isinstance(e.__cause__, (TypeError, ValueError)):
                raise
            i = re.search(r"at index (\d+)", str(e))  # Gradio's own index into block_fn.inputs
            what = i and getattr(block_fn.inputs[int(i.group(1))], "label", None) or "An input"
            raise user_error(f"{what}: not a value this field takes (files go through handle_file).") from None
        except ValueError as e:  # last: the others are ValueErrors too
            # an API caller sent too few values: Gradio logged a traceback and said nothing
            if "didn't receive enough input values" not in str(e):
                raise
            takes = [c for c in block_fn.inputs if not getattr(c, "stateful", False)]
            names = ", ".join(str(getattr(c, "label", None) or type(c).__name__) for c in takes)
            raise user_error(f"This endpoint takes {len(takes)} values ({names}); got {len(inputs or [])}.") from None
    demo.preprocess_data = preprocess_data
    return demo


def _name_the_field(message: str, components: list, values: list) -> str:
    """Gradio's range check says "Value -5 is less than minimum value 0." without saying of which
    box: put the label of the number box or slider whose value is out of its range in front."""
    for comp, value in zip(components, values):
        lo, hi = getattr(comp, "minimum", None), getattr(comp, "maximum", None)
        if isinstance(value, (int, float)) and ((lo is not None and value < lo) or (hi is not None and value > hi)):
            return f"{getattr(comp, 'label', None) or 'A number'}: {message}"
    return message


def masking_rate(rate) -> float:
    """The masking rate a form sends, in (0, 1], or a user_error: the Masking lab and its score share it."""
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise user_error(f"The masking rate must be a number between 0 and 1, got {rate!r}.") from None
    if not 0.0 < r <= 1.0:
        raise user_error(f"The masking rate must be above 0 and at most 1, got {rate!r}.")
    return r


def check_text(text, what: str = "text") -> str:
    """The text, or a user_error when it is not a non-empty string (Gradio can send None)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        raise user_error(f"The {what} is empty: type a sentence.")
    if not isinstance(text, str):
        raise user_error(f"The {what} must be text, got {type(text).__name__}.")
    if len(text) > MAX_INPUT_CHARS:
        raise user_error(f"The {what} has {len(text):,} characters; paste at most {MAX_INPUT_CHARS:,} "
                         f"(the model reads only its first few hundred pieces anyway).")
    return text


def check_pair(text, pair) -> tuple[str, str | None]:
    """(text, pair) checked; an empty or whitespace pair counts as no pair."""
    text = check_text(text)
    return text, (check_text(pair, "second sentence") if isinstance(pair, str) and pair.strip() else None)


def tokenized(choice, text, pair=None):
    """(tokenizer, encoding, truncation notice or "") of the checked text for the picked model."""
    _, tok = load_model(choice)
    text, pair = check_pair(text, pair)
    with mistakes():
        enc = tok.encode(text, pair=pair)
    note = (f"The text was cut to {len(enc)} tokens: this model reads at most "
            f"{tok.model_max_length} pieces (including [CLS]/[SEP]).") if enc.truncated else ""
    return tok, enc, note


def notice_html(note: str) -> str:
    if not note:
        return ""
    return ('<div style="padding:6px 10px;margin:4px 0 8px;border-left:4px solid #f59e0b;'
            f'background:#fffbeb;color:#78350f;border-radius:4px">⚠ {html.escape(note)}</div>')


def word_groups(tokens: list[str], special: list[int], word_ids: list | None = None) -> list[list[int]]:
    """Positions grouped into words: a piece joins the word before it when the tokenizer says it is the
    same word (word_ids: any family's tokenizer), else when it starts with '##'; specials stand alone."""
    groups: list[list[int]] = []
    for i, t in enumerate(tokens):
        same = (word_ids[i] is not None and i > 0 and word_ids[i] == word_ids[i - 1]) if word_ids is not None \
            else t.startswith("##")
        if not special[i] and same and groups and not special[groups[-1][-1]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def legend_html(items: list[tuple[str, str]], extra: str = "") -> str:
    cells = "".join(f'<span style="{CHIP};{style};margin-right:6px;font-size:12px">{html.escape(label)}</span>'
                    for label, style in items)
    return f'<div style="margin:6px 0 10px">{cells}{extra}</div>'


def chip_style(segment: int, special: bool, unk: bool) -> str:
    """A token chip: [UNK] red, [CLS]/[SEP] dark, other pieces tinted by their segment."""
    tint = f"background:{SEG_TINT.get(segment, '#f3f4f6')}"
    return f"{CHIP};{UNK_STYLE if unk else SPECIAL_STYLE if special else tint}"


@contextlib.contextmanager
def form(explain: str):
    """The tab's inputs (built inside the `with`) on the left, its explanation on the right. Yields
    that right-hand column, where `examples` puts a tab's examples: one click away, yet never
    between the controls and the results."""
    with gr.Row(elem_classes="bl-form"):
        with gr.Column(scale=2, elem_classes="bl-controls"):
            with gr.Column(scale=1, elem_classes="bl-side", render=False) as side:
                gr.Markdown(explain, elem_classes="bl-explain")
            yield side
        side.render()


def examples(side, rows: list, inputs: list, **kw) -> gr.Examples:
    """A tab's examples in its form's side column (from `form`): clicking one fills the inputs and runs."""
    with side:
        return gr.Examples(rows, inputs=inputs, label=kw.pop("label", "Examples: click one to run it"), **kw)


def plot_beside_json(plot_label: str, json_label: str, note: str = "") -> tuple[gr.Plot, gr.JSON]:
    """A chart (with `note` under it) beside its numbers as folded JSON."""
    with gr.Row():
        with gr.Column(scale=3):
            plot = gr.Plot(label=plot_label)
            if note:
                gr.Markdown(note)
        with gr.Column(scale=2):
            raw = gr.JSON(label=json_label, open=False)
    return plot, raw


def wire(fn, inputs, outputs, button, api_name: str, triggers: list, examples=None, *, auto=None, inputs_kwargs=None,
         **kw) -> list:
    """Run fn from the button (the API endpoint `api_name`), on each trigger (with `kw`), after an
    example is picked, and when the page opens (so a tab shows a result before the first click).
    `auto`, if given, runs instead of fn on those unasked runs (e.g. a section that re-runs on another
    section's inputs and leaves their mistakes to that section's own message). `inputs_kwargs`: inputs
    passed by name (Gradio's). Returns the events."""
    auto = auto or fn
    scroll_to_results(button)
    key = api_name  # what the student asks for supersedes the tab's opening run: see _opening
    by_name = {"inputs_kwargs": inputs_kwargs} if inputs_kwargs else {}
    events = [button.click(_asked(fn, key), inputs, outputs, api_name=api_name, **by_name),
              gr.on(triggers, _asked(auto, key), inputs, outputs, api_name=False, **by_name, **kw)]
    if examples is not None:
        events.append(examples.load_input_event.then(_asked(auto, key), inputs, outputs, api_name=False, **by_name))
    events.append(on_open(_opening(auto, key, len(outputs)), inputs, outputs, **by_name))
    clear_on_failure(events, outputs, key)
    return events


def clear_on_failure(events: list, outputs: list, key: str | None = None) -> None:
    """When one of `events` fails (a bad input: its one message), empty `outputs`: the results of the
    previous input must not stay on screen as if they answered this one. With the view's `key`: unless
    the student asked again after the failed run began (a slider's Enter fires two events; the second's
    clearing wiped the result of the recipe clicked after it)."""
    n = len(outputs)

    def empty():
        sv = _session_view(key) if key else None
        if sv is not None and _ASKED.get(sv, 0.0) > _FAILED.get(sv, 0.0):
            return [gr.skip()] * n if n > 1 else gr.skip()
        return None if n == 1 else (None,) * n
    for event in events:
        event.failure(empty, None, outputs, api_name=False, show_progress="hidden")


def scroll_to_results(button: gr.Button) -> None:
    """A click on `button` brings what is under it into view when the button sits low on the screen: at
    1280x900 Attention's heatmap started at y = 870 (only its title showed), and on a phone Fill-mask's
    and Next sentence's results lay below the fold. In the browser, no server round trip."""
    if not button.elem_id:
        button.elem_id = f"bl-go-{button._id}"
    button.click(None, None, None, api_name=False, js=f"""() => {{
        const b = document.getElementById({json.dumps(button.elem_id)});
        if (!b) return;
        const r = b.getBoundingClientRect();
        if (r.bottom > window.innerHeight * 0.5) window.scrollBy({{top: r.top - 8, behavior: "smooth"}});
    }}""")


_ASKED: dict[tuple, float] = {}  # (browser session, view) -> when the student last asked it to run
_FAILED: dict[tuple, float] = {}  # (browser session, view) -> when the last asked run that failed began


def _session_view(key: str) -> tuple:
    from gradio.context import LocalContext
    return getattr(LocalContext.request.get(None), "session_hash", None), key


def _asked(fn, key: str):
    """fn, noting when this browser asked the view `key` for a result."""
    @functools.wraps(fn)  # the API keeps fn's own parameters
    def run(*args, **kwargs):
        if len(_ASKED) > 5000:  # a bound: old sessions' entries only matter for a few seconds
            _ASKED.clear()
        sv = _session_view(key)
        _ASKED[sv] = began = time.monotonic()
        try:
            return fn(*args, **kwargs)
        except Exception:
            _FAILED[sv] = began  # clear_on_failure empties the view unless a newer run began since
            _FAILED.pop(next(iter(_FAILED))) if len(_FAILED) > 5000 else None
            raise
    return run


def _opening(fn, key: str, n_outputs: int):
    """fn for the run a tab makes as it opens, whose result is dropped when the student asked for one
    after it began: a slow first run (the next-sentence head's accuracy is measured once per model)
    that came in late drew the defaults' result over theirs. (Gradio's `cancels` lost the student's
    own result now and then: a cancelled run's stream is the session's.)"""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        began = time.monotonic()
        try:
            out = fn(*args, **kwargs)
        except Exception:
            _FAILED[_session_view(key)] = time.monotonic()  # its failure empties the view (clear_on_failure)
            raise
        if _ASKED.get(_session_view(key), 0.0) > began:
            return [gr.skip()] * n_outputs if n_outputs > 1 else gr.skip()
        return out
    return run


def _top_tab() -> gr.Tab | None:
    """The outermost gr.Tab being built around this point (None outside any tab)."""
    from gradio.context import get_render_context
    block, top = get_render_context(), None
    while block is not None:
        if isinstance(block, gr.Tab):
            top = block
        block = getattr(block, "parent", None)
    return top


def on_open(fn, inputs, outputs, after=None, **kw):
    """Run fn (no API endpoint) when the student opens the tab it is built in, or when the page opens
    (after the page-load event `after`, if given) for the page's first tab and anything outside tabs.
    Filling every tab as the page opened sent some sixty results into tabs not yet drawn, and the
    browser walks its whole page for each: on a 2-core laptop the page froze ~25 s before a tab could
    be clicked. Returns the event."""
    kw = {"api_name": False, "show_progress": "hidden", **kw}
    tab = _top_tab()
    if tab is not None and not _is_first(tab):
        return tab.select(fn, inputs, outputs, **kw)
    if after is not None:
        return after.then(fn, inputs, outputs, **kw)
    return gr.context.Context.root_block.load(fn, inputs, outputs, **kw)


def _is_first(tab: gr.Tab) -> bool:
    siblings = [c for c in getattr(tab.parent, "children", []) if isinstance(c, gr.Tab)]
    return bool(siblings) and siblings[0] is tab


def redraw_open_tab_only(tabs: gr.Tabs, model: gr.Textbox) -> None:
    """Call once, after every tab is built. A new model redraws the open tab; any other tab redraws
    when it is next opened, not at once (every tab redrawing froze a 2-core laptop's page as the
    page-open runs did, see on_open). Each tab's listeners of `model`.change are moved onto a hidden
    copy of the model that only the open tab's copy follows: in the browser, no server round trip."""
    from gradio.context import get_blocks_context
    top = [t for t in tabs.children if isinstance(t, gr.Tab)]
    owner = {}  # block id -> the top tab it is drawn in
    for t in top[1:]:  # the first tab is open as the page opens: it follows the model directly
        stack = [t]
        while stack:
            b = stack.pop()
            owner[b._id] = t
            stack.extend(getattr(b, "children", []))
    open_tab = gr.Textbox(str(top[0].id), visible="hidden", label="Open tab", elem_id="bl-open-tab")
    copies = {t._id: gr.Textbox(model.value, visible="hidden", label=f"Model of {t.id}") for t in top[1:]}
    for f in get_blocks_context().fns.values():
        tabs_of = {owner.get(c._id) for c in f.outputs}
        if (model._id, "change") in f.targets and len(tabs_of) == 1 and None not in tabs_of:
            copy = copies[tabs_of.pop()._id]
            f.targets = [(copy._id, "change") if t == (model._id, "change") else t for t in f.targets]
    keys = [json.dumps(str(t.id)) for t in top[1:]]
    model.change(None, [model, open_tab, *copies.values()], list(copies.values()), api_name=False, js=f"""
        (m, open, ...had) => [{", ".join(keys)}].map((k, i) => k === open ? m : had[i])""")
    for t in top:
        t.select(None, None, open_tab, api_name=False, js=f"() => {json.dumps(str(t.id))}")
        if t._id in copies:  # opening a tab catches its copy up; a change runs the tab's listeners
            t.select(None, model, copies[t._id], api_name=False, js="(m) => m")
