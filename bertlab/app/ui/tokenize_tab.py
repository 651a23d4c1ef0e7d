"""Tokenize: what BERT actually reads. Words become WordPiece pieces, pieces become ids."""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd

from .common import (
    CHIP,
    MAX_INPUT_CHARS,
    SEG_TINT,
    SPECIAL_STYLE,
    UNK_STYLE,
    encode,
    legend_html,
    load_model,
    notice_html,
    truncation_note,
    wire,
    word_groups,
)

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


def chip_style(segment: int, special: bool, unk_id: bool) -> str:
    style = UNK_STYLE if unk_id else SPECIAL_STYLE if special else f"background:{SEG_TINT.get(segment, '#f3f4f6')}"
    return f"{CHIP};{style}"


def chips_html(enc, tok) -> str:
    """Coloured chips; the pieces of one word touch (square inner corners) so the word reads whole."""
    out = []
    for group in word_groups(enc.tokens, enc.special_tokens_mask):
        parts = []
        for k, i in enumerate(group):
            t = enc.tokens[i]
            style = chip_style(enc.token_type_ids[i], bool(enc.special_tokens_mask[i]), enc.ids[i] == tok.unk_token_id)
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


TOKEN_LEGEND = [("segment A", f"background:{SEG_TINT[0]}"), ("segment B", f"background:{SEG_TINT[1]}"),
                ("[CLS] / [SEP]", SPECIAL_STYLE), ("[UNK] (unknown character)", UNK_STYLE)]


_L = f"{CHIP};background:#fff;font-size:12px"
JOIN_LEGEND = (f'<span style="display:inline-flex;vertical-align:middle"><span style="{_L};border-top-right-radius:0;'
               f'border-bottom-right-radius:0;border-right:none">play</span><span style="{_L};border-top-left-radius:0;'
               f'border-bottom-left-radius:0;border-left:1px dashed #94a3b8">##ing</span></span>'
               '<span style="font-size:12px;color:#374151"> = pieces of one word</span>')


def tokenize(text: str, pair: str, choice: str | None):
    """(chips HTML, table, JSON) for a text and an optional second sentence."""
    _, tok = load_model(choice)
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
    wire(tokenize, [text, pair, picker], [view, table, raw], go, "tokenize", [text.submit, pair.submit, picker.change],
         ex)
