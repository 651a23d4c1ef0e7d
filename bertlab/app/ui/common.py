"""What every tab shares: clear errors for the visitor, loading the picked model, checking and
encoding text with a notice, token chip styles, and running a view when the page opens.

A visitor's mistake goes through `user_error`: a message on the page and nothing in the server log
(Gradio prints a traceback for every gr.Error unless told not to). Any other exception is a bug,
and Gradio still logs its traceback.
"""
from __future__ import annotations

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


def load_model(choice, failed: str = ""):
    """(model, tokenizer) for a picker value, or a user_error saying why it cannot load."""
    try:
        return models.get(choice)
    except MODEL_ERRORS as e:
        raise user_error(f"{failed}{e}") from None


def quiet_gradio_checks(demo: gr.Blocks) -> gr.Blocks:
    """Gradio's own checks of the inputs (a choice not offered, a number out of range, text in a
    number box) are the visitor's mistakes too: say them through user_error, without a traceback."""
    preprocess = demo.preprocess_data

    async def preprocess_data(block_fn, inputs, *args, **kwargs):
        try:
            return await preprocess(block_fn, inputs, *args, **kwargs)
        except gr.Error as e:
            raise user_error(e.message) from None
        except ValidationError as e:  # e.g. a path where a file upload belongs
            raise user_error(f"An input is not a valid {e.title}: send files with gradio_client.handle_file.") from None
        except ComponentProcessingError as e:  # a malformed value, e.g. text in a number box
            if not isinstance(e.__cause__, (TypeError, ValueError, OverflowError)):
                raise
            m = re.search(r"at index (\d+)", str(e))
            i = int(m.group(1)) if m and int(m.group(1)) < min(len(inputs), len(block_fn.inputs)) else None
            what = f"{getattr(block_fn.inputs[i], 'label', None) or 'An input'}: {inputs[i]!r:.60}" if i is not None \
                else "An input"
            raise user_error(f"{what} is not a value this field takes.") from None
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


def encode(tok, text, pair=None, what="text"):
    """tok.encode with friendly errors; an empty/whitespace pair counts as no pair."""
    text = check_text(text, what)
    pair = pair if isinstance(pair, str) and pair.strip() else None
    if pair is not None:
        check_text(pair, "second sentence")
    try:
        return tok.encode(text, pair=pair)
    except (ValueError, TypeError) as e:
        raise user_error(e) from None


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


def on_load(fn, inputs, outputs) -> None:
    """Also run `fn` when the page opens, so a tab shows a result before the first click."""
    root = gr.context.Context.root_block
    if root is not None:
        root.load(fn, inputs, outputs, api_name=False, show_progress="hidden")
