"""Fill-mask's view for an ELECTRA discriminator: it was never trained to guess hidden words, but to
spot the words a small generator swapped in. So it reads a whole sentence and says, per token, how
likely that token was replaced. A sentence with one wrong word should light that word up."""
from __future__ import annotations

import html

import plotly.graph_objects as go

from .... import family
from ....analysis.predict import replaced_tokens
from ..shared import common

NOTE = ("<b>This is a {label} discriminator.</b> It was pre-trained on <i>replaced token detection</i>: "
        "a generator (a smaller masked-LM) filled the gaps of masked sentences with plausible words, and the "
        "discriminator learned to tell, for <i>every</i> token, whether it is the original or a replacement. "
        "It has no head that guesses masked words, so instead of [MASK] guesses you see, per token, the "
        "probability that it was replaced. Try <i>the chef cooked the meal .</i> and then <i>the chef ate "
        "the meal .</i>, or put one wrong word into a sentence.")
HOT = "#dc2626"
COLD = "#2563eb"


def _colour(p: float) -> str:
    """Light to strong red with the probability of 'replaced'; blue-grey when it reads as original."""
    if p > 0.5:
        return f"rgba(220,38,38,{0.25 + 0.6 * p:.2f})"
    return f"rgba(37,99,235,{0.08 + 0.25 * (0.5 - p):.2f})"


def text_html(rows: list[dict]) -> str:
    spans = [f'<span title="P(replaced) = {r["replaced"]:.1%}" style="background:{_colour(r["replaced"])};'
             f'color:#111;padding:1px 4px;margin:1px;border-radius:3px;display:inline-block">'
             f'{html.escape(r["token"])}</span>' for r in rows if not r["special"]]
    flagged = [r["token"] for r in rows if not r["special"] and r["replaced"] > 0.5]
    said = (f"Flagged as replaced (above 50 %): <b>{html.escape(', '.join(flagged))}</b>" if flagged
            else "No token is above 50 %: the discriminator reads every token as original.")
    return (f'<div style="margin:4px 0 8px"><div style="color:#374151">Each token coloured by the probability '
            f'that it was replaced (red) or is original (blue):</div><div style="line-height:2">{"".join(spans)}'
            f'</div><div style="color:#374151">{said}</div></div>')


def figure(rows: list[dict], label: str) -> go.Figure:
    shown = [r for r in rows if not r["special"]]
    labels = [f"{i + 1}. {r['token']}" for i, r in enumerate(shown)]
    p = [r["replaced"] for r in shown]
    fig = go.Figure(go.Bar(x=p, y=labels, orientation="h", marker_color=[HOT if q > 0.5 else COLD for q in p],
                           text=[f"{q:.0%}" for q in p], textposition="auto",
                           hovertemplate="%{y}: P(replaced) %{x:.1%}<extra></extra>"))
    fig.add_vline(x=0.5, line_dash="dot", line_color="#6b7280")
    fig.update_xaxes(range=[0, 1], tickformat=".0%", title="probability that the token was replaced")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_layout(height=min(2400, 120 + 26 * len(shown)), margin=dict(l=10, r=20, t=60, b=40),
                      title=dict(text=f"Replaced or original? ({label} discriminator)", font_size=15), showlegend=False)
    return fig


def predict(model, tok, text: str):
    """(figure, JSON rows, HTML) for the Fill-mask tab's outputs."""
    with common.mistakes():
        rows = replaced_tokens(model, tok, text)
    label = family.family_name(model.config)
    note = f'<div style="padding:6px 10px;margin:4px 0 8px;border-left:4px solid #2563eb;background:#eff6ff;color:#1e3a8a;border-radius:4px">{NOTE.format(label=label)}</div>'
    return figure(rows, label), {"replaced_token_detection": rows}, note + text_html(rows)
