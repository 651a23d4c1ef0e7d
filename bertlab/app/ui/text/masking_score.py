"""Masking lab → "Score a draw": the draw above goes through the model, and at every selected position
(masked, random and kept alike) the student sees the loss pre-training adds there and the top-5
guesses. The shares of the 80/10/10 rule are sliders, so the 100 % [MASK] ablation is one click."""
from __future__ import annotations

import html
import math

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from ....analysis import draw_score
from ....data import masking_lab
from ..shared import common

# The Masking lab's own rule colours (masking_tab.RULE_COLOR; a test keeps them equal).
COLORS = {"[MASK]": "#d62728", "random": "#ff7f0e", "kept": "#2ca02c"}
LEGEND = {"[MASK]": "selected → [MASK]", "random": "selected → random token", "kept": "selected, kept as is"}

EXPLAIN = """**Score a draw.** The draw above (same text, rate and seed) goes through the model once. At
every *selected* position the model must give back the original piece, whatever it was shown there:
`[MASK]`, a random piece, or the piece itself. The **loss** there is −log p(original): 0 when the model
is sure and right, about 2.3 when it gives the original only 10 %. Pre-training's loss for this sentence
is the mean over the selected positions. Expect *kept* positions to be cheap (the answer is in the
input) and *random* ones dear (the input points the wrong way).

**Move the shares.** Only the rule of each selected position changes; the same positions stay selected."""

ABLATION = """**The 100 % [MASK] ablation.** If every selected piece became `[MASK]`, every piece that is
*not* `[MASK]` would be right as it stands: the model would only ever be tested where it sees `[MASK]`,
and has little reason to build good vectors for real words. But a fine-tuned model never sees
`[MASK]`: every input piece is a real word, the very case pre-training never tested. This gap between
pre-training and fine-tuning inputs is the *mismatch* that BERT's 10 % random and 10 % kept pieces
narrow (Devlin et al. 2019, §3.1; in their Table 8, 100 % `[MASK]` did worst where BERT's vectors
were used frozen, for named entities). Click the recipe *100 % [MASK] (the ablation)*: every selected
position is then `[MASK]`, and no loss is measured on a real word."""

RECIPES = [[0.8, 0.1], [1.0, 0.0], [0.8, 0.0], [0.0, 0.0], [0.0, 1.0]]
RECIPE_LABELS = ["BERT's 80/10/10", "100 % [MASK] (the ablation)", "80 % [MASK], 20 % kept",
                 "all kept (nothing hidden)", "all random"]


def _share(x, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise common.user_error(f"The {what} must be a number from 0 to 1, got {x!r}.") from None
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise common.user_error(f"The {what} must be from 0 to 1, got {x!r}.")
    return v


def check_shares(mask_share, random_share) -> tuple[float, float, float]:
    """([MASK], random, kept) shares of the selected tokens; kept is what the other two leave."""
    m, r = _share(mask_share, "[MASK] share"), _share(random_share, "random share")
    if m + r > 1.0 + 1e-9:
        raise common.user_error(f"The [MASK] share ({m:.0%}) and the random share ({r:.0%}) add up to "
                                f"{m + r:.0%}: together they may be at most 100% (kept is the rest).")
    return m, r, max(0.0, 1.0 - m - r)


def _pct(p: float) -> str:
    return f"{p:.0%}" if p >= 0.005 else f"{p * 100:.1g}%"


def loss_figure(rows: list[dict], labels: list[str], title: str) -> go.Figure:
    """One bar per selected position, its height the loss, coloured by its rule (one legend entry each)."""
    fig = go.Figure()
    for rule, color in COLORS.items():
        mine = [(lab, r) for lab, r in zip(labels, rows) if r["rule"] == rule]
        if not mine:
            continue
        fig.add_bar(x=[lab for lab, _ in mine], y=[r["loss"] for _, r in mine], name=LEGEND[rule],
                    marker_color=color, text=[r["guesses"][0] for _, r in mine], textposition="outside",
                    customdata=[r["hover"] for _, r in mine], cliponaxis=False,
                    hovertemplate="%{x}: loss %{y:.2f}<br>%{customdata}<extra></extra>")
    top = max([r["loss"] for r in rows] + [1.0])
    fig.update_layout(
        title={"text": title, "font": {"size": 15}}, height=400, margin=dict(l=50, r=10, t=60, b=10),
        barmode="group", plot_bgcolor="white", bargap=0.3,
        yaxis={"title": "loss = −log p(original)", "range": [0, top * 1.25], "gridcolor": "#e5e7eb"},
        xaxis={"type": "category", "tickangle": -45, "categoryorder": "array", "categoryarray": labels},
        legend={"orientation": "h", "y": -0.28, "x": 0, "font": {"size": 11}})
    return fig


def score(text, rate, whole_word, seed, mask_share, random_share, choice, spans=False):
    """The API: (summary, loss chart, table, JSON) for the draw of `seed` with the given shares."""
    m, r, k = check_shares(mask_share, random_share)
    rate = common.masking_rate(rate)
    seed = common.whole_number(seed, "seed (draw number)", lo=0, hi=2**62)
    model, _ = common.load_model(choice)
    tok, enc, note = common.tokenized(choice, text)
    with common.mistakes():
        draw = masking_lab.preview(tok, enc.ids, rate, bool(whole_word), seed, m, r, bool(spans))
        if not draw["eligible"]:
            raise ValueError("Nothing to mask: every piece of this text is [UNK] or another special token.")
        res = draw_score.score_draw(model, draw["input_ids"], draw["labels"], draw["rule"], enc.token_type_ids)
    rows, s = res["positions"], res["summary"]
    name = tok.id_to_token
    for row in rows:
        row["original"], row["seen"] = name(row["label_id"]), name(draw["input_ids"][row["position"]])
        row["guesses"] = [name(j) for j, _ in row["top"]]
        row["hover"] = "top 5: " + " · ".join(f"{html.escape(name(j))} {_pct(p)}" for j, p in row["top"])
    labels = [f"{row['position']} {row['original']}" for row in rows]
    per_rule = "; ".join(f"{rule}: {v['count']} (mean loss {v['mean_loss']:.2f})"
                         for rule, v in s["by_rule"].items() if v["count"])
    said = (common.notice_html(note) + f"**Draw #{seed}** with {m:.0%} [MASK] / {r:.0%} random / {k:.0%} kept: "
            f"{s['selected']} positions selected; pre-training's loss for this draw (their mean) = "
            f"**{s['mean_loss']:.2f}**. By rule: {per_rule}.")
    table = pd.DataFrame([{"position": row["position"], "original": row["original"], "rule": row["rule"],
                           "model saw": row["seen"], "loss": round(row["loss"], 3),
                           "p(original)": _pct(row["prob"]), "rank": row["rank"],
                           "top-5 guesses": ", ".join(f"{g} {_pct(p)}"
                                                      for g, (_, p) in zip(row["guesses"], row["top"]))}
                          for row in rows])
    fig = loss_figure(rows, labels, f"Loss at each selected position<br><sub>bar label = the model's first "
                                    f"guess · mean {s['mean_loss']:.2f}</sub>")
    data = {"seed": seed, "rate": rate, "whole_word": bool(whole_word), "spans": bool(spans), "shares": {"[MASK]": m, "random": r,
                                                                                   "kept": k},
            "model_input": [name(i) for i in draw["input_ids"]], "summary": s, "truncated": enc.truncated,
            "positions": [{key: row[key] for key in ("position", "original", "rule", "seen", "loss", "prob",
                                                     "rank")} | {"top": [{"token": g, "prob": p} for g, (_, p)
                                                                         in zip(row["guesses"], row["top"])]}
                          for row in rows]}
    return said, fig, table, data


def shown(text, rate, whole_word, seed, mask_share, random_share, choice, spans=False):
    """`score`, but a model without a masked-LM head (an ELECTRA discriminator) is a note in the section:
    it re-scores on every change of the draw and the picker, so an error would pop up unasked."""
    try:
        return score(text, rate, whole_word, seed, mask_share, random_share, choice, spans)
    except gr.Error as e:
        if "masked-LM head" not in str(e.message):
            raise
        return common.notice_html(common.said(e)), None, None, {}


def rescore(text, rate, whole_word, seed, mask_share, random_share, choice, spans=False):
    """`shown` as the draw above changes: a mistake in that draw (text, rate, seed) is the lab's own
    handler's to say, once; here it is a note, not a second and third error."""
    try:
        common.check_text(text)
        common.masking_rate(rate)
        common.whole_number(seed, "seed (draw number)", lo=0, hi=2**62)
    except gr.Error as e:
        return common.notice_html(f"Fix the draw above first: {common.said(e)}"), None, None, {}
    return shown(text, rate, whole_word, seed, mask_share, random_share, choice, spans)


def build(text, rate, whole, seed, picker, spans) -> None:
    """The section, under the lab's statistics; it re-scores whenever the draw above changes."""
    gr.Markdown("### Score a draw: the loss at every selected position")
    with common.form(EXPLAIN):
        with gr.Row():
            mask_share = gr.Slider(0, 1, value=0.8, step=0.05, label="[MASK] share of the selected", min_width=200)
            random_share = gr.Slider(0, 1, value=0.1, step=0.05, label="random share (kept = the rest)",
                                     min_width=200)
        # beside the sliders, not in the side column: on a phone that goes to the foot of the tab
        ex = gr.Examples(RECIPES, [mask_share, random_share], example_labels=RECIPE_LABELS,
                         label="Recipes: click one to score the draw with it")
        go_btn = gr.Button("Score this draw", variant="primary")
        said = gr.Markdown(elem_id="mask-score-said")
        gr.Markdown(ABLATION)
    plot = gr.Plot(label="Loss per selected position", elem_id="mask-score-plot")
    # widths that fit each header on one line: at a phone's 390 px the columns broke "posi/ti/on" into
    # three lines; now the table scrolls sideways instead
    table = gr.Dataframe(label="Every selected position", interactive=False, wrap=True, elem_id="mask-score-table",
                         column_widths=["100px", "110px", "100px", "120px", "80px", "130px", "70px", "260px"])
    with gr.Accordion("JSON (per position: rule, loss, p(original), rank, top-5)", open=False):
        raw = gr.JSON()
    inputs = [text, rate, whole, seed, mask_share, random_share, picker, spans]
    common.wire(shown, inputs, [said, plot, table, raw], go_btn, "mask_score",
                [seed.change, whole.input, spans.input, rate.release, text.submit, picker.change, mask_share.release,
                 random_share.release, mask_share.input, random_share.input], ex, auto=rescore,
                trigger_mode="always_last")
