"""Attention → "Head finder": attention from token X to token Y in every layer and head at once, and
the heads ranked by how well they follow neighbours, subject–verb pairs and long-range links on the
annotated sentences shipped in examples/heads.jsonl (scores from analysis.head_finder)."""
from __future__ import annotations

import weakref

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....analysis import attention_views as av
from ....analysis import head_finder as hf
from ....data import head_set
from ..shared.common import load_model, mistakes, notice_html, user_error
from .attention_run import checked_run as _run

NOTE = """**Find the heads.** Pick two tokens of the sentence above: the grid shows, for every layer (rows)
and head (columns), the share of the *from* token's attention that lands on the *to* token. Try a pronoun
and the noun it stands for (`it` → `cat`), a verb and its subject, or a word and its neighbour."""

RANK_NOTE = """**Which heads follow which relation?** Scored on 50 short sentences written for bertlab
(`examples/heads.jsonl`), with whole words marked: the score is the mean share of attention from one
word of a pair to the other (a split word's pieces averaged when attending, summed when attended to).
- **Neighbours**: from every word to the word just before it (or just after: the better of the two is
  kept and named). Many heads do almost nothing else.
- **Subject–verb**: from a verb to its subject (or back), for pairs at least two words apart ("the keys
  to the cabinet *are*"), so a neighbour head does not score by standing next to them.
- **Long-range**: links four or more words apart: a pronoun and the noun it stands for, a verb and a
  far subject, *either … or*, *if … then*.

*top-1* is how often the head looks at that word more than at any other word of the sentence; *chance*
is what a head spreading its attention evenly would score. **A high score is a correlation, not
proof**: the head looks where the relation is on these sentences, which does not show that the model
uses it for that relation (removing the head and watching agreement fail would be a test). Fifty
sentences are few, and a head may score for a reason we did not mark (the words may simply be near)."""

PRONOUNS = {"it", "he", "she", "they", "him", "her", "them", "his", "its", "their"}
DETERMINERS = {"the", "a", "an", "this", "that", "my", "your", "his", "her", "its", "our", "their"}
MAX_CHOICES = 512
_scores: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> head_scores on the shipped set


def _choices(run) -> list[tuple[str, int]]:
    return list(zip(av.unique_labels(run.tokens), range(len(run.tokens))))[:MAX_CHOICES]


def default_pair(tokens: list[str], special: list[bool]) -> tuple[int, int]:
    """(from, to) to open on: a pronoun and the first noun-like word before it, else the last word and
    the first; plain rules (no tagger), so only a starting point."""
    words = [i for i, s in enumerate(special) if not s]
    if not words:
        return 0, 0
    x = next((i for i in reversed(words) if tokens[i].lower().lstrip("ġ▁") in PRONOUNS), words[-1])
    y = next((i for i in words if i != x and tokens[i].lower().lstrip("ġ▁") not in DETERMINERS), words[0])
    return x, y


def _pos(v, what: str, n: int) -> int:
    """A token position from 0, or one clear line."""
    if v is None or v == "":
        raise user_error(f"Pick the {what} token.")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 0 <= int(v) < n:
        raise user_error(f"The {what} token must be a position of this text's tokens, 0 to {n - 1}; got {v!r}.")
    return int(v)


def grid_figure(g, label_x: str, label_y: str) -> go.Figure:
    """L × A heatmap, each cell the share of X's attention on Y in that head."""
    L, A = g.shape
    return go.Figure(go.Heatmap(
        z=g.float().numpy(), x=[f"head {a + 1}" for a in range(A)], y=[f"layer {l + 1}" for l in range(L)],
        colorscale="Blues", zmin=0, zmax=max(float(g.max()), 0.05), xgap=2, ygap=2,
        texttemplate="%{z:.2f}" if L * A <= 256 else None, colorbar={"title": "share"},
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"), layout=dict(
        title={"text": f"From <b>{label_x}</b> to <b>{label_y}</b><br><sub>share of the first token's "
                       "attention, every layer and head</sub>", "font": {"size": 15}},
        height=min(700, max(300, 44 * L + 140)), margin=dict(l=10, r=10, t=70, b=10),
        yaxis={"autorange": "reversed"}, xaxis={"side": "bottom"}, plot_bgcolor="white"))


def pair_view(text: str, pair: str, x, y, choice: str | None):
    """The API: (grid figure, caption, JSON) for attention from token x to token y (from 0)."""
    run, _, _ = _run(text, pair, choice, 1, 1)
    n = len(run.tokens)
    x, y = _pos(x, "from", n), _pos(y, "to", n)
    g = hf.pair_grid(run.attentions, x, y)  # (L, A)
    lx, ly = av.unique_labels(run.tokens)[x], av.unique_labels(run.tokens)[y]
    best = int(g.flatten().argmax())
    bl, bh = divmod(best, run.num_heads)
    caption = (f"Strongest: **layer {bl + 1}, head {bh + 1}** gives **{float(g[bl, bh]):.0%}** of "
               f"`{lx}`'s attention to `{ly}`; the mean over all {g.numel()} heads is {float(g.mean()):.0%}, and "
               f"a head spreading attention evenly over the {n} tokens would give {1 / n:.0%}.")
    if run.truncated:
        caption += notice_html(f"The text was cut to {n} tokens.")
    data = {"from": x, "to": y, "from_token": run.tokens[x], "to_token": run.tokens[y], "tokens": run.tokens,
            "grid": g.double().round(decimals=4).tolist(), "best": {"layer": bl + 1, "head": bh + 1}}
    return grid_figure(g, lx, ly), caption, data


def pair_api(text: str, pair: str = "", from_token: int = 1, to_token: int = 1, choice: str | None = None) -> dict:
    """The API: attention from token `from_token` to token `to_token` (positions from 0, [CLS] = 0) in
    every layer and head: {"grid": L × A shares, "best": {"layer", "head"}, "tokens", ...}."""
    return pair_view(text, pair, from_token, to_token, choice)[-1]


def tokens_row(text: str, pair: str, choice: str | None, x=None, y=None):
    """After every redraw of the tab: the two token pickers for the new text (kept where they still
    point inside it) and the grid for them."""
    run, _, _ = _run(text, pair, choice, 1, 1)
    n = len(run.tokens)
    ok = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n for v in (x, y))
    x, y = (x, y) if ok else default_pair(run.tokens, run.special)
    fig, caption, data = pair_view(text, pair, x, y, choice)
    choices = _choices(run)
    return gr.Dropdown(choices=choices, value=x), gr.Dropdown(choices=choices, value=y), fig, caption, data


def set_scores(model, tok):
    """head_scores of `model` on the shipped sentences, computed once per loaded model."""
    found = _scores.get(model)
    if found is None:
        found = _scores[model] = hf.run_set(model, tok, head_set.load())
    return found


def ranking_figure(ranks: dict) -> go.Figure:
    """One L × A grid per relation, each on its own colour scale (neighbour heads reach ~1, others less)."""
    rels = list(ranks)
    fig = make_subplots(rows=1, cols=len(rels), subplot_titles=rels, horizontal_spacing=0.06)
    for k, rel in enumerate(rels, 1):
        g = ranks[rel]["grid"]
        L, A = g.shape
        hover = [[f"layer {i + 1}, head {j + 1}: {float(g[i, j]):.3f}<br>{ranks[rel]['direction'][i][j]}"
                  for j in range(A)] for i in range(L)]
        fig.add_trace(go.Heatmap(z=g.float().numpy(), x=[str(j + 1) for j in range(A)],
                                 y=[str(i + 1) for i in range(L)], colorscale="Blues", zmin=0, showscale=False,
                                 xgap=1, ygap=1, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                                 texttemplate="%{z:.2f}" if L * A <= 36 else None, textfont={"size": 10}),
                      1, k)
        fig.update_xaxes(title_text="head", type="category", row=1, col=k)
        fig.update_yaxes(autorange="reversed", type="category", title_text="layer" if k == 1 else None,
                         row=1, col=k)
    fig.update_layout(title={"text": "Mean attention along each relation<br><sub>darker = follows it more; "
                                     "each grid on its own scale</sub>", "font": {"size": 15}},
                      height=360, margin=dict(l=10, r=10, t=90, b=10), plot_bgcolor="white")
    return fig


def rank_heads(choice: str | None):
    """The API: (ranking figure, top-5 table, JSON) of every head on the shipped annotated sentences."""
    model, tok = load_model(choice)
    with mistakes(ValueError):
        scores = set_scores(model, tok)
    ranks = hf.rankings(scores, top=5)
    table = pd.DataFrame([{"relation": r["relation"], "layer": r["layer"], "head": r["head"],
                           "direction": r["direction"], "score": round(r["score"], 3), "top-1": f"{r['top1']:.0%}",
                           "chance": round(r["chance"], 3), "pairs": r["pairs"]}
                          for rel in ranks.values() for r in rel["top"]])
    data = {"relations": {rel: v["top"] for rel, v in ranks.items()},
            "grids": {rel: v["grid"].double().round(decimals=4).tolist() for rel, v in ranks.items()},
            "sentences": len(head_set.load())}
    return ranking_figure(ranks), table, data


def build(text, pair, picker):
    """The sub-tab; returns (redraw fn, its inputs, its outputs) for the tab to run after each redraw."""
    with gr.Tab("Head finder") as tab:
        gr.Markdown(NOTE)
        with gr.Row():
            x = gr.Dropdown(label="From token (X)", choices=[], min_width=160, elem_id="finder-from")
            y = gr.Dropdown(label="To token (Y)", choices=[], min_width=160, elem_id="finder-to")
        caption = gr.Markdown(elem_id="finder-caption")
        grid = gr.Plot(label="Attention from X to Y in every head", elem_id="finder-grid")
        with gr.Accordion("JSON (the grid)", open=False):
            raw = gr.JSON()
        gr.Markdown(RANK_NOTE)
        rank_btn = gr.Button("Rank the heads on the annotated sentences")
        rank_plot = gr.Plot(label="Heads by relation", elem_id="finder-rank-plot")
        rank_table = gr.Dataframe(label="Top 5 heads per relation", interactive=False, elem_id="finder-ranking",
                                  max_height=700)
        with gr.Accordion("JSON (rankings and grids)", open=False):
            rank_raw = gr.JSON()
        gr.api(pair_api, api_name="attention_pair")  # the pickers check a value against their first (empty) choices
    gr.on([x.input, y.input], pair_view, [text, pair, x, y, picker], [grid, caption, raw], api_name=False)
    gr.on([tab.select, rank_btn.click, picker.change], rank_heads, picker, [rank_plot, rank_table, rank_raw],
          api_name="head_finder")
    return tokens_row, [text, pair, picker, x, y], [x, y, grid, caption, raw]
