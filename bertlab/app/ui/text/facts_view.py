"""Fill-mask's "What BERT knows" section: LAMA-style factual cloze prompts (analysis/facts.py) scored on the
picked model, per relation and per prompt, with what it guesses instead when it does not know."""
from __future__ import annotations

import html
from collections import Counter

import gradio as gr

from .... import family
from ....analysis import facts as F
from ..shared import common, links, models

RELATIONS, FACTS = F.load()
ALL = "all"
CHOICES = [("all relations", ALL)] + [(f"{r}: {about}", r) for r, about in RELATIONS.items()]
EXAMPLES = [[ALL], ["genre"], ["capital"], ["sound"]]
EXPLAIN = f"""**What BERT knows.** Write a fact as a sentence with a gap, *the capital of france is [MASK] .*,
and a masked-word model becomes a quiz-taker. LAMA (Petroni et al., 2019) quizzed BERT this way and found
that pre-training on Wikipedia and books had stored many facts in it that no one taught it directly. Here:
{len(FACTS)} facts in {len(RELATIONS)} relations written for bertlab (`bertlab/data/facts.jsonl`).
**P@1** is the share of prompts whose answer is the model's first guess, **P@10** the share with it among
the first ten; *rank* is where the answer comes in the model's list. A model can only say a word its
vocabulary holds as one piece: an answer it lacks is a miss, counted apart as *not in vocabulary*.
The shipped model read nothing but IMDB movie reviews: it met films, actors and opinions, seldom capitals
or animals, so where it does not know it answers with what reviews say. Type a hub model such as
*bert-base-uncased* in the model box at the top (where the server may download it) to see what Wikipedia
taught."""
MARK = "background:#fde68a;color:#111;padding:0 3px;border-radius:3px"
GREY = "color:#6b7280"
# A link with ?relation= brings the quiz, far down the tab, into view once its answer is drawn (its first only)
SCROLL = """() => { if (!new URLSearchParams(location.search).get("relation") || window.blFactsShown) return;
    window.blFactsShown = true;
    document.getElementById("facts-relation")?.scrollIntoView({block: "start"}); }"""


def _pct(p: float) -> str:
    return f"{p:.0%}" if p >= 0.1 or p == 0 else f"{p:.1%}" if p >= 0.001 else f"{p * 100:.1g}%"


def _share(p: float) -> str:
    """A precision: 12.5% stays 12.5% (a share of 40 prompts), 40.0% is 40%."""
    return f"{p:.1%}".replace(".0%", "%")


def said(res: dict, choice) -> str:
    """What the numbers say, every figure from `res`."""
    o, rows, e = res["overall"], res["rows"], html.escape
    n = o["prompts"]
    hit1 = sum(1 for r in rows if r["rank"] == 1)
    hit10 = sum(1 for r in rows if r["rank"] is not None and r["rank"] <= 10)
    lacks = [r["answer"] for r in rows if not r["in_vocab"]]
    parts = [f"<b>{hit1}</b> of {n} facts answered with the first guess (P@1 {_share(o['p_at_1'])}), <b>{hit10}</b> "
             f"with the answer among the first ten (P@10 {_share(o['p_at_10'])})."]
    if lacks:
        named = e(", ".join(lacks[:6])) + ", …" * (len(lacks) > 6)
        parts.append(f"<b>{len(lacks)}</b> of the {n} answers are not one piece of its {res['vocab_size']:,}-piece "
                     f"vocabulary, so it cannot say them at all ({named}).")
    if len(res["relations"]) > 1:
        top = max(r["p_at_10"] for r in res["relations"])
        best = [r["relation"] for r in res["relations"] if r["p_at_10"] == top]
        if top > 0:
            parts.append(f"It does best on <b>{e(' and '.join(best))}</b> (P@10 {_share(top)}).")
    common_firsts = Counter(r["guesses"][0] for r in rows).most_common(4)
    firsts = ", ".join(f"<i>{e(g)}</i> ({k}{' prompts' * (i == 0)})" for i, (g, k) in enumerate(common_firsts))
    seen = ("It read only movie reviews, and answers with what reviews say: its" if (choice or models.DEFAULT) ==
            models.DEFAULT else "Its")
    parts.append(f"{seen} commonest first guesses here are {firsts}.")
    return f"<p style='margin:4px 0'>{' '.join(parts)}</p>"


def relations_html(res: dict) -> str:
    head = "<tr><th>relation</th><th>prompts</th><th>P@1</th><th>P@10</th><th>not in vocabulary</th></tr>"
    rows = "".join(f"<tr><td><b>{html.escape(r['relation'])}</b><br><span style='{GREY};font-size:0.9em'>"
                   f"{html.escape(r['about'])}</span></td><td>{r['prompts']}</td><td>{_share(r['p_at_1'])}</td>"
                   f"<td>{_share(r['p_at_10'])}</td><td>{r['out_of_vocab']}</td></tr>" for r in res["relations"])
    return _table(head + rows)


def prompts_html(res: dict) -> str:
    head = "<tr><th>prompt</th><th>answer</th><th>rank</th><th>its top guesses</th></tr>"
    rows = []
    for r in res["rows"]:
        e = html.escape
        answer = (f"<b>{e(r['answer'])}</b>" if r["in_vocab"] else
                  f"<b>{e(r['answer'])}</b><br><span style='{GREY};font-size:0.85em'>not in vocabulary</span>")
        rank = f"{r['rank']:,}<br><span style='{GREY};font-size:0.85em'>{_pct(r['prob'])}</span>" if r["in_vocab"] \
            else "–"
        hit = (r["rank"] or 0) - 1  # the answer's place among the guesses shown (by id: RoBERTa's '▁paris' too)
        guesses = ", ".join(f"<mark style='{MARK}'>{e(g)}</mark>" if i == hit else e(g)
                            for i, g in enumerate(r["guesses"]))
        rows.append(f"<tr><td>{e(r['cloze'])}</td><td>{answer}</td><td>{rank}</td><td>{guesses}</td></tr>")
    return _table(head + "".join(rows))


def _table(body: str) -> str:
    return ('<div style="overflow-x:auto"><table style="border-collapse:collapse;margin:4px 0;font-size:0.92em" '
            f'cellpadding="3">{body}</table></div>')


def facts_view(relation, choice):
    """(HTML: what the numbers say, the per-relation and per-prompt tables; JSON: analysis.facts.score)."""
    model, tok = common.load_model(choice)
    with common.mistakes():
        res = F.score(model, tok, relation or None)
    view = (said(res, choice) + relations_html(res) + "<p style='margin:8px 0 2px'><b>Each prompt</b> "
            "(rank and probability of the answer; the answer highlighted where the model guessed it):</p>"
            + prompts_html(res))
    return view, res


def on_its_own(relation, choice):
    """facts_view for the runs no one asked for (the tab opening, a new model): a model without a masked-word
    head gets a note here, the fill-mask view above having said what it does instead."""
    model, _ = common.load_model(choice)
    if not family.has_mlm_head(model):
        return f"<p style='{GREY}'>This model has no masked-word head: it cannot take the quiz.</p>", {}
    return facts_view(relation, choice)


def build(picker: gr.Dropdown) -> None:
    with common.form(EXPLAIN) as side:
        relation = gr.Dropdown(choices=CHOICES, value=ALL, label="Relation", elem_id="facts-relation")
        go_btn = gr.Button("Quiz the model", variant="primary", elem_id="facts-go")
        view = gr.HTML(elem_id="facts-view")
        with gr.Accordion("JSON: per relation and per prompt (rank, probability, top guesses)", open=False):
            raw = gr.JSON(label="facts JSON")
    ex = common.examples(side, EXAMPLES, [relation])
    links.register("fill-mask", relation=relation)
    view.change(None, None, None, api_name=False, js=SCROLL)
    common.wire(facts_view, [relation, picker], [view, raw], go_btn, "facts", [relation.input, picker.change], ex,
                auto=on_its_own)
