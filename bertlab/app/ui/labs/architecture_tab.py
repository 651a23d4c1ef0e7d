"""Architecture: how big a BERT-family model is, where its parameters live, and what it costs to run
or train; every member (family.MEMBERS) beside a BERT of the same shape.

Pure arithmetic on a BertConfig (bertlab.analysis.sizing), so any size answers at once; only the
card about the picked model loads a model.
"""
from __future__ import annotations

import contextlib
import math
import re

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ....analysis import sizing
from ....config import MODEL_TYPES, BertConfig, preset, preset_names
from ....family import MEMBERS, NAMES
from ..shared import common, forms, links, models
from ..shared.common import MODEL_ERRORS, load_model, mistakes, wire
from . import architecture_moe, architecture_shapes, architecture_variants

EXPLAIN = """**How big is a BERT?** A BERT is a stack of identical layers; four numbers fix its size:
the number of layers, the hidden width, the attention heads and the feed-forward width (usually
4 × hidden). Pick a family member and a preset or type your own: the charts count the parameters,
the memory to run or train it, and the arithmetic per sentence — note how attention's share grows
with the length, since every token looks at every other token."""

KNOWN_NOTE = """**Why the sizes differ.** *RoBERTa* is BERT with a 50k-word byte-level vocabulary (the
extra word vectors are the whole difference) and no sentence pairs. *DistilBERT* keeps BERT-base's
width but only **6 layers** (and drops the token-type table and the pooler). *ALBERT* and *ELECTRA*
**factorise the embeddings**: words live in E = 128 dimensions and are projected up to the hidden
width, so 30k × 128 instead of 30k × H."""


def gaps_note() -> str:
    """The published sizes our count misses by more than 5 %, and what is known of why."""
    return "".join(f" *{name}*: {sizing.known_gap(name)}." for name in sizing.KNOWN_GAPS)


def family_note() -> str:
    """The two lines a student asks about, with the published models' own numbers."""
    albert = sizing.known_config("ALBERT-large")
    bert = sizing.as_bert(albert)
    p, pb = (sizing.param_counts(x, heads=False)["encoder_total"] for x in (albert, bert))
    f, fb = (sizing.flops(x, 128, heads=False)["total"] for x in (albert, bert))
    base = sizing.electra_pair(sizing.known_config("ELECTRA-base"))
    small = sizing.electra_pair(sizing.known_config("ELECTRA-small"))
    gen = "the generator adds {} parameters and {:.0f} % to the training FLOPs".format
    return (f"**ALBERT saves parameters, not compute:** its layers share one set of weights, so ALBERT-large "
            f"stores {sizing.humanize(p)} parameters where a BERT of its shape stores {sizing.humanize(pb)}, "
            f"but a sentence still goes through all {albert.num_hidden_layers} layers: "
            f"{sizing.humanize(f, 'FLOPs')} per 128 tokens against {sizing.humanize(fb, 'FLOPs')}.\n\n"
            f"**What ELECTRA's generator costs:** ELECTRA trains a small masked-LM generator beside the "
            f"discriminator, sharing its embeddings; for ELECTRA-base (a 1/3-width generator) "
            + gen(sizing.humanize(base["pair_params"] - base["discriminator_params"]),
                  100 * base["generator_train_flops"] / base["discriminator_train_flops"])
            + "; the released ELECTRA-small generator is as wide as its discriminator (the paper's is 1/4): "
            + gen(sizing.humanize(small["pair_params"] - small["discriminator_params"]),
                  100 * small["generator_train_flops"] / small["discriminator_train_flops"])
            + ". Only the discriminator is kept.")


def deberta_note(tokens: int = 512) -> str:
    """DeBERTa beside the family: what disentangled attention adds, counted on its released configs."""
    v1, v3 = sizing.deberta("DeBERTa-base", tokens), sizing.deberta("DeBERTa-v3-base", tokens)
    h = sizing.humanize
    return (f"**DeBERTa keeps positions apart.** BERT adds a position vector to each word once, before the first "
            f"layer. DeBERTa (built here as DeBERTa-v3: pick it above, or pre-train it with `--arch deberta`) keeps the two apart: every layer's attention adds a "
            f"content-to-position and a position-to-content score against vectors for the *relative* distance "
            f"between two words (up to k = {v1['k']} either way; one table of {2 * v1['k']:,} vectors that all "
            f"layers share). DeBERTa-base ({v1['source']}: BERT-base's shape, RoBERTa's vocabulary) stores "
            f"{h(v1['total'])} parameters: the table {h(v1['table'])} and each layer's two projections of it "
            f"{h(v1['projections'] / v1['num_layers'])} ({h(v1['projections'])} in all); at {tokens} tokens the extra scores "
            f"and projections cost {h(v1['extra_flops'], 'FLOPs')}, "
            f"{100 * v1['extra_flops'] / v1['bert_flops']:+.0f} % on a BERT of its shape. DeBERTa-v3-base reuses "
            f"the words' own query and key projections for the positions and sorts distances into "
            f"{v3['k']} buckets: {h(v3['layers'])} in its layers and {h(v3['embeddings'])} in its "
            f"{sizing.DEBERTA['DeBERTa-v3-base']['vocab_size']:,}-word table (the paper: "
            f"{v3['published'][0] / 1e6:.0f} M and {v3['published'][1] / 1e6:.0f} M), "
            f"{100 * v3['extra_flops'] / v3['bert_flops']:+.0f} % FLOPs at {tokens} tokens.")


# (label, BertConfig field, largest accepted value): caps keep typos like 1e30 from reaching the charts
FIELDS = [("Layers", "num_hidden_layers", 1024), ("Hidden size", "hidden_size", 65536),
          ("Attention heads", "num_attention_heads", 1024), ("Feed-forward size", "intermediate_size", 262144),
          ("Vocabulary", "vocab_size", 10_000_000), ("Max positions", "max_position_embeddings", 1_000_000)]
# Optional fields of two members: empty means E = hidden size, one layer group.
EXTRA = [("Embedding size E (ALBERT, ELECTRA; 0 = no factorising)", "embedding_size", 65536, None),
         ("Layer groups (ALBERT)", "num_hidden_groups", 1024, 1)]
SAY = {field: label.split(" (")[0] for label, field, *_ in FIELDS + EXTRA}  # a box's name in a message
FAMILIES = [(NAMES[k], k) for k in MODEL_TYPES]
FIRST = {n: m.first_preset for n, m in MEMBERS.items()}  # the preset a family opens on (its record's)
PARTS = [("embeddings", "Embeddings", "#1f77b4"), ("projection", "E → H projection", "#17becf"),
         ("attention", "Attention", "#ff7f0e"), ("feed_forward", "Feed-forward", "#2ca02c"),
         ("pooler", "Pooler", "#9467bd"), ("mlm_head", "MLM head", "#d62728"),
         ("nsp_head", "NSP / SOP head", "#8c564b"), ("rtd_head", "Replaced-token head", "#e377c2")]
MEM_PARTS = [("weights", "weights", "#1f77b4"), ("gradients", "gradients", "#ff7f0e"),
             ("optimizer", "AdamW state", "#2ca02c"), ("weight_copies", "bf16 weight copy", "#17becf"),
             ("activations", "activations", "#9467bd"), ("logits", "output logits", "#d62728"),
             ("temporaries", "backward temporaries", "#8c564b")]
FLOP_PARTS = [(("qkv", "attention_output"), "Q, K, V and output projections", "#ff7f0e"),
              (("attention_scores", "attention_values"), "attention scores + mixing (∝ length²)", "#d62728"),
              (("feed_forward",), "feed-forward", "#2ca02c"),
              (("projection", "pooler", "mlm_head", "nsp_head", "rtd_head"), "E→H, pooler + heads", "#7f7f7f")]


CUSTOM = "custom"  # the preset box's value when the fields match no preset


def readable(x: float) -> str:
    """A number as a person reads it: 1,048,576 up to a trillion, then 1e+30 (not 31 digits)."""
    return f"{int(x):,}" if abs(x) < 1e12 else f"{x:.3g}"


def _whole(v, label: str, field: str, cap: int, empty=...) -> int | None:
    """A form value as a whole number; `empty` (when given) stands for a blank box. Messages name the
    box as the page labels it (`field` is the config's name, which the student never sees)."""
    label = SAY.get(field, label)
    if v is None or (isinstance(v, str) and not v.strip()):
        if empty is not ...:
            return empty
        raise ValueError(f"{label} is empty: type a number")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{label} must be a number, got {v!r}") from None
    if not math.isfinite(x) or x != int(x):
        raise ValueError(f"{label} must be a whole number, got {v!r}")
    if x > cap:
        raise ValueError(f"{label} must be at most {cap:,}, got {readable(x)}")
    return int(x)


def in_words(message: str) -> str:
    """A config's message with its field names replaced by the form's labels: 'hidden_size (256) must be
    divisible by num_attention_heads (12)' reads 'Hidden size (256) must be divisible by Attention heads (12)'."""
    for field in sorted(SAY, key=len, reverse=True):
        message = re.sub(rf"\b{field}\b", SAY[field], message)
    return message[:1].upper() + message[1:]


def _family(family) -> str:
    if family is None:
        return "bert"
    if family not in MODEL_TYPES:
        raise ValueError(f"Family must be one of {', '.join(MODEL_TYPES)}, got {family!r}")
    return family


# The form's shape boxes by name (the API's parameters): FIELDS, then EXTRA, in order
SHAPE = ("layers", "hidden", "heads", "intermediate", "vocab", "max_positions", "embedding", "groups")


def make_config(family="bert", **shape) -> BertConfig:
    """A validated BertConfig from the form's shape boxes (SHAPE, by name), with the family's fixed fields
    (RoBERTa's single token type and pad id, ALBERT's activation, ...) from its first preset; ValueError
    names the field."""
    family = _family(family)
    forms.check_names(shape, SHAPE, "the shape")
    kw = {field: _whole(shape.get(name), label, field, cap) for name, (label, field, cap) in zip(SHAPE, FIELDS)}
    kw |= {field: _whole(shape.get(name, empty), label, field, cap, empty)
           for name, (label, field, cap, empty) in zip(SHAPE[len(FIELDS):], EXTRA)}
    if kw["embedding_size"] == 0:  # a browser's number box sends 0 for a cleared box: no factorisation
        kw["embedding_size"] = None
    if "embedding_size" not in MEMBERS[family].only and kw["embedding_size"] == kw["hidden_size"]:
        kw["embedding_size"] = None  # E = H is no factorisation: fine for every member
    try:
        return preset(preset_names(family)[0], model_type=family).replace(**kw)
    except ValueError as e:  # the config names its own fields: say them as the form does
        raise ValueError(in_words(str(e))) from None


def form_values(c: BertConfig) -> list:
    """The form's shape boxes (FIELDS, then EXTRA) for a config; E is 0 (its label's "no factorising")
    when it equals H: a blank box read as a value left out."""
    e = c.embedding_size if c.embedding_dim != c.hidden_size else 0
    return [getattr(c, field) for _, field, _ in FIELDS] + [e, c.num_hidden_groups]


def fill_preset(name: str, family: str = "bert"):
    """The form values for a family's preset; "custom" leaves the fields as they are."""
    if name == CUSTOM:  # chosen by hand: the fields stay as they are
        return [gr.skip()] * (len(FIELDS) + len(EXTRA))
    with mistakes(ValueError):
        return form_values(preset(name, model_type=_family(family)))


def preset_of(family, *values) -> str:
    """The family's preset whose fields are `values`, else "custom": the box never names other numbers."""
    with mistakes(ValueError):
        family = _family(family)
    for name in preset_names(family):
        want = form_values(preset(name, model_type=family))
        if want[:len(FIELDS)] == list(values[:len(FIELDS)]) and \
                [want[-2] or None, want[-1]] == [values[-2] or None, values[-1] or 1]:
            return name
    return CUSTOM


def preset_box(family: str, value: str):
    return gr.update(choices=preset_names(family) + [CUSTOM], value=value)


def pick_family(family):
    """A new family: its presets in the box, its first size in the form."""
    with mistakes(ValueError):
        family = _family(family)
    name = FIRST.get(family, "base")
    return [preset_box(family, name)] + fill_preset(name, family)


def fill_picked(choice):
    """(family, preset box, form values) from the picked model's own config."""
    c = load_model(choice)[0].config
    values = form_values(c)
    return [c.model_type, preset_box(c.model_type, preset_of(c.model_type, *values))] + values


def params_figure(p: dict) -> go.Figure:
    total = p["total"]
    parts = [part for part in PARTS if p[part[0]]][::-1]  # only what this member has
    names = [label for _, label, _ in parts]
    vals = [p[k] for k, _, _ in parts]
    fig = go.Figure(go.Bar(
        x=vals, y=names, orientation="h", marker_color=[c for _, _, c in parts],
        text=[f"{sizing.humanize(v)} ({100 * v / total:.1f} %)" for v in vals], textposition="auto",
        hovertemplate="%{y}: %{x:,} parameters<extra></extra>"))
    fig.update_layout(title=f"Parameters: {sizing.humanize(total)} in all ({total:,})", height=340,
                      xaxis=dict(title="parameters"), margin=dict(l=20, r=20, t=50, b=40))
    return fig


def memory_table(c: BertConfig, batch: int, seq_len: int) -> dict:
    return {mode: {dt: sizing.memory(c, batch, seq_len, dt, training=(mode == "training"), optimizer="adamw")
                   for dt in ("fp32", "bf16")} for mode in ("inference", "training")}


def memory_figure(mem: dict, batch: int, seq_len: int) -> go.Figure:
    bars = [(f"{mode}<br>{dt}", mem[mode][dt]) for mode in ("inference", "training") for dt in ("fp32", "bf16")]
    fig = go.Figure()
    for key, label, color in MEM_PARTS:
        fig.add_trace(go.Bar(name=label, x=[b for b, _ in bars], y=[d.get(key, 0) / 1e9 for _, d in bars],
                             marker_color=color, hovertemplate=f"{label}: %{{y:.3g}} GB<extra></extra>"))
    for b, d in bars:
        fig.add_annotation(x=b, y=d["total"] / 1e9, text=sizing.humanize(d["total"], "B"), showarrow=False,
                           yshift=10, font=dict(size=12))
    fig.update_layout(barmode="stack", height=440, yaxis=dict(title="GB (10⁹ bytes)"),
                      title=f"Memory for a batch of {batch} × {seq_len} tokens",
                      legend=dict(font=dict(size=11), orientation="h", y=-0.2), margin=dict(l=60, r=20, t=50, b=40))
    return fig


LONG = 8192  # the chart runs on past the model's limit to show where attention takes over


def lengths_for(max_positions: int, seq_len: int) -> list[int]:
    """Doubling lengths from 8 up to max(limit, LONG), plus the limit and the chosen length."""
    out, t = set(), 8
    while t < max(max_positions, LONG):
        out.add(t)
        t *= 2
    return sorted(out | {max(max_positions, LONG), max_positions, seq_len})


def max_tokens(c: BertConfig) -> int:
    """The longest input: RoBERTa's first pad_token_id + 1 position rows are never read."""
    return c.max_position_embeddings - c.position_offset


def flops_figure(c: BertConfig, seq_len: int) -> tuple[go.Figure, list[dict]]:
    limit = max_tokens(c)
    Ts = lengths_for(limit, seq_len)
    rows = [sizing.flops(c, T) for T in Ts]
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=(  # stacked: readable on a phone
        "forward FLOPs for one sequence", "share of the work (attention grows with length²)"))
    fig.add_trace(go.Scatter(x=Ts, y=[r["total"] for r in rows], mode="lines+markers", name="total",
                             line=dict(color="black", width=3),
                             hovertemplate="length %{x}: %{y:.3s}FLOPs<extra></extra>"), 1, 1)
    share = 2, 1
    for keys, label, color in FLOP_PARTS:
        fig.add_trace(go.Scatter(x=Ts, y=[sum(r[k] for k in keys) for r in rows], name=label, mode="lines",
                                 stackgroup="share", groupnorm="percent", line=dict(color=color, width=0.5),
                                 hovertemplate=f"{label}<br>length %{{x}}: %{{y:.1f}} %<extra></extra>"), *share)
    fig.add_vline(x=seq_len, line_dash="dot", line_color="gray", row="all", col="all")
    if Ts[-1] > limit:
        fig.add_vrect(x0=limit, x1=Ts[-1], fillcolor="gray", opacity=0.18,
                      line_width=0, layer="above", row="all", col="all")
        fig.add_annotation(x=math.log10(limit), y=0.98, xref="x", yref="y domain",
                           showarrow=False, xanchor="left", yanchor="top", font=dict(size=11, color="dimgray"),
                           text=" longer than this<br> model can read")
    totals = [r["total"] for r in rows]  # every tick labelled in full (plotly's own writes a bare "2" under 200)
    fig.update_xaxes(type="log", title="sequence length (tokens)", **common.log_ticks(Ts[0], Ts[-1]))
    fig.update_yaxes(type="log", title="FLOPs", **common.log_ticks(min(totals), max(totals), common.si), row=1, col=1)
    fig.update_yaxes(title="% of forward FLOPs", range=[0, 100], row=2, col=1)
    fig.update_layout(height=680, legend=dict(orientation="h", y=-0.12, font=dict(size=11)),
                      margin=dict(l=60, r=20, t=50, b=40))
    series = [{"length": T, "total": r["total"], "within_max_positions": T <= limit,
               "attention_share": (r["attention_scores"] + r["attention_values"]) / r["total"]}
              for T, r in zip(Ts, rows)]
    return fig, series


def size_row(name: str, c: BertConfig, published: int | None = None) -> list:
    """One table row: the member's own count beside a plain BERT of the same shape."""
    n = sizing.param_counts(c, heads=False)["encoder_total"]
    bert = sizing.param_counts(sizing.as_bert(c), heads=False)["encoder_total"]
    f = sizing.flops(c, min(128, max_tokens(c)), heads=False)["total"]
    e = c.embedding_dim if c.embedding_dim != c.hidden_size else ""
    return [name, c.num_hidden_layers, c.hidden_size, e, c.num_attention_heads, f"{c.vocab_size:,}",
            sizing.humanize(n), sizing.humanize(bert), f"≈{published / 1e6:.0f}M" if published else "",
            f"{100 * (n - published) / published:+.1f} %" if published else "", sizing.humanize(f)]


def known_rows(c: BertConfig) -> list[list]:
    rows = [size_row(name, sizing.known_config(name), m["published"]) for name, m in sizing.KNOWN_MODELS.items()]
    return rows + [size_row(f"your config ({NAMES[c.model_type]})", c)]


KNOWN_HEADERS = ["model", "layers", "hidden", "E", "heads", "vocab", "parameters", "as a BERT", "published",
                 "diff", "FLOPs/128 tokens"]
KNOWN_WIDTHS = ["190px", "72px", "72px", "56px", "68px", "84px", "108px", "100px", "100px", "84px", "180px"]


def picked_card(choice) -> tuple[str, dict]:
    """The picked model's own config and sizes; a loading error becomes a line, not a failure."""
    try:
        model, _ = models.get(choice)
        card = models.describe(choice)
    except MODEL_ERRORS as e:
        return f"**Picked model:** could not load it ({e})", {"error": str(e)}
    c = model.config
    counted = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    try:  # our classes carry Hugging Face's names; a fine-tuned BERT is sized as its encoder
        formula = sizing.param_counts(c, architecture=type(model).__name__)["total"]
    except ValueError:
        formula = sizing.param_counts(c)["total" if hasattr(model, "cls") else "encoder_total"]
    check = "✓ matches" if counted == formula else f"formula says {formula:,}"
    return (f"**Picked model:** {card}  \nparameters counted in its weights: {counted:,} ({check}) — "
            "press *Use the picked model* to size it above."), \
        {"config": c.to_dict(), "parameters_counted": counted, "parameters_formula": formula}


def family_lines(c: BertConfig, seq_len: int) -> list[str]:
    """What this member does differently, in numbers: a BERT of the same shape, ALBERT's sharing,
    ELECTRA's generator."""
    if c.model_type == "bert":
        return []
    own, bert = (sizing.param_counts(x, heads=False)["encoder_total"] for x in (c, sizing.as_bert(c)))
    lines = [f"as a plain BERT of this shape it would have {sizing.humanize(bert)} encoder parameters; "
             f"{NAMES[c.model_type]} has {sizing.humanize(own)}"]
    own = MEMBERS[c.model_type]
    if "num_hidden_groups" in own.only:  # ALBERT's shared layers
        lines.append(f"{own.label} stores {sizing.layers_stored(c)} layer weight set(s) but runs "
                     f"{sizing.layers_run(c)} layers per sentence: fewer parameters, the same compute")
    if own.generator:
        try:
            pair = sizing.electra_pair(c, seq_len=seq_len)
        except ValueError as e:
            return lines + [f"no {own.label} generator for this shape ({e})"]
        g = pair["generator"]
        lines.append(f"training also runs a generator ({g['num_hidden_layers']} layers of {g['hidden_size']}, "
                     f"sharing the embeddings): +{sizing.humanize(pair['pair_params'] - pair['discriminator_params'])}"
                     f" parameters, +{100 * pair['generator_train_flops'] / pair['discriminator_train_flops']:.0f} % "
                     f"training FLOPs per sequence")
    return lines


# the API's parameters, in the order it has always had (the shape first, the two members' own fields last)
INPUTS = (*SHAPE[:6], "batch", "seq_len", "choice", "family", *SHAPE[6:])


def compute(**form):
    """Everything the tab shows: (summary, params chart, memory chart, FLOPs chart, table, card, JSON) for
    the form (INPUTS by name; `choice`: the model picked at the top)."""
    with mistakes(ValueError, TypeError, OverflowError):
        forms.check_names(form, INPUTS)
        batch, seq_len, choice = form.get("batch"), form.get("seq_len"), form.get("choice")
        c = make_config(form.get("family") or "bert", **{k: form[k] for k in SHAPE if k in form})
        batch = max(1, int(batch or 1))
        seq_len = max(1, int(seq_len or 1))
    notes = []
    if seq_len > max_tokens(c):
        notes.append(f"length {seq_len} is more than this model reads ({max_tokens(c)} "
                     f"positions): using {max_tokens(c)}")
        seq_len = max_tokens(c)
    p = sizing.param_counts(c)
    mem = memory_table(c, batch, seq_len)
    f = sizing.flops(c, seq_len)
    att = (f["attention_scores"] + f["attention_values"]) / f["total"]
    flops_fig, series = flops_figure(c, seq_len)
    card, picked = picked_card(choice)
    train = mem["training"]["bf16"]["total"]
    summary = (f"**{sizing.humanize(p['total'])} parameters** ({sizing.humanize(p['encoder_total'])} without the "
               f"pre-training heads) · one {seq_len}-token sentence costs **{sizing.humanize(f['total'], 'FLOPs')}** "
               f"forward, {100 * att:.1f} % of it attention scores · training batch {batch} in bf16 needs "
               f"≈**{sizing.humanize(train, 'B')}**")
    lines = family_lines(c, seq_len) + notes
    if lines:
        summary += "\n\n" + "\n".join(f"- {n}" for n in lines)
    data = {"config": c.to_dict(), "family": c.model_type, "architecture": sizing.architecture_of(c),
            "params": p, "memory": mem, "batch_size": batch, "seq_len": seq_len,
            "flops": f, "attention_share": att, "flops_vs_length": series,
            "layers_stored": sizing.layers_stored(c), "layers_run": sizing.layers_run(c),
            "as_bert": sizing.param_counts(sizing.as_bert(c)),
            "known_models": {n: {"family": m["family"], "computed": sizing.known_model_params(n),
                                 "published": m["published"]} for n, m in sizing.KNOWN_MODELS.items()},
            "picked_model": picked, "notes": notes}
    if MEMBERS[c.model_type].generator:
        with contextlib.suppress(ValueError):
            data["electra_pair"] = sizing.electra_pair(c, seq_len=seq_len)
    return (summary, params_figure(p), memory_figure(mem, batch, seq_len), flops_fig, known_rows(c), card, data)


def build(picker: gr.Textbox) -> None:
    start = fill_preset("base")
    with common.form(EXPLAIN):
        with gr.Row():
            family = gr.Dropdown(FAMILIES, value="bert", label="Family", scale=1, min_width=130)
            name = gr.Dropdown(preset_names("bert") + [CUSTOM], value="base", label="Preset", scale=1, min_width=130)
            use_picked = gr.Button("Use the picked model", scale=1, min_width=140)
        with gr.Row():
            boxes = [gr.Number(v, label=label, min_width=110) for (label, *_), v in zip(FIELDS, start)]
        with gr.Row():  # the two members' own fields, side by side
            boxes += [gr.Number(v, label=label, min_width=150) for (label, *_), v in zip(EXTRA, start[len(FIELDS):])]
        with gr.Row():
            batch = gr.Slider(1, 256, value=32, step=1, label="Batch size", min_width=160)
            seq_len = gr.Slider(8, 4096, value=128, step=8, label="Sequence length (tokens)", min_width=160)
        go_btn = gr.Button("Size it", variant="primary")
        links.copy_button("architecture")
        summary = gr.Markdown()
        params_plot = gr.Plot(label="Where the parameters are")
        picked = gr.Markdown()
    flops_plot = gr.Plot(label="Compute")
    with gr.Row():
        with gr.Column(scale=4, min_width=320):
            mem_plot = gr.Plot(label="Memory")
            gr.Markdown("*Training* = AdamW, at the step's peak: often the output layer's backward, before any "
                        "weight has a gradient. *bf16* training is mixed precision (fp32 master weights). It "
                        "counts the word logits at every position and, with attention dropout, the attention "
                        "maps: the Scaling tab's *Memory, measured* section sets it beside a measured step and "
                        "the guides' figure.")
        with gr.Column(scale=5, min_width=320):
            gr.Markdown(family_note() + "\n\n" + KNOWN_NOTE + gaps_note() + "\n\n" + deberta_note())
    # the table has the page's width: beside the chart it hid "published" and "diff" on a laptop
    table = gr.Dataframe(known_rows(preset("base")), headers=KNOWN_HEADERS, interactive=False, wrap=True,
                         column_widths=KNOWN_WIDTHS, label="Published models, each beside a BERT of its shape",
                         elem_id="arch-known-table")
    gr.Markdown("*parameters*: encoder parameters from each model's config (no pre-training heads); *as a BERT*: a "
                "plain BERT of the same layers, widths and vocabulary; *E*: the embedding width where it differs "
                "from the hidden width; *published*: the paper's count, and *diff* ours against it.")
    with gr.Accordion("Numbers (JSON)", open=False):
        raw = gr.JSON(label="parameters, memory (bytes), FLOPs")
    architecture_moe.build(lambda family="bert", **shape: make_config(family, **shape),
                           {**dict(zip(SHAPE, boxes)), "family": family})  # the form's model, as experts
    architecture_variants.build()  # every family member at every preset, side by side
    architecture_shapes.build()  # BERT beside a decoder (GPT-2) and an encoder-decoder (T5)
    links.register("architecture", family=family, preset=name, batch=batch, seq_len=seq_len, **dict(zip(links.ARCH_FIELDS, boxes)))
    by_name = dict(zip(INPUTS, (*boxes[:6], batch, seq_len, picker, family, *boxes[6:])))
    outputs = [summary, params_plot, mem_plot, flops_plot, table, picked, raw]
    triggers = [b.submit for b in boxes] + [batch.release, seq_len.release, picker.change]
    wire(compute, [], outputs, go_btn, "architecture", triggers, inputs_kwargs=by_name, show_progress="minimal")
    again = dict(inputs=None, outputs=outputs, inputs_kwargs=by_name, api_name=False)
    name.input(fill_preset, [name, family], boxes, api_name=False).then(compute, **again)
    family.input(pick_family, family, [name] + boxes, api_name=False).then(compute, **again)
    use_picked.click(fill_picked, picker, [family, name] + boxes, api_name=False).then(compute, **again)
    gr.on([b.input for b in boxes], preset_of, [family] + boxes, name, api_name=False, show_progress="hidden")
