"""Deep links: the page address says which tab is open and what its inputs hold, so a teacher can
share exactly what is on the projector.

    ?tab=attention&text=the+cat+sat+.&layer=2&head=3&model=...
    ?lesson=4                    (the Lessons tab, at lesson 4)

`PARAMS` (tabs.py, one record per tab) is the contract: each tab's key and the names of its inputs. A tab registers its
inputs in its build() with one call, `links.register("attention", text=text_box, layer=slider, ...)`,
and puts a "copy link" button where it wants one with `links.copy_button("attention")`; app.py calls
`links.install(...)` once. Opening a link then fills the tab's inputs, runs their .change listeners
once (a browser would not fire them for a tab it had not drawn) and selects the tab, whose opening
draws its view from the filled inputs; the page's own opening events (the model, the lesson) see the
link's values instead of the defaults. A training tab is only filled, never started.

Layers and heads are counted as the UI counts them: attention's layer and head from 1; the
embeddings layer from 0 (0 = the embedding layer's output); probing's layer as its slider (-1 = all).
A link comes from strangers: values are checked against the component they fill (lengths bounded,
numbers clamped to the slider's range, a choice must be one offered), unknown names are ignored,
and what is wrong is said in one warning, never a traceback.
"""
from __future__ import annotations

import inspect
import json
import math
import time
import urllib.parse
from dataclasses import dataclass, field

import gradio as gr
from gradio.context import LocalContext

from . import common, models
from .tabs import KEYS, PARAMS  # noqa: F401  (the tabs' records: keys and link parameters)

ARCH_FIELDS = ("layers", "hidden", "heads", "ffn", "vocab", "positions", "embedding", "groups")  # its boxes, in order
TRAINING = {"pretrain", "finetune", "distill", "race"}  # filled from a link, never started from one
MAX_TEXT = 2000  # characters of one value from a link (browsers and servers refuse much longer addresses)
MAX_PARAMS = 40


def url(tab: str, **params) -> str:
    """The relative link ("?tab=...&...") to `tab` with `params`; for "Try it" buttons and tests.
    Booleans become 1/0; None is left out. Raises ValueError for a name the tab does not take."""
    if tab not in PARAMS:
        raise ValueError(f"No tab {tab!r}: one of {', '.join(PARAMS)}.")
    bad = set(params) - set(PARAMS[tab]) - {"model"}
    if bad:
        raise ValueError(f"The {tab} tab takes {', '.join(PARAMS[tab])} (and model), not {', '.join(sorted(bad))}.")
    q = {"tab": tab} | {k: int(v) if isinstance(v, bool) else v for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)


def _links(root=None) -> dict:
    """This app's registrations, kept on the Blocks being built (so two apps never mix)."""
    root = root or gr.context.Context.root_block
    if root is None:
        raise RuntimeError("links.register and links.copy_button belong inside a tab's build().")
    return root.__dict__.setdefault("_bl_links", {})


def register(tab: str, **inputs) -> None:
    """Let a link fill these components: name=component, with names from PARAMS[tab]."""
    if tab not in PARAMS:
        raise ValueError(f"No tab {tab!r} in links.PARAMS.")
    bad = set(inputs) - set(PARAMS[tab])
    if bad:
        raise ValueError(f"Add {', '.join(sorted(bad))} to links.PARAMS[{tab!r}] first: it is the links' contract.")
    _links().setdefault(tab, {}).setdefault("inputs", {}).update(inputs)


def copy_button(tab: str) -> None:
    """A "copy link" button with a small box that shows the link (the clipboard is refused on plain
    http and on some phones). Wired by install(), once the tab's inputs are registered."""
    with gr.Row(elem_classes="bl-link", equal_height=True):
        btn = gr.Button("Copy link", size="sm", scale=0, min_width=120, elem_classes="bl-copy-link")
        box = gr.Textbox(show_label=False, container=False, interactive=False, max_lines=1, scale=1, min_width=160,
                         placeholder="a link to this view, with its inputs", buttons=["copy"],
                         elem_classes="bl-link-url")
    _links().setdefault(tab, {})["copy"] = (btn, box)


# ---- reading a link ---------------------------------------------------------------------------

@dataclass
class Link:
    tab: str | None = None
    values: dict = field(default_factory=dict)  # name -> checked value
    model: str | None = None
    problems: list = field(default_factory=list)  # one short sentence each

    def message(self) -> str:
        return "This link had a problem: " + " ".join(self.problems) if self.problems else ""


def _choices(comp) -> list[tuple[str, object]]:
    return [c if isinstance(c, (tuple, list)) else (str(c), c) for c in (getattr(comp, "choices", None) or [])]


def check_value(comp, raw: str, name: str):
    """(value for comp, problem or ""): raw text from the address as this component's kind of value."""
    if isinstance(comp, gr.Checkbox):
        v = raw.strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True, ""
        if v in ("0", "false", "no", "off", ""):
            return False, ""
        return None, f"{name} must be 1 or 0, not {raw[:20]!r}."
    if isinstance(comp, (gr.Slider, gr.Number)):
        try:
            v = float(raw)
        except ValueError:
            return None, f"{name} must be a number, not {raw[:20]!r}."
        if not math.isfinite(v):
            return None, f"{name} must be a finite number."
        lo, hi = getattr(comp, "minimum", None), getattr(comp, "maximum", None)
        note = ""
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            v = min(max(v, -math.inf if lo is None else lo), math.inf if hi is None else hi)
            note = f"{name} {raw[:20]} is outside {_fmt(lo)} to {_fmt(hi)}: {_fmt(v)} is used."
        step = getattr(comp, "step", None) if isinstance(comp, gr.Slider) else None
        if step and lo is not None:
            v = min(lo + round((v - lo) / step) * step, hi if hi is not None else math.inf)
        whole = (isinstance(comp, gr.Number) and comp.precision == 0) or \
                (isinstance(comp, gr.Slider) and float(step or 0).is_integer() and float(lo or 0).is_integer())
        return (int(round(v)) if whole else round(v, 6)), note
    if isinstance(comp, gr.CheckboxGroup):  # comma-separated choices, each one offered
        known = {k.lower(): value for label, value in _choices(comp) for k in (str(value), label)}
        parts = [p.strip() for p in raw.split(",") if p.strip()][:len(known)]
        bad = [p for p in parts if p.lower() not in known]
        if bad or not parts:
            offered = ", ".join(str(v) for _, v in _choices(comp)[:12])
            return None, f"{name} {raw[:40]!r} must be choices from: {offered}."
        return list(dict.fromkeys(known[p.lower()] for p in parts)), ""
    if isinstance(comp, (gr.Dropdown, gr.Radio)):
        want = raw.strip().lower()
        for label, value in _choices(comp):
            if raw in (str(value), label) or want in (str(value).lower(), label.lower()):
                return value, ""
        starts = [value for label, value in _choices(comp)  # "alb" for the choice "ALBERT (factorised ...)"
                  if len(want) >= 2 and (label.lower().startswith(want) or str(value).lower().startswith(want))]
        if len(starts) == 1:
            return starts[0], ""
        offered = ", ".join(str(v) for _, v in _choices(comp)[:8])
        return None, f"{name} {raw[:30]!r} is not one of the choices ({offered})."
    if isinstance(comp, gr.Textbox):
        limit = min(MAX_TEXT, getattr(comp, "max_length", None) or MAX_TEXT)
        if len(raw) > limit:
            return None, f"{name} has {len(raw):,} characters; a link carries at most {limit:,}."
        return "".join(ch for ch in raw if ch in "\n\t" or ch >= " "), ""
    return None, f"{name} cannot be set from a link."


def _fmt(x) -> str:
    return "no limit" if x is None else f"{x:g}"


def parse(query, registered: dict, tabs=None) -> Link:
    """The link in `query` (a mapping of the address's parameters) checked against the registered
    components, {tab: {"inputs": {name: component}}}, and the page's tab keys (`tabs`, by default
    every key of PARAMS). Pure: no model is loaded."""
    q = {str(k): str(v) for k, v in list(dict(query).items())[:MAX_PARAMS]}
    tabs = [t for t in PARAMS if t in (PARAMS if tabs is None else tabs)]
    link = Link()
    tab = q.get("tab", "").strip().lower()[:40] or ("lessons" if "lesson" in q else "")
    if tab in tabs:
        link.tab = tab
    elif tab:
        link.problems.append(f"There is no tab {tab!r}; the tabs are {', '.join(tabs)}.")
    if link.tab:
        for name, comp in registered.get(link.tab, {}).get("inputs", {}).items():
            if name in q:
                value, problem = check_value(comp, q[name], name)
                if problem:
                    link.problems.append(problem)
                if value is not None:
                    link.values[name] = value
    if "model" in q:
        m = q["model"].strip()
        if m and len(m) <= 200 and all(ch >= " " for ch in m):
            link.model = m
        elif m:
            link.problems.append("model is not a model name.")
    return link


def _request_link(registered: dict, tabs) -> Link | None:
    req = LocalContext.request.get(None)
    params = getattr(req, "query_params", None)
    if not params:
        return None
    link = parse(params, registered, tabs)
    return link if (link.tab or link.model) else None


# ---- wiring -----------------------------------------------------------------------------------

def install(demo: gr.Blocks, tabs: gr.Tabs, keys: list[str], picker: gr.Dropdown, model: gr.Textbox) -> None:
    """Call once, after every tab is built: opening a link fills its tab's inputs, runs their .change
    listeners, then selects the tab (whose opening draws the view from the filled inputs), with one
    warning for what was wrong; every event that runs when the page opens sees the link's model and
    values; each copy button builds the link from its tab's current values."""
    registered = _links(demo)
    comps = [(tab, name, c) for tab, r in registered.items() for name, c in r.get("inputs", {}).items()]
    # The checked link, as JSON, for the events that apply it. A page opened without a link leaves it
    # empty, so they never run: sending "no change" to every linked input of every tab cost a 2-core
    # laptop's browser ~2 s as the page opened.
    held = gr.Textbox("", visible="hidden", label="Link", elem_id="bl-link")

    def apply(request: gr.Request):
        link = parse(getattr(request, "query_params", {}) or {}, registered, keys)
        if link.model and not _loads(link.model):
            link.problems.append(f"The model {link.model[:60]!r} could not be loaded; the shipped one is used.")
            link.model = None
        if link.problems:
            common.warn(link.message())
        chosen = json.dumps({"tab": link.tab, "values": link.values, "model": link.model}) if link.tab else gr.skip()
        return [link.model if link.model else gr.skip(), chosen]

    def fill(chosen: str):
        tab, values = _held(chosen)
        return [values[name] if t == tab and name in values else gr.skip() for t, name, _ in comps]

    def select(chosen: str):
        return gr.Tabs(selected=_held(chosen)[0]) if chosen else gr.skip()

    demo.load(apply, None, [picker, held], api_name=False, show_progress="hidden")
    filled = held.change(fill, held, [c for *_, c in comps], api_name=False, show_progress="hidden")
    _see_links_on_open(demo, registered, keys, picker, model)
    # The link's tab is selected only while the page still shows its first tab: on a busy server the chain
    # ends seconds after the page opens, and a student who has moved to another tab meanwhile stays there
    # (a reload of ?tab=pretrain pulled a student back from Fine-tune to Pre-train).
    untouched = (f"(chosen) => {{ const list = document.querySelector('#{tabs.elem_id} [role=tablist]');"
                 " const tabs = list ? [...list.querySelectorAll('[role=tab]')] : [];"
                 " const on = tabs.find(t => t.getAttribute('aria-selected') === 'true');"
                 " return on && on !== tabs[0] ? '' : chosen; }")
    _follow_changes(demo, filled, held, registered, {picker._id, model._id}).then(select, held, tabs, api_name=False,
                                                          show_progress="hidden", js=untouched)
    remember_tab(tabs)
    for tab, r in registered.items():
        if "copy" in r:
            btn, box = r["copy"]
            names = list(r.get("inputs", {}))
            btn.click(None, [*r.get("inputs", {}).values(), model], box, api_name=False,
                      js=_copy_js(tab, names))


def remember_tab(tabs: gr.Tabs) -> None:
    """The address names the open tab (?tab=attention), so a reload or a bookmark comes back to it rather
    than to the Lessons. In the browser only. A link's own values stay in the address while its tab is
    open; another tab replaces them (and a ?teacher= token, which the browser has stored by then)."""
    by_title = json.dumps(KEYS)
    tabs.select(None, None, None, api_name=False, show_progress="hidden", js=f"""() => {{ setTimeout(() => {{
        const list = document.querySelector('#{tabs.elem_id} [role=tablist]');
        const on = list && list.querySelector('[role=tab][aria-selected=true]');
        const key = on && {by_title}[on.innerText.trim()];
        const url = new URL(window.location.href);
        if (!key || url.searchParams.get('tab') === key) return;
        url.search = '';
        url.searchParams.set('tab', key);
        history.replaceState(history.state, '', url);
    }}, 0); }}""")


def _held(chosen: str) -> tuple[str | None, dict]:
    """(tab, values) of the link `apply` checked and held."""
    try:
        d = json.loads(chosen or "{}")
    except ValueError:
        return None, {}
    return d.get("tab"), dict(d.get("values") or {})


def _copy_js(tab: str, names: list[str]) -> str:
    return f"""(...v) => {{
  const names = {json.dumps(names)}, p = new URLSearchParams({{tab: {json.dumps(tab)}}});
  names.forEach((n, i) => {{ let x = v[i];
    if (x === null || x === undefined || Array.isArray(x) || typeof x === "object") return;
    p.set(n, typeof x === "boolean" ? (x ? "1" : "0") : String(x)); }});
  const m = v[names.length];
  if (m && m !== {json.dumps(models.DEFAULT)}) p.set("model", m);
  const link = location.origin + location.pathname + "?" + p.toString();
  try {{ navigator.clipboard.writeText(link).catch(() => {{}}); }} catch (e) {{}}
  return link;
}}"""


def _opens_page(demo, fn) -> bool:
    """Whether this event runs when the page opens: a load event, or one chained after one."""
    seen = set()
    while fn is not None and fn._id not in seen:
        seen.add(fn._id)
        if any(t[1] == "load" and t[0] in (None, demo._id) for t in fn.targets):
            return True
        fn = demo.fns.get(fn.trigger_after) if fn.trigger_after is not None else None
    return False


def _plain(fn) -> bool:
    """A function we can call with the same positional inputs (no request, progress or event data)."""
    if fn is None or inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) \
            or inspect.isasyncgenfunction(fn):
        return False
    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(any(s in str(p.annotation) for s in ("Request", "Progress", "EventData"))
                   or isinstance(p.default, gr.Progress) for p in ps)


def _see_links_on_open(demo, registered: dict, keys, picker, model) -> None:
    """Every event that runs when the page opens and reads a linked input is given the link's value
    instead of the default the browser still shows at that moment; the model too. (On a training tab
    these only describe the form: a plan, a parameter count. Nothing that opens a page starts a run.)"""
    by_id = {c._id: (tab, name) for tab, r in registered.items() for name, c in r.get("inputs", {}).items()}
    model_ids = {picker._id, model._id}
    for block_fn in list(demo.fns.values()):
        ids = [getattr(c, "_id", None) for c in block_fn.inputs]
        if not block_fn.inputs or not _plain(block_fn.fn) or not _opens_page(demo, block_fn):
            continue
        if not any(i in by_id or i in model_ids for i in ids):
            continue
        block_fn.fn = _substituting(block_fn.fn, ids, by_id, model_ids, registered, keys, block_fn.input_keyword_names)


def _follow_changes(demo, filled, held, registered: dict, model_ids: set):
    """What a linked input's own .change listeners do (the Pre-train recipe fills the form, the
    Fine-tune method shows its settings) is done here, once the link has filled the inputs: a browser
    does not fire them for a tab it has not drawn yet. Returns the event (chained after `filled`)."""
    owner = {c._id: (tab, name) for tab, r in registered.items() for name, c in r.get("inputs", {}).items()}
    follow = []
    for f in list(demo.fns.values()):
        triggers = {owner[t[0]] for t in f.targets if t[1] == "change" and t[0] in owner}
        if triggers and f.outputs and _plain(f.fn):
            follow.append((triggers, f))
    outputs = list({id(c): c for _, f in follow for c in f.outputs}.values())
    slot = {id(c): i for i, c in enumerate(outputs)}

    def run_listeners(chosen: str):
        out = [gr.skip()] * len(outputs)
        tab, values = _held(chosen)
        linked_model = json.loads(chosen or "{}").get("model") if tab else None
        for triggers, f in follow:
            # only the listeners of inputs the link set: a bare ?tab= (a reload) changes nothing, and
            # refilling the Pre-train form from the default recipe raced the run it shows on reload
            if not any(t == tab and name in values for t, name in triggers):
                continue
            args = []
            for c in f.inputs:
                who = owner.get(c._id)
                if who and who[0] == tab and who[1] in values:
                    args.append(values[who[1]])
                else:
                    args.append(linked_model if c._id in model_ids and linked_model else c.value)
            n = len(args) - len(f.input_keyword_names)
            try:
                res = f.fn(*args[:n], **dict(zip(f.input_keyword_names, args[n:])))
            except (ValueError, TypeError, gr.Error):
                continue
            if isinstance(res, dict):  # {component: value}, the outputs it changes
                pairs = [(c, res[c]) for c in f.outputs if c in res]
            else:
                pairs = zip(f.outputs, [res] if len(f.outputs) == 1 else list(res))
            for c, v in pairs:
                out[slot[id(c)]] = v
        return out
    return filled.then(run_listeners, held, outputs, api_name=False, show_progress="hidden")


def _substituting(fn, ids, by_id, model_ids, registered, keys, names=()):
    """`fn` with the link's values for its linked inputs; `names`: those of its last inputs, passed by
    keyword (a form built from a spec)."""
    def with_link(*args, **kwargs):
        link = _request_link(registered, keys)
        if link is not None:
            args = list(args)
            slots = [*((k, None) for k in range(len(args))), *((None, n) for n in kwargs)]
            for (k, name), i in zip(slots, ids):
                if i in by_id and by_id[i][0] == link.tab and by_id[i][1] in link.values:
                    value = link.values[by_id[i][1]]
                elif i in model_ids and link.model and _loads(link.model):
                    value = link.model
                else:
                    continue
                if name is None:
                    args[k] = value
                else:
                    kwargs[name] = value
        return fn(*args, **kwargs)
    with_link.__name__ = getattr(fn, "__name__", "fn")
    with_link.substitutes = {i for i in ids if i in by_id or i in model_ids}  # for tests
    with_link.original = fn
    return with_link


_TRIED: dict[str, tuple[bool, float]] = {}  # model -> (loads, when): one page opening asks ~20 times


def _loads(choice: str) -> bool:
    ok, when = _TRIED.get(choice, (None, 0.0))
    if ok is None or time.monotonic() - when > 60:
        try:
            models.get(choice)
            ok = True
        except (ValueError, OSError):
            ok = False
        if len(_TRIED) > 256:
            _TRIED.clear()
        _TRIED[choice] = (ok, time.monotonic())
    return ok
