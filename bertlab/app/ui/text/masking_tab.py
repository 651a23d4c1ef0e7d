"""Masking lab: the corruption BERT learns from, drawn by the same function pre-training uses."""
from __future__ import annotations

import html

import gradio as gr
import plotly.graph_objects as go

from ....data import masking_lab
from ....data.masking import KEPT, MASKED, RANDOM
from ..shared import common, links, text_notes
from . import masking_gradient, masking_score

EXPLAIN = """**How BERT makes its own exercises.** Before each batch, about 15 % of the tokens are
*selected* as things to guess. Of those, 80 % are replaced by `[MASK]`, 10 % by a random token and
10 % are left as they are, so the model cannot just learn "only `[MASK]` needs fixing". The draw
is new every time a sentence is seen (*dynamic masking*): press **Re-sample**. *Whole-word*
masking selects all pieces of a word together (`play ##ing`), which makes the guess harder.
*Spans* (SpanBERT) go further: the words are cut into runs of 1 to 10 (lengths drawn from a geometric
distribution, 3.8 words on average), and runs are hidden whole, in a random order, until the rate's
share of the tokens is spent (the last run cut short to fit), so the model must rebuild a phrase from
what surrounds it, not a word from its neighbours. The share hidden is the rate in every draw, rounded
to whole words; on a short sentence the budget is a few tokens, so the runs come out shorter.
SpanBERT found this helped span tasks such as question answering; DeBERTa, another descendant,
keeps BERT's masking but gives attention separate vectors for a word's content and its relative
position."""

STATS_NOTE = """The bars count many fresh draws of this same sentence. *Selected* is the share of
maskable tokens chosen (the expected value is a little above the rate on short sentences, because
at least one token is always chosen; with spans it is the budget itself, round(rate × tokens)). The
other bars split the selected tokens by rule. With whole-word masking one rule is drawn per word (with
spans, per run), so the split moves in bigger steps."""

EXAMPLES = [
    ["the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable .", 0.15, False],
    ["i was completely captivated by the breathtaking cinematography .", 0.15, True],
    ["this film is a masterpiece of suspense , humour and heartbreaking drama .", 0.4, False],
    ["the screenplay was predictable but the performances were outstanding .", 0.15, True],
]

VIEWS = ("score", "gradient")  # the sub-tabs' ids, for links
RULE_COLOR = {MASKED: "#d62728", RANDOM: "#ff7f0e", KEPT: "#2ca02c"}
LEGEND = [("selected → [MASK] (80 %)", "background:#d62728;color:#fff"),
          ("selected → random token (10 %)", "background:#ff7f0e;color:#fff"),
          ("selected, kept as is (10 %)", "background:#2ca02c;color:#fff"),
          ("not selected", f"background:{common.SEG_TINT[0]}"),
          ("[CLS]/[SEP] (never selected)", common.SPECIAL_STYLE),
          ("[UNK] (never selected)", common.UNK_STYLE)]


def _int(x, what: str, default: int = 0, lo: int | None = None, hi: int | None = None) -> int:
    """A blank field is the default; anything else a whole number from lo to hi, or a message
    naming the field."""
    n = default if x is None or x == "" else common.whole_number(x, what)
    if lo is not None and n < lo:
        raise common.user_error(f"The {what} must be {lo} or more, got {n}.")
    if hi is not None and n > hi:
        raise common.user_error(f"The {what} must be at most {hi:,}, got {n:,}.")
    return n


def _token_cell(tok_str: str, style: str, below: str, below_color: str, join: str) -> str:
    return (f'<span style="display:inline-flex;flex-direction:column;align-items:center;margin:3px 0 3px {join}">'
            f'<span style="{style}">{html.escape(tok_str)}</span>'
            f'<span style="font-size:11px;font-family:ui-monospace,monospace;color:{below_color};'
            f'min-height:15px">{html.escape(below)}</span></span>')


def tokens_html(enc, tok, draw: dict) -> str:
    """Original pieces; a selected one is framed in its rule's colour, with what replaced it below."""
    cells = []
    starts = {g[0] for g in common.word_groups(enc.tokens, enc.special_tokens_mask, enc.word_ids)}
    for i, t in enumerate(enc.tokens):
        rule, seen = draw["rule"][i], draw["input_ids"][i]
        join = "6px" if i in starts else "1px"  # pieces of a word sit close together
        if rule in RULE_COLOR:  # never a special token or [UNK]
            color = RULE_COLOR[rule]
            style = f"{common.CHIP};background:#fff;border:3px solid {color};font-weight:600"
            below = {MASKED: "→[MASK]", RANDOM: f"→{tok.id_to_token(seen)}", KEPT: "kept"}[rule]
        else:
            unk = enc.ids[i] == tok.unk_token_id
            style = common.chip_style(0, enc.special_tokens_mask[i], unk)
            below, color = "", "#6b7280"
        cells.append(_token_cell(t, style, below, color, join))
    return "".join(cells)


def model_input_html(tok, draw: dict, special: list[int]) -> str:
    """The corrupted sequence, exactly as the model receives it."""
    chips = []
    for i, (seen, rule) in enumerate(zip(draw["input_ids"], draw["rule"])):
        if rule in RULE_COLOR:
            c = RULE_COLOR[rule]
            style = f"{common.CHIP};background:{c};color:#fff;border-color:{c}"
        elif special[i]:
            style = f"{common.CHIP};{common.SPECIAL_STYLE}"
        else:
            style = f"{common.CHIP};background:#f3f4f6"
        chips.append(f'<span style="{style};margin:2px 3px 2px 0">{html.escape(tok.id_to_token(seen))}</span>')
    return "".join(chips)


def stats_figure(stats: dict) -> go.Figure:
    """Observed shares over N draws beside what the rule promises (grouped bars, rule colours)."""
    cats = ["selected", "→ [MASK]", "→ random", "kept"]
    colors = ["#7f7f7f", RULE_COLOR[MASKED], RULE_COLOR[RANDOM], RULE_COLOR[KEPT]]
    obs = [stats["selected_share"]] + [stats["split"][k] for k in ("[MASK]", "random", "kept")]
    exp = [stats["expected_share"]] + [stats["expected_split"][k] for k in ("[MASK]", "random", "kept")]
    fig = go.Figure()
    fig.add_bar(name="observed", x=cats, y=obs, marker_color=colors, text=[f"{v:.1%}" for v in obs],
                textposition="outside", hovertemplate="%{x}: %{y:.1%} observed<extra></extra>")
    fig.add_bar(name="expected", x=cats, y=exp, marker=dict(color=colors, opacity=0.35, pattern_shape="/"),
                text=[f"{v:.1%}" for v in exp], textposition="outside",
                hovertemplate="%{x}: %{y:.1%} expected<extra></extra>")
    fig.update_layout(
        barmode="group", height=340, margin=dict(l=50, r=20, t=60, b=85), yaxis_tickformat=common.PERCENT_AXIS,
        yaxis_range=[0, 1.0], legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        title=dict(text=f"Over {stats['samples']} draws: {stats['selected_tokens']:,} tokens selected "
                        f"(rate {stats['rate']:.0%})", font_size=15))
    fig.add_annotation(x=0, y=-0.3, xref="paper", yref="paper", showarrow=False, font_size=11,
                       text="'selected' = share of maskable tokens<br>the other bars = share of the selected ones")
    return fig


def mask_preview(text: str, rate: float, whole_word: bool, seed: int, n_samples: int, choice: str | None,
                 spans: bool = False):
    """(HTML of one draw, statistics figure, JSON) for one text, rate, whole-word flag and seed; `spans`:
    SpanBERT's runs of whole words."""
    r, seed = common.masking_rate(rate), _int(seed, "seed (draw number)", lo=0)
    n = _int(n_samples, "number of samples (N)", 200, lo=1, hi=masking_lab.MAX_SAMPLES)
    tok, enc, note = common.tokenized(choice, text)
    with common.mistakes():
        draw = masking_lab.preview(tok, enc.ids, r, bool(whole_word), seed, spans=bool(spans))
        if not draw["eligible"]:  # the lab's rule (the tokenizer's special ids), not one of our own
            raise ValueError("Nothing to mask: every piece of this text is [UNK] or another special token "
                             "([UNK]: characters the vocabulary does not know). Type some words.")
        stats = masking_lab.sample_stats(tok, enc.ids, r, bool(whole_word), n, seed, spans=bool(spans))
    n_sel = sum(x != 0 for x in draw["rule"])
    view = (common.notice_html(text_notes.cut(text)) + common.notice_html(note)
            + f"<div style='color:#374151'>Draw #{seed}: {n_sel} of {draw['eligible']} maskable pieces selected"
            + (" (spans of whole words)" if spans else " (whole words)" if whole_word else "")
            + (f"; over N draws the selected pieces came in runs of {stats['mean_run']:.1f} pieces"
               f" ({stats['mean_run_words']:.1f} words) on average" if spans or whole_word else "") + "</div>"
            + f"<div style='line-height:1.3;margin:4px 0 8px'>{tokens_html(enc, tok, draw)}</div>"
            + "<div style='color:#374151;margin-top:6px'><b>What BERT sees</b> (its input; it must "
              "recover the original piece at every coloured position):</div>"
            + f"<div style='line-height:2;margin:4px 0'>{model_input_html(tok, draw, enc.special_tokens_mask)}</div>"
            + common.legend_html(LEGEND))
    names = {**masking_lab.RULE_NAMES, 0: None}
    per_token = [{"position": i, "token": t, "selected": draw["rule"][i] != 0, "rule": names[draw["rule"][i]],
                  "replacement": tok.id_to_token(draw["input_ids"][i]) if draw["rule"][i] else None}
                 for i, t in enumerate(enc.tokens)]
    data = {"tokens": per_token, "model_input": [tok.id_to_token(i) for i in draw["input_ids"]],
            "seed": seed, "rate": r, "whole_word": bool(whole_word), "spans": bool(spans), "truncated": enc.truncated,
            "notice": note, "statistics": stats}
    return view, stats_figure(stats), data


def resample(text, rate, whole_word, seed, n_samples, choice, spans=False):
    """Dynamic masking: the next seed, so every click is a fresh draw (and still reproducible)."""
    seed = _int(seed, "seed (draw number)", lo=0) + 1
    return (seed, *mask_preview(text, rate, whole_word, seed, n_samples, choice, spans))


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        text = gr.Textbox(label="Text", value=EXAMPLES[0][0], lines=2,
                          max_length=common.MAX_INPUT_CHARS)
        with gr.Row():
            rate = gr.Slider(0.01, 1.0, value=0.15, step=0.01,
                             label="Masking rate (share of tokens selected)", min_width=220)
        with gr.Row():  # the two units side by side, under the rate: beside it a phone squeezed them
            whole = gr.Checkbox(label="Whole-word masking", value=False, min_width=160)
            spans = gr.Checkbox(label="Spans (SpanBERT)", value=False, min_width=160, elem_id="masking-spans",
                                info="runs of 1-10 whole words (3.8 on average) until the rate is spent")
        with gr.Row():
            seed = gr.Number(label="Seed (draw number)", value=0, precision=0, min_width=220)  # checked here, naming the field
            n = gr.Slider(10, 2000, value=200, step=10, label="Samples for the statistics (N)", min_width=220)
        with gr.Row():
            go_btn = gr.Button("Mask", variant="primary")
            again = gr.Button("Re-sample (new draw)")
        links.copy_button("masking")
        view = gr.HTML(label="One draw")  # right under the controls; the explanation and examples beside
    plot, raw = common.plot_beside_json("Over N samples", "JSON (per token: token, selected, rule, "
                                        "replacement; statistics)", STATS_NOTE)
    ex = common.examples(side, EXAMPLES, [text, rate, whole])
    links.register("masking", text=text, rate=rate, whole_word=whole, seed=seed, n=n, spans=spans)
    inputs = [text, rate, whole, seed, n, picker, spans]
    # typing in a number box (the seed, or a slider's own box) re-runs too: the last value wins
    common.wire(mask_preview, inputs, [view, plot, raw], go_btn, "mask_preview",
                [text.submit, whole.input, spans.input, rate.release, n.release, picker.change, seed.input, seed.submit,
                 rate.input, n.input], ex, trigger_mode="always_last")
    again.click(resample, inputs, [seed, view, plot, raw], api_name=False)
    with gr.Tabs(overflow_behavior="wrap") as views:  # under the draw, the two things the model does with it
        with gr.Tab("Score a draw", id="score"):
            masking_score.build(text, rate, whole, seed, picker, spans)  # the loss at every selected position
        with gr.Tab("The gradient of the loss", id="gradient"):
            position, grad_ex = masking_gradient.build(text, rate, whole, seed, picker, spans)
    opens = gr.Textbox("", visible=False)  # a link's ?view=gradient opens that sub-tab
    links.register("masking", position=position, view=opens)
    opens.change(lambda v: gr.Tabs(selected=v) if v in VIEWS else gr.skip(), opens, views, api_name=False)
    grad_ex.load_input_event.then(mask_preview, inputs, [view, plot, raw], api_name=False)  # its text and seed
