"""Attention → "Click to mask": the student clicks a token, it becomes [MASK], and the sentence runs
again: the model's guesses for that spot, and how attention to and from it changes in the picked head."""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....analysis import attention_views as av
from ....analysis import masked
from ..shared.common import load_model, mistakes, notice_html
from .attention_run import checked_run as _run

NOTE = """**Click a token to mask it.** BERT learned by guessing words hidden behind `[MASK]` from the
words on *both* sides. Click a token: only that token is replaced by `[MASK]`, the sentence runs through
the model again, and you see what the model now guesses there, and how attention changes in the
layer and head picked above: what the masked spot looks at (its row) and how much every token looks at
it (its column). A `[MASK]` carries no meaning of its own, so heads that looked at the word for its
content often look elsewhere now. Click another token to move the mask."""

MAX_CLICKABLE = 160  # more buttons than this are no use on a page
BEFORE, AFTER = "#9ca3af", "#ea580c"


def _choices(run, pos: int | None = None, mask: str = "[MASK]") -> list[tuple[str, int]]:
    """One radio button per word piece ([CLS]/[SEP] cannot be masked); the masked one reads [MASK]."""
    return [(mask if i == pos else t, i) for i, t in enumerate(run.tokens[:MAX_CLICKABLE]) if not run.special[i]]


def tokens_row(text: str, pair: str, choice: str | None):
    """After a redraw: the clickable tokens of the new text, nothing masked yet, old results cleared."""
    run, _, _ = _run(text, pair, choice, 1, 1)
    more = len(run.tokens) > MAX_CLICKABLE
    note = notice_html(f"Only the first {MAX_CLICKABLE} tokens can be clicked.") if more else ""
    return (gr.Radio(choices=_choices(run), value=None), note + "*Click a token above.*", None, None, None)


def _sentence(tokens: list[str], pos: int) -> str:
    """The masked text as chips, the [MASK] in orange."""
    chip = "display:inline-block;padding:1px 5px;margin:1px;border-radius:5px;font-family:ui-monospace,monospace"
    return "".join(f'<span style="{chip};background:{"#ea580c;color:#fff;font-weight:700" if i == pos else "#f3f4f6"}">'
                   f"{html.escape(t)}</span>" for i, t in enumerate(tokens))


def change_figure(run, mrun, layer: int, head: int, pos: int) -> go.Figure:
    """Two bar charts, before and after masking: the masked spot's row and its column in the picked head."""
    labels = av.unique_labels(mrun.tokens)
    a, b = run.attentions[layer - 1, head - 1], mrun.attentions[layer - 1, head - 1]  # (T, T) each
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22, subplot_titles=(
        f"What {pos} [MASK] looks at (its row)", f"How much each token looks at {pos} [MASK]"))
    for r, (x, y) in enumerate([(a[pos], b[pos]), (a[:, pos], b[:, pos])], start=1):
        for vals, name, colour in ((x, f"before ({run.tokens[pos]})", BEFORE), (y, "after ([MASK])", AFTER)):
            fig.add_trace(go.Bar(x=labels, y=vals.tolist(), name=name, marker_color=colour, showlegend=r == 1,
                                 hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>"), row=r, col=1)
    fig.update_layout(barmode="group", height=560, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white",
                      title={"text": f"Layer {layer}, head {head}: before and after", "font": {"size": 15}},
                      legend={"orientation": "h", "y": 1.13, "x": 0}, bargap=0.25)
    fig.update_xaxes(tickangle=-60, type="category")
    fig.update_yaxes(title_text="weight", rangemode="tozero", gridcolor="#e5e7eb")
    return fig


def mask_at(text: str, pair: str, layer, head, position, choice: str | None):
    """The API: (token row, masked sentence, guesses table, before/after figure, JSON)."""
    run, layer, head = _run(text, pair, choice, layer, head)
    model, tok = load_model(choice)
    with mistakes():
        mrun, g = masked.mask_token(model, tok, run, position)
    pos = g["position"]
    top = g["top"][0]
    said = (f"Masked **{html.escape(g['original'])}** (token {pos}). The model's first guess: "
            f"**{html.escape(top['token'])}** ({top['prob']:.1%}); the hidden **{html.escape(g['original'])}** "
            f"gets {_pct(g['original_prob'])} (its rank: {g['original_rank']:,}).")
    table = pd.DataFrame({"rank": range(1, len(g["top"]) + 1), "guess": [t["token"] for t in g["top"]],
                          "probability": [round(t["prob"], 4) for t in g["top"]]})
    data = {**g, "layer": layer, "head": head, "masked_tokens": mrun.tokens,
            "row_before": av_round(run.attentions[layer - 1, head - 1, pos]),
            "row_after": av_round(mrun.attentions[layer - 1, head - 1, pos]),
            "column_before": av_round(run.attentions[layer - 1, head - 1, :, pos]),
            "column_after": av_round(mrun.attentions[layer - 1, head - 1, :, pos])}
    return (gr.Radio(choices=_choices(run, pos), value=pos), _sentence(mrun.tokens, pos) + "\n\n" + said,
            table, change_figure(run, mrun, layer, head, pos), data)


def _pct(p: float) -> str:
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.1g} %"


def av_round(v) -> list[float]:
    return [round(float(x), 4) for x in v]


def mask_api(text: str, pair: str = "", layer: int = 1, head: int = 1, position: int = 1,
             choice: str | None = None) -> dict:
    """The API: token `position` (from 0) masked: the model's guesses there, and the attention row and
    column of that position in `head` of `layer` (both from 1), before and after."""
    return mask_at(text, pair, layer, head, position, choice)[-1]


def again(text, pair, layer, head, position, choice):
    """Slider moves: redraw the masked view for the new head, if a token is masked."""
    if position is None:
        return (gr.skip(),) * 5
    return mask_at(text, pair, layer, head, position, choice)


def build(text, pair, layer, head, picker):
    """The sub-tab's parts; returns (redraw fn, its inputs, its outputs) for the tab to run after each redraw."""
    gr.Markdown(NOTE)
    row = gr.Radio(label="Click a token to replace it by [MASK]", choices=[], elem_id="attn-mask-tokens")
    said = gr.Markdown(elem_id="attn-mask-said")
    with gr.Row():
        with gr.Column(scale=1, min_width=240):
            guesses = gr.Dataframe(label="What the model guesses for [MASK]", interactive=False,
                                   elem_id="attn-mask-guesses")
        with gr.Column(scale=2):
            fig = gr.Plot(label="Attention before and after masking")
    with gr.Accordion("JSON (what the API returns)", open=False):
        raw = gr.JSON()
    outputs = [row, said, guesses, fig, raw]
    row.input(mask_at, [text, pair, layer, head, row, picker], outputs, api_name=False)
    gr.api(mask_api, api_name="attention_mask")  # the radio checks a value against its first (empty) choices
    gr.on([layer.release, head.release], again, [text, pair, layer, head, row, picker], outputs, api_name=False)
    return tokens_row, [text, pair, picker], outputs
