"""Masking lab → "The gradient of the loss": the draw above through the model and back. At every
position, autograd's gradient of pre-training's loss at the logits beside the formula (p − onehot)/M;
at one selected piece its largest entries; and what reaches the word table the output layer shares."""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from ....analysis import mlm_gradient
from ....data import masking_lab
from ..shared import common
from .masking_score import COLORS, LEGEND

EXPLAIN = r"""**Where the loss pushes.** At a selected position the model gives every piece of the
vocabulary a score z (a logit), softmax turns the scores into probabilities p, and the loss there is
−log p<sub>y</sub> for the original piece y. Its gradient with respect to the scores is simply

$$\frac{\partial}{\partial z_w}\left(-\log p_y\right) = p_w - [w = y]$$

so the original's score is raised (p<sub>y</sub> − 1 < 0) and every other piece's lowered by its own
probability: the wrong favourites most. Pre-training's loss is the mean over the M selected
positions, so each of them gets (p − onehot)/M, and a position that was not selected (label −100) gets
**exactly zero**: it teaches the output layer nothing. Each row sums to 0, since p sums to 1.

Below, `torch.autograd` runs the model's own loss backwards on the draw above (BERT's 80/10/10 rule,
fp32, no dropout), and the formula is checked against it entry by entry."""

ROWS_NOTE = """**One step further down: the word table.** BERT's output layer scores a piece with the
word table's own row for it (tied weights), so the gradient at the scores lands on the table: row w
gets the sum over the selected positions of ∂L/∂z<sub>w</sub> times the head's vector there. A
negative sum pulls the row toward those vectors (the originals), a positive one pushes it away (the
wrong favourites); a piece that is the original at one position and a favourite at another gets both.
The input side reaches only the rows of the pieces the model was shown."""

EXAMPLES = [
    ["the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable .", 3, 1],
    ["the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable .", 3, 4],
    ["the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable .", 3, 5],
]
EXAMPLE_LABELS = ["draw #3, 1st selected (kept): sure and right", "draw #3, 4th: far off", "draw #3, 5th: torn between two"]
TOP_K, TOP_ROWS = 8, 8


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _esc(piece: str) -> str:
    """A piece as the summary shows it: escaped, and never read as Markdown (no link, no emphasis)."""
    return "<code>" + html.escape(piece).replace("[", "&#91;").replace("*", "&#42;").replace("_", "&#95;") + "</code>"


def norm_figure(tokens: list[str], rules: list[str | None], norms: list[float], M: int) -> go.Figure:
    """One bar per position (the piece the model saw), its height ‖∂L/∂z_i‖; selected ones in their
    rule's colour, the others grey at exactly 0."""
    labels = [f"{i} {t}" for i, t in enumerate(tokens)]
    fig = go.Figure()
    for rule, color in [*COLORS.items(), (None, "#9ca3af")]:
        mine = [i for i, r in enumerate(rules) if r == rule]
        if not mine:
            continue
        fig.add_bar(x=[labels[i] for i in mine], y=[norms[i] for i in mine], marker_color=color,
                    name=LEGEND[rule] if rule else "not selected: exactly 0",
                    text=[f"{norms[i]:.3g}" if rule else "" for i in mine], textposition="outside", cliponaxis=False,
                    hovertemplate="%{x}: ‖∂L/∂z‖ = %{y:.3g}<extra></extra>")
    fig.update_layout(
        title={"text": f"‖∂L/∂z‖ at every position<br><sub>non-zero only at the {M} selected</sub>",
               "font": {"size": 15}},
        height=380, margin=dict(l=50, r=10, t=60, b=10), plot_bgcolor="white", bargap=0.3, barmode="group",
        yaxis={"title": "gradient norm", "range": [0, max(norms + [1e-3]) * 1.3], "gridcolor": "#e5e7eb"},
        xaxis={"type": "category", "tickangle": -45, "categoryorder": "array", "categoryarray": labels},
        legend={"orientation": "h", "y": -0.35, "x": 0, "font": {"size": 11}})
    return fig


def gradient(text, rate, whole_word, seed, position, choice, spans=False):
    """The API: (summary, norm chart, entries table, word-table note, rows table, JSON) for the draw of
    `seed`, inspecting its `position`-th selected piece (from 1; past the last, the last)."""
    rate = common.masking_rate(rate)
    seed = common.whole_number(seed, "seed (draw number)", lo=0, hi=2**62)
    k = common.whole_number(position, "selected piece to inspect", lo=1, hi=2**62)
    model, _ = common.load_model(choice)
    tok, enc, note = common.tokenized(choice, text)
    with common.mistakes():
        draw = masking_lab.preview(tok, enc.ids, rate, bool(whole_word), seed, spans=bool(spans))
        if not draw["eligible"]:
            raise ValueError("Nothing to mask: every piece of this text is [UNK] or another special token.")
        res = mlm_gradient.mlm_gradient(model, draw["input_ids"], draw["labels"], enc.token_type_ids)
    M, T, V, sel = res["M"], res["T"], res["V"], res["selected"]
    names = {**masking_lab.RULE_NAMES, 0: None}
    rules = [names[r] for r in draw["rule"]]
    seen = [tok.id_to_token(i) for i in draw["input_ids"]]
    k_used = min(k, M)
    pos = sel[k_used - 1]
    entries = mlm_gradient.top_entries(res, pos, TOP_K)
    original = tok.id_to_token(draw["labels"][pos])
    right = entries[0]  # the original's entry, p_y - 1
    sums = max(abs(s) for s in res["row_sums"])
    zero = "exactly 0" if res["unselected_max"] == 0 else f"at most {res['unselected_max']:.1e}"
    clamp = (f" (this draw selects {M}: the {_ordinal(M)} is shown)" if k > M else "")
    said = (common.notice_html(note) + f"**Draw #{seed}**: {M} of {T} positions selected; pre-training's loss "
            f"(their mean) = **{res['loss']:.3f}**.\n\n"
            f"- **Formula against autograd**: the largest difference between (p − onehot)/M and "
            f"`torch.autograd`'s gradient over all {T} × {V:,} = {T * V:,} scores is **{res['max_abs_diff']:.1e}** "
            f"(fp32).\n"
            f"- **Not selected**: at the {T - M} other positions autograd's gradient is "
            f"{zero}.\n"
            f"- **Each selected row sums to 0**: the largest |sum| is {sums:.1e} (fp32 rounding).\n"
            f"- **The {_ordinal(k_used)} selected piece**{clamp}: position {pos}, original {_esc(original)}, "
            f"the model saw {_esc(seen[pos])} ({rules[pos]}). p<sub>y</sub> = {right['p']:.4g}, so its entry "
            f"p<sub>y</sub> − 1 = **{right['p_minus_onehot']:+.3g}** (always the largest: the other entries add "
            f"up to 1 − p<sub>y</sub>) and its gradient (÷ {M}) {right['grad']:+.3g}; the gradient's norm there is "
            f"{res['norms'][pos]:.3g}.")
    table = pd.DataFrame([{"piece": tok.id_to_token(e["id"]), "p": f"{e['p']:.4f}", "onehot": e["onehot"],
                           "p − onehot": f"{e['p_minus_onehot']:+.4f}", f"÷ M = ÷ {M}": f"{e['grad']:+.3e}",
                           "autograd": f"{e['autograd']:+.3e}", "|Δ|": f"{abs(e['grad'] - e['autograd']):.1e}"}
                          for e in entries])
    fig = norm_figure(seen, rules, res["norms"], M)
    data = {"seed": seed, "rate": rate, "whole_word": bool(whole_word), "spans": bool(spans), "M": M, "T": T,
            "V": V, "loss": res["loss"], "max_abs_diff": res["max_abs_diff"],
            "unselected_max": res["unselected_max"], "row_sums": res["row_sums"], "truncated": enc.truncated,
            "positions": [{"position": i, "seen": seen[i], "rule": rules[i], "norm": res["norms"][i],
                           "original": tok.id_to_token(draw["labels"][i]) if i in sel else None} for i in range(T)],
            "inspected": {"position": pos, "original": original,
                          "entries": [{"token": tok.id_to_token(e["id"])} | e for e in entries]}}
    if res["tied"]:
        rows = mlm_gradient.top_rows(res, TOP_ROWS)
        every = "every p > 0" if res["out_rows"] == V else "the others' p rounded to 0 in fp32"
        pieces = "the" if res["in_rows"] == res["input_pieces"] else "of the"
        rows_said = (ROWS_NOTE + f"\n\nHere the output layer's gradient reaches **{res['out_rows']:,} of {V:,} "
                     f"rows** ({every}); the input side's reaches **{res['in_rows']}**, {pieces} "
                     f"{res['input_pieces']} distinct pieces of the input (elsewhere its largest entry is "
                     f"{res['in_outside_input']:.1g}). Summed over all rows the output layer's gradient is "
                     f"{res['out_column_sum']:.1e} at most: the rows' pushes cancel.")
        rows_table = pd.DataFrame([{"row (piece)": tok.id_to_token(r["id"]),
                                    "original at": ", ".join(str(i) for i in sel if draw["labels"][i] == r["id"]) or "—",
                                    "Σ ∂L/∂z": f"{r['coefficient']:+.4f}",
                                    "the row is": "pulled in" if r["coefficient"] < 0 else "pushed away",
                                    "‖gradient row‖": f"{r['norm']:.3g}"} for r in rows])
        data["table"] = {key: res[key] for key in ("out_rows", "in_rows", "input_pieces", "in_outside_input",
                                                   "out_column_sum")} | {
            "top_rows": [{"token": tok.id_to_token(r["id"])} | r for r in rows]}
    else:
        rows_said, rows_table = ("This model's output layer has a matrix of its own (not the word table): the "
                                 "table gets only the input side's gradient."), None
    return said, fig, table, rows_said, rows_table, data


def shown(text, rate, whole_word, seed, position, choice, spans=False):
    """`gradient`, but a model without a masked-LM head is a note: the view re-runs as the draw changes."""
    try:
        return gradient(text, rate, whole_word, seed, position, choice, spans)
    except gr.Error as e:
        if "masked-LM head" not in str(e.message):
            raise
        return common.notice_html(common.said(e)), None, None, "", None, {}


def rerun(text, rate, whole_word, seed, position, choice, spans=False):
    """`shown` as the draw above changes: the draw's mistakes are the lab's to say, once (here a note);
    only this view's own box speaks up."""
    try:
        return shown(text, rate, whole_word, seed, position, choice, spans)
    except gr.Error as e:
        if "selected piece to inspect" in str(e.message):
            raise
        return common.notice_html(f"Fix the draw above first: {common.said(e)}"), None, None, "", None, {}


def build(text, rate, whole, seed, picker, spans) -> tuple[gr.Number, gr.Examples]:
    """The view; it re-runs whenever the draw above changes. Returns its input and its examples (which
    set the lab's text and seed: the lab redraws after them)."""
    with common.form(EXPLAIN):
        position = gr.Number(label="Selected piece to inspect (1 = the first selected)", value=1, precision=0,
                             minimum=1, min_width=220, elem_id="mask-grad-position")
        # under the box, not in the side column: on a phone that goes to the foot of the view
        ex = gr.Examples(EXAMPLES, [text, seed, position], example_labels=EXAMPLE_LABELS,
                         label="Examples: click one to check it (they set the draw above too)")
        go_btn = gr.Button("Check the gradient", variant="primary")
        said = gr.Markdown(elem_id="mask-grad-said")
    plot = gr.Plot(label="Gradient norm per position", elem_id="mask-grad-plot")
    table = gr.Dataframe(label="The largest entries of p − onehot at the inspected piece", interactive=False,
                         wrap=True, elem_id="mask-grad-entries",
                         column_widths=["110px", "80px", "80px", "110px", "120px", "120px", "80px"])
    rows_said = gr.Markdown(elem_id="mask-grad-rows-said")
    rows = gr.Dataframe(label="The word-table rows the output layer pushes hardest", interactive=False,
                        wrap=True, elem_id="mask-grad-rows", column_widths=["120px", "110px", "100px", "120px", "160px"])
    with gr.Accordion("JSON (per position: the gradient's norm; the inspected piece's entries; the table)",
                      open=False):
        raw = gr.JSON()
    inputs = [text, rate, whole, seed, position, picker, spans]
    common.wire(shown, inputs, [said, plot, table, rows_said, rows, raw], go_btn, "mask_gradient",
                [seed.change, whole.input, spans.input, rate.release, text.submit, picker.change, position.submit,
                 position.input], ex, auto=rerun, trigger_mode="always_last")
    return position, ex
