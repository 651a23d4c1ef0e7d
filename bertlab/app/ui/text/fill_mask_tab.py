"""Fill-mask: the pre-training task itself, and the first thing to try on any BERT."""
from __future__ import annotations

import html
import math
import re

import gradio as gr
import plotly.graph_objects as go

from .... import family
from ....analysis.predict import MASK_RE, MAX_MASKS, fill_mask, with_masks
from ..shared import common, links, text_notes
from . import facts_view, fill_in_turn, generate_view, logit_lens, replaced_view

EXPLAIN = """**Fill in the blank.** BERT was pre-trained by hiding words and guessing them back from
the words on *both* sides. Write `[MASK]` where a word should go (or pick a word to hide): the bars
are the model's probabilities for the pieces that could fill each gap.

**Left context only** hides every word to the right of each position, as a left-to-right language
model (GPT) would read. Compare *"the [MASK] of the river was muddy ."* with *"she went to the
[MASK] to deposit money ."*: from the left, both gaps read "…the [MASK]"; only the words *after*
the gap tell a river bank from a money bank. That is what bidirectional context buys."""

EXAMPLES = [
    ["the acting was [MASK] .", 5, False],
    ["i would [MASK] recommend this film to anyone .", 5, False],
    ["this is one of the [MASK] movies i have ever seen .", 5, False],
    ["the [MASK] was slow but the ending was great .", 5, False],
    ["the [MASK] of the river was muddy .", 5, False],
    ["she went to the [MASK] to deposit money .", 5, False],
    ["the [MASK] was [MASK] and the actors were wooden .", 5, False],
    [fill_in_turn.EXAMPLE, 5, False],
    ["the [MASK] was slow but the ending was great .", 5, True],
]
WORD_RE = re.compile(r"\[mask\]|[^\W_]+(?:['’][^\W_]+)*", re.IGNORECASE)
PICK_RE = re.compile(r"^#(\d+) ")
BAR = "#1f77b4"
MARK = "background:#fde68a;color:#111;padding:0 3px;border-radius:3px;font-weight:600"
SHOWN = 3  # filled sentences per [MASK]


def filled_html(text: str, results: list[list[dict]]) -> str:
    """The typed text with each [MASK] filled by its top guesses, the guessed word highlighted (as
    Hugging Face's widget shows `sequence`); the other [MASK]s stay as they are."""
    spans = [m.span() for m in MASK_RE.finditer(text)]
    blocks = []
    for i, ((a, b), cands) in enumerate(zip(spans, results)):
        lines = []
        for j, c in enumerate(cands[:SHOWN]):
            word, before = c["token_str"], text[:a]
            if word.startswith("##"):  # a word's continuation: glued to the piece before the gap
                word, before = word[2:], before.rstrip()
            lines.append(f'<li style="margin:2px 0">{html.escape(before)}<mark style="{MARK}">'
                         f'{html.escape(word)}</mark>{html.escape(text[b:])} '
                         f'<span style="color:#6b7280;white-space:nowrap">· {c["score"]:.1%}</span></li>')
        head = f"<b>[MASK] #{i + 1}</b>: " if len(results) > 1 else ""
        blocks.append(f'<div style="margin:2px 0 6px">{head}<ol style="margin:2px 0 0;padding-left:1.6em">'
                      f'{"".join(lines)}</ol></div>')
    return ('<div style="margin:4px 0 8px"><div style="color:#374151">The text filled with the model\'s '
            f'top guess{"es" * (SHOWN > 1)} (highlighted):</div>{"".join(blocks)}</div>')


def words_of(text) -> list[tuple[int, int, str]]:
    """(start, end, word) for the words of the text, skipping [MASK]s and punctuation."""
    if not isinstance(text, str):
        return []
    return [(m.start(), m.end(), m.group()) for m in WORD_RE.finditer(text) if not MASK_RE.fullmatch(m.group())]


def pick_choices(text) -> list[str]:
    """Dropdown entries '#k word', numbered so a word that occurs twice stays two distinct entries."""
    return [f"#{k} {w}" for k, (_, _, w) in enumerate(words_of(text), 1)][:500]


def update_words(text):
    return gr.Dropdown(choices=pick_choices(text), value=None)


def mask_word(text: str, pick: str | None) -> str:
    """Replace the picked word ('#k word') by [MASK]; the rest of the text stays as typed."""
    if not pick:
        return text
    m = PICK_RE.match(str(pick))
    words = words_of(text)
    if m is None or not 1 <= int(m.group(1)) <= len(words):
        raise common.user_error(f"Cannot find the word {pick!r} in the text any more: "
                                "pick it again.")
    a, b, w = words[int(m.group(1)) - 1]
    if str(pick) != f"#{m.group(1)} {w}":
        raise common.user_error(f"The text changed since {pick!r} was listed: pick the word again.")
    return text[:a] + "[MASK]" + text[b:]


def figure(results: list[list[dict]], causal: bool) -> go.Figure:
    """One horizontal bar chart per [MASK] (two columns when several), best guess on top. Built
    as a plain figure dict: make_subplots and per-call updates took 9 of the call's 16 ms."""
    n = len(results)
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    hs, vs = 0.22, min(0.2, 0.6 / rows)  # gaps between panels (room for a title), as shares
    w, h = (1 - (cols - 1) * hs) / cols, (1 - (rows - 1) * vs) / rows
    data, layout = [], {"annotations": []}
    for i, cands in enumerate(results):
        r, c, k = i // cols, i % cols, str(i + 1) if i else ""
        x0, y1 = c * (w + hs), 1 - r * (h + vs)  # rounded below: [0, 1] exactly, as plotly checks
        data.append(dict(type="bar", x=[x["score"] for x in cands], orientation="h",
                         y=[f"{j + 1}. {x['token_str']}" for j, x in enumerate(cands)],
                         marker_color=BAR, text=[f"{x['score']:.1%}" for x in cands], textposition="auto",
                         showlegend=False, customdata=[x["sequence"] for x in cands], xaxis=f"x{k}",
                         yaxis=f"y{k}", hovertemplate="%{y}: %{x:.2%}<br>%{customdata}<extra></extra>"))
        layout[f"xaxis{k}"] = dict(domain=[round(x0, 9), round(x0 + w, 9)], anchor=f"y{k}",
                                   rangemode="tozero", tickformat=common.PERCENT_AXIS)
        layout[f"yaxis{k}"] = dict(domain=[max(0.0, round(y1 - h, 9)), round(y1, 9)], anchor=f"x{k}",
                                   autorange="reversed")
        if n > 1:
            layout["annotations"].append(dict(text=f"[MASK] #{i + 1}", x=x0 + w / 2, y=y1, xref="paper",
                                              yref="paper", xanchor="center", yanchor="bottom",
                                              showarrow=False, font=dict(size=16)))
    per = 40 + 24 * max(len(r) for r in results)
    title = "Guesses for the [MASK]" + ("s" if n > 1 else "") + (" · left context only" if causal else "")
    layout.update(height=min(2400, 80 + rows * per), margin=dict(l=10, r=20, t=70, b=30),
                  title=dict(text=title, font_size=15))
    return go.Figure(dict(data=data, layout=layout))


def predict(text: str, top_k: int, causal: bool, choice: str | None):
    """(figure, Hugging Face fill-mask JSON: one list of {score, token, token_str, sequence} per
    [MASK], and HTML: any notice (truncation, a cut paste), then the filled sentences)."""
    text = common.check_text(text)
    k = common.whole_number(top_k, "number of guesses", 1, 100)
    model, tok = common.load_model(choice)
    if family.is_discriminator(model):  # a replaced-token discriminator: no guesses
        return replaced_view.predict(model, tok, MASK_RE.sub(" ", text))
    n = len(MASK_RE.findall(text))
    if n == 0:
        raise common.user_error("No [MASK] in the text: write [MASK] where the model should "
                                "guess a word, or pick a word to mask.")
    if n > MAX_MASKS:
        raise common.user_error(f"The text has {n} [MASK]s: use at most {MAX_MASKS} at once.")
    with common.mistakes():
        results = fill_mask(model, tok, text, top_k=k, causal=bool(causal))
        truncated = tok.encode(with_masks(tok, text)[0]).truncated
    note = (f"The text was cut to {tok.model_max_length} tokens (this model's limit); "
            f"words after that were not seen.") if truncated else ""
    view = common.notice_html(text_notes.cut(text)) + common.notice_html(note) + filled_html(text, results)
    return figure(results, bool(causal)), results, view


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        text = gr.Textbox(label="Text with [MASK]", value=EXAMPLES[0][0], lines=2,
                          max_length=common.MAX_INPUT_CHARS)
        pick = gr.Dropdown(choices=pick_choices(EXAMPLES[0][0]), value=None,
                           label="…or pick a word to mask",
                           info="Choosing a word replaces it by [MASK] in the text above.")
        with gr.Row():
            k = gr.Slider(1, 20, value=5, step=1, label="How many guesses (top-k)", min_width=220)  # stacked on a phone
            causal = gr.Checkbox(label="Left context only (hide the words to the right)",
                                 value=False)
        go_btn = gr.Button("Predict", variant="primary")
        links.copy_button("fill-mask")
        note = gr.HTML()  # results right under the controls; the explanation and examples beside them
        plot = gr.Plot(label="Probabilities per [MASK]")
        with gr.Accordion("JSON: one list per [MASK] of {score, token, token_str, sequence}", open=False):
            raw = gr.JSON(label="fill-mask JSON")
    ex = common.examples(side, EXAMPLES, [text, k, causal])
    links.register("fill-mask", text=text, k=k, left_only=causal)
    args = dict(fn=predict, inputs=[text, k, causal, picker], outputs=[plot, raw, note])
    triggers = [text.submit, causal.input, k.release, picker.change]
    events = common.wire(**args, button=go_btn, api_name="fill_mask", triggers=triggers, examples=ex)
    lens = logit_lens.build(text, k, causal, picker, events)
    turn = fill_in_turn.build(text, causal, picker, events)
    facts_view.build(picker)  # its own form: what the model knows, on prompts shipped with bertlab
    generate_view.build(picker)  # its own form: continuing a prompt, encoder against decoder
    text.change(update_words, text, pick, api_name=False, show_progress="hidden")
    masked = pick.input(mask_word, [text, pick], text, api_name=False).success(api_name=False, **args)
    masked.success(api_name=False, **lens)
    masked.success(api_name=False, **turn)
