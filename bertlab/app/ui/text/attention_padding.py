"""Attention → "Padding and the mask": two or three sentences padded into one batch, the ids and the
attention mask the model is given, and what the mask changes, measured (numbers from analysis.padding)."""
from __future__ import annotations

import html
import math

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
import torch

from ....analysis import padding as P
from ....data.masking import IGNORE_INDEX
from ..shared.common import examples, form, load_model, mistakes, notice_html, wire

FP32_MIN = torch.finfo(torch.float32).min  # what bertlab's model adds to a pad key's score (model.attention_bias)
_E = math.floor(math.log10(-FP32_MIN))
_UP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
FP32_MIN_SAID = f"−{-FP32_MIN / 10 ** _E:.1f} × 10{str(_E).translate(_UP)}"  # −3.4 × 10³⁸

NOTE = f"""**Why [PAD] exists.** A batch goes through the model as one rectangular tensor of ids,
sentences × positions, so every shorter sentence is filled up with `[PAD]` to the longest one's length.
The **attention mask**, under the ids, marks real tokens 1 and fillers 0.

**What the mask does.** In every head, before the softmax, the score of every pad key gets a huge
negative number added: in bertlab the lowest number of the model's float type ({FP32_MIN_SAID} in
float32; Google's BERT code adds −10,000, as the study guide *BERT: Bidirectional Encoder
Representations from Transformers* shows). Its exponential underflows to 0, so no real token gives a
pad any weight, and each sentence comes out as if it had been run alone, up to float rounding.

**Pads still get vectors.** The model computes a vector at every position of the rectangle, pads
included: skipping them would break the one big matrix product. Nothing uses them: no real token
attends to them, a classifier reads `[CLS]`, and the training loss labels pads {IGNORE_INDEX} (skipped).
Leave the mask out, and the real tokens spend part of their attention on the pads: their vectors and
their guesses change."""

EXAMPLES = [
    ["the film was a [MASK] .\nthe acting was great but the plot was far too long and slow ."],
    ["i loved it .\nthe music was [MASK] .\nthe story dragged on and on , and even the actors looked bored ."],
    ["[MASK] .\nthis is one of the best films i have seen this year , with a cast that never puts a foot wrong ."],
]
CHIP = "display:inline-block;min-width:2.2em;padding:1px 4px;margin:1px;border-radius:4px;text-align:center"
CELL = "border:none;padding:0 1px"  # chips, not a grid
PAD, ZERO = "background:#e5e7eb;color:#6b7280", "background:#fee2e2;color:#991b1b;font-weight:700"


def batch_html(res: dict) -> str:
    """Each sentence's row of the batch: its tokens, their ids and the mask, pads greyed, zeros red;
    it scrolls sideways on a phone rather than widening the page."""
    out = []
    for b, (tokens, ids, mask) in enumerate(zip(res["tokens"], res["ids"], res["attention_mask"])):
        cells = [[f'<span style="{CHIP};{PAD if not m else "background:#dbeafe"}">{html.escape(t)}</span>',
                  f'<span style="{CHIP};{PAD if not m else ""}">{i}</span>',
                  f'<span style="{CHIP};{ZERO if not m else "background:#dcfce7"}">{m}</span>']
                 for t, i, m in zip(tokens, ids, mask)]
        rows = "".join(f'<tr><th style="{CELL};text-align:left;padding-right:6px">{name}</th>'
                       + "".join(f'<td style="{CELL}">{c[k]}</td>' for c in cells) + "</tr>"
                       for k, name in enumerate(("token", "id", "mask")))
        out.append(f'<div style="margin:4px 0 10px"><b>Sentence {b + 1}</b>: {res["lengths"][b]} tokens + '
                   f'{len(tokens) - res["lengths"][b]} × {html.escape(res["pad_token"])}'
                   f'<div style="overflow-x:auto"><table style="border:none;margin:2px 0;border-collapse:collapse;'
                   f'font-family:ui-monospace,monospace;font-size:12px">{rows}</table></div></div>')
    return "".join(out)


def _pct(p: float) -> str:
    return f"{p:.1%}"


def summary(res: dict) -> str:
    """The view's statements, every number from `res`."""
    L, A = res["num_layers"], res["num_heads"]
    most = max(max(r) for r in res["pad_max_masked"])
    same = max(s["max_diff_masked"] for s in res["sentences"])
    padded = [(b, s) for b, s in enumerate(res["sentences"], 1) if s["pads"]]
    layers = ", ".join(f"{_pct(x)} in layer {k}" for k, x in enumerate(res["pad_share_layers"], 1))
    lines = [f"**With the mask**, the largest weight a real token gives a `[PAD]`, over all {L} layers × {A} heads: "
             f"**{most:g}**. Each sentence's last-layer vectors equal its run alone within max |Δ| = "
             f"**{same:.1e}** (float32 rounding).",
             f"**Without the mask**, the real tokens of the padded sentences give the pads {layers} "
             "(mean over heads and tokens)."]
    for b, s in padded:
        lines.append(f"Sentence {b} ({s['pads']} pads): its last-layer vectors move by up to "
                     f"**{s['max_diff_unmasked']:.2f}** (cosine with its run alone down to "
                     f"**{s['min_cos_unmasked']:.3f}**).")
    for b, s in enumerate(res["sentences"], 1):
        g = s["mask"]
        if g:
            change = "its first guess stays the same" if g["guess_unmasked"] == g["guess"] else (
                f"its first guess becomes **{html.escape(g['guess_unmasked'])}** ({_pct(g['prob_guess_unmasked'])})")
            lines.append(f"Sentence {b}'s `[MASK]`: alone, the model guesses **{html.escape(g['guess'])}** "
                         f"({_pct(g['prob_alone'])}); padded with the mask, {_pct(g['prob_masked'])}; without it, "
                         f"{_pct(g['prob_unmasked'])}, and {change}.")
    n = sum(len(t) - k for t, k in zip(res["tokens"], res["lengths"]))
    lines.append(f"The {n} pad positions still get vectors (mean length {res['pad_vector_norm']:.2f}; real tokens' "
                 f"{res['real_vector_norm']:.2f}), which nothing reads.")
    cut = [str(b) for b, s in enumerate(res["sentences"], 1) if s["truncated"]]
    note = f"Sentence {', '.join(cut)} was cut to the {len(res['ids'][0])} tokens this model reads." if cut else ""
    return notice_html(note) + "\n\n".join(lines)


def share_figure(res: dict) -> go.Figure:
    """Without the mask: each head's share of attention on pads, grouped by layer."""
    share = res["pad_share_unmasked"]  # (L, A)
    x = [f"layer {k + 1}" for k in range(len(share))]
    fig = go.Figure([go.Bar(x=x, y=[row[h] for row in share], name=f"head {h + 1}",
                            hovertemplate="%{x}, head " + str(h + 1) + ": %{y:.1%}<extra></extra>")
                     for h in range(res["num_heads"])], layout=dict(
        title={"text": "Attention on [PAD], mask left out<br><sub>with the mask: 0 in every head</sub>",
               "font": {"size": 15}},
        barmode="group", height=380, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white",
        yaxis={"tickformat": ".0%", "rangemode": "tozero", "gridcolor": "#e5e7eb", "title": "share on pads"},
        legend={"orientation": "h", "y": -0.15}))
    return fig


def sentence_rows(res: dict) -> pd.DataFrame:
    rows = []
    for b, s in enumerate(res["sentences"], 1):
        g = s["mask"]
        rows.append({"#": b, "tokens": s["tokens"], "pads": s["pads"], "|Δ| masked": f"{s['max_diff_masked']:.1e}",
                     "|Δ| unmasked": f"{s['max_diff_unmasked']:.3f}", "cos unmasked": f"{s['min_cos_unmasked']:.3f}",
                     "[MASK]: alone → unmasked": (f"{g['guess']} {_pct(g['prob_alone'])} → {g['guess_unmasked']} "
                                                  f"{_pct(g['prob_guess_unmasked'])}") if g else ""})
    return pd.DataFrame(rows)


def layer_rows(res: dict) -> pd.DataFrame:
    return pd.DataFrame([{"layer": k, "masked: most on a pad": f"{max(m):g}",
                          "unmasked: share on pads": _pct(s), "unmasked: top head": _pct(max(u))}
                         for k, (m, s, u) in enumerate(zip(res["pad_max_masked"], res["pad_share_layers"],
                                                           res["pad_share_unmasked"]), 1)])


def show(sentences: str, choice: str | None):
    """The API: (summary, batch HTML, per-sentence table, per-layer table, figure, JSON) for 2-3
    sentences, one per line."""
    model, tok = load_model(choice)
    with mistakes(ValueError, TypeError):
        res = P.padding_study(model, tok, P.split_sentences(sentences))
    return summary(res), batch_html(res), sentence_rows(res), layer_rows(res), share_figure(res), res


def build(picker) -> None:
    with form(NOTE) as side:
        box = gr.Textbox(label=f"{P.MIN_SENTENCES} or {P.MAX_SENTENCES} sentences, one per line (put a [MASK] in one)",
                         value=EXAMPLES[0][0], lines=3, max_length=P.MAX_SENTENCES * (P.CHARS + 1),
                         elem_id="attn-pad-text")
        btn = gr.Button("Pad them into one batch", variant="primary", elem_id="attn-pad-go")
    ex = examples(side, EXAMPLES, [box], elem_id="attn-pad-examples")
    said = gr.Markdown(elem_id="attn-pad-said")
    batch = gr.HTML(elem_id="attn-pad-batch")
    per_sentence = gr.Dataframe(label="Each sentence in the padded batch against its run alone: last layer's max |Δ| "
                                      "and lowest cosine, with and without the mask",
                                interactive=False, elem_id="attn-pad-sentences")
    with gr.Row():
        with gr.Column(scale=3, min_width=300):
            fig = gr.Plot(label="Attention on pads without the mask")
        with gr.Column(scale=2, min_width=300):
            per_layer = gr.Dataframe(label="Per layer: the largest weight on a pad with the mask (any head); without "
                                           "it, the share on pads (mean of the heads) and the largest head's",
                                     interactive=False, elem_id="attn-pad-layers")
    with gr.Accordion("JSON of the padded batch (what /attention_padding returns)", open=False):
        raw = gr.JSON()
    wire(show, [box, picker], [said, batch, per_sentence, per_layer, fig, raw], btn, "attention_padding",
         [picker.change], ex)
