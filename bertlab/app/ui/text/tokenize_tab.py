"""Tokenize: what BERT actually reads. Words become WordPiece pieces, pieces become ids."""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd

from ..shared import common, links, models, text_notes

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


# Where two pieces of one word meet: square corners, and one dashed line between them.
OPEN_RIGHT = "border-top-right-radius:0;border-bottom-right-radius:0;border-right:none"
OPEN_LEFT = "border-top-left-radius:0;border-bottom-left-radius:0;border-left:1px dashed #94a3b8"


def chips_html(enc, tok) -> str:
    """Coloured chips; the pieces of one word touch so the word reads whole."""
    out = []
    for group in common.word_groups(enc.tokens, enc.special_tokens_mask, enc.word_ids):
        parts = []
        for k, i in enumerate(group):
            seg = enc.token_type_ids[i]
            unk = enc.ids[i] == tok.unk_token_id
            style = common.chip_style(seg, enc.special_tokens_mask[i], unk)
            if k > 0:
                style += ";" + OPEN_LEFT
            if k < len(group) - 1:
                style += ";" + OPEN_RIGHT
            title = f"position {i} · id {enc.ids[i]} · segment {'AB'[seg]}"
            parts.append(f'<span style="{style}" title="{html.escape(title)}">'
                         f'{html.escape(tok.piece_text(enc.ids[i]))}'
                         f'<sub style="color:#6b7280;font-size:10px;margin-left:3px">{i}</sub></span>')
        out.append(f'<span style="display:inline-flex;margin:3px 4px 3px 0">{"".join(parts)}</span>')
    return "".join(out)


def legend(tok) -> list[tuple[str, str]]:
    """Segments, then this tokenizer's own start/end markers and unknown piece."""
    return [("segment A", f"background:{common.SEG_TINT[0]}"), ("segment B", f"background:{common.SEG_TINT[1]}"),
            (f"{tok.id_to_token(tok.cls_token_id)} / {tok.id_to_token(tok.sep_token_id)}", common.SPECIAL_STYLE),
            (f"{tok.id_to_token(tok.unk_token_id)} (unknown character)", common.UNK_STYLE)]


_L = f"{common.CHIP};background:#fff;font-size:12px"
JOIN = {"wordpiece": ("play", "##ing"), "bpe": ("\u2581play", "ing"), "unigram": ("\u2581play", "ing")}


def join_legend(tok) -> str:
    a, b = JOIN.get(tok.kind, JOIN["wordpiece"])
    return (f'<span style="display:inline-flex;vertical-align:middle">'
            f'<span style="{_L};{OPEN_RIGHT}">{a}</span><span style="{_L};{OPEN_LEFT}">{b}</span></span>'
            '<span style="font-size:12px;color:#374151"> = pieces of one word</span>')


_NOTE = "<div style='font-size:13px;color:#374151;margin:-4px 0 8px'>{}</div>"
KIND_NOTE = {  # the explanation beside describes BERT's WordPiece; other families' pieces differ
    "bpe": _NOTE.format("This model uses <b>byte-level BPE</b> (RoBERTa's tokenizer): pieces are built from "
                        "bytes, so no character is ever unknown; a piece that starts a word after a space "
                        "is shown with ▁ (stored as Ġ), and a character split across pieces shows its bytes "
                        "as &lt;0xNN&gt;. Pairs read &lt;s&gt; A &lt;/s&gt;&lt;/s&gt; B &lt;/s&gt;, all segment A."),
    "unigram": _NOTE.format("This model uses a <b>SentencePiece</b> (unigram) vocabulary, as ALBERT and "
                            "DeBERTa-v3 do: a piece that starts a word begins with ▁, and case is kept where the "
                            "vocabulary kept it."),
}


def tokenize(text: str, pair: str, choice: str | None):
    """(chips HTML, table, JSON) for a text and an optional second sentence."""
    tok, enc, note = common.tokenized(choice, text, pair)
    sources = {0: text, 1: pair or ""}
    per_token = zip(enc.tokens, enc.ids, enc.token_type_ids, enc.sequence_ids, enc.word_ids,
                    enc.offsets)
    rows = [{"pos": i, "token": tok.piece_text(idx), "id": idx, "seg": "AB"[seg],
             "word": "" if wid is None else wid, "chars": "" if sid is None else f"{a}–{b}",
             "text": "" if sid is None else sources[sid][a:b]}
            for i, (t, idx, seg, sid, wid, (a, b)) in enumerate(per_token)]
    n_unk = sum(i == tok.unk_token_id for i in enc.ids)
    groups = common.word_groups(enc.tokens, enc.special_tokens_mask, enc.word_ids)
    specials = sum(enc.special_tokens_mask)
    words = len(groups) - specials
    n_cont = len(enc) - len(groups)  # pieces that continue a word
    cut = [text_notes.cut(t, w) for t, w in ((text, "text"), (pair, "second sentence"))]
    view = ("".join(map(common.notice_html, cut)) + common.notice_html(note)
            + f"<div style='color:#374151;margin-bottom:4px'>{len(enc)} tokens for {words} words "
              f"({n_cont} piece{'s' * (n_cont != 1)} continuing a word, {n_unk} unknown)</div>"
            + f"<div style='line-height:2.1'>{chips_html(enc, tok)}</div>"
            + common.legend_html(legend(tok), join_legend(tok)) + KIND_NOTE.get(tok.kind, ""))
    data = {"tokens": enc.tokens, "ids": enc.ids, "token_type_ids": enc.token_type_ids,
            "offsets": [list(o) for o in enc.offsets], "word_ids": enc.word_ids,
            "truncated": enc.truncated, "max_length": tok.model_max_length,
            "notice": " ".join(n for n in (*cut, note) if n)}
    return view, pd.DataFrame(rows), data


# shares of the table's width, so that all seven columns fit a phone (at 524 px of fixed widths the
# "chars" and "text" columns were cut off at 390 px); app.py's CSS tightens the cells there
COLUMN_WIDTHS = ["9%", "19%", "12%", "9%", "11%", "15%", "25%"]
TABLE_KEY = ("**pos** = position in the input · **seg** = segment (A or B) · **word** = which word of "
             "the text the piece belongs to · **chars** = where it is in your text")


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        text = gr.Textbox(label="Text", value=EXAMPLES[0][0], lines=2,
                          max_length=common.MAX_INPUT_CHARS)
        pair = gr.Textbox(label="Second sentence (optional: makes a pair, segment B)", value="",
                          lines=1, max_length=common.MAX_INPUT_CHARS)
        go = gr.Button("Tokenize", variant="primary")
        links.copy_button("tokenize")
        try:  # the example's result is on the page from the start, before the page's own load event
            first, rows, _ = tokenize(EXAMPLES[0][0], "", models.DEFAULT)
        except gr.Error:
            first, rows = "", None
        view = gr.HTML(first, label="Pieces")  # right under the controls; explanation and examples beside
        table = gr.Dataframe(rows, label="Token table", interactive=False, wrap=True, max_height=420,
                             column_widths=COLUMN_WIDTHS, elem_id="bl-token-table")
        gr.Markdown(TABLE_KEY, elem_classes="bl-table-key")
    with gr.Accordion("JSON (tokens, ids, token_type_ids, offsets, truncated)", open=False):
        raw = gr.JSON(label="tokenize JSON")
    # labelled buttons, not a two-column table: its "Second sentence" column was cut on a phone
    ex = common.examples(side, EXAMPLES, [text, pair],
                         example_labels=[t if not p else f"{t}  +  {p}" for t, p in EXAMPLES])
    links.register("tokenize", text=text, pair=pair)
    common.wire(tokenize, [text, pair, picker], [view, table, raw], go, "tokenize",
                [text.submit, pair.submit, picker.change], ex)
