"""Scaling: what pre-training a BERT costs (FLOPs, time, money) and what the scaling laws of Kaplan et
al. 2020 and Hoffmann et al. 2022 say about a model and a budget. Arithmetic only
(bertlab.analysis.compute); the CPU's matmul rate is measured once, on first use."""
from __future__ import annotations

import functools
import math

import gradio as gr
import numpy as np
import plotly.graph_objects as go

from ....analysis import compute
from ....analysis.sizing import humanize
from ....config import PRESETS, preset
from ..shared import common, forms, links
from ..shared.common import mistakes, wire
from . import scaling_memory, scaling_sweep

# Chinchilla itself (Hoffmann et al. 2022): 70 B parameters on 1.4 T tokens, the 20 tokens a parameter
CHINCHILLA_N, CHINCHILLA_D = 70e9, 1.4e12
SMALL_BUDGET = 1e18  # FLOPs: the first budget the note quotes


def fit_ratios() -> dict:
    """Tokens a parameter at the fitted loss's minimum at three budgets (SMALL_BUDGET, BERT-base's as
    published, Chinchilla's own 6ND); the exponent of C they grow with, (α - β)/(α + β); the rule's
    ratio; and the budget where the two agree."""
    k = compute.CHINCHILLA
    budgets = {"small": SMALL_BUDGET, "bert": compute.worked_example("bert-base")["flops_exact"]["flops"],
               "chinchilla": 6 * CHINCHILLA_N * CHINCHILLA_D}
    out = {name: {**compute.chinchilla_fit(b), "budget": b} for name, b in budgets.items()}
    e, rule = (k["alpha"] - k["beta"]) / (k["alpha"] + k["beta"]), CHINCHILLA_D / CHINCHILLA_N
    out |= {"exponent": e, "rule": rule, "agree": SMALL_BUDGET * (rule / out["small"]["tokens_per_param"]) ** (1 / e)}
    return out


def fit_note() -> str:
    """Why the two Chinchilla rows differ, in the fit's own numbers."""
    r, k, sci = fit_ratios(), compute.CHINCHILLA, compute.sci
    s, b, c = r["small"], r["bert"], r["chinchilla"]
    return (f"**Why two Chinchilla rows differ.** The row *{r['rule']:.0f} tokens/param* is Chinchilla's own "
            f"ratio ({CHINCHILLA_N / 1e9:.0f} B parameters on {CHINCHILLA_D / 1e12:.1f} T tokens). It follows "
            f"Hoffmann et al.'s Approaches 1 and 2, where parameters and tokens grow at the same rate, so the "
            f"ratio does not change with the budget. The row *fitted L* is the minimum of their Approach 3, a fitted loss "
            f"E + A/N^α + B/D^β. There α = {k['alpha']:g} is larger than β = {k['beta']:g}, so the best ratio "
            f"grows as C^{r['exponent']:.3f}: {s['tokens_per_param']:.1f} tokens a parameter at "
            f"{sci(s['budget'], 0)} FLOPs, {b['tokens_per_param']:.1f} at BERT-base's {sci(b['budget'])} and "
            f"{c['tokens_per_param']:.1f} at Chinchilla's own {sci(c['budget'])}, where it picks "
            f"{c['n'] / 1e9:.1f} B parameters on {c['d'] / 1e12:.2f} T tokens. The two rows agree only near "
            f"{sci(r['agree'], 1)} FLOPs. Besiroglu et al. 2024 refit Approach 3 and found the published "
            f"constants rounded and the fit stopped early; their refit agrees with Approaches 1 and 2.")


EXPLAIN = f"""**What does pre-training cost?** Each token meets every weight once forward (a multiply and
an add: 2 FLOPs) and twice backward (4 more), so compute is about **6 FLOPs per parameter per
token** (C ≈ 6ND). Divide by
how many FLOPs a second your hardware *sustains* (its peak × a utilisation, rarely above 50 %) to
get the time, and multiply the hours by a price. The **scaling laws** then say what more parameters
(N) or more tokens (D) buy: Kaplan's curves on their own, and Chinchilla's best split of a FLOP
budget in two rows: the rule of thumb ({CHINCHILLA_D / CHINCHILLA_N:.0f} tokens a parameter) and the
fitted loss ({fit_ratios()['small']['tokens_per_param']:.1f} tokens a parameter at {compute.sci(SMALL_BUDGET, 0)}
FLOPs, more at larger budgets; the note under the formulas says why). Click a published BERT below:
its row says how far our count is from the paper's 4 days."""

NOTES = """**Sources.** BERT's recipe: Devlin et al. 2019, appendix A.2 (1M steps of 256 sequences, 128
tokens for 90 % of the steps and 512 for the rest; base on 16 TPU chips, large on 64, 4 days each;
the TPU generation is not stated). ELECTRA's train-FLOPs column: Clark et al. 2020, Tables 1 and 8
(6.4e19 and 1.9e20, which ELECTRA's own `flops_computation.py` gives: we did not find the tables' text
itself), re-counted here with that script's rules (backward = forward, all steps at 512 tokens,
embedding look-ups as matmuls). Kaplan et al. 2020: α_N 0.076,
N_c 8.8e13 non-embedding parameters, α_D 0.095, D_c 5.4e13 tokens; their loss is nats per token of
GPT-style models on WebText2, so read it as a **shape** (how fast loss falls), not a prediction of
BERT's masked-LM loss. Hoffmann et al. 2022, Approach 3: E 1.69, A 406.4, B 410.7, α 0.34, β 0.28.
Chinchilla itself: 70B parameters on 1.4T tokens. Besiroglu et al. 2024 (Epoch AI, arXiv:2404.10102): the
Approach 3 refit. Peak FLOP/s: TPU v2 45 T (180 T a 4-chip board, Google I/O
2017), TPU v3 123 T (Google Cloud docs), V100 15.7 / 125,
T4 8.1 / 65, A100 19.5 / 312, H100 67 / 989 (NVIDIA datasheets; dense, no 2:4 sparsity). *Exact*
FLOPs are the Architecture tab's size model: matmuls only, training = 3 × forward, vocabulary logits
at the masked 15 % only."""

CPU = "cpu"
CUSTOM = "custom FLOP/s"
ACCEL_CHOICES = [(a["label"], k) for k, a in compute.ACCELERATORS.items()] + [
    ("this CPU (measured)", CPU), ("my own FLOP/s", CUSTOM)]
PICKED = "the picked model"
MODELS = list(PRESETS) + ["roberta:base", "albert:base", "electra:small", "distilbert:base", PICKED]
# The form as the published runs set it; the utilisation is the one the 4 days imply on TPU v2 chips.
FIELDS = ["model", "steps", "batch", "seq_len", "tokens", "accelerator", "dtype", "utilization", "count",
          "flops_per_second", "price", "budget"]


LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]
FORMULAS = [("tokens", "Tokens"), ("flops_6nd", "FLOPs, the rule of thumb"), ("flops_exact", "FLOPs, counted"),
            ("time", "Time"), ("cost", "Cost"), ("kaplan_n", "Kaplan: loss against parameters"),
            ("kaplan_d", "Kaplan: loss against tokens"), ("chinchilla_rule", "Chinchilla: 20 tokens a parameter"),
            ("chinchilla_fit", "Chinchilla: the fitted loss")]


def example_row(name: str) -> list:
    ex = compute.EXAMPLES[name]
    u = compute.worked_example(name)["implied_utilization"]["tpu-v2"]
    sched = ",".join(f"{L}:{s:g}" for L, s in ex["schedule"])
    return [ex["preset"], ex["steps"], ex["batch"], sched, None, "tpu-v2", "bf16", round(u, 3), ex["chips"],
            None, None, None]


@functools.lru_cache(maxsize=1)
def cpu_rate() -> float:
    return compute.measure_cpu()


def _config(model, picker):
    if model == PICKED:
        c = common.config_of(picker)
        if c is None:
            raise ValueError(f"the picked model {picker!r} does not load")
        return c, f"the picked model ({picker})"
    if model in PRESETS:
        return preset(model), f"BERT-{model}"
    family, _, size = str(model).partition(":")
    return preset(size, model_type=family), f"{family} {size}"


def _blank(x) -> bool:
    return x is None or (isinstance(x, str) and not x.strip()) or (isinstance(x, float) and math.isnan(x))


def _optional(x):
    """An optional number box: blank, or 0 (what a browser's cleared number box and an example's None
    send), means not given."""
    return None if _blank(x) or (isinstance(x, (int, float)) and x == 0) else x


def _matching_example(model, steps, batch, seq_len, tokens) -> str | None:
    for name, ex in compute.EXAMPLES.items():
        if (model == ex["preset"] and _blank(tokens) and not _blank(steps) and float(steps) == ex["steps"]
                and not _blank(batch) and float(batch) == ex["batch"]
                and compute.parse_schedule(seq_len) == ex["schedule"]):
            return name
    return None


def kaplan_figure(n_model: float, label: str, n_tokens: float) -> go.Figure:
    """Kaplan's L(N) on log-log axes, the model marked; the dotted line is L(D) at this run's tokens."""
    ns = np.logspace(4, 12, 120)
    fig = go.Figure(go.Scatter(x=ns, y=(compute.KAPLAN["N_c"] / ns) ** compute.KAPLAN["alpha_N"], mode="lines",
                               name="Kaplan L(N)", line={"color": "#1f77b4"}))
    ld = compute.kaplan_loss_d(n_tokens)["loss"]
    fig.add_hline(y=ld, line_dash="dot", line_color="#ff7f0e")
    # on a log axis an annotation's y is log10 of the value (plotly's rule), so place it by hand
    fig.add_annotation(x=1, xref="paper", y=math.log10(ld), yanchor="bottom", xanchor="right", showarrow=False,
                       text=f"L(D) at {compute.sci(n_tokens, 1)} tokens", font={"color": "#ff7f0e"})
    y = compute.kaplan_loss_n(n_model)["loss"]
    fig.add_trace(go.Scatter(x=[n_model], y=[y], mode="markers+text", name=label, text=[label],
                             textposition="top right", marker={"size": 12, "color": "#d62728"}))
    fig.update_xaxes(type="log", title="non-embedding parameters N")
    fig.update_yaxes(type="log", title="loss (nats/token, WebText2)", tickvals=[1.5, 2, 3, 4, 5, 6, 8],
                     range=[math.log10(1.2), math.log10(8)])
    fig.update_layout(height=360, margin={"l": 60, "r": 20, "t": 40, "b": 50}, showlegend=False,
                      title={"text": "Kaplan et al. 2020: L(N) = (N_c / N)^0.076", "font": {"size": 14}})
    return fig


def _row(what, value, how):
    return [what, value, how]


def formula_md(title: str, formula: str) -> str:
    """The general formula on its own line, then each line with this run's numbers as inline math,
    which KaTeX may break after an = or a ·: a long line wraps on a phone instead of being cut."""
    first, *rest = formula.split(",\\ ")
    return f"**{title}**\n\n$${first}$$\n\n" + "\n\n".join(f"${line}$" for line in rest)


def table_md(rows: list) -> str:
    """The result as a Markdown table: it wraps on a phone, where a grid would scroll sideways."""
    lines = ["| quantity | value | how |", "|---|---|---|"]
    return "\n".join(lines + [f"| {a} | **{b}** | {c} |" for a, b, c in rows])


# the form's boxes by name, in order (the API's parameters; the published examples' rows)
INPUTS = ("model", "steps", "batch", "seq_len", "n_tokens", "accelerator", "dtype", "utilization", "count",
          "flops_per_second", "price", "budget")


def calculate(**form):
    """(summary, table, formulas, chart, JSON) for the form: INPUTS by name, and `picker` (the model
    picked at the top, for the model box's "picked" choice)."""
    with mistakes(ValueError):
        forms.check_names(form, (*INPUTS, "picker"), "the calculator")
    model, steps, batch, seq_len, n_tokens, accelerator, dtype, utilization, count, flops_per_second, price, \
        budget = (form.get(k) for k in INPUTS)
    picker = form.get("picker")
    n_tokens, flops_per_second, price, budget = map(_optional, (n_tokens, flops_per_second, price, budget))
    with mistakes(ValueError, TypeError, OverflowError):
        c, label = _config(model, picker)
        schedule = compute.parse_schedule(seq_len if not _blank(seq_len) else "128")
        if _blank(n_tokens) and _blank(steps):
            raise ValueError("give the steps (or the tokens)")
        res = compute.estimate(c, steps=None if _blank(steps) else steps,
                               batch=None if _blank(batch) else batch, schedule=schedule,
                               n_tokens=None if _blank(n_tokens) else n_tokens,
                               budget=None if _blank(budget) else budget)
        if accelerator == CUSTOM:
            if _blank(flops_per_second):
                raise ValueError("type the FLOP/s, or pick an accelerator")
            rate = compute.throughput(flops_per_second=flops_per_second)
        else:
            rate = compute.throughput(accelerator, dtype, utilization, count,
                                      measured_cpu=cpu_rate() if accelerator == CPU else None)
        res["rate"], res["time"] = rate, compute.train_time(res["flops_exact"]["flops"], rate["flops_per_second"])
        if not _blank(price):
            res["cost"] = compute.cost(res["time"]["seconds"], price, rate.get("count", 1))
        example = _matching_example(model, steps, batch, seq_len, n_tokens)
    sci = compute.sci
    tok = res["tokens"]
    rows = [_row("parameters N (encoder)", humanize(res["params"]), "from the config"),
            _row("non-embedding parameters", humanize(res["non_embedding_params"]), "Kaplan's N"),
            _row("tokens D", sci(tok["tokens"]), f"{tok['sequences']:,.0f} sequences × {tok['mean_seq_len']:g}"),
            _row("FLOPs ≈ 6ND", sci(res["flops_6nd"]["flops"]), "Kaplan et al. 2020"),
            _row("FLOPs, exact count", sci(res["flops_exact"]["flops"]), "size model, MLM logits at 15 %"),
            _row("speed", f"{sci(rate['flops_per_second'])} FLOP/s", rate["label"]),
            _row("time", compute.human_time(res["time"]["seconds"]), "exact FLOPs / speed")]
    if "cost" in res:
        rows.append(_row("cost", f"${res['cost']['dollars']:,.0f}", f"${float(price):g} per device-hour"))
    rows += [_row("Kaplan L(N)", f"{res['kaplan_n']['loss']:.3f}", "nats/token, WebText2 (a shape)"),
             _row("Kaplan L(D)", f"{res['kaplan_d']['loss']:.3f}", "nats/token, WebText2 (a shape)"),
             _row("Chinchilla N, D (20 tokens/param)",
                  f"{humanize(res['chinchilla_rule']['n'])}, {sci(res['chinchilla_rule']['d'])}",
                  f"budget {sci(res['budget'])} FLOPs"),
             _row("Chinchilla N, D (fitted L)", f"{humanize(res['chinchilla_fit']['n'])}, "
                  f"{sci(res['chinchilla_fit']['d'])}", f"{res['chinchilla_fit']['tokens_per_param']:.1f} tokens/param, "
                  f"loss {res['chinchilla_fit']['loss']:.3f} (Approach 3: see the note under the formulas)")]
    summary = (f"**{label}**: {sci(res['flops_exact']['flops'])} FLOPs to pre-train on {sci(tok['tokens'])} "
               f"tokens (6ND says {sci(res['flops_6nd']['flops'])}) · **{compute.human_time(res['time']['seconds'])}** "
               f"at {sci(rate['flops_per_second'])} FLOP/s")
    if "cost" in res:
        summary += f" · **${res['cost']['dollars']:,.0f}**"
    if example:
        ex = compute.EXAMPLES[example]
        w = compute.worked_example(example)
        res["electra_count"], res["implied_utilization"] = w["electra_count"], w["implied_utilization"]
        rows += [_row("ELECTRA's train FLOPs (printed)", sci(ex["electra_flops"], 1), ex["source"]),
                 _row("ELECTRA's way, counted here", sci(w["electra_count"]["flops"]),
                      "2 × forward, 512 tokens every step"),
                 _row("utilisation the 4 days imply", f"{w['implied_utilization']['tpu-v2']:.1%} (TPU v2), "
                      f"{w['implied_utilization']['tpu-v3']:.1%} (TPU v3)", f"{ex['chips']} chips × {ex['days']} days")]
        corpus, p = ex["corpus"], compute.corpus_passes(example)
        r = compute.ROBERTA_RUN
        rows += [_row("corpus (published)", f"{p['words'] / 1e9:.1f} B words", f"{corpus['parts']}; {corpus['source']}"),
                 _row("passes over the corpus", f"{p['passes']:.1f}", "the tokens above ÷ its words (a word a token)"),
                 _row("the paper's ≈ 40 epochs", f"{p['passes_at_512']:.1f}", "counted at 512 tokens every step"),
                 _row("RoBERTa's longest run read", sci(p["roberta_tokens"]),
                      f"{r['steps']:,} steps × {r['batch']:,} × {r['seq_len']} tokens of {r['gigabytes']} GB; {r['source']}")]
        summary += (f"\n\nAs published: {ex['chips']} TPU chips for {ex['days']} days. Our exact count means the "
                    f"chips ran at {w['implied_utilization']['tpu-v2']:.1%} of a TPU v2's peak "
                    f"({w['implied_utilization']['tpu-v3']:.1%} of a v3's). ELECTRA prints "
                    f"{sci(ex['electra_flops'], 1)}: it counts every step at 512 tokens and backward = forward."
                    f"\n\nThe corpus: {p['words'] / 1e9:.1f} B words ({corpus['parts']}), read about "
                    f"**{p['passes']:.0f} times** at the appendix's schedule; the paper's *approximately 40 epochs* "
                    f"is the same run counted at 512 tokens a step ({p['passes_at_512']:.1f}). RoBERTa then trained "
                    f"this shape on {r['gigabytes']} GB with {r['batch']:,} sequences a step: "
                    f"**{p['roberta_over_bert']:.0f}×** the tokens.")
    formulas = "\n\n".join(formula_md(title, res[k]["formula"]) for k, title in FORMULAS if k in res)
    fig = kaplan_figure(res["non_embedding_params"], label, tok["tokens"])
    res["table"] = rows
    return summary, table_md(rows), formulas, fig, res


def build(picker: gr.Textbox) -> None:
    start = example_row("bert-base")
    with common.form(EXPLAIN) as side:
        with gr.Row():
            model = gr.Dropdown(MODELS, value=start[0], label="Model", min_width=140)
            steps = gr.Number(start[1], label="Steps", minimum=0, min_width=120)
            batch = gr.Number(start[2], label="Batch (sequences)", minimum=0, min_width=120)
        with gr.Row():
            seq_len = gr.Textbox(start[3], label="Sequence length (or LEN:SHARE,...)", min_width=180)
            n_tokens = gr.Number(None, label="Tokens (0: from the steps)", minimum=0, min_width=150)
        with gr.Row():
            accel = gr.Dropdown(ACCEL_CHOICES, value=start[5], label="Accelerator", min_width=160)
            dtype = gr.Radio(list(compute.DTYPES), value=start[6], label="Precision", min_width=120)
            util = gr.Slider(0.01, 1, value=start[7], step=0.001, label="Utilisation of peak", min_width=160)
        with gr.Row():
            count = gr.Number(start[8], label="Devices", minimum=0, min_width=100)
            fps = gr.Number(None, label="FLOP/s (for 'my own FLOP/s')", minimum=0, min_width=150)
            price = gr.Number(None, label="$ per device-hour", minimum=0, min_width=120)
            budget = gr.Number(None, label="FLOP budget (0: this run's)", minimum=0, min_width=150)
        go_btn = gr.Button("Calculate", variant="primary", elem_id="scaling-go")
        links.copy_button("scaling")
        summary = gr.Markdown(elem_id="scaling-summary")
        table = gr.Markdown(elem_id="scaling-table")
    with gr.Row(elem_id="scaling-plots"):
        plot = gr.Plot(label="Kaplan's L(N), this model marked")
    with gr.Accordion("The formulas, with this run's numbers", open=True):
        formulas = gr.Markdown(elem_id="scaling-formulas", latex_delimiters=LATEX)
    gr.Markdown(fit_note(), elem_id="scaling-fit-note")
    gr.Markdown(NOTES)
    with gr.Accordion("Numbers (JSON)", open=False):
        raw = gr.JSON(label="every number and formula")
    inputs = [model, steps, batch, seq_len, n_tokens, accel, dtype, util, count, fps, price, budget]
    outputs = [summary, table, formulas, plot, raw]
    links.register("scaling", model_size=model, steps=steps, batch=batch, seq_len=seq_len, tokens=n_tokens, accel=accel,
                   dtype=dtype, util=util, count=count, flops=fps, price=price, budget=budget)
    ex = common.examples(side, [example_row(n) for n in compute.EXAMPLES], inputs,
                         label="Published BERTs: click one", example_labels=["BERT-base", "BERT-large"])
    wire(calculate, [], outputs, go_btn, "scaling", [b.submit for b in (steps, batch, n_tokens, count, fps, price, budget)]
         + [seq_len.submit, model.input, accel.input, dtype.input, util.release], examples=ex,
         inputs_kwargs={**dict(zip(INPUTS, inputs)), "picker": picker}, show_progress="minimal")
    scaling_sweep.build()  # the sweep: measure a scaling law on this machine
    scaling_memory.build()  # a training step's peak memory, estimated and measured
