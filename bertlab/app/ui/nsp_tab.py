"""Next sentence prediction: BERT's second pre-training task, and why later models dropped it."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from ...analysis.predict import nsp_scores
from . import common

EXPLAIN = """**Does sentence B follow sentence A?** Besides filling in blanks, original BERT was
trained on pairs `[CLS] A [SEP] B [SEP]`: half the time B really came next in the document, half
the time it was a random sentence. A small head on the `[CLS]` vector outputs P(IsNext). Write one
sentence A and several candidate B's (one per line): they are ranked by that probability.

RoBERTa (2019) found that dropping this task does not hurt (it even helps), and many models are
trained with masked-word prediction only. Such a model still *has* an NSP head, but an untrained
one: its scores hover around 50 % and mean nothing."""

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


def _short(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def figure(ranking: list[dict]) -> go.Figure:
    """Horizontal bars, most likely continuation on top; labels numbered so they stay unique."""
    labels = [f"{r['rank']}. {_short(r['second'])}" for r in ranking]
    p = [r["p_is_next"] for r in ranking]
    colors = ["#2ca02c" if v >= 0.5 else "#7f7f7f" for v in p]
    fig = go.Figure(go.Bar(x=p, y=labels, orientation="h", marker_color=colors,
                           text=[f"{v:.1%}" for v in p], textposition="auto",
                           customdata=[r["second"] for r in ranking],
                           hovertemplate="P(IsNext) = %{x:.2%}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0.5, line_dash="dot", line_color="#9ca3af")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", title="P(IsNext)")
    fig.update_layout(height=120 + 36 * len(ranking), margin=dict(l=10, r=20, t=50, b=40),
                      title=dict(text="Which B follows A? (ranked by P(IsNext))", font_size=15))
    return fig


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
    with common.mistakes():
        scores = nsp_scores(model, tok, first, seconds)
        truncated = [tok.encode(first, pair=s).truncated for s in seconds]
    order = sorted(range(len(seconds)), key=lambda i: -scores[i])
    ranking = [{"rank": r + 1, "second": seconds[i], "p_is_next": scores[i], "truncated": truncated[i]}
               for r, i in enumerate(order)]
    untrained = all(abs(s - 0.5) < UNTRAINED_BAND for s in scores)
    flat = len(scores) > 1 and max(scores) - min(scores) < FLAT_SPREAD
    notes = []
    if untrained:
        notes.append("⚠ All scores are ≈ 50 %: this model's NSP head looks **untrained** (e.g. a model "
                     "trained with masked-word prediction only, like RoBERTa), so these scores are "
                     "meaningless. Try the fill-mask tab instead.")
    elif flat:
        notes.append(f"All candidates score within {100 * (max(scores) - min(scores)):.1f} points of each "
                     "other: this model hardly tells them apart (its NSP head is weakly trained), so the "
                     "order says little.")
    if any(truncated):
        notes.append(f"⚠ Some pairs were cut to {tok.model_max_length} tokens (this model's limit), "
                     "so the model saw only part of them.")
    data = {"first": first, "ranking": ranking, "nsp_head_untrained": untrained, "scores_flat": flat,
            "notice": " ".join(notes)}
    return figure(ranking), data, "\n\n".join(notes)


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN):
        first = gr.Textbox(label="Sentence A", value=EXAMPLES[0][0], lines=1, max_length=20_000)
        seconds = gr.Textbox(label="Candidate sentences B (one per line)", value=EXAMPLES[0][1],
                             lines=5, max_length=50_000)
        go_btn = gr.Button("Rank the B's", variant="primary")
    note = gr.Markdown()
    plot, raw = common.plot_beside_json("P(IsNext) per candidate", "JSON ranking")
    ex = gr.Examples(EXAMPLES, inputs=[first, seconds])
    common.wire(nsp, [first, seconds, picker], [plot, raw, note], go_btn, "nsp",
                [first.submit, picker.change], ex)
