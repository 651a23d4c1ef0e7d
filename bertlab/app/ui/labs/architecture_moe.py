"""Architecture → "Mixture of experts": the model above with its feed-forward layers copied into experts and a
router that sends each token to top-k of them: parameters grow with the experts, a token's compute only with
k. Arithmetic on the form's config (bertlab.analysis.sizing.moe), so it answers at once."""
from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go

from ....analysis import sizing
from ..shared.common import mistakes

EXPLAIN = """**Mixture of experts: more parameters, the same compute per token.** Replace a layer's
feed-forward by *E* copies (the *experts*) and a small *router* that picks, for each token, the *k*
experts it goes through. The model stores all *E* feed-forwards, but each token runs through only *k*,
so what a token costs grows with *k*, not with *E*. Switch Transformer uses *k* = 1 in every other layer;
GShard *k* = 2. The price: all experts must sit in memory, and a batch's tokens must be spread over them
evenly (a load-balancing loss). Counts are the encoder of the model sized above; the router is
*H* × *E* weights a layer."""

EVERY = [("every layer", 1), ("every other layer (Switch)", 2)]
GRID = [1, 2, 4, 8, 16, 32, 64, 128]


def size(c, experts, top_k, every) -> tuple[str, go.Figure, dict]:
    """(summary, chart, JSON) for config `c` with this mixture."""
    with mistakes(ValueError, TypeError):
        experts, top_k, every = int(experts), int(top_k), int(every)
        r = sizing.moe(c, experts, top_k, every)
        curve = [sizing.moe(c, e, min(top_k, e), every) for e in sorted(set(GRID + [experts]))]
    xs = [x["experts"] for x in curve]
    fig = go.Figure()
    for key, base, name, colour in (("params", "dense_params", "parameters stored", "#2563eb"),
                                    ("active_params", "dense_params", "parameters a token uses", "#16a34a"),
                                    ("flops_per_token", "dense_flops_per_token", "compute a token costs", "#ea580c")):
        fig.add_trace(go.Scatter(x=xs, y=[x[key] / x[base] for x in curve], mode="lines+markers", name=name,
                                 line=dict(color=colour, width=2), hovertemplate="%{x} experts: %{y:.2f}×<extra>"
                                 + name + "</extra>"))
    fig.add_vline(x=experts, line=dict(color="#9ca3af", dash="dot"))
    fig.update_xaxes(type="log", title="experts", tickvals=xs, ticktext=[str(x) for x in xs])
    fig.update_yaxes(title="× the dense model", rangemode="tozero")
    fig.update_layout(height=360, margin=dict(l=50, r=10, t=30, b=40), legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"top-{top_k}, {dict((v, k) for k, v in EVERY)[every]}", font=dict(size=14)))
    summary = (f"**{experts} experts, top-{top_k}**, in {r['moe_layers']} of {c.num_hidden_layers} layers: "
               f"**{sizing.humanize(r['params'])} parameters** stored ({r['params'] / r['dense_params']:.2f}× the dense "
               f"{sizing.humanize(r['dense_params'])}), **{sizing.humanize(r['active_params'])}** used by each token, "
               f"**{sizing.humanize(r['flops_per_token'], 'FLOPs')}** a token forward "
               f"({r['flops_per_token'] / r['dense_flops_per_token']:.2f}× the dense model's).")
    return summary, fig, {"picked": r, "by_experts": curve}


def build(config_of_form, form_inputs: dict) -> None:
    """`config_of_form(**form_inputs)`: the BertConfig the Architecture form above describes."""
    with gr.Accordion("Mixture of experts: parameters against compute", open=False, elem_id="arch-moe"):
        with gr.Row():
            with gr.Column(scale=3):
                with gr.Row():
                    experts = gr.Slider(1, 128, value=8, step=1, label="Experts", min_width=160)
                    top_k = gr.Slider(1, 4, value=1, step=1, label="Experts a token goes to (k)", min_width=160)
                every = gr.Radio(EVERY, value=2, label="Which layers", elem_id="arch-moe-every")
                btn = gr.Button("Size the mixture", elem_id="arch-moe-go")
                said = gr.Markdown(elem_id="arch-moe-said")
            with gr.Column(scale=2):
                gr.Markdown(EXPLAIN)
        plot = gr.Plot(label="Mixture of experts")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON()

    def run(experts, top_k, every, **form):
        with mistakes(ValueError, TypeError, OverflowError):
            c = config_of_form(**form)
        return size(c, experts, top_k, every)

    by_name = {"experts": experts, "top_k": top_k, "every": every, **form_inputs}
    gr.on([btn.click, experts.release, top_k.release, every.change], run, None, [said, plot, raw],
          inputs_kwargs=by_name, api_name="architecture_moe")
