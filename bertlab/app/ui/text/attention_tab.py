"""Attention: where each token looks, head by head and layer by layer, for the student's own sentence.

Numbers come from `analysis.attention_views` (one forward pass, shared by every view); this module
only draws them. The bertviz pages are built in a second event so the API call stays fast.
"""
from __future__ import annotations

import html
import math

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from ....analysis import attention_views as av
from ....analysis import bertviz_offline as bv
from ..shared import links, models, text_notes
from ..shared.common import config_of, examples, form, load_model, mistakes, notice_html, wire
from . import attention_finder, attention_mask, attention_math, attention_padding, attention_sparse
from .attention_run import checked_run as _run

MAX_TEXT = 20_000  # characters per box: more would only be cut to the model's tokens anyway

EXPLAIN = """**Attention: where each token looks.** In every layer, each *head* lets every token (a row,
the *query*) share out 100 % of its attention over all tokens (the columns, the *keys*) and takes in
their information in that proportion. Heads learn habits: the previous or next word, the token itself,
or "parking" on `[CLS]`/`[SEP]`. Layers and heads are numbered from 1."""

OVERVIEW_NOTE = """Each square is one head, named after where more than half of its attention goes
(`[CLS]`, `[SEP]`, the previous, next or same token); *broad* heads spread it nearly evenly, *mixed*
ones look at a few tokens chosen by content. The number is that share. Hover for all figures."""

ROLLOUT_NOTE = """**Rollout** (Abnar & Zuidema 2020) multiplies the head-averaged attention maps of
all layers, counting the skip connection as half of each step, to estimate how much each token's
final vector draws on each input token. It is a rough guide, not an explanation: it ignores what
the value vectors and feed-forward layers do with the mixture, and it blurs towards uniform in deep models."""

STATS_NOTE = """Per head, averaged over the tokens of this sentence: the share of attention on `[CLS]`,
on `[SEP]`, on the previous, next and same token, and the entropy (0 = all on one token;
'entropy / max' = 1 means spread evenly) — the measures of Clark et al. (2019), *What does BERT look
at?*, who found heads for previous/next tokens, heads parked on `[SEP]`, and heads that track syntax.
Click a column header to sort. Computed on all tokens, [CLS]/[SEP] included."""

AVERAGE_NOTE = """**Average of the layer's heads**: each cell is that cell's mean over all heads of this
layer, so one head's sharp habit is diluted by the others', and it shows a single layer's step, where
**Rollout** multiplies such averages through every layer (skip connections included) to reach the final
vectors. The study guide *BERT and Bidirectional Models* draws this map for the last layer."""

BERTVIZ_NOTE = """Interactive views from **bertviz** (Vig 2019), drawn in your browser with no internet.
*Head view*: it opens on the layer and head picked above; hover a token to see the lines to what it
attends to. The numbered squares are the heads: click one to add or remove it, double-click to show only
that one. *Model view*: every head of every layer as a thumbnail; click one to enlarge. Layers and heads
are numbered from 1 here, as everywhere on this page."""

EXAMPLES = [
    ["the cat sat on the mat because it was tired .", ""],
    ["i sat on the river bank .", ""],
    ["the acting was great .", "the plot was a mess ."],
]

PATTERN_COLOURS = {"[CLS]": "#1f77b4", "[SEP]": "#9467bd", "previous": "#17becf", "next": "#bcbd22",
                   "self": "#8c564b", "broad": "#d4d4d4", "mixed": "#e377c2"}
STAT_COLUMNS = [("layer", "layer"), ("head", "head"), ("pattern", "pattern"), ("cls", "[CLS]"),
                ("sep", "[SEP]"), ("prev", "previous"), ("next", "next"), ("self", "self"),
                ("entropy", "entropy (nats)"), ("entropy_norm", "entropy / max")]
GRID_CELLS = 1_200_000  # more numbers than this in one "all heads" figure is too slow to send and draw
HEATMAP_COLOURS = "Blues"
VIEWS = ("sparse", "padding")  # sub-tabs a link's ?view= opens


def _shown(run, hide_specials: bool):
    with mistakes(ValueError):
        keep = av.kept_positions(run, bool(hide_specials))
    return keep, av.unique_labels([run.tokens[i] for i in keep], keep)


def _r(m, digits: int = 4) -> list:
    """A tensor as nested lists of short floats (small JSON for API users)."""
    return m.double().round(decimals=digits).tolist()


def _z(m):
    """A tensor for plotly: float32 numpy goes out as compact binary and skips per-number validation."""
    return m.float().numpy()


def heatmap(m, labels: list[str], title: str, axes: tuple[str, str] = ("key (attended to)", "query (attending)"),
            ) -> go.Figure:
    """One (T, T) map: `axes` = (across, down), by default key tokens across and query tokens down,
    weight on hover; square cells. Keep `title` short: a phone shows about 40 characters of it."""
    n = len(labels)
    size = min(950, max(500, 26 * n + 230))
    # The layout goes whole into the constructor: update_layout() afterwards costs several times more.
    return go.Figure(go.Heatmap(
        z=_z(m), x=labels, y=labels, colorscale=HEATMAP_COLOURS, zmin=0, colorbar={"title": "weight"},
        hovertemplate="<b>%{y}</b> attends to <b>%{x}</b><br>weight %{z:.3f}<extra></extra>"), layout=dict(
        title={"text": title, "font": {"size": 15}}, height=size, margin=dict(l=10, r=10, t=50, b=10),
        xaxis={"title": axes[0], "tickangle": -60, "type": "category", "constrain": "domain"},
        yaxis={"title": axes[1], "autorange": "reversed", "type": "category", "scaleanchor": "x",
               "constrain": "domain"},
        plot_bgcolor="white"))


def _domain(a: float, b: float) -> list[float]:
    """A subplot's [start, end] in paper units; rounding noise must not step outside [0, 1]."""
    return [max(0.0, round(a, 6)), min(1.0, round(b, 6))]


def layer_grid(run, keep, labels, layer: int) -> tuple[go.Figure, str]:
    """All heads of one layer as small maps sharing one colour scale (axes built by hand: fast)."""
    A = run.num_heads
    maps = av.restrict(run.attentions[layer - 1], keep) if len(keep) < len(run.tokens) else run.attentions[layer - 1]
    note = ""
    if A * len(keep) ** 2 > GRID_CELLS:  # keep the figure small enough to send: crop to the first tokens
        n = int(math.sqrt(GRID_CELLS / A))
        maps, labels = maps[:, :n, :n], labels[:n]
        note = f"The all-heads grid shows only the first {n} tokens (the full grid would be too big to draw)."
    cols = min(A, 4)
    rows = math.ceil(A / cols)
    gap_x, gap_y = 0.04, 0.06 / max(rows, 1) * 2
    w, h = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    data, layout = [], {}
    show_ticks = len(labels) <= 40  # token names on the left of each row of maps, where they fit
    for k in range(A):
        r, c = divmod(k, cols)
        ax = "" if k == 0 else str(k + 1)
        data.append(go.Heatmap(z=_z(maps[k]), x=labels, y=labels, coloraxis="coloraxis", xaxis=f"x{ax}",
                               yaxis=f"y{ax}", hovertemplate=f"head {k + 1}<br><b>%{{y}}</b> → <b>%{{x}}</b>"
                                                             "<br>weight %{z:.3f}<extra></extra>"))
        x0, y1 = c * (w + gap_x), 1 - r * (h + gap_y)
        layout[f"xaxis{ax}"] = {"domain": _domain(x0, x0 + w), "showticklabels": False, "anchor": f"y{ax}",
                                "type": "category"}
        layout[f"yaxis{ax}"] = {"domain": _domain(y1 - h, y1), "anchor": f"x{ax}", "autorange": "reversed",
                                "type": "category", "tickfont": {"size": 9},
                                "showticklabels": c == 0 and show_ticks}
        layout.setdefault("annotations", []).append(
            {"text": f"head {k + 1}", "x": x0 + w / 2, "y": y1, "xref": "paper", "yref": "paper",
             "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    layout.update(title={"text": f"Layer {layer}: all {A} heads<br><sub>rows = query, columns = key; "
                                 "hover for tokens</sub>", "font": {"size": 15}},
                  coloraxis={"colorscale": HEATMAP_COLOURS, "cmin": 0, "colorbar": {"title": "weight"}},
                  height=min(1000, 230 * rows + 90), margin=dict(l=90 if show_ticks else 10, r=10, t=70, b=10),
                  plot_bgcolor="white")
    return go.Figure(data=data, layout=layout), note


def overview(stats: list[dict], L: int, A: int) -> go.Figure:
    """Layers × heads: each head coloured by its dominant pattern, labelled with that share."""
    codes = {p: i for i, p in enumerate(av.PATTERNS)}
    z = [[0] * A for _ in range(L)]
    text = [[""] * A for _ in range(L)]
    hover = [[""] * A for _ in range(L)]
    for s in stats:
        i, j = s["layer"] - 1, s["head"] - 1
        z[i][j] = codes[s["pattern"]]
        text[i][j] = f"{s['pattern']}<br>{s['pattern_share']:.2f}"
        hover[i][j] = (f"layer {s['layer']}, head {s['head']}: <b>{s['pattern']}</b><br>[CLS] {s['cls']:.2f} · "
                       f"[SEP] {s['sep']:.2f}<br>previous {s['prev']:.2f} · next {s['next']:.2f} · "
                       f"self {s['self']:.2f}<br>entropy / max {s['entropy_norm']:.2f}")
    n = len(av.PATTERNS)
    scale = []
    for i, p in enumerate(av.PATTERNS):  # one flat colour band per pattern code
        scale += [[i / n, PATTERN_COLOURS[p]], [(i + 1) / n, PATTERN_COLOURS[p]]]
    return go.Figure(go.Heatmap(
        z=z, x=[f"head {j + 1}" for j in range(A)], y=[f"layer {i + 1}" for i in range(L)], zmin=-0.5,
        zmax=n - 0.5, colorscale=scale, text=text, texttemplate="%{text}", customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2,
        colorbar={"tickvals": list(range(n)), "ticktext": list(av.PATTERNS), "title": "mostly looks at"}),
        layout=dict(title={"text": "Every head at a glance<br><sub>layer 1 = closest to the input</sub>",
                           "font": {"size": 15}},
                    height=min(900, max(320, 60 * L + 140)), margin=dict(l=10, r=10, t=60, b=10),
                    yaxis={"autorange": "reversed"}, xaxis={"side": "top"}, plot_bgcolor="white"))


def stats_frame(stats: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{label: s[k] for k, label in STAT_COLUMNS} for s in stats]).round(3)


def _caption(run, keep, layer, head, hide, extra: str = "") -> str:
    shown = (f"**Layer {layer}, head {head}** of {run.num_layers} layers × {run.num_heads} heads · "
             f"{len(run.tokens)} tokens")
    if hide:
        shown += (f" · **[CLS]/[SEP] hidden**: {len(run.tokens) - len(keep)} removed and every row rescaled "
                  "to sum to 1 over the tokens shown (so a weight reads as a share of the attention *not* spent "
                  "on [CLS]/[SEP])")
    notes = [n for n in (f"The text was cut to {len(run.tokens)} tokens: this model reads at most "
                         f"{run.max_length}." if run.truncated else "", extra) if n]
    return shown + "".join(notice_html(n) for n in notes)


def cut_notes(text, pair) -> str:
    """A box's limit cuts a longer paste in the browser without a word: say so under the caption."""
    return "".join(notice_html(n) for n in (text_notes.cut(text, "text", MAX_TEXT),
                                             text_notes.cut(pair, "second sentence", MAX_TEXT)) if n)


def head_figures(run, layer: int, head: int, hide: bool):
    keep, labels = _shown(run, hide)
    m = av.restrict(run.attentions[layer - 1, head - 1], keep)
    fig = heatmap(m, labels, f"Layer {layer}, head {head}<br><sub>each row shares out 1.0 of attention</sub>")
    grid, note = layer_grid(run, keep, labels, layer)
    return fig, grid, _caption(run, keep, layer, head, hide, note), keep, labels, m


def average_figure(run, keep, labels, layer: int) -> tuple[go.Figure, str]:
    """The layer's map averaged over its heads (shown as the head map is), and its strongest word pair."""
    m = av.restrict(av.layer_average(run, layer), keep)  # (T', T')
    fig = heatmap(m, labels, f"Layer {layer}, mean of {run.num_heads} heads<br><sub>each row still sums to 1</sub>")
    try:
        i, j, w = av.strongest_pair(m, [run.special[k] for k in keep])
        said = (f"Strongest link between two different word pieces here: **{html.escape(labels[i])}** → "
                f"**{html.escape(labels[j])}**, {w:.2f}.")
    except ValueError:
        said = ""
    return fig, said


def average_view(text: str, pair: str, layer, hide_specials: bool, choice: str | None):
    """After a redraw or a new layer: (the layer's head-averaged map, its caption)."""
    run, layer, _ = _run(text, pair, choice, layer, 1)
    keep, labels = _shown(run, bool(hide_specials))
    fig, said = average_figure(run, keep, labels, layer)
    return fig, said + "\n\n" + AVERAGE_NOTE


def analyse(text: str, pair: str, layer, head, hide_specials: bool, choice: str | None):
    """The API: (head map, layer grid, overview, rollout, stats table, caption, JSON)."""
    run, layer, head = _run(text, pair, choice, layer, head)
    hide = bool(hide_specials)
    fig, grid, caption, keep, labels, m = head_figures(run, layer, head, hide)
    stats = av.stats_table(run)
    roll = av.restrict(av.rollout_map(run), keep)
    roll_fig = heatmap(roll, labels, "Rollout over all layers<br><sub>rows = final token, columns = input token"
                       "</sub>", axes=("input token (drawn on)", "final token (drawing)"))
    data = {"tokens": [run.tokens[i] for i in keep], "positions": keep, "all_tokens": run.tokens,
            "truncated": run.truncated, "hide_specials": hide, "layer": layer, "head": head,
            "num_layers": run.num_layers, "num_heads": run.num_heads, "attention": _r(m),
            "head_stats": [{k: s[k] for k, _ in STAT_COLUMNS} | {"pattern_share": s["pattern_share"]} for s in stats],
            "rollout": _r(roll), "layer_average": _r(av.restrict(av.layer_average(run, layer), keep))}
    caption += cut_notes(text, pair)
    return fig, grid, overview(stats, run.num_layers, run.num_heads), roll_fig, stats_frame(stats), caption, data


def select_head(text: str, pair: str, layer, head, hide_specials: bool, choice: str | None):
    """Slider moves: redraw only the head map, the layer grid and the caption."""
    run, layer, head = _run(text, pair, choice, layer, head)
    fig, grid, caption, *_ = head_figures(run, layer, head, bool(hide_specials))
    return fig, grid, caption + cut_notes(text, pair)


def bertviz_views(text: str, pair: str, layer, head, hide_specials: bool, choice: str | None):
    """(head view HTML, model view HTML): self-contained iframes, with [CLS]/[SEP] hidden if asked."""
    run, layer, head = _run(text, pair, choice, layer, head)
    keep, _ = _shown(run, hide_specials)
    att = av.restrict(run.attentions, keep)
    tokens = [run.tokens[i] for i in keep]
    b = next((k for k, i in enumerate(keep) if run.token_type_ids[i] == 1), None)
    note = "[CLS]/[SEP] hidden, rows rescaled to sum to 1." if hide_specials else ""
    try:
        with mistakes(ValueError):
            head_doc = bv.head_view_html(att, tokens, b, layer=layer - 1, heads=[head - 1], note=note)
            if bv.fits(att, whole_model=True):
                model_html = bv.iframe(bv.model_view_html(att, tokens, b, note=note),
                                       bv.model_view_height(run.num_layers, run.num_heads, len(tokens)))
            else:
                model_html = notice_html("The model view is too big for this many tokens and heads: shorten the text.")
    except bv.BertvizUnavailable as e:
        msg = notice_html(str(e))
        return msg, msg
    return bv.iframe(head_doc, bv.head_view_height(len(tokens))), model_html


def on_model(choice: str | None, layer, head):
    """Fit the layer/head sliders to the chosen model, keeping the current choice where it exists."""
    model, _ = load_model(choice)
    L, A = model.config.num_hidden_layers, model.config.num_attention_heads

    def fit(v, n):
        return min(max(int(v), 1), n) if isinstance(v, (int, float)) and math.isfinite(v) else 1
    return (gr.Slider(minimum=1, maximum=L, value=fit(layer, L), step=1),
            gr.Slider(minimum=1, maximum=A, value=fit(head, A), step=1))


def build(picker: gr.Dropdown) -> None:
    c = config_of(models.DEFAULT)
    L, A = (c.num_hidden_layers, c.num_attention_heads) if c else (12, 12)
    with form(EXPLAIN) as side:
        text = gr.Textbox(label="Text", value=EXAMPLES[0][0], lines=2, max_length=MAX_TEXT)
        pair = gr.Textbox(label="Second sentence (optional)", value="", lines=1, max_length=MAX_TEXT)
        with gr.Row():
            layer = gr.Slider(1, L, value=min(2, L), step=1, label="Layer", min_width=220)
            head = gr.Slider(1, A, value=1, step=1, label="Head", min_width=220)
            hide = gr.Checkbox(label="Hide [CLS]/[SEP]", info="drop them, rescale each row to sum to 1",
                               value=False, min_width=220)
        go_btn = gr.Button("Show attention", variant="primary")
        links.copy_button("attention")
    ex = examples(side, EXAMPLES, [text, pair])
    links.register("attention", text=text, pair=pair, layer=layer, head=head, hide=hide)
    caption = gr.Markdown()
    with gr.Tabs(overflow_behavior="wrap") as views:  # on a phone: rows of tabs, none hidden behind "…"
        with gr.Tab("One head"):
            with gr.Row():  # side by side on a wide screen, one under the other on a phone
                with gr.Column(min_width=320):
                    head_plot = gr.Plot(label="Attention of one head")
                with gr.Column(min_width=320):
                    avg_plot = gr.Plot(label="Average of the layer's heads", elem_id="attn-average")
                    avg_said = gr.Markdown(elem_id="attn-average-said")
        with gr.Tab("All heads of the layer"):
            grid_plot = gr.Plot(label="All heads of the layer")
        with gr.Tab("Overview"):
            gr.Markdown(OVERVIEW_NOTE)
            overview_plot = gr.Plot(label="Layers × heads")
        with gr.Tab("Rollout"):
            gr.Markdown(ROLLOUT_NOTE)
            rollout_plot = gr.Plot(label="Attention rollout")
        with gr.Tab("Head statistics"):
            gr.Markdown(STATS_NOTE)
            table = gr.Dataframe(label="Per-head statistics", interactive=False, max_height=460)
        with gr.Tab("bertviz"):
            gr.Markdown(BERTVIZ_NOTE)
            with gr.Tabs(overflow_behavior="wrap"):
                with gr.Tab("Head view"):
                    head_view = gr.HTML()
                with gr.Tab("Model view"):
                    model_view = gr.HTML()
        with gr.Tab("Click to mask"):
            follow = [attention_mask.build(text, pair, layer, head, picker)]
        with gr.Tab("Q·K·V by hand"):
            follow.append(attention_math.build(text, pair, layer, head, picker))
        with gr.Tab("Sparse patterns", id="sparse"):
            follow.append(attention_sparse.build(text, pair, layer, head, picker))
        follow.append(attention_finder.build(text, pair, picker))  # its own sub-tab
        with gr.Tab("Padding and the mask", id="padding"):
            attention_padding.build(picker)  # its own sentences: it does not follow the text above
    with gr.Accordion("JSON (what the API returns)", open=False):
        raw = gr.JSON(label="tokens, attention of the selected head, head_stats, rollout")
    view = gr.Textbox("", visible=False)  # a link's ?view=sparse (or padding) opens that sub-tab
    links.register("attention", view=view)
    view.change(lambda v: gr.Tabs(selected=v) if v in VIEWS else gr.skip(), view, views, api_name=False)

    inputs = [text, pair, layer, head, hide, picker]
    outputs = [head_plot, grid_plot, overview_plot, rollout_plot, table, caption, raw]
    events = wire(analyse, inputs, outputs, go_btn, "attention",
                  [text.submit, pair.submit, hide.change], ex)
    events.append(picker.change(on_model, [picker, layer, head], [layer, head], api_name=False)
                  .success(analyse, inputs, outputs, api_name=False))
    averaged = [text, pair, layer, hide, picker]
    for event in events:  # the bertviz pages and new token rows follow every full redraw, the page opening too
        event.success(bertviz_views, inputs, [head_view, model_view], api_name=False, show_progress="hidden")
        event.success(average_view, averaged, [avg_plot, avg_said], api_name=False, show_progress="hidden")
        for fn, ins, outs in follow:  # a dict of inputs: the handler takes them by name
            by_name = {"inputs": None, "inputs_kwargs": ins} if isinstance(ins, dict) else {"inputs": ins}
            event.success(fn, outputs=outs, api_name=False, show_progress="hidden", **by_name)
    gr.on([layer.release, head.release], select_head, inputs, [head_plot, grid_plot, caption], api_name=False
          ).success(bertviz_views, inputs, [head_view, model_view], api_name=False, show_progress="hidden")
    layer.release(average_view, averaged, [avg_plot, avg_said], api_name=False, show_progress="hidden")
