"""Embeddings → Static vs contextual: a word's row of the input-embedding table (one vector per
vocabulary entry, as Word2Vec gives) against its vectors in two sentences at every layer (as ELMo and
BERT give), with the nearest rows of the table and the nearest words of the sentences."""
from __future__ import annotations

import html
import re

import gradio as gr
import plotly.graph_objects as go

from ....analysis import static_vectors as SV
from ....analysis import words
from ....config import preset
from ..shared import common
from ..shared.common import check_text, load_model, mistakes

BASE = preset("base")  # BERT-base's table, from our own preset: the guides' figures are checked against it
EXPLAIN = f"""**From Word2Vec to ELMo to BERT.** Word2Vec (2013, as the *Basic BERT Language Model*
study guide dates it) and GloVe learn one vector per word type: *bank* by a river and *bank* that
lends money get the same numbers, so the two senses are averaged into one. ELMo (2018) made the
vector depend on the sentence: a left-to-right and a right-to-left LSTM each read it, and their
states are joined side by side (the guide calls this bidirectional but shallow: the two directions
never see each other inside the network). BERT reads the whole sentence at once in every layer of a
Transformer, so each layer's vector already mixes both sides.

**BERT holds both kinds.** Its input-embedding table is a static lookup, one row per vocabulary entry:
BERT-base's has {BASE.vocab_size:,} rows of {BASE.hidden_size} numbers, {BASE.vocab_size * BASE.hidden_size / 1e6:.1f} M
parameters (the *BERT* guide gives the same vocabulary; the textbook chapter rounds the table to about
23 M and notes that ALBERT shrinks it because it only has to hold context-free vectors). Every vector
after it is contextual. Here: the word's row (identical in both sentences), its nearest rows
in the table (special tokens left out), then its vector in each sentence layer by layer, how alike the
two stay, and which words of the sentences lie nearest. A word cut into pieces counts as the mean of
its pieces' rows (and, higher up, of its pieces' vectors)."""

EXAMPLES = [["bank", "we had a picnic on the river bank .", "the bank refused to lend them any money ."],
            ["score", "the score by hans zimmer gave me chills .", "my score for this movie is 8 out of 10 ."],
            ["star", "the star of the film is tom hanks .", "we saw a shooting star last night ."],
            ["play", "the play was adapted into a film .", "the kids play in the garden ."],
            ["mesmerizing", "the visuals were mesmerizing .", "a mesmerizing score by hans zimmer ."]]
EXAMPLE_LABELS = ["bank: river or money?", "score: music or a rating?", "star: actor or sky?",
                  "play: drama or to play?", "mesmerizing: a word in pieces"]
ROW, BLUE = -1, "#2563eb"  # the x of the table row on the chart, left of layer 0


def md(text: str) -> str:
    """What a visitor typed, safe inside Markdown: no HTML, no emphasis."""
    return re.sub(r"([\\`*_\[\]|~#])", r"\\\1", html.escape(str(text)))


def for_link(word, sentences):
    """A link's word (?view=static&word=bank) for this view, with its example's sentences, or else the
    first two of the link's sentences (the first sub-tab's) that hold it."""
    word = word.strip() if isinstance(word, str) else ""
    ex = next((e for e in EXAMPLES if e[0] == word.lower()), None)
    if ex:
        return word, ex[1], ex[2]
    held = [s for s in (sentences or "").splitlines() if word and words.occurrences(s, word, True)]
    return (word, *held[:2]) if len(held) >= 2 else (word, gr.skip(), gr.skip())


def figure(res: dict) -> go.Figure:
    (pair,) = res["pairs"]
    x = [ROW] + res["layers"]
    y = [res["static"]["pairs"][0]["cosine"]] + pair["similarity"]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="lines+markers+text", text=[f"{v:.2f}" for v in y], textposition="top center",
        line=dict(color=BLUE, width=3), marker=dict(size=9), cliponaxis=False,
        hovertemplate="%{customdata}: cosine %{y:.3f}<extra></extra>",
        customdata=["table row"] + [f"layer {i}" for i in res["layers"]]))
    fig.add_vline(x=ROW / 2, line=dict(color="#9ca3af", dash="dot"))
    fig.update_layout(
        title=f"“{html.escape(res['word'])}” in S1 and S2: cosine of its two vectors", height=380,
        xaxis=dict(tickmode="array", tickvals=x, ticktext=["row", "0 emb"] + [str(i) for i in res["layers"][1:]],
                   title="static row | contextual, by layer"),
        yaxis=dict(title="cosine", range=[min(0.0, min(y) - 0.05), 1.12]),
        margin=dict(l=55, r=15, t=50, b=50), showlegend=False)
    return fig


def summary(res: dict) -> str:
    s = res["static"]
    sp, (pair,) = s["spellings"][0], res["pairs"]
    rows, width = res["table"]
    w = md(res["word"])
    pieces = " ".join(md(p) for p in sp["pieces"])
    rule = (f"“{w}” is cut into {len(sp['pieces'])} pieces, **{pieces}**: its static vector here is the mean of "
            f"their rows") if len(sp["pieces"]) > 1 else f"“{w}” is one piece, **{pieces}**: one row"
    cos = s["pairs"][0]["cosine"]
    same = (f"the **same** vector in both sentences (cosine **{cos:.3f}**)" if s["identical"] else
            f"**different** vectors in the two sentences (this tokenizer spells it by its place; cosine {cos:.3f})")
    near = ", ".join(f"{md(n['token'])} {n['cosine']:.2f}" for n in sp["neighbours"])
    sim = pair["similarity"]
    low = min(range(len(sim)), key=sim.__getitem__)
    pos = [p[0] for p in res["positions"]]
    top = res["layers"][-1]

    def own(layer: int) -> int:  # how many of the two words' nearest words are in the word's own sentence
        return sum(n["sentence"] == i for i, per in enumerate(res["neighbours"][layer], 1) for n in per)
    k = sum(len(per) for per in res["neighbours"][top])
    first, last = own(0), own(top)
    verdict = ("the vector has taken in its own sentence" if last > first else
               "no more than at layer 0" if last == first else "fewer than at layer 0")
    lowest = f" (lowest {sim[low]:.3f}, at layer {low})" if low != top else ""
    return (f"{rule} of the table ({rows:,} rows of {width} numbers): {same}. Its nearest rows in the table: "
            f"{near}.\n\nWith position {pos[0]} (S1) or {pos[1]} (S2) and the segment added, then normalised "
            f"(layer 0), the two vectors have cosine **{sim[0]:.3f}**; after layer {top} **{sim[-1]:.3f}**{lowest}. "
            f"Of the {k} nearest words (below), {first} are in the word's own sentence at layer 0 and **{last}** at "
            f"layer {top}: {verdict}.")


def neighbour_rows(res: dict) -> list[list[str]]:
    """One row per layer: each sentence's nearest words, a word of the other sentence marked (S1) or (S2)."""
    def cell(per: list[dict], own: int) -> str:
        return " · ".join(n["word"] + ("" if n["sentence"] == own else f" (S{n['sentence']})") + f" {n['cosine']:.2f}"
                          for n in per)
    return [["0 emb" if layer == 0 else str(layer), *(cell(per, i) for i, per in enumerate(sides, 1))]
            for layer, sides in enumerate(res["neighbours"])]


def neighbour_html(rows: list[list[str]]) -> str:
    """The rows as a table that wraps inside a phone's width (a Dataframe scrolled its second column away)."""
    cell = "padding:4px 6px;border-top:1px solid #e5e7eb;vertical-align:top;overflow-wrap:anywhere"
    head = "".join(f"<th style='{cell};text-align:left;width:{w}'>{t}</th>" for t, w in
                   (("layer", "3.6em"), ("nearest to S1's word", "auto"), ("nearest to S2's word", "auto")))
    def items(c: str) -> str:  # a line breaks between two words, never inside "word (S2) 0.31"
        return " · ".join(f"<span style='white-space:nowrap'>{html.escape(x)}</span>" for x in c.split(" · "))
    body = "".join("<tr>" + "".join(f"<td style='{cell}'>{items(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (f"<table style='width:100%;table-layout:fixed;border-collapse:collapse;font-size:14px'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def show(word, a, b, choice):
    """(summary, chart, neighbours table as HTML, JSON) for the picked model."""
    model, tok = load_model(choice)
    if not isinstance(word, str) or not word.strip():
        raise common.user_error("The word is empty: type the word to follow (it must be in both sentences).")
    word = word.strip()
    a, b = check_text(a, "sentence S1"), check_text(b, "sentence S2")
    if len(word) > 100:
        raise common.user_error("The word is longer than 100 characters: type one word.")
    for name, s in (("S1", a), ("S2", b)):
        if not words.occurrences(s, word, getattr(tok, "lowercase", False)):
            raise common.user_error(f"The word “{word}” is not in sentence {name} as a whole word: "
                                    "type a sentence that contains it.")
    with mistakes():
        res = SV.static_vs_contextual(model, tok, word, [a, b])
    return summary(res), figure(res), neighbour_html(neighbour_rows(res)), res


def build(model_box: gr.Textbox, word_link: gr.Textbox, sentences_link: gr.Textbox, view: gr.Textbox) -> None:
    with common.form(EXPLAIN) as side:
        word = gr.Textbox(EXAMPLES[0][0], label="Word", max_length=100, elem_id="static-word")
        with gr.Row():
            a = gr.Textbox(EXAMPLES[0][1], label="Sentence S1", max_length=500, min_width=240)
            b = gr.Textbox(EXAMPLES[0][2], label="Sentence S2", max_length=500, min_width=240)
        go_btn = gr.Button("Compare static and contextual", variant="primary")
        said = gr.Markdown(elem_id="static-summary")
        plot = gr.Plot(label="Static row, then contextual vectors")
        gr.Markdown("**Nearest words of the two sentences** (cosine; the word itself and punctuation left out; "
                    "(S1) or (S2) marks a word of the other sentence):")
        table = gr.HTML(elem_id="static-neighbours")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="static rows, cosines by layer, neighbours")
        ex = common.examples(side, EXAMPLES, [word, a, b], example_labels=EXAMPLE_LABELS)
    common.wire(show, [word, a, b, model_box], [said, plot, table, raw], go_btn, "static_vectors",
                [word.submit, a.submit, b.submit, model_box.change], ex)
    # ?tab=embeddings&view=static&word=bank: the link's word (the first sub-tab's box) comes here
    view.change(lambda v, w, s: for_link(w, s) if v == "static" else (gr.skip(),) * 3,
                [view, word_link, sentences_link], [word, a, b], api_name=False)
