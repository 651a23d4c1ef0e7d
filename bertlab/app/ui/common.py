"""What every tab shares. A visitor's mistake leaves through `user_error`: a message on the page and
nothing in the server log (Gradio logs a traceback for every other exception: those are bugs)."""
from __future__ import annotations

import contextlib
import html
import re

import gradio as gr
from gradio.exceptions import ComponentProcessingError
from pydantic import ValidationError

from . import models

SEG_TINT = {0: "#dbeafe", 1: "#ede9fe"}  # segment A blue, B violet
SPECIAL_STYLE = "background:#4b5563;color:#fff;border-color:#374151"
UNK_STYLE = "background:#fde2e2;color:#b91c1c;border-color:#d62728;font-weight:600"
CHIP = ("display:inline-block;padding:2px 6px;margin:0;border:1px solid #94a3b8;border-radius:6px;"
        "font-family:ui-monospace,Menlo,monospace;font-size:14px;line-height:1.5;color:#111")
MAX_INPUT_CHARS = 200_000  # beyond this, tokenizing alone would stall the shared CPU
MODEL_ERRORS = (ValueError, OSError)  # what models.get raises for a choice that cannot be loaded


def user_error(e: Exception | str) -> gr.Error:
    """The visitor's mistake as one clear line on the page, with no traceback in the server log."""
    return gr.Error(str(e).strip() or type(e).__name__, print_exception=False)


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
        raise user_error(f"The {what} must be from {lo} to {hi}, got {n}.")
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
            raise user_error(e.message) from None
        except (ValidationError, ComponentProcessingError) as e:  # text in a number box, a path for an upload
            if isinstance(e, ComponentProcessingError) and not isinstance(e.__cause__, (TypeError, ValueError)):
                raise
            i = re.search(r"at index (\d+)", str(e))  # Gradio's own index into block_fn.inputs
            what = i and getattr(block_fn.inputs[int(i.group(1))], "label", None) or "An input"
            raise user_error(f"{what}: not a value this field takes (files go through handle_file).") from None
    demo.preprocess_data = preprocess_data
    return demo


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


def check_pair(text, pair, what: str = "text") -> tuple[str, str | None]:
    """(text, pair) checked; an empty or whitespace pair counts as no pair."""
    text = check_text(text, what)
    return text, (check_text(pair, "second sentence") if isinstance(pair, str) and pair.strip() else None)


def encode(tok, text, pair=None, what="text"):
    """tok.encode of the checked text and pair, with friendly errors."""
    text, pair = check_pair(text, pair, what)
    with mistakes():
        return tok.encode(text, pair=pair)


def truncation_note(enc, tok) -> str:
    return (f"The text was cut to {len(enc)} tokens: this model reads at most "
            f"{tok.model_max_length} pieces (including [CLS]/[SEP]).") if enc.truncated else ""


def notice_html(note: str) -> str:
    if not note:
        return ""
    return ('<div style="padding:6px 10px;margin:4px 0 8px;border-left:4px solid #f59e0b;'
            f'background:#fffbeb;color:#78350f;border-radius:4px">⚠ {html.escape(note)}</div>')


def word_groups(tokens: list[str], special: list[int]) -> list[list[int]]:
    """Positions grouped into words: a '##' piece joins the word before it; specials stand alone."""
    groups: list[list[int]] = []
    for i, t in enumerate(tokens):
        if not special[i] and t.startswith("##") and groups and not special[groups[-1][-1]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def legend_html(items: list[tuple[str, str]], extra: str = "") -> str:
    cells = "".join(f'<span style="{CHIP};{style};margin-right:6px;font-size:12px">{html.escape(label)}</span>'
                    for label, style in items)
    return f'<div style="margin:6px 0 10px">{cells}{extra}</div>'


def on_load(fn, inputs, outputs):
    """Also run `fn` when the page opens, so a tab shows a result before the first click."""
    return gr.context.Context.root_block.load(fn, inputs, outputs, api_name=False, show_progress="hidden")


def wire(fn, inputs, outputs, button, api_name: str, triggers: list, examples=None, **kw):
    """Run fn from the button (the API endpoint `api_name`), on each trigger (with `kw`), after an
    example is picked, and when the page opens."""
    button.click(fn, inputs, outputs, api_name=api_name)
    gr.on(triggers, fn, inputs, outputs, api_name=False, **kw)
    if examples is not None:
        examples.load_input_event.then(fn, inputs, outputs, api_name=False)
    on_load(fn, inputs, outputs)
