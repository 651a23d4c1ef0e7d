"""Fill-mask's "at every layer" section: the logit lens on one [MASK], as a layers × guesses heatmap."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from .... import family
from ....analysis.lens import logit_lens
from ....analysis.predict import MASK_RE
from ..shared import common
from ..training.train_charts import empty_figure

EXPLAIN = """**Predictions at every layer (the logit lens).** Pre-training reads the guess for a
`[MASK]` off the *last* layer only: its masked-word head (a small transform, then a score for every
piece of the vocabulary) turns the [MASK] position's vector into probabilities. Here the same head
is applied to that position's vector after the embeddings and after each layer, so you can watch
the guess take shape, row by row. The *embeddings* row knows only "a [MASK] here, at this
position", so it guesses pieces that are common anywhere; the **last row is exactly the fill-mask
prediction** above. The earlier layers were never trained to be read this way: their rows are a
rough view of what the vector already points to, not the model's answer."""
MAX_K = 8  # columns that still read on a phone


def _short(word: str, n: int = 8) -> str:
    """A cell's piece, short enough for a phone's column (the hover shows it whole)."""
    return word if len(word) <= n else word[: n - 1] + "…"


def figure(lens: dict, which: int, n_masks: int) -> go.Figure:
    """Rows = layers (embeddings at the top, the last layer at the bottom), columns = 1st..k-th
    guess; each cell is coloured by its probability and names the piece."""
    k = len(lens["top"][0])
    z = [[c["score"] for c in row] for row in lens["top"]]
    text = [[f"{_short(c['token_str'])}<br>{c['score']:.0%}" if c["score"] >= 0.01
             else f"{_short(c['token_str'])}<br>{c['score']:.1%}" for c in row] for row in lens["top"]]
    hover = [[f"{lens['layers'][r]} · guess {j + 1}: {c['token_str']} ({c['score']:.2%})" for j, c in enumerate(row)]
             for r, row in enumerate(lens["top"])]
    top = max(max(r) for r in z)
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"#{j + 1}" for j in range(k)], y=lens["layers"], text=text, texttemplate="%{text}",
        textfont=dict(size=11), customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorscale="Blues", zmin=0, zmax=max(top, 0.05), xgap=2, ygap=2,
        showscale=False))  # every cell prints its probability: a colour bar would only take a phone's width
    fig.update_yaxes(autorange="reversed", title=None, automargin=True)
    fig.update_xaxes(side="top", title=None)
    which_mask = f"[MASK] #{which}" if n_masks > 1 else "the [MASK]"
    fig.update_layout(height=110 + 52 * len(z), margin=dict(l=10, r=10, t=80, b=10),
                      title=dict(text=f"Top guesses for {which_mask} after each layer<br>"
                                      "<sup>last row = the fill-mask prediction</sup>", font_size=15))
    return fig


def lens_view(text, top_k, causal, which, choice):
    """(figure, JSON) of the logit lens for the `which`-th [MASK] (1-based) of the text."""
    text = common.check_text(text)
    k = min(MAX_K, common.whole_number(top_k, "number of guesses", 1, 100))
    model, tok = common.load_model(choice)
    if not family.has_mlm_head(model):  # an ELECTRA discriminator: the tab shows replaced tokens instead
        return empty_figure("No masked-LM head in this model, so there is nothing to read at each "
                                   "layer"), {}
    n = len(MASK_RE.findall(text))
    if n == 0:
        raise common.user_error("No [MASK] in the text: write [MASK] where the model should guess a word.")
    w = common.whole_number(which, "[MASK] number (which [MASK] to follow)", 1, max(1, n))
    with common.mistakes():
        lens = logit_lens(model, tok, text, top_k=k, mask_index=w - 1, causal=bool(causal))
    return figure(lens, w, n), lens


def build(text, k, causal, picker, after: list) -> dict:
    """The section under the fill-mask results, run after each of the fill-mask view's events (`after`: its
    button's first, which also carries this view's API) and only when that worked: a text without [MASK]
    is then one message, not the same mistake in two wordings. Returns the event's arguments."""
    gr.Markdown(EXPLAIN, elem_classes="bl-lens-explain")
    which = gr.Number(value=1, precision=0, label="Which [MASK] to follow (1 = the first)", minimum=None)
    plot = gr.Plot(label="Predictions at every layer")
    with gr.Accordion("JSON: per layer the top pieces {token, token_str, score}", open=False):
        raw = gr.JSON(label="logit-lens JSON")
    args = dict(fn=lens_view, inputs=[text, k, causal, which, picker], outputs=[plot, raw])
    after[0].success(**args, api_name="logit_lens")
    for event in after[1:]:
        event.success(**args, api_name=False)
    common.clear_on_failure(after, [plot, raw])  # the fill-mask view's mistake empties this section too
    gr.on([which.submit, which.input], **args, api_name=False, trigger_mode="always_last")
    return args
