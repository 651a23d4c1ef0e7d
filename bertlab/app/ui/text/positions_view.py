"""Embeddings → Position embeddings: BERT learns one vector per position; the Transformer paper fixed them
as sines and cosines. The two tables' similarity maps side by side, and the shuffle test: with positions
switched off, attention cannot tell one order of the words from another."""
from __future__ import annotations

import html

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....analysis import positions as P
from ..shared import common, links
from ..shared.common import load_model, mistakes

EXPLAIN = """**Where is a word?** Attention alone cannot tell word order, so BERT adds a vector for each
position (0 = [CLS]) to every word's vector. BERT *learns* its table; the original Transformer *fixed*
it: column 2j of row p is sin(p / 10000^(2j/H)) and column 2j+1 the cosine, clocks that tick at
H/2 speeds. Top: the cosine similarity of every pair of rows of each table, on one −1..1 scale (blue
alike, red opposite). A dark band along the diagonal means *near positions have similar vectors*.
Bottom: the same, averaged over all pairs the same distance apart. The sinusoidal curve is the same
for every model of this width and length. A randomly initialised table shows only the diagonal and
noise."""

SHUFFLE_EXPLAIN = """**Switch positions off and shuffle.** Attention compares every word with every
other word, and the comparison does not depend on where they stand. Take the position vectors away and
shuffle the words: each word comes out of the last layer with **the same vector** as before (cosine
1.000), only in another place. [CLS], which the classifier reads, is then the same for *the man bit the
dog* and *the dog bit the man*: a bag of words. With the positions on, every vector changes. That is
all the position table is for."""

SHUFFLE_EXAMPLE = "the man bit the dog ."
TICKS = [-1.0, -0.5, 0.0, 0.5, 1.0]
BLUE, ORANGE = "#2563eb", "#ea580c"


def show(choice):
    """(figure, summary, JSON) for the picked model: its table and the sinusoidal one of its shape."""
    model, _ = load_model(choice)
    t = P.tables(model)
    sims = {k: P.similarity(t[k]) for k in ("learned", "sinusoidal")}
    dist = {k: P.by_distance(s) for k, s in sims.items()}
    n, width = t["learned"].shape
    own = "this model (fixed)" if t["fixed"] else "this model (learnt)"  # short: two maps share a phone's width
    fig = make_subplots(rows=2, cols=2, row_heights=[0.58, 0.42], vertical_spacing=0.16, horizontal_spacing=0.1,
                        specs=[[{}, {}], [{"colspan": 2}, None]],
                        subplot_titles=(own, "sinusoidal", "mean by distance"))
    for col, k in ((1, "learned"), (2, "sinusoidal")):
        fig.add_trace(go.Heatmap(z=sims[k].tolist(), colorscale="RdBu", zmin=-1, zmax=1, zmid=0, showscale=col == 2,
                                 colorbar=dict(title="cosine", tickvals=TICKS, ticktext=[f"{x:g}" for x in TICKS],
                                               len=0.55, y=0.78, thickness=12),
                                 hovertemplate="positions %{y} and %{x}: %{z:.2f}<extra></extra>"), 1, col)
        fig.update_yaxes(autorange="reversed", title="position" if col == 1 else None, row=1, col=col)
        fig.update_xaxes(title="position", row=1, col=col)
    for k, color, name in (("learned", BLUE, "this model's"), ("sinusoidal", ORANGE, "sinusoidal")):
        fig.add_trace(go.Scatter(x=list(range(n)), y=dist[k], mode="lines", line=dict(color=color, width=2), name=name,
                                 hovertemplate=f"{name}: %{{x}} apart, %{{y:.2f}}<extra></extra>"), 2, 1)
    fig.update_xaxes(title="distance (positions apart)", row=2, col=1)
    fig.update_yaxes(title="cosine", range=[-1, 1], row=2, col=1)
    fig.update_layout(height=640, legend=dict(orientation="h", y=-0.16), margin=dict(l=50, r=10, t=40, b=40))
    half = slice(n // 2, None)
    near = {k: d[1] if n > 1 else 1.0 for k, d in dist.items()}
    far = {k: sum(d[half]) / max(1, len(d[half])) for k, d in dist.items()}
    summary = (f"{n} position vectors of {width} numbers. Neighbours (1 apart) average **{near['learned']:.2f}** "
               f"in this model's table and {near['sinusoidal']:.2f} in the sinusoidal one; positions {n // 2} or more "
               f"apart **{far['learned']:.2f}** and {far['sinusoidal']:.2f}."
               + (" This model was pre-trained with the sinusoidal table: the two maps are the same." if t["fixed"]
                  else ""))
    return fig, summary, {"positions": n, "width": width, "fixed_sinusoidal": t["fixed"],
                          "mean_by_distance": dist["learned"], "sinusoidal_mean_by_distance": dist["sinusoidal"]}


def shuffle(choice, text, seed):
    """(summary, table rows, JSON): shuffle_test on the picked model."""
    model, tok = load_model(choice)
    with mistakes():
        res = P.shuffle_test(model, tok, text or "", int(seed or 0))
    rows = [[r["token"], r["position"], r["moved_to"], f"{r['with_positions']:.3f}", f"{r['without_positions']:.3f}"]
            for r in res["rows"]]  # three decimals as text: 1.000 reads as "the same", 1 would not
    e = html.escape
    summary = (f"Shuffled: **{e(' '.join(res['shuffled']))}**. Without positions every token's last-layer vector "
               f"is the one it had before (largest difference {res['max_diff_without']:.1e}, float rounding); "
               f"[CLS] has cosine **{res['cls_without']:.3f}** with its first self. With positions, [CLS] falls "
               f"to **{res['cls_with']:.3f}** and the words' vectors to "
               f"{min(r['with_positions'] for r in res['rows']):.2f}–{max(r['with_positions'] for r in res['rows']):.2f}.")
    return summary, rows, res


def build(model_box: gr.Textbox) -> None:
    with common.form(EXPLAIN):
        btn = gr.Button("Show the position embeddings", variant="primary")
        summary = gr.Markdown()
        plot = gr.Plot(label="Similarity of position vectors")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="mean similarity by distance")
    common.wire(show, [model_box], [plot, summary, raw], btn, "positions", [model_box.change])
    with common.form(SHUFFLE_EXPLAIN):
        with gr.Row():
            text = gr.Textbox(SHUFFLE_EXAMPLE, label="Sentence to shuffle", max_length=300, min_width=240, scale=3,
                              elem_id="positions-shuffle-text")
            seed = gr.Number(0, label="Shuffle #", precision=0, minimum=0, maximum=10**6, min_width=100, scale=1)
        go_btn = gr.Button("Shuffle, with and without positions", variant="primary", elem_id="positions-shuffle")
        said = gr.Markdown(elem_id="positions-shuffle-summary")
        table = gr.Dataframe(headers=["token", "from", "to", "on", "off"],  # narrow: all five fit a phone
                             datatype=["str", "number", "number", "str", "str"], interactive=False,
                             label="cosine of each token's last-layer vector in the two orders, positions on and off",
                             elem_id="positions-shuffle-table")
        with gr.Accordion("Numbers (JSON)", open=False):
            res = gr.JSON(label="shuffle test")
    links.register("embeddings", shuffle=text)
    common.wire(shuffle, [model_box, text, seed], [said, table, res], go_btn, "shuffle_positions",
                [text.submit, seed.change, model_box.change])
