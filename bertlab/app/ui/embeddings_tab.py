"""Embeddings: the same word gets a different vector in every sentence, and more so higher up."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from ...analysis import embeddings as E
from .common import config_of, load_model, mistakes, user_error, whole_number, wire

EXPLAIN = """**One word, many meanings.** BERT's first vector for a word (layer 0) is a table lookup:
the word's row plus a vector for its *position* and one for its segment, so the same word at the same
position starts out identical (1.0), and at another position only slightly different. Every layer
then mixes in the neighbouring words, so higher up *score* in "the film's score" (music) drifts away
from *score* in "a score of 8/10" (a rating). Below: whole sentences as single vectors, and a 2-D map
of every token's vector."""

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
EXAMPLE_LABELS = ["score: film music or a rating?", "bank: river or money?", "play: theatre or to play?",
                  "star: actor, rating or sky?", "no word: just compare sentences"]
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
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
        title=f"How similar is “{w['word']}” in each pair of sentences?", height=400,
        xaxis=dict(title="layer (0 = embedding output)", tickmode="array", tickvals=layers,
                   ticktext=["0 emb"] + [str(x) for x in layers[1:]]),
        yaxis=dict(title="cosine similarity", range=[max(-1.0, low - 0.05), 1.02]),
        legend=dict(font=dict(size=11)), margin=dict(l=60, r=20, t=50, b=50))
    return fig


def matrix_figure(res: dict) -> go.Figure:
    m = res["matrix"]
    labels = [_label(i, s, 22) for i, s in enumerate(res["sentences"], 1)]
    z = m["values"]
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, colorscale="Blues", zmax=1.0, colorbar=dict(title="cos"),
        text=[[f"{v:.2f}" for v in row] for row in z], texttemplate="%{text}",
        hovertemplate="%{y}<br>%{x}<br>cosine %{z:.3f}<extra></extra>"))
    name = dict((v, k) for k, v in POOLING_CHOICES)[m["pooling"]]
    fig.update_layout(title=f"Sentence similarity ({name}, layer {m['layer']})", height=420,
                      yaxis=dict(autorange="reversed"), xaxis=dict(tickangle=30),
                      margin=dict(l=20, r=20, t=50, b=20))
    return fig


def pca_figure(res: dict) -> go.Figure:
    p = res["pca"]
    fig = go.Figure()
    for i, s in enumerate(res["sentences"], 1):
        pts = [q for q in p["points"] if q["sentence"] == i]
        color = COLORS[(i - 1) % len(COLORS)]
        fig.add_trace(go.Scatter(
            x=[q["x"] for q in pts], y=[q["y"] for q in pts], mode="markers+text", name=_label(i, s, 24),
            text=[q["token"] for q in pts], textposition="top center", textfont=dict(size=10, color=color),
            marker=dict(color=color, size=[15 if q["target"] else 8 for q in pts],
                        symbol=["star" if q["target"] else "circle" for q in pts],
                        line=dict(width=[1.5 if q["target"] else 0 for q in pts], color="black")),
            customdata=[[q["position"]] for q in pts],
            hovertemplate=f"S{i} · %{{customdata[0]}} %{{text}}<extra></extra>"))
    v1, v2 = (100 * r for r in p["explained_variance"])
    fig.update_layout(title=f"Token vectors at layer {p['layer']}, flattened to 2-D (PCA)", height=460,
                      xaxis=dict(title=f"PC1 ({v1:.0f} % of variance)", zeroline=False),
                      yaxis=dict(title=f"PC2 ({v2:.0f} % of variance)", zeroline=False),
                      legend=dict(font=dict(size=11)), margin=dict(l=60, r=20, t=50, b=50))
    return fig


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
    res["notes"] = notes + res["notes"]
    md = "\n".join(f"- {x}" for x in res["notes"]) if res["notes"] else ""
    return word_figure(res), matrix_figure(res), pca_figure(res), md, res


def build(picker: gr.Dropdown) -> None:
    gr.Markdown(EXPLAIN)
    n = num_layers(picker.value)
    with gr.Row():
        with gr.Column(scale=2):
            word = gr.Textbox(label="Word to follow (leave empty to compare sentences only)",
                              value=EXAMPLES[0][0], max_length=100)
            sentences = gr.Textbox(label="Sentences", info=SENTENCES_INFO, value=EXAMPLES[0][1], lines=6,
                                   max_length=MAX_CHARS)
            with gr.Row():
                layer = gr.Slider(0, n, value=n, step=1, label="Layer for the matrix and the map",
                                  info="0 = embedding output")
                pooling = gr.Radio(POOLING_CHOICES, value="mean", label="Sentence vector")
            special = gr.Checkbox(False, label="Show [CLS] and [SEP] in the map")
            go_btn = gr.Button("Compare", variant="primary")
            examples = gr.Examples(EXAMPLES, inputs=[word, sentences], label="Examples (click one to run it)",
                                   example_labels=EXAMPLE_LABELS)
        with gr.Column(scale=3):
            word_plot = gr.Plot(label="Same word, different sentences")
            notes = gr.Markdown()
    with gr.Row():
        matrix_plot = gr.Plot(label="Sentence similarity")
        pca_plot = gr.Plot(label="Token map")
    with gr.Accordion("Numbers (JSON)", open=False):
        raw = gr.JSON(label="per-layer similarities, matrix, PCA coordinates")
    inputs = [word, sentences, layer, pooling, special, picker]
    outputs = [word_plot, matrix_plot, pca_plot, notes, raw]
    wire(compare, inputs, outputs, go_btn, "embeddings", [word.submit, layer.release, pooling.input, special.input],
         examples, show_progress="minimal")
    picker.change(layer_slider, picker, layer, api_name=False).then(compare, inputs, outputs, api_name=False)
