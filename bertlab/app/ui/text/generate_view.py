"""Fill-mask's "Generate" section: a prompt continued token by token (analysis/generate.py). A causal
model (pre-trained with `--objective causal`) writes on; a masked-word model, asked the same, shows why
BERT is not a generator; the two attention masks side by side."""
from __future__ import annotations

import html
from collections import Counter

import gradio as gr
import plotly.graph_objects as go

from .... import family
from ....analysis.generate import MAX_NEW, generate
from ..shared import common, links

EXPLAIN = """**Generate: encoder against decoder.** A *decoder* such as GPT reads left to right: every
token attends to itself and the tokens before it (the lower-triangular mask on the right), and learns to
predict the token after it. So it can write: predict one token, append it, predict the next.
An *encoder* such as BERT attends both ways (the full mask) and learns to fill a `[MASK]` from both
sides. At the end of a prompt there is no right-hand side, so here it gets the prompt + `[MASK]` and
fills that blank again and again: it tends to close the sentence, then keep closing it, because a blank
just before the end of a text is where it saw full stops.
An *encoder-decoder* (T5, BART) has both halves: an encoder reads the whole input both ways, a decoder
writes the output left to right while attending to it (translation, summaries).
To see a decoder write, pre-train BERT's own shape as one (Pre-train tab, objective *Next token, left
to right (GPT)*, or `python -m bertlab pretrain --objective causal`) and pick that run in the model box."""
EXAMPLES = [["the acting was", 10, "greedy"], ["this is one of the best movies i have", 12, "greedy"],
            ["i went to see this film because", 15, "sample"], ["the plot", 8, "sample"]]
HOW = [("Greedy (the likeliest)", "greedy"), ("Sample from the top k", "sample")]
MARK = "background:#bbf7d0;color:#111;padding:0 3px;border-radius:3px"
GREY = "color:#6b7280"


def said_html(res: dict) -> str:
    """The continuation, then what happened, in words, from the result's own numbers."""
    e = html.escape
    new = [s["token"] for s in res["steps"] if not (res["stopped"] and s is res["steps"][-1])]
    text = (f"<p style='margin:4px 0;font-size:1.05em'>{e(' '.join(res['prompt_tokens'][1:]))} "
            f"<mark style='{MARK}'>{e(res['text']) or '(nothing)'}</mark></p>")
    if res["mode"] == "causal":
        why = (f"This model reads left to right (its config says <i>is_decoder</i>): each of the {len(res['steps'])} "
               f"steps saw only the tokens before it and predicted the next.")
        if res["stopped"]:
            why += " It then predicted [SEP], its end of text, and stopped."
    else:
        tok, n = Counter(new).most_common(1)[0] if new else ("", 0)
        why = (f"This is a masked-word model: it was never trained to predict what comes next, only to fill a blank "
               f"from both sides. Asked to fill a [MASK] at the end, over and over, it gave <b>“{e(tok)}”</b> "
               f"{n} time{'s' * (n != 1)} out of {len(new)}. Its right-hand side was always just [SEP], the end of "
               f"the text, so each guess answers another question: what comes just before the end?")
    return text + f"<p style='margin:4px 0'>{why}</p>"


def steps_html(res: dict) -> str:
    e = html.escape
    rows = "".join(f"<tr><td>{i}</td><td><b>{e(s['token'])}</b></td><td>{s['p']:.1%}</td>"
                   f"<td>{', '.join(f'{e(t)} {p:.0%}' for t, p in s['top'])}</td></tr>"
                   for i, s in enumerate(res["steps"], 1))
    return ('<div style="overflow-x:auto"><table style="border-collapse:collapse;margin:4px 0;font-size:0.92em" '
            'cellpadding="3"><tr><th>step</th><th>token</th><th>its probability</th><th>the likeliest five</th></tr>'
            f'{rows}</table></div>')


def masks_figure(res: dict) -> go.Figure:
    """The two masks over the prompt's first tokens: query rows, key columns, filled where a query may look."""
    toks = res["prompt_tokens"][:len(res["masks"]["causal"])]
    labels = [f"{i}. {t}" for i, t in enumerate(toks)]  # numbered: a word twice stays two rows
    data, layout = [], {}
    for k, (name, title) in enumerate((("bidirectional", "BERT: both ways"),
                                       ("causal", "GPT: left only"))):
        ax = str(k + 1) if k else ""
        data.append(dict(type="heatmap", z=res["masks"][name], x=labels, y=labels, xaxis=f"x{ax}", yaxis=f"y{ax}",
                         zmin=0, zmax=1, showscale=False, colorscale=[[0, "#f3f4f6"], [1, "#2563eb"]], xgap=1, ygap=1,
                         hovertemplate="query %{y}<br>key %{x}<br>%{z}<extra></extra>"))
        layout[f"xaxis{ax}"] = dict(domain=[0.55 * k, 0.55 * k + 0.45], anchor=f"y{ax}", tickangle=-60, title=title)
        layout[f"yaxis{ax}"] = dict(domain=[0, 1], anchor=f"x{ax}", autorange="reversed", showticklabels=k == 0)
    layout.update(height=360, margin=dict(l=10, r=10, t=40, b=10),
                  title=dict(text="Who may attend to whom (blue: may look)", font_size=15))
    return go.Figure(dict(data=data, layout=layout))


def generate_view(prompt, new_tokens, how, k, seed, choice):
    """(HTML: the continuation and what happened; the two masks; JSON: analysis.generate's result)."""
    prompt = common.check_text(prompt, "opening")
    n = common.whole_number(new_tokens, "number of new tokens", 1, MAX_NEW)
    top_k = common.whole_number(k, "number of tokens to sample among (k)", 2, 50) if how == "sample" else 0
    s = common.whole_number(seed, "seed", 0, 2**31 - 1) if top_k else 0
    if how not in dict((v, t) for t, v in HOW):
        raise common.user_error(f"Choose greedy or sample, got {how!r}.")
    model, tok = common.load_model(choice)
    with common.mistakes():
        res = generate(model, tok, prompt, n, top_k, s)
    return said_html(res) + steps_html(res), masks_figure(res), res


def on_its_own(prompt, new_tokens, how, k, seed, choice):
    """generate_view for the runs no one asked for: a model without a masked-word head gets a note here."""
    model, _ = common.load_model(choice)
    if not family.has_mlm_head(model):
        return f"<p style='{GREY}'>This model has no word-predicting head: it cannot continue a text.</p>", None, {}
    return generate_view(prompt, new_tokens, how, k, seed, choice)


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        prompt = gr.Textbox(label="Prompt to continue", value=EXAMPLES[0][0], lines=1, elem_id="generate-prompt",
                            max_length=common.MAX_INPUT_CHARS)
        with gr.Row():
            n = gr.Slider(1, MAX_NEW, value=10, step=1, label="New tokens", min_width=200)
            how = gr.Radio(HOW, value="greedy", label="Choosing each token", min_width=220)
        with gr.Row():
            k = gr.Slider(2, 50, value=10, step=1, label="k (sampling only)", min_width=200)
            seed = gr.Number(0, precision=0, label="Seed (sampling only)", minimum=0, min_width=160)
        go_btn = gr.Button("Generate", variant="primary", elem_id="generate-go")
        view = gr.HTML(elem_id="generate-view")
        plot = gr.Plot(label="The two attention masks", elem_id="generate-masks")
        with gr.Accordion("JSON: each step's token, probability and runners-up; the two masks", open=False):
            raw = gr.JSON(label="generate JSON")
    ex = common.examples(side, EXAMPLES, [prompt, n, how])  # k and the seed keep theirs: more columns did not fit
    links.register("fill-mask", opening=prompt, tokens=n, sample=how, sample_k=k, seed=seed)
    common.wire(generate_view, [prompt, n, how, k, seed, picker], [view, plot, raw], go_btn, "generate",
                [prompt.submit, n.release, how.input, k.release, seed.submit, picker.change], ex, auto=on_its_own)
