"""Fill-mask's "two masks" section: the masks filled in one pass (each on its own, as BERT's loss
treats them) against one at a time, each later word seeing the earlier ones (analysis/predict.py)."""
from __future__ import annotations

import html
import math

import gradio as gr

from ....analysis.predict import MASK_RE, MAX_IN_TURN, fill_in_turn
from ..shared import common

EXAMPLE = "i saw it in [MASK] [MASK] last year ."
EXPLAIN = f"""**Two masks: one pass or one at a time?** BERT learned to guess each hidden word from
the words it can see, never from the other hidden ones: its loss treats them as independent,
p(a, b | text) ≈ p(a | text) · p(b | text). Filled in one pass, two `[MASK]`s side by side can each
take their own best word and make a pair no one writes. Filled one at a time (the surest first, then
the model runs again with that word in place), the second word sees the first. Both rows are scored
the same way: each word's probability given the words before it filled in.
**XLNet** (Yang et al., 2019) was built to close this gap: it predicts the words of a sentence in a
random order, each from the ones before it in that order, so it learns the words *together*, with no
`[MASK]` token at all. Try *{EXAMPLE}*"""


def _pct(p: float) -> str:
    return f"{p:.0%}" if p >= 0.1 else f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def _filled(text: str, tokens: list[str]) -> str:
    """The typed text with its masks replaced by `tokens`, each highlighted."""
    parts, last = [], 0
    for m, t in zip(MASK_RE.finditer(text), tokens):
        parts += [html.escape(text[last:m.start()]),
                  f'<mark style="background:#fde68a;padding:0 3px;border-radius:3px">{html.escape(t)}</mark>']
        last = m.end()
    return "".join(parts) + html.escape(text[last:])


def table_html(text: str, res: dict) -> str:
    rows = []
    for key, name in (("independent", "One pass"), ("in_turn", "One at a time")):
        r = res[key]
        rows.append(f"<tr><td><b>{name}</b></td><td>{_filled(text, r['tokens'])}</td>"
                    f"<td>{' · '.join(_pct(p) for p in r['alone'])}</td>"
                    f"<td>{' · '.join(_pct(p) for p in r['chain'])}</td>"
                    f"<td><b>{_pct(math.exp(r['chain_log_prob']))}</b></td></tr>")
    one, turn = res["independent"], res["in_turn"]
    gain = math.exp(turn["chain_log_prob"] - one["chain_log_prob"])
    if one["tokens"] == turn["tokens"]:
        said = ("Here both ways agree: the words the model picks alone also fit each other. Put two masks "
                "side by side where many words fit, as in the example, to see them part.")
    else:
        worst = min(range(len(one["chain"])), key=lambda i: one["chain"][i])
        said = (f"In one pass, [MASK] #{worst + 1} took <b>{html.escape(one['tokens'][worst])}</b>, which the "
                f"model itself gives {_pct(one['chain'][worst])} once it sees the words before it: each mask "
                f"chose without the other. One at a time, the filling is <b>{gain:,.0f}×</b> as likely.")
    head = "<tr><th></th><th>filled</th><th>alone</th><th>in turn</th><th>together</th></tr>"
    key = ("<i>alone</i>: each word's probability in one pass, the other masks hidden (how BERT was trained); "
           "<i>in turn</i>: given the words before it filled in; <i>together</i>: their product, the filling's "
           "probability read left to right. <i>One at a time</i> fills the surest mask first.")
    return ('<div style="overflow-x:auto"><table style="border-collapse:collapse;margin:4px 0;font-size:0.92em" cellpadding="3">'
            f"{head}{''.join(rows)}</table></div><p style='margin:6px 0'>{said}</p>"
            f"<p style='margin:4px 0;color:#6b7280;font-size:0.9em'>{key}</p>")


def in_turn_view(text, causal, choice):
    """(HTML, JSON) of the masks filled in one pass and one at a time; a hint where the text has fewer
    than two [MASK]s (the fill-mask view above has already said what is wrong with a bad text)."""
    text = common.check_text(text)
    n = len(MASK_RE.findall(text))
    if n < 2 or n > MAX_IN_TURN:
        return (f"<p style='color:#6b7280'>Write two to {MAX_IN_TURN} [MASK]s (side by side shows it best) "
                f"to compare filling them in one pass with one at a time, e.g. <i>{html.escape(EXAMPLE)}</i></p>"), {}
    if causal:
        return ("<p style='color:#6b7280'>This comparison reads both sides of each mask: untick "
                "<i>Left context only</i> to see it.</p>"), {}
    model, tok = common.load_model(choice)
    with common.mistakes():
        res = fill_in_turn(model, tok, text)
    return table_html(text, res), res


def build(text, causal, picker, after: list) -> dict:
    """The section under the logit lens, run after each of the fill-mask view's events that worked
    (`after`: its button's first, which also carries this view's API)."""
    gr.Markdown(EXPLAIN, elem_classes="bl-in-turn-explain")
    view = gr.HTML(elem_id="fill-in-turn")
    with gr.Accordion("JSON: per way, the tokens, each one's probability alone and in the chain", open=False):
        raw = gr.JSON(label="fill-in-turn JSON")
    args = dict(fn=in_turn_view, inputs=[text, causal, picker], outputs=[view, raw])
    after[0].success(**args, api_name="fill_in_turn")
    for event in after[1:]:
        event.success(**args, api_name=False)
    common.clear_on_failure(after, [view, raw])  # the fill-mask view's mistake empties this section too
    return args
