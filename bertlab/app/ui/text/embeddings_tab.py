"""Embeddings: the same word gets a different vector in every sentence, and more so higher up."""
from __future__ import annotations

import html

import gradio as gr
import plotly.graph_objects as go

from ....analysis import embeddings as E
from ....analysis import words
from ..shared import common, links
from ..shared.common import away_from_neighbours, config_of, load_model, mistakes, user_error, whole_number, wire
from . import contexts_view, positions_view, static_view

EXPLAIN = """**One word, many meanings.** BERT's first vector for a word (layer 0) is a table lookup:
the word's row plus a vector for its *position* and one for its segment, so the same word at the same
position starts out identical (1.0), and at another position only slightly different. Every layer
then mixes in the neighbouring words, so higher up *score* in "the film's score" (music) drifts away
from *score* in "a score of 8/10" (a rating). Below: whole sentences as single vectors, and a 2-D map
of every token's vector.

**What a small model can tell apart.** The shipped model has 4 layers and read only movie reviews:
a sense it rarely saw (a *bank* of a river, or one that lends money) it may not separate at all, and
the most similar pair need not share a sense. For the examples, the notes under the chart measure it:
do pairs with the same sense end up more similar than pairs with different senses?"""

MAX_CHARS = 20_000
SENTENCES_INFO = f"one per line, 2 to {E.MAX_SENTENCES}; each must contain the word"

EXAMPLES = [
    ["score", "the score swells beautifully in the final scene .\nthe score by hans zimmer gave me chills .\n"
              "my score for this movie is 8 out of 10 .\na score of three stars is too generous ."],
    ["bank", "we had a picnic on the river bank .\nthe bank refused to lend them any money .\n"
             "they sat by the bank of the river all day .\nhe robbed a bank in the first scene ."],
    ["play", "the play was adapted into a film .\ni could play this soundtrack all day .\n"
             "the kids play in the garden .\nshe wrote a play about her father ."],
    ["star", "the star of the film is tom hanks .\ni give it one star out of five .\n"
             "we saw a shooting star last night .\nshe became a star after this role ."],
    ["", "this movie was wonderful .\ni loved this film .\nthe plot was boring and slow .\n"
         "the weather is cold today ."],
]
# the sense of the word in each example sentence, to measure whether the model separates them
SENSES = {"score": ["music", "music", "rating", "rating"], "bank": ["river", "money", "river", "money"],
          "play": ["drama", "to play music", "to play", "drama"], "star": ["actor", "rating", "sky", "actor"]}
EXAMPLE_LABELS = ["score: film music or a rating?", "bank: river or money?", "play: theatre or to play?",
                  "star: actor, rating or sky?", "no word: just compare sentences"]
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
COS_TICKS = [-1.0, -0.5, 0.0, 0.5, 1.0]
POOLING_CHOICES = [("[CLS] vector", "cls"), ("mean of the tokens", "mean"), ("max over the tokens", "max")]


def num_layers(choice) -> int:
    return getattr(config_of(choice), "num_hidden_layers", 12)


def layer_slider(choice):
    """Fit the layer slider to the picked model (its last layer by default)."""
    n = num_layers(choice)
    return gr.Slider(minimum=0, maximum=n, value=n, step=1)


def _empty(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, font=dict(size=14), x=0.5, y=0.5,
                       xref="paper", yref="paper")
    fig.update_layout(xaxis=dict(visible=False), yaxis=dict(visible=False), height=380,
                      margin=dict(l=20, r=20, t=40, b=20))
    return fig


def _label(i: int, sentence: str, n: int = 28) -> str:
    return f"S{i} {E.short(sentence, n)}"


def word_figure(res: dict) -> go.Figure:
    w = res.get("word")
    if w is None:
        return _empty("type a word (above) to follow it through the layers")
    sents = res["sentences"]
    layers = w["layers"]
    fig = go.Figure()
    for k, p in enumerate(w["pairs"]):
        a, b = p["a"], p["b"]
        fig.add_trace(go.Scatter(
            x=layers, y=p["similarity"], mode="lines+markers", name=f"S{a} ↔ S{b}",
            line=dict(width=2, color=COLORS[k % len(COLORS)]),
            hovertemplate=f"S{a}: {E.short(sents[a - 1])}<br>S{b}: {E.short(sents[b - 1])}"
                          "<br>layer %{x}: %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=layers, y=w["mean_similarity"], mode="lines", name="mean of all pairs",
                             line=dict(width=4, color="black", dash="dash"),
                             hovertemplate="mean, layer %{x}: %{y:.3f}<extra></extra>"))
    low = min(min(p["similarity"]) for p in w["pairs"])
    fig.update_layout(
        title=f"“{w['word']}” in each pair of sentences", height=400,
        xaxis=dict(title="layer (0 = embedding output)", tickmode="array", tickvals=layers,
                   ticktext=["0 emb"] + [str(x) for x in layers[1:]]),
        yaxis=dict(title="cosine similarity", range=[max(-1.0, low - 0.05), 1.02]),
        legend=dict(font=dict(size=11)), margin=dict(l=60, r=20, t=50, b=50))
    return fig


def matrix_figure(res: dict) -> go.Figure:
    """The sentence × sentence cosine matrix on one fixed -1..1 scale: equal numbers, equal colours."""
    m = res["matrix"]
    sents = res["sentences"]
    short = [f"S{i}" for i in range(1, len(sents) + 1)]  # the full sentences are in the hover text
    z = m["values"]
    fig = go.Figure(go.Heatmap(
        z=z, x=short, y=short, colorscale="RdBu", zmin=-1.0, zmax=1.0, zmid=0.0,
        colorbar=dict(title="cosine", tickvals=COS_TICKS, ticktext=[f"{t:g}" for t in COS_TICKS],
                      len=0.9, thickness=14),
        text=[[f"{v:.2f}" for v in row] for row in z], texttemplate="%{text}",
        customdata=[[[E.short(a, 50), E.short(b, 50)] for b in sents] for a in sents],
        hovertemplate="%{y}: %{customdata[0]}<br>%{x}: %{customdata[1]}<br>cosine %{z:.3f}<extra></extra>"))
    name = dict((v, k) for k, v in POOLING_CHOICES)[m["pooling"]]
    fig.update_layout(title=f"Sentence similarity<br><sup>{name}, layer {m['layer']}</sup>", height=400,
                      yaxis=dict(autorange="reversed"), margin=dict(l=40, r=10, t=60, b=30))
    return fig


MAX_LABELS = 12


def pca_figure(res: dict) -> go.Figure:
    """Every token as a point; the followed word as stars with its label, the other tokens on hover."""
    p = res["pca"]
    fig = go.Figure()
    targets = any(q["target"] for q in p["points"])
    few = {id(q) for q in sorted(p["points"], key=lambda q: -(q["x"] ** 2 + q["y"] ** 2))[:MAX_LABELS]}

    def shown(q) -> bool:  # the target word, or (no word) the points farthest out, where labels have room
        return q["target"] if targets else id(q) in few

    labelled = [q for q in p["points"] if shown(q)]  # each label away from its nearest labelled neighbour
    where = dict(zip(map(id, labelled), away_from_neighbours([(q["x"], q["y"]) for q in labelled])))

    for i, s in enumerate(res["sentences"], 1):
        pts = [q for q in p["points"] if q["sentence"] == i]
        color = COLORS[(i - 1) % len(COLORS)]
        fig.add_trace(go.Scatter(
            x=[q["x"] for q in pts], y=[q["y"] for q in pts], mode="markers+text", name=_label(i, s, 24),
            # words on the map only for the followed word (or, without one, a few tokens): hover for the rest
            # the followed word's stars are labelled by sentence (S1, S2, ...): the same word four times over
            # piled up unreadably where its vectors are close
            text=[(f"S{i}" if q["target"] else q["token"]) if shown(q) else "" for q in pts],
            hovertext=[q["token"] for q in pts],
            textposition=[where.get(id(q), "top center") for q in pts],
            textfont=dict(size=11, color=color),
            marker=dict(color=color, size=[15 if q["target"] else 8 for q in pts],
                        symbol=["star" if q["target"] else "circle" for q in pts],
                        line=dict(width=[1.5 if q["target"] else 0 for q in pts], color="black")),
            customdata=[[q["position"]] for q in pts],
            hovertemplate=f"S{i} · position %{{customdata[0]}}: %{{hovertext}}<extra></extra>"))
    v1, v2 = (100 * r for r in p["explained_variance"])
    word = next((q["token"] for q in p["points"] if q["target"]), "")
    which = f"stars: <b>{html.escape(word)}</b> in sentence S1, S2, ..." if targets else \
        f"the {MAX_LABELS} tokens farthest out"
    fig.update_layout(title=f"Tokens at layer {p['layer']}, in 2-D (PCA)<br>"
                            f"<sup>labelled: {which}; hover a point for its token</sup>", height=460,
                      xaxis=dict(title=f"PC1 ({v1:.0f} % of variance)", zeroline=False),
                      yaxis=dict(title=f"PC2 ({v2:.0f} % of variance)", zeroline=False),
                      legend=dict(font=dict(size=11), orientation="h", y=-0.2, x=0),
                      margin=dict(l=50, r=10, t=60, b=40))
    return fig


def sense_notes(word, sentences: str, res: dict) -> list[str]:
    """For an example whose senses are known: do same-sense pairs end up more similar than the rest?"""
    w = res.get("word")
    ex = next((e for e in EXAMPLES if e[0] == (word or "").strip() and e[1].strip() == sentences.strip()), None)
    if w is None or ex is None or ex[0] not in SENSES:
        return [f"a small model ({res['num_layers']} layers; the shipped one read only movie reviews) may not "
                "separate the senses of a word it rarely saw: the most similar pair need not share a sense"] \
            if w is not None else []
    sense, top = SENSES[ex[0]], w["layers"][-1]
    same = [p["similarity"][top] for p in w["pairs"] if sense[p["a"] - 1] == sense[p["b"] - 1]]
    diff = [p["similarity"][top] for p in w["pairs"] if sense[p["a"] - 1] != sense[p["b"] - 1]]
    s, d = sum(same) / len(same), sum(diff) / len(diff)
    groups = ", ".join(f"{x} (S{', S'.join(str(i + 1) for i, y in enumerate(sense) if y == x)})"
                       for x in dict.fromkeys(sense))
    verdict = (f"this model separates the senses a little ({s - d:+.2f})" if s - d >= 0.05 else
               f"this model does **not** separate the senses ({s - d:+.2f}): it has {res['num_layers']} layers, "
               f"and the shipped one learnt from movie reviews, where “{ex[0]}” in these senses is rare")
    return [f"senses here: {groups}. At layer {top}, same-sense pairs average {s:.2f} and different-sense "
            f"pairs {d:.2f}: {verdict}"]


def compare(word: str, sentences: str, layer, pooling: str, include_special: bool, choice):
    """All three views for the picked model: (word chart, matrix heatmap, PCA map, notes, JSON)."""
    model, tok = load_model(choice)
    if not isinstance(sentences, str) or not sentences.strip():
        raise user_error("The sentences are empty: type 2 or more sentences, one per line.")
    if len(sentences) > MAX_CHARS:
        raise user_error(f"The sentences have {len(sentences):,} characters; paste at most {MAX_CHARS:,}.")
    if word is not None and not isinstance(word, str):
        raise user_error(f"The word must be text, got {type(word).__name__}.")
    layer = -1 if layer is None else whole_number(layer, "layer")
    n = model.config.num_hidden_layers
    notes = []
    if layer > n:
        notes.append(f"this model has {n} layers: showing layer {n}")
        layer = n
    with mistakes():
        res = E.analyze(model, tok, sentences.splitlines(), word, layer, pooling or "mean", bool(include_special))
    res["notes"] = notes + res["notes"] + sense_notes(word, sentences, res)
    md = "\n".join(f"- {x}" for x in res["notes"]) if res["notes"] else ""
    return word_figure(res), matrix_figure(res), pca_figure(res), md, res


VIEWS = ("compare", "static", "contexts", "positions")  # the sub-tabs' ids, for links


def example_sentences(view: str, word, sentences):
    """A link to the static view names only a word: the first sub-tab, which reads the same `word`, gets
    that word's example sentences if its own lack it (else it would open on an error)."""
    w = (word or "").strip().lower() if isinstance(word, str) else ""
    ex = next((e for e in EXAMPLES if e[0] and e[0] == w), None)
    if view != "static" or ex is None or not isinstance(sentences, str) or \
            all(words.occurrences(s, w, True) for s in sentences.splitlines() if s.strip()):
        return gr.skip()
    return ex[1]


def build(picker: gr.Textbox) -> None:
    n = num_layers(picker.value)
    view = gr.Textbox("", visible=False)  # a link's ?view=positions opens that sub-tab
    with gr.Tabs(overflow_behavior="wrap") as views:  # on a phone: the sub-tabs wrap, none hidden behind '…'
        with gr.Tab("Same word, different sentences", id="compare"):
            layer, word, sentences = build_compare(picker, n)
        with gr.Tab("Static vs contextual", id="static"):
            static_view.build(picker, word, sentences, view)
        with gr.Tab("Other contexts of a token", id="contexts"):
            ctx_layer = contexts_view.build(picker, n)
        with gr.Tab("Position embeddings", id="positions"):
            positions_view.build(picker)
    links.register("embeddings", view=view)
    view.change(lambda v: gr.Tabs(selected=v) if v in VIEWS else gr.skip(), view, views, api_name=False)
    view.change(example_sentences, [view, word, sentences], sentences, api_name=False)
    picker.change(layer_slider, picker, ctx_layer, api_name=False)
    return layer


def build_compare(picker: gr.Textbox, n: int) -> tuple[gr.Slider, gr.Textbox, gr.Textbox]:
    with common.form(EXPLAIN) as side:
        word = gr.Textbox(label="Word to follow (leave empty to compare sentences only)",
                          value=EXAMPLES[0][0], max_length=100)
        sentences = gr.Textbox(label="Sentences", info=SENTENCES_INFO, value=EXAMPLES[0][1], lines=4,
                               max_length=MAX_CHARS)
        with gr.Row(equal_height=True):
            layer = gr.Slider(0, n, value=n, step=1, label="Layer for the matrix and the map",
                              info="0 = embedding output", min_width=260)
            pooling = gr.Dropdown(POOLING_CHOICES, value="mean", label="Sentence vector", min_width=170)
            special = gr.Checkbox(False, label="[CLS], [SEP] in the map", min_width=170)
        go_btn = gr.Button("Compare", variant="primary")
        links.copy_button("embeddings")
        word_plot = gr.Plot(label="Same word, different sentences")
        notes = gr.Markdown()
        with gr.Row():
            matrix_plot = gr.Plot(label="Sentence similarity", min_width=320)
            pca_plot = gr.Plot(label="Token map", min_width=320)
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="per-layer similarities, matrix, PCA coordinates")
        examples = common.examples(side, EXAMPLES, [word, sentences], example_labels=EXAMPLE_LABELS)
    inputs = [word, sentences, layer, pooling, special, picker]
    links.register("embeddings", word=word, sentences=sentences, layer=layer, pooling=pooling, special=special)
    outputs = [word_plot, matrix_plot, pca_plot, notes, raw]
    wire(compare, inputs, outputs, go_btn, "embeddings", [word.submit, layer.release, pooling.input, special.input],
         examples, show_progress="minimal")
    picker.change(layer_slider, picker, layer, api_name=False).then(compare, inputs, outputs, api_name=False)
    return layer, word, sentences
