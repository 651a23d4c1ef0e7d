"""Embeddings → Other contexts: where else in the movie reviews does a token get a vector like this
one (exBERT's corpus search)? The index of corpus vectors is built on first use for each model's
weights and layer, and kept in a small cache bounded in bytes."""
from __future__ import annotations

import functools
import html
import re

import gradio as gr

from ....analysis import contexts as C
from ....cache import LRU
from ....checkpoint import weights_stamp
from ....data.corpus import clean_text, movie_reviews, split_sentences
from ..shared import common, models
from ..shared.common import check_text, load_model, mistakes, user_error, whole_number

EXPLAIN = """**Other contexts of this token.** Pick a word in your sentence: its vector at the chosen
layer is compared (cosine) with token vectors from IMDB movie reviews, and the closest are listed with
the token highlighted. *This token only* searches up to 150 review sentences that contain the word:
at layer 0 its occurrences are nearly alike (only the position differs); higher up the closest are
those where it is used the same way. *Every token* searches all tokens of about 800 review sentences:
which other words share the neighbourhood? The first search for a model builds its index (seconds)."""

SAME_SENTENCES = 150  # occurrences of one word: the sentences that contain it, from the whole corpus
ANY_SENTENCES = 1000  # every token: a fixed sample (fewer once the index reaches its byte bound)
EXAMPLE_LABELS = ["bank by a river", "score: film music", "score: a rating", "wooden: every token"]
SCOPES = [("this token only", "same"), ("every token", "any")]
EXAMPLES = [["we had a picnic on the river bank .", "bank", 4, "same"],
            ["the score by hans zimmer gave me chills .", "score", 4, "same"],
            ["my score for this movie is 8 out of 10 .", "score", 4, "same"],
            ["the acting was wooden and the plot was thin .", "wooden", 4, "any"]]
_indexes = LRU(12, 120e6, lambda ix: ix.nbytes)  # (model folder, weights stamp, word or None) -> Index


@functools.lru_cache(1)
def reviews() -> tuple[str, ...]:
    """The 25,000 IMDB reviews of the `movie-reviews` package, raw (about 33 MB)."""
    return tuple(movie_reviews("imdb")["text"])


def _sentences(docs, keep, n: int) -> list[str]:
    out: list[str] = []
    for doc in docs:
        out += [s for s in split_sentences(clean_text(doc)) if 4 <= len(s.split()) <= 30 and keep(s)]
        if len(out) >= n:
            break
    return out[:n]


def corpus_for(word: str | None) -> list[str]:
    """Sentences with `word` as a whole word (case-insensitive) from the whole corpus; or, for None,
    a fixed sample of sentences from reviews spread over it."""
    texts = reviews()
    if word is None:
        return _sentences(texts[:: max(1, len(texts) // 400)], lambda s: True, ANY_SENTENCES)
    pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", re.I)
    return _sentences((t for t in texts if pattern.search(t)), pattern.search, SAME_SENTENCES)


def index_for(choice, word: str | None) -> C.Index | None:
    """The cached index for the picked model's weights (None: no corpus sentence has the word)."""
    model, tok = load_model(choice)
    folder = models.resolve(choice)
    key = (str(folder), weights_stamp(folder), word)
    if (ix := _indexes.get(key)) is not None:
        return ix
    with mistakes(ValueError, prefix="The movie-review corpus cannot be read: "):
        sentences = corpus_for(word)
    if not sentences:
        return None
    return _indexes.get_or_make(key, lambda: C.build_index(model, tok, sentences))


def result_html(rows: list[dict]) -> str:
    """One line per neighbour: a bar for the similarity, the sentence with the token marked."""
    out = []
    for r in rows:
        s, (a, b) = r["sentence"], r["span"]
        text = f"{html.escape(s[:a])}<mark style='background:#fde68a;font-weight:700;padding:0 2px'>" \
               f"{html.escape(s[a:b])}</mark>{html.escape(s[b:])}"
        w = max(0.0, r["similarity"]) * 100
        out.append("<div style='display:flex;gap:8px;align-items:baseline;margin:3px 0'>"
                   f"<span style='flex:0 0 86px;font-family:ui-monospace,monospace;font-size:13px'>"
                   f"<span style='display:inline-block;width:{w * 0.4:.0f}px;height:9px;background:#2563eb'></span> "
                   f"{r['similarity']:.2f}</span><span style='font-size:14px'>{text}</span></div>")
    return "<div>" + "".join(out) + "</div>" if out else "<p>No occurrence of this token in the corpus sample.</p>"


def search(sentence, word, layer, scope, choice, k: int = 10):
    """(matches as HTML, summary, JSON) for the picked model."""
    model, tok = load_model(choice)
    sentence = check_text(sentence, "sentence")
    word = check_text(word, "word").strip()
    n = model.config.num_hidden_layers
    layer = n if layer is None else min(whole_number(layer, "layer", 0, None), n)
    if scope not in ("same", "any"):
        raise user_error(f"Search among: choose {' or '.join(v for _, v in SCOPES)}, got {scope!r}.")
    with mistakes():
        vec, token_id, piece = C.query_vector(model, tok, sentence, word, layer)
    ix = index_for(choice, word.lower() if scope == "same" else None)
    rows = C.nearest(ix, vec, layer, k, token_id if scope == "same" else None) if ix else []
    where = f"{len(ix.sentences):,} review sentences ({ix.vectors.size(1):,} token vectors)" if ix else "no review sentence"
    if scope == "same":
        count = len(C.nearest(ix, vec, layer, 10**9, token_id)) if ix else 0
        lines = [f"“{piece}” as a whole word: **{count}** occurrences in {where} containing “{word}”; "
                 f"the {len(rows)} most similar at layer {layer} of {n}:"]
        if count == 0:
            lines.append("Try *every token* to see which words sit near it instead.")
    else:
        same = sum(r["token"] == piece for r in rows)
        lines = [f"The {len(rows)} token vectors nearest to “{piece}” at layer {layer} of {n}, among {where}: "
                 f"{same} of them {'is' if same == 1 else 'are'} “{piece}” itself; the others are words this layer places nearby."]
    data = {"token": piece, "layer": layer, "scope": scope, "indexed_sentences": len(ix.sentences) if ix else 0,
            "matches": rows}
    return result_html(rows), "\n\n".join(lines), data


def build(model_box: gr.Textbox, n_layers: int) -> None:
    """The sub-tab's controls, results right under them; the explanation and examples beside."""
    with common.form(EXPLAIN) as side:
        sentence = gr.Textbox(EXAMPLES[0][0], label="Your sentence", max_length=2000)
        with gr.Row():
            word = gr.Textbox(EXAMPLES[0][1], label="Word in it to look up", max_length=100, min_width=140)
            layer = gr.Slider(0, n_layers, value=n_layers, step=1, label="Layer", info="0 = embedding output",
                              min_width=160)
        scope = gr.Radio(SCOPES, value="same", label="Search among")
        go_btn = gr.Button("Find other contexts", variant="primary")
        summary = gr.Markdown("Press **Find other contexts**: the first search reads the reviews (a few seconds).")
        matches = gr.HTML(label="Nearest contexts")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="nearest neighbours")
        ex = common.examples(side, EXAMPLES, [sentence, word, layer, scope], example_labels=EXAMPLE_LABELS)
    inputs = [sentence, word, layer, scope, model_box]
    outputs = [matches, summary, raw]
    go_btn.click(search, inputs, outputs, api_name="contexts")
    gr.on([sentence.submit, word.submit, layer.release, scope.input], search, inputs, outputs, api_name=False)
    ex.load_input_event.then(search, inputs, outputs, api_name=False)
    return layer
