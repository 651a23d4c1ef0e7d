"""Tokenize: what BERT actually reads. Words become WordPiece pieces, pieces become ids.

Also home to the small helpers the other text tabs share (clear errors, encoding with a notice,
token chips), so every tab reports bad input and truncation the same way.
"""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd

from . import models

EXPLAIN = """**How BERT reads text.** BERT does not see words but *WordPiece* pieces from a fixed
vocabulary (8,192 pieces here, 30,522 in bert-base). A frequent word is one piece; a rarer one is split
into known pieces, and a piece that continues a word starts with `##` (`playing` → `play ##ing`).
So an unknown word becomes several pieces instead of `[UNK]`; only a character the vocabulary
has never seen (many emoji) becomes `[UNK]`. `[CLS]` starts every input and `[SEP]` ends each
sentence; the *segment* id (A = 0, B = 1) tells BERT which sentence a piece belongs to."""

EXAMPLES = [
    ["the overacting in this rewatchable sequel was unwatchable 😍", ""],
    ["the movie was unbelievably entertaining .", ""],
    ["I was playing with my cat while the film was loading.", ""],
    ["the director's cinematography is breathtaking 😍", ""],
    ["the acting was great .", "the plot , however , was a mess ."],
    ["Supercalifragilisticexpialidocious was the only word I could think of.", ""],
]

SEG_TINT = {0: "#dbeafe", 1: "#ede9fe"}  # segment A blue, B violet (shared by the text tabs)
SPECIAL_STYLE = "background:#4b5563;color:#fff;border-color:#374151"
UNK_STYLE = "background:#fde2e2;color:#b91c1c;border-color:#d62728;font-weight:600"
CHIP = ("display:inline-block;padding:2px 6px;margin:0;border:1px solid #94a3b8;border-radius:6px;"
        "font-family:ui-monospace,Menlo,monospace;font-size:14px;line-height:1.5;color:#111")
MAX_INPUT_CHARS = 200_000  # beyond this, tokenizing alone would stall the shared CPU


def user_error(e: Exception) -> gr.Error:
    """One clear line for the user (no traceback)."""
    return gr.Error(str(e).strip() or type(e).__name__)


def check_text(text, what: str = "text") -> str:
    """The text, or gr.Error when it is not a non-empty string (Gradio can send None)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        raise gr.Error(f"The {what} is empty: type a sentence.")
    if not isinstance(text, str):
        raise gr.Error(f"The {what} must be text, got {type(text).__name__}.")
    if len(text) > MAX_INPUT_CHARS:
        raise gr.Error(f"The {what} has {len(text):,} characters; paste at most {MAX_INPUT_CHARS:,} "
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


def chip_style(token: str, segment: int, special: bool, unk_id: bool) -> str:
    if unk_id:
        return f"{CHIP};{UNK_STYLE}"
    if special:
        return f"{CHIP};{SPECIAL_STYLE}"
    return f"{CHIP};background:{SEG_TINT.get(segment, '#f3f4f6')}"


def word_groups(tokens: list[str], special: list[int]) -> list[list[int]]:
    """Positions grouped into words: a '##' piece joins the word before it; specials stand alone."""
    groups: list[list[int]] = []
    for i, t in enumerate(tokens):
        if not special[i] and t.startswith("##") and groups and not special[groups[-1][-1]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def chips_html(enc, tok) -> str:
    """Coloured chips; the pieces of one word touch (square inner corners) so the word reads whole."""
    out = []
    for group in word_groups(enc.tokens, enc.special_tokens_mask):
        parts = []
        for k, i in enumerate(group):
            t = enc.tokens[i]
            style = chip_style(t, enc.token_type_ids[i], bool(enc.special_tokens_mask[i]),
                               enc.ids[i] == tok.unk_token_id)
            if len(group) > 1:  # join the pieces: no rounded corners or border where they meet
                if k > 0:
                    style += ";border-top-left-radius:0;border-bottom-left-radius:0;border-left:1px dashed #94a3b8"
                if k < len(group) - 1:
                    style += ";border-top-right-radius:0;border-bottom-right-radius:0;border-right:none"
            title = f"position {i} · id {enc.ids[i]} · segment {'AB'[enc.token_type_ids[i]]}"
            parts.append(f'<span style="{style}" title="{html.escape(title)}">{html.escape(t)}'
                         f'<sub style="color:#6b7280;font-size:10px;margin-left:3px">{i}</sub></span>')
        out.append(f'<span style="display:inline-flex;margin:3px 4px 3px 0">{"".join(parts)}</span>')
    return "".join(out)


def legend_html(items: list[tuple[str, str]], extra: str = "") -> str:
    cells = "".join(f'<span style="{CHIP};{style};margin-right:6px;font-size:12px">{html.escape(label)}</span>'
                    for label, style in items)
    return f'<div style="margin:6px 0 10px">{cells}{extra}</div>'


TOKEN_LEGEND = [("segment A", f"background:{SEG_TINT[0]}"), ("segment B", f"background:{SEG_TINT[1]}"),
                ("[CLS] / [SEP]", SPECIAL_STYLE), ("[UNK] (unknown character)", UNK_STYLE)]


_L = f"{CHIP};background:#fff;font-size:12px"
JOIN_LEGEND = (f'<span style="display:inline-flex;vertical-align:middle"><span style="{_L};border-top-right-radius:0;'
               f'border-bottom-right-radius:0;border-right:none">play</span><span style="{_L};border-top-left-radius:0;'
               f'border-bottom-left-radius:0;border-left:1px dashed #94a3b8">##ing</span></span>'
               '<span style="font-size:12px;color:#374151"> = pieces of one word</span>')


def on_load(fn, inputs, outputs) -> None:
    """Also run `fn` when the page opens, so a tab shows a result before the first click."""
    root = gr.context.Context.root_block
    if root is not None:
        root.load(fn, inputs, outputs, api_name=False, show_progress="hidden")


def tokenize(text: str, pair: str, choice: str | None):
    """(chips HTML, table, JSON) for a text and an optional second sentence."""
    try:
        _, tok = models.get(choice)
    except ValueError as e:
        raise user_error(e) from None
    enc = encode(tok, text, pair)
    sources = {0: text, 1: pair or ""}
    rows = []
    for i, (t, idx, seg, sid, wid, (a, b)) in enumerate(zip(enc.tokens, enc.ids, enc.token_type_ids,
                                                             enc.sequence_ids, enc.word_ids, enc.offsets)):
        special = sid is None
        rows.append({"position": i, "token": t, "id": idx, "segment": "AB"[seg], "word id": "" if wid is None else wid,
                     "chars": "" if special else f"{a}–{b}",
                     "original text": "" if special else sources[sid][a:b]})
    table = pd.DataFrame(rows, columns=["position", "token", "id", "segment", "word id", "chars", "original text"])
    n_unk = sum(i == tok.unk_token_id for i in enc.ids)
    n_cont = sum(t.startswith("##") for t in enc.tokens)
    words = len(word_groups(enc.tokens, enc.special_tokens_mask)) - sum(enc.special_tokens_mask)
    summary = (f"<div style='color:#374151;margin-bottom:4px'>{len(enc)} tokens for {words} words "
               f"({n_cont} '##' continuation piece{'s' * (n_cont != 1)}, {n_unk} [UNK])</div>")
    note = truncation_note(enc, tok)
    view = notice_html(note) + summary + f"<div style='line-height:2.1'>{chips_html(enc, tok)}</div>" \
        + legend_html(TOKEN_LEGEND, JOIN_LEGEND)
    data = {"tokens": enc.tokens, "ids": enc.ids, "token_type_ids": enc.token_type_ids,
            "offsets": [list(o) for o in enc.offsets], "word_ids": enc.word_ids,
            "truncated": enc.truncated, "max_length": tok.model_max_length, "notice": note}
    return view, table, data


def build(picker: gr.Dropdown) -> None:
    with gr.Row():
        with gr.Column(scale=2):
            text = gr.Textbox(label="Text", value=EXAMPLES[0][0], lines=2, max_length=MAX_INPUT_CHARS)
            pair = gr.Textbox(label="Second sentence (optional: makes a pair, segment B)", value="", lines=1,
                              max_length=MAX_INPUT_CHARS)
            go = gr.Button("Tokenize", variant="primary")
        with gr.Column(scale=1):
            gr.Markdown(EXPLAIN)
    view = gr.HTML(label="Pieces")
    with gr.Row():
        table = gr.Dataframe(label="Token table", interactive=False, wrap=True, max_height=420)
        raw = gr.JSON(label="JSON (tokens, ids, token_type_ids, offsets, truncated)", open=False)
    ex = gr.Examples(EXAMPLES, inputs=[text, pair])
    args = dict(fn=tokenize, inputs=[text, pair, picker], outputs=[view, table, raw])
    go.click(api_name="tokenize", **args)
    gr.on([text.submit, pair.submit, picker.change], api_name=False, **args)
    ex.load_input_event.then(api_name=False, **args)
    on_load(**args)
