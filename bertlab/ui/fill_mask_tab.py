"""Fill-mask: the pre-training task itself, and the first thing to try on any BERT."""
from __future__ import annotations

import gradio as gr

from ..analysis.predict import fill_mask

EXPLAIN = """**Fill in the blank.** BERT was pre-trained by hiding 15 % of the words of a text and
guessing them back from the words on *both* sides. Write `[MASK]` where a word should go: the bars
are the model's probabilities for the words that could fill that gap."""

EXAMPLES = [
    ["the acting was [MASK] ."],
    ["i would [MASK] recommend this film to anyone ."],
    ["this is one of the [MASK] movies i have ever seen ."],
    ["the [MASK] was slow but the ending was great ."],
]


def predict(get_model, text: str, top_k: int):
    model, tok = get_model()
    try:
        results = fill_mask(model, tok, text, top_k=int(top_k))
    except ValueError as e:
        raise gr.Error(str(e))
    first = {c["token_str"]: c["score"] for c in results[0]}
    return first, results


def build(get_model) -> None:
    gr.Markdown(EXPLAIN)
    with gr.Row():
        with gr.Column():
            text = gr.Textbox(label="Text with [MASK]", value=EXAMPLES[0][0], lines=2, max_length=2000)
            k = gr.Slider(1, 20, value=5, step=1, label="How many guesses")
            go = gr.Button("Predict", variant="primary")
            gr.Examples(EXAMPLES, inputs=[text])
        with gr.Column():
            label = gr.Label(label="Guesses for the first [MASK]")
            raw = gr.JSON(label="All masks (score, token, token_str, sequence)")
    fn = lambda t, kk: predict(get_model, t, kk)
    go.click(fn, [text, k], [label, raw], api_name="fill_mask")
    text.submit(fn, [text, k], [label, raw], api_name=False)
