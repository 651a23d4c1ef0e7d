"""Web forms built from a job's spec: a tab names the fields it shows, and each widget's label, help,
range, choices and default come from the field's metadata (train/spec_base.opt). The handler gets the
form as keyword arguments named as the spec's fields (Gradio's `inputs_kwargs`), so the API reads like
`spec.json`, and a recipe or a finished run fills the form by field name.

A spec field no tab places by hand and no tab hides shows in the tab's "More settings" (`rest`): a new
option is its field and the code that uses it, nothing here.
"""
from __future__ import annotations

from dataclasses import MISSING, Field, fields

import gradio as gr

from ....train.spec_base import Spec, field_kind, label_of

SIMPLE = ("int", "float", "bool")  # what `rest` shows by itself; free text never (it may name a server path)


def zero_is_none(f: Field) -> bool:
    """A number field that may be None and does not take 0: its box shows 0 for None (Gradio's number
    box has no empty state: it shows and sends 0)."""
    kind, optional = field_kind(f)
    check = f.metadata.get("check")
    return optional and kind in ("int", "float") and check is not None and not check.test(0)


def shown_as_is(f: Field) -> bool:
    """Can a box show this field's default? Not a number that may be None and may be 0 with None for a
    default (e.g. "the model's own dropout"): the box would send 0, another setting."""
    kind, optional = field_kind(f)
    return not (optional and kind in ("int", "float") and f.default is None and not zero_is_none(f))


def read(spec: type[Spec], values: dict) -> dict:
    """A form's values by name as spec values: an empty box is the field's None where it may be None,
    else its default (left out); 0 in a number box is None where the field takes no 0. The tab's own
    inputs pass as they are."""
    out = dict(values)
    for f in fields(spec):
        if f.name not in values:
            continue
        v, optional = values[f.name], field_kind(f)[1]
        if v is None or isinstance(v, str) and not v.strip() or v == 0 and zero_is_none(f):
            if optional:
                out[f.name] = None
            elif v is None or isinstance(v, str):
                del out[f.name]
    return out


def spec_fields(spec: type[Spec], values: dict, exclude=()) -> dict:
    """The spec's own fields among a form's values (read as above), but those in `exclude` (the
    server's, or those the tab reads itself)."""
    known = {f.name for f in fields(spec)}
    return {k: v for k, v in read(spec, values).items() if k in known and k not in exclude}


def check_names(given, allowed, what: str = "the form") -> None:
    """A form taken by name (**form) says a name it does not know, instead of ignoring a typo."""
    unknown = set(given) - set(allowed)
    if unknown:
        raise ValueError(f"unknown field {sorted(unknown)[0]!r:.40}: {what} takes {', '.join(allowed)}")


class Form:
    """The widgets of one spec's fields (and a tab's own inputs, such as an upload) on a page."""

    def __init__(self, spec: type[Spec], prefix: str, values: dict | None = None):
        """`values`: what the widgets start at where not the fields' defaults (e.g. the first recipe);
        `prefix`: of the widgets' element ids (`pretrain-mask-rate`)."""
        self.spec, self.prefix, self.values = spec, prefix, dict(values or {})
        self.fields: dict[str, Field] = {f.name: f for f in fields(spec)}
        self.widgets: dict[str, gr.components.Component] = {}

    def __call__(self, name: str, cls: type | None = None, help: bool = True, **kw) -> gr.components.Component:
        """Place the widget of field `name` here; `cls` and `kw` override what the metadata gives."""
        f = self.fields[name]
        (kind, _), m = field_kind(f), f.metadata
        default = self.values.get(name, f.default if f.default is not MISSING else f.default_factory())
        if cls is None:
            cls = gr.Dropdown if m.get("choices") or "choices" in kw else {
                "bool": gr.Checkbox, "int": gr.Number, "float": gr.Number}.get(kind, gr.Textbox)
        args: dict = {"label": label_of(f), "value": list(default) if isinstance(default, tuple) else default}
        if help and m.get("help"):
            args["info"] = m["help"]
        if zero_is_none(f):
            args["value"] = default or 0
            if help and m.get("help"):
                args["info"] = f"{m['help']} (0: none given)"
        if cls in (gr.Dropdown, gr.Radio) and m.get("choices"):
            args["choices"] = list(m["choices"])
        if cls in (gr.Number, gr.Slider):
            check = m.get("check")
            args.update({k: v for k, v in (("minimum", check and check.lo), ("maximum", check and check.hi))
                         if v is not None})
            if zero_is_none(f):
                args["minimum"] = 0
            if cls is gr.Number and kind == "int":
                args["precision"] = 0
        if cls is gr.Textbox:  # empty, not None: an API caller may leave it out (read() gives None back)
            args["max_length"] = 200
            args["value"] = "" if args["value"] is None else args["value"]
        args.update(kw)
        return self.add(name, cls(elem_id=args.pop("elem_id", f"{self.prefix}-{name.replace('_', '-')}"), **args))

    def add(self, name: str, widget: gr.components.Component) -> gr.components.Component:
        """A widget of the tab's own under `name` (read by the tab's handler, e.g. an upload)."""
        if name in self.widgets:
            raise ValueError(f"{name} is on the form twice")
        self.widgets[name] = widget
        return widget

    def rest(self, hide: tuple[str, ...] = (), **overrides: dict) -> list[str]:
        """A widget for each number, yes/no or choice field not placed yet and not hidden (the server's
        settings, or a field the tab sets itself); `overrides`: a field's widget arguments (e.g. a
        tighter maximum). The names placed."""
        placed = [name for name, f in self.fields.items() if name not in self.widgets and name not in hide
                  and (field_kind(f)[0] in SIMPLE or f.metadata.get("choices")) and shown_as_is(f)]
        with gr.Row():  # as many side by side as the page is wide
            for name in placed:
                with gr.Column(min_width=240):  # a checkbox keeps no min_width of its own: squeezed in a row
                    self(name, **overrides.get(name, {}))
        return placed

    def inputs(self, *names: str) -> dict:
        """{name: widget} of these fields (all when none named): an event's `inputs_kwargs`."""
        return {k: self.widgets[k] for k in names or self.widgets if k in self.widgets}

    def fill(self, values: dict) -> dict:
        """{widget: value} for the fields of `values` this form shows: a recipe (a partial spec) or a run's
        spec, as an event's output."""
        out = {}
        for k, v in values.items():
            if k in self.widgets:
                out[self.widgets[k]] = list(v) if isinstance(v, tuple) else 0 if v is None and k in self.fields \
                    and zero_is_none(self.fields[k]) else v
        return out
