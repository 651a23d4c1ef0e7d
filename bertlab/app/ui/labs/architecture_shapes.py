"""Architecture → "Encoder, decoder, encoder-decoder": BERT beside GPT-2 (a decoder) and T5 (an encoder and a
decoder), their parameters by part and forward FLOPs a token against their published sizes. Arithmetic
(bertlab.analysis.shapes, which tests check against transformers' own classes), so it answers at once."""
from __future__ import annotations

import gradio as gr
import pandas as pd

from ....analysis import shapes
from ....analysis.sizing import MLM_FRACTION, humanize
from ..shared import common, links

SENTENCE = "the film was slow but the ending made up for every minute of it"
SPANS = [(3, 1), (7, 3)]  # "slow"; "made up for"


def explain() -> str:
    """The section's explanation; its example and T5's lengths come from shapes' own functions."""
    src, tgt = shapes.corrupt(SENTENCE.split(), SPANS)
    pair = shapes.pretraining_pair(512)
    return f"""**Three ways to wire a Transformer.** The study guides place BERT among its neighbours: GPT is
a decoder, T5 and BART are encoder-decoders, and BERT, which cannot write text one token after another,
is an encoder (guide 001, *BERT's position in the landscape*).

- **Encoder (BERT)**: every token sees the whole input, left and right. Good for reading: classify,
  tag, find an answer. It learns from the {MLM_FRACTION:.0%} of tokens it hides, so it needs about
  {1 / MLM_FRACTION:.1f}× the tokens of a model that learns from all (the same 6.7× as guide 004).
- **Decoder (GPT-2)**: each token sees only the tokens to its left, and the model predicts the next
  one at every position; it writes by feeding each prediction back in. Its blocks are BERT's (with
  each LayerNorm moved before its sub-layer) under a mask that hides the upper half of the scores.
- **Encoder-decoder (T5, BART)**: an encoder reads the input both ways; a decoder writes the output
  left to right and, in every layer, also attends to what the encoder read (*cross-attention*, the
  column only T5 has). T5 learns by **span corruption**: {shapes.NOISE:.0%} of a text, in spans of about
  {shapes.MEAN_SPAN:.0f} tokens, becomes one sentinel per span, and the decoder writes the hidden spans.
  - the encoder reads `{src}`
  - the decoder writes `{tgt}`

  At T5's {pair['inputs']}-token inputs that is a {pair['targets']}-token target. BART instead corrupts a
  text (masks spans, shuffles sentences) and its decoder writes the whole original back.

The table counts each published shape from its config; *FLOPs a token* are forward matmuls at the
lengths chosen (decoders score the whole T×T matrix, masked or not)."""


EXAMPLES = [[128, 32], [512, shapes.pretraining_pair(512)["targets"]], [512, 512]]
EXAMPLE_LABELS = ["short: 128 in, 32 out", "T5's pre-training: 512 in, {} out".format(EXAMPLES[1][1]),
                  "512 in, 512 out"]
# what a student compares first (size, published, cost) on the left: on a phone the rest scrolls into view
HEADERS = ["model", "parameters", "published (ours against it)", "FLOPs a token", "kind", "layers", "width", "heads",
           "embeddings", "positions", "attention", "cross-attention", "feed-forward", "norms", "head", "source"]
PART_COLUMNS = ("embeddings", "positions", "attention", "cross_attention", "feed_forward", "norms", "head")


def millions(n: float) -> str:
    """117000000 -> "117M", 124439808 -> "124.4M", 1557611200 -> "1,557.6M": one unit down a column."""
    m = n / 1e6
    return f"{m:,.0f}M" if m == round(m) else f"{m:,.1f}M"


def _layers(r: dict) -> str:
    if r["kind"] == "encoder-decoder":
        return f"{r['encoder_layers']} + {r['decoder_layers']}"
    return str(r["encoder_layers"] or r["decoder_layers"])


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([[r["name"], millions(r["params"]["total"]),
                          " / ".join(f"{millions(p['params'])} ({round(100 * p['diff'], 1) or 0.0:+.1f} %)"
                                     for p in r["published"]),
                          humanize(r["flops_per_token"]["total"], "FLOPs"), r["kind"], _layers(r), r["width"],
                          r["heads"], *(humanize(r["params"][k]) if r["params"][k] else "–" for k in PART_COLUMNS),
                          " / ".join(p["source"] for p in r["published"])] for r in rows], columns=HEADERS)


def summary(rows: list[dict], seq_len: int, target: int) -> str:
    """What the table says, in numbers from it."""
    by = {r["name"]: r for r in rows}
    bert, gpt, t5 = by["BERT-base"], by["GPT-2 small"], by["T5-base"]
    gap, g, t5p = shapes.gpt2_gap(), gpt["params"], t5["params"]
    logits = 2 * gpt["width"] * shapes.GPT2_VOCAB  # the tied output layer's matmul, per token
    f = humanize
    return (f"**BERT-base and GPT-2 small have layers of the same size** ({bert['encoder_layers']} of width "
            f"{bert['width']}: {f(bert['params']['attention'])} in attention, {f(bert['params']['feed_forward'])} in "
            f"feed-forward for both); GPT-2 stores {f(g['total'] - bert['params']['total'])} more, in its "
            f"{shapes.GPT2_VOCAB:,}-word table and {shapes.GPT2_POSITIONS:,} positions. At {seq_len} tokens a GPT-2 "
            f"small token costs {f(gpt['flops_per_token']['total'], 'FLOPs')} against BERT-base's "
            f"{f(bert['flops_per_token']['total'], 'FLOPs')}: {f(logits, 'FLOPs')} of it are the logits over every "
            f"word, which a decoder computes at every position.\n\n"
            f"**T5-base** puts {100 * t5p['cross_attention'] / t5p['total']:.0f} % of its {f(t5p['total'])} in "
            f"cross-attention; on {seq_len} tokens in and {target} out, a token costs "
            f"{f(t5['flops_per_token']['total'], 'FLOPs')}. Its relative positions are {t5p['positions']:,} numbers "
            f"({t5p['positions'] // (2 * t5['heads'])} distance buckets × {t5['heads']} heads, in each of its two "
            f"stacks), where BERT-base learns {bert['params']['positions']:,}.\n\n"
            f"**Why GPT-2 has two sizes.** The paper's table "
            f"({', '.join(millions(m['paper']) for m in gap['models'].values())}) is within {100 * gap['worst']:.1f} % of "
            f"what GPT-2's layers hold with GPT-1's {gap['vocab']:,}-word vocabulary and {gap['n_positions']} "
            f"positions; the released weights have {shapes.GPT2_VOCAB:,} words and {shapes.GPT2_POSITIONS:,} "
            f"positions ({', '.join(millions(m['released']) for m in gap['models'].values())}): the sizes a "
            f"released checkpoint has, and the names the models go by since.")


def compare(seq_len=512, target=128):
    """The API: (summary, table, JSON) for BERT and GPT-2 at `seq_len` tokens, T5 at `seq_len` in, `target` out."""
    S = common.whole_number(seq_len, "input length", lo=1, hi=shapes.MAX_LEN)
    T = common.whole_number(target, "output length (T5)", lo=1, hi=shapes.MAX_LEN)
    with common.mistakes(ValueError):
        rows = shapes.shapes(S, T)
    return summary(rows, S, T), table(rows), {"seq_len": S, "target": T, "models": rows,
                                               "gpt2_gap": shapes.gpt2_gap()}


def build() -> None:
    """The section, under the variants."""
    gr.Markdown("### Encoder, decoder, encoder-decoder", elem_id="arch-shapes")
    with common.form(explain()):
        with gr.Row():
            length = gr.Slider(8, shapes.MAX_LEN, value=512, step=8, label="Tokens in (BERT, GPT-2, T5's input)",
                               min_width=220)
            target = gr.Slider(1, shapes.MAX_LEN, value=128, step=1, label="Tokens out (T5's output)", min_width=220)
        ex = gr.Examples(EXAMPLES, [length, target], example_labels=EXAMPLE_LABELS, label="Examples")
        go_btn = gr.Button("Compare the three", elem_id="arch-shapes-go")
        said = gr.Markdown(elem_id="arch-shapes-said")  # beside the explanation: it fills the column's foot
    out = gr.Dataframe(headers=HEADERS, interactive=False, wrap=False, elem_id="arch-shapes-table",
                       label="Parameters by part (BERT: the encoder with its pooler; GPT-2: LM head tied; "
                             "T5 v1.0: head tied, ReLU feed-forward) and forward FLOPs a token")
    with gr.Accordion("JSON (exact parameters and FLOPs)", open=False):
        raw = gr.JSON()
    links.register("architecture", shapes_len=length, shapes_target=target)
    common.wire(compare, [length, target], [said, out, raw], go_btn, "architecture_shapes",
                [length.release, target.release], ex)
