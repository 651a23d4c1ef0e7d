"""Probing lab: what can a linear classifier read off each layer, and is that more than it could memorise?"""
from __future__ import annotations

from pathlib import Path

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ....cache import LRU
from ....checkpoint import weights_stamp
from ....data import probe as probe_data
from ....train import probing, speed
from ....train.probing import per_tag, public
from ... import traffic, workers
from ...limits import limits
from ..shared import common, links, models
from ..shared.common import MODEL_ERRORS, config_of, mistakes, user_error, whole_number

EXPLAIN = """**What does each layer know?** A *probe* is a small classifier trained on a layer's frozen
vectors (the model is not changed). If it predicts part of speech well from layer 2, then part of
speech is *decodable* from layer 2. Layer 0 is the embedding output: word + position, no context yet.

**Read it against a control.** A probe can also memorise: give every word type a fixed *random* tag
(Hewitt & Liang 2019) and a probe still scores well on words it saw in training. **Selectivity** =
task accuracy − control accuracy: high when the layer holds the real property, not just word
identity. For sentiment (one label per sentence, no word type to tie a label to) the control
shuffles the labels among sentences, so it shows what the probe reaches on noise (≈ chance).

**What it cannot show:** that the model *uses* this information. A probe measures what is there,
not what matters; and a randomly initialised model of the same shape (compare with it!) already
gives a surprisingly strong baseline."""

TASKS = [("part of speech (per word)", "pos"), ("polarity in its sentence (per word)", "polarity"),
         ("sentiment (per sentence)", "sentiment"),
         ("position (per token)", "position"), ("my file (upload below)", "file")]
FEATURES = [("first piece · [CLS]", "first"), ("mean of the pieces", "mean")]
PROBES = [("linear (logistic regression)", "linear"), ("MLP (1 hidden layer)", "mlp")]
RANDOM = "random init (same config)"
MAX_SAMPLE = 8530  # every Rotten Tomatoes sentence
MAX_MODELS = 4
# seconds at speed.py's reference machine, in the worker (one thread), its data already read (the server's
# first probe also starts the worker and reads them): the default probe (part of speech, 1,000 sentences,
# linear), and the layer story (bench/ESTIMATES.md)
PROBE_S, STORY_S = 13.0, 11.0


def time_note(machine: float | None = None) -> str:
    return f"the default takes about {speed.say(speed.here(PROBE_S, machine=machine))} a model here"
COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c"]
EXAMPLES = [["pos", "first", "linear", 1000], ["pos", "mean", "mlp", 1000], ["sentiment", "first", "linear", 4000],
            ["position", "first", "linear", 500]]

STORY_EXPLAIN = f"""**The layer story.** Tenney et al. (2019) found BERT's layers in the order of a classical
NLP pipeline: *syntax* decodable low, *semantics* higher, the task it was fine-tuned on at the top.
Three linear probes test it on the picked model, each at every layer:

- **pos**: each word's part of speech ({probing.STORY_SAMPLE['pos']} sentences; silver tags from TextBlob);
- **polarity**: is a word positive or negative *in its sentence*? A word TextBlob's opinion lexicon rates
  gets its lexicon sign, flipped when *not, n't, no, never* … stands up to 3 words before it ("not funny":
  negative); other words are left out. Silver labels, from every Rotten Tomatoes sentence;
- **sentiment**: is the whole sentence positive ({probing.STORY_SAMPLE['sentiment']:,} sentences, the mean of
  its pieces)? Lesson 8 fine-tunes exactly this: pick a fine-tuned run above and its curve should rise at the top.

**How to read the chart:** each line is what context adds: the task's accuracy at a layer minus its
accuracy at layer 0 (the embeddings: the words alone), in points. The ◆ is the task's *center of
gravity*, the expected layer of its gains: Σ l·Δₗ / Σ Δₗ, with Δₗ how much the best score so far
rose at layer l. Pipeline order means pos's ◆ left of polarity's, sentiment's at the right.

**Caution:** a probe measures what is *decodable*, not what the model uses; and a model fine-tuned on
Rotten Tomatoes has seen some of these sentences with their labels. About {{story}} a model here, then
cached."""
STORY_COLORS = {"pos": "#2563eb", "polarity": "#ea580c", "sentiment": "#16a34a"}


def _bytes(result: dict) -> int:
    return 10_000 + sum(v.numel() * v.element_size() if torch.is_tensor(v) else 8 * len(v)
                        for k, v in result.items() if k.startswith("_"))


_results = LRU(16, 200e6, _bytes)  # finished probe runs, by (model files, task, settings)


def _folder(choice: str | None, failed: str = ""):
    with mistakes(*MODEL_ERRORS, prefix=failed):
        return models.resolve(choice)


def probe_model(name, folder, random: bool, task, feature, kind, sample) -> dict:
    """One probe, run in the worker process (a big one must not grow the server), or cached."""
    stamp = weights_stamp(folder)
    key = (str(folder), stamp, random, task, feature, kind, sample,
           Path(task).stat().st_mtime_ns if task not in probe_data.TASKS else None)
    hit = _results.get_or_make(key, lambda: workers.run(
        workers.probe_job, str(folder), stamp, random, limits().max_model_params, task, feature=feature, probe=kind,
        sample=sample, name=name))
    return {**hit, "model": name}


def figure(results: list[dict]) -> go.Figure:
    """Left: accuracy (solid) and control accuracy (dashed) by layer; right: selectivity."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.09,
                        subplot_titles=("accuracy (solid) · control task (dashed)", "selectivity = accuracy − control"))
    for i, r in enumerate(results):
        c, xs = COLORS[i % len(COLORS)], [row["layer"] for row in r["layers"]]
        pct = lambda k: [100 * row[k] for row in r["layers"]]  # noqa: E731
        hov = "%{fullData.name}<br>layer %{x}: %{y:.1f} %<extra></extra>"
        fig.add_trace(go.Scatter(x=xs, y=pct("acc"), name=f"{r['model']}", mode="lines+markers", line=dict(color=c, width=3),
                                 legendgroup=str(i), hovertemplate=hov), 1, 1)
        fig.add_trace(go.Scatter(x=xs, y=pct("control_acc"), name=f"{r['model']} · control", mode="lines+markers",
                                 line=dict(color=c, dash="dash", width=2), marker_symbol="circle-open",
                                 legendgroup=str(i), hovertemplate=hov), 1, 1)
        fig.add_trace(go.Scatter(x=xs, y=pct("selectivity"), name=f"{r['model']} · selectivity", mode="lines+markers",
                                 line=dict(color=c, width=3), legendgroup=str(i), showlegend=False,
                                 hovertemplate=hov.replace(" %<", " points<")), 1, 2)
    r0 = results[0]
    fig.add_hline(y=100 * r0["majority"], line_dash="dot", line_color="#6b7280", row=1, col=1,
                  annotation_text=f"majority class {100 * r0['majority']:.0f} %", annotation_position="bottom right")
    fig.add_hline(y=0, line_color="#9ca3af", row=1, col=2)
    L = max(r["num_layers"] for r in results)
    ticks = dict(tickvals=list(range(L + 1)), ticktext=["emb"] + [str(i) for i in range(1, L + 1)], title="layer")
    fig.update_xaxes(**ticks)
    fig.update_yaxes(title="accuracy on held-out sentences (%)", row=1, col=1)
    fig.update_yaxes(title="points", row=1, col=2)
    fig.update_layout(height=500, margin=dict(l=10, r=10, t=70, b=10), hovermode="closest",
                      legend=dict(orientation="h", yanchor="top", y=-0.16, x=0),
                      title=dict(text=f"{r0['task']} probe ({r0['probe']}, {r0['feature']}) by layer", font_size=15))
    return fig


def _short(name: str, n: int = 22) -> str:
    name = "random init" if name == RANDOM else name
    return name if len(name) <= n else "…" + name[-(n - 1):]


def tag_table(results: list[dict], layer: int) -> pd.DataFrame:
    """Per label at one layer for the main model, with every compared model's accuracy beside it."""
    r0 = results[0]
    rows = per_tag(r0, layer)
    df = pd.DataFrame([{"label": t["label"], "held-out count": t["count"], "train %": round(100 * t["train share"], 1),
                        f"acc % · {_short(r0['model'])}": round(100 * t["accuracy"], 1),
                        "confused with": t["most confused with"]} for t in rows])
    for r in results[1:]:
        if layer <= r["num_layers"] and r["labels"] == r0["labels"]:
            acc = {t["label"]: t["accuracy"] for t in per_tag(r, layer)}
            df[f"acc % · {_short(r['model'])}"] = [round(100 * acc.get(t["label"], float("nan")), 1) for t in rows]
    return df


def summary(results: list[dict], layer: int) -> str:
    r0, c = results[0], results[0]["counts"]
    lines = [f"**{r0['task']}** · {c['sentences']:,} sentences → {c['train']:,} training / {c['validation']:,} "
             f"held-out {c['unit']} · {c['labels']} labels · control: {r0['control']} · majority class "
             f"{100 * r0['majority']:.1f} % · per-label table at layer {layer}"]
    for r in results:
        b, s = r["layers"][r["best_layer"]], r["layers"][r["most_selective_layer"]]
        lines.append(f"- **{r['model']}**: best layer {r['best_layer']}, {100 * b['acc']:.1f} % (control "
                     f"{100 * b['control_acc']:.1f} %); most selective layer {r['most_selective_layer']} "
                     f"({100 * s['selectivity']:+.1f} points) · {r['seconds']:.1f} s")
    lines += [f"- note: {n}" for n in dict.fromkeys(n for r in results for n in r["notes"])]
    return "\n".join(lines)


def story_figure(s: dict) -> go.Figure:
    """Each task's gain over the embeddings by layer, its center of gravity marked; the flipped words dotted."""
    fig = go.Figure()
    for t in s["tasks"]:
        c, xs, gain = STORY_COLORS.get(t["task"], "#6b7280"), list(range(len(t["acc"]))), [100 * g for g in t["gain"]]
        fig.add_trace(go.Scatter(x=xs, y=gain, customdata=[100 * a for a in t["acc"]], name=t["task"], legendgroup=t["task"],
                                 mode="lines+markers", line=dict(color=c, width=3),
                                 hovertemplate=f"{t['task']}<br>layer %{{x}}: %{{customdata:.1f}} % (%{{y:+.1f}} points)"
                                               "<extra></extra>"))
        sub = t["subset"]
        if sub and sub["acc"][0] is not None:
            acc = [100 * a for a in sub["acc"]]
            fig.add_trace(go.Scatter(x=xs, y=[a - acc[0] for a in acc], customdata=acc, legendgroup=t["task"],
                                     name=f"{t['task']}: only the {sub['validation']} negated words", mode="lines+markers",
                                     line=dict(color=c, width=2, dash="dot"), marker_symbol="circle-open",
                                     hovertemplate="negated words<br>layer %{x}: %{customdata:.1f} % (%{y:+.1f} points)"
                                                   "<extra></extra>"))
        if t["center"] is not None:
            lo = int(t["center"])
            y = gain[lo] + (t["center"] - lo) * (gain[min(lo + 1, len(gain) - 1)] - gain[lo])
            fig.add_trace(go.Scatter(x=[t["center"]], y=[y], mode="markers+text", text=[f"{t['center']:.1f}"],
                                     textposition="top center", textfont=dict(color=c), legendgroup=t["task"],
                                     marker=dict(symbol="diamond", size=14, color=c, line=dict(color="white", width=1)),
                                     showlegend=False, hovertemplate=f"{t['task']}: center of gravity "
                                                                     f"{t['center']:.2f}<extra></extra>"))
    fig.add_hline(y=0, line_color="#9ca3af", line_dash="dot")
    flat = [t["task"] for t in s["tasks"] if t["center"] is None]
    if flat:  # the text compares three ◆: say where one is missing, and why
        fig.add_annotation(xref="paper", yref="paper", x=0, y=1.0, xanchor="left", yanchor="bottom", showarrow=False,
                           align="left", font=dict(size=12, color="#4b5563"),
                           text=f"no ◆ for {' and '.join(flat)}:<br>no layer beats the embeddings")
    L = s["num_layers"]
    fig.update_xaxes(tickvals=list(range(L + 1)), ticktext=["emb"] + [str(i) for i in range(1, L + 1)], title="layer")
    fig.update_yaxes(title="points over layer 0", zeroline=False)
    fig.update_layout(height=460, margin=dict(l=10, r=10, t=50, b=10), hovermode="closest",
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
                      title=dict(text="What context adds, layer by layer", font_size=15))
    return fig


def story_table(s: dict) -> pd.DataFrame:
    """Raw accuracy per layer and task (%), the control's in brackets."""
    rows = []
    for i in range(s["num_layers"] + 1):
        row = {"layer": "emb" if i == 0 else str(i)}
        for t in s["tasks"]:
            row[t["task"]] = f"{100 * t['acc'][i]:.1f} ({100 * t['control_acc'][i]:.0f})"
        rows.append(row)
    return pd.DataFrame(rows)


def run_story(choice=None, progress=gr.Progress()):
    """(figure, table, what it shows, JSON) of the layer story on the model picked at the top; each
    probe runs in the worker and is kept in the probe cache like any other."""
    name, folder = choice or models.DEFAULT, _folder(choice)
    results = []
    for i, task in enumerate(probing.STORY):
        progress(i / len(probing.STORY), desc=f"{task}: probing every layer (in a worker process)")
        feature = probing.STORY_FEATURE[task]
        with mistakes(ValueError):
            results.append(probe_model(name, folder, False, task, None if feature == "first" else feature, "linear",
                                       probing.STORY_SAMPLE[task]))
    s = probing.story(results)
    text = (f"**On {name}** ({s['num_layers']} layers): {probing.describe(s)} Computed now, "
            f"{s['seconds']:.0f} s of probing.")
    return story_figure(s), story_table(s), text, s


FORM = ("task", "file", "feature", "kind", "sample", "compare", "layer", "choice")  # the API's parameters, in order


def run_probes(progress=gr.Progress(), **form):
    """(figure, per-label table, summary, JSON, results) for the form (FORM by name; `choice` the model
    picked at the top) and every model compared with it; results (with the probes' predictions) go to
    a gr.State for `show`."""
    task, file, feature, kind, sample, compare, layer, choice = (form.get(k) for k in FORM)
    if task == "file":
        if not file:
            raise user_error("Upload a file first: .conll/.txt (a token and its tag per line), .jsonl with "
                             "tokens + tags lists, or .csv with text,label columns.")
        try:
            traffic.check_owner(file)  # another visitor's upload is not this page's to use
        except ValueError as e:
            raise user_error(e) from None
        task = str(file)
    elif task not in probe_data.TASKS:
        raise user_error(f"Unknown task {task!r}: choose {', '.join(probe_data.TASKS)} or file.")
    if feature not in ("first", "mean"):
        raise user_error(f"Unknown feature {feature!r}: choose first or mean.")
    sample = None if sample in (None, "") else whole_number(sample, "sample size")
    if sample is not None and not probe_data.MIN_SENTENCES <= sample <= MAX_SAMPLE:
        raise user_error(f"The sample must be between {probe_data.MIN_SENTENCES} and {MAX_SAMPLE:,} sentences.")
    compare = list(compare) if isinstance(compare, (list, tuple)) else [compare] if compare else []
    if not all(x is None or isinstance(x, str) for x in compare):
        raise user_error(f"Compare with: name the models as text, got {compare!r:.80}.")
    main_name = choice or models.DEFAULT
    entries = [main_name] + [e for e in dict.fromkeys(x.strip() for x in compare if x and x.strip()) if e != main_name]
    if len(entries) > MAX_MODELS:
        raise user_error(f"Compare at most {MAX_MODELS - 1} models with the picked one.")
    main = _folder(choice)
    results = []
    for i, entry in enumerate(entries):
        random = i > 0 and entry == RANDOM
        folder = main if i == 0 or random else _folder(entry, failed=f"Cannot load {entry!r} to compare with: ")
        progress(i / len(entries), desc=f"{entry}: probing every layer (in a worker process)")
        try:  # "first" means [CLS] for a sentence task: the backend's default for each kind
            results.append(probe_model(entry, folder, random, task, None if feature == "first" else feature, kind, sample))
        except ValueError as e:  # an upload's temporary folder means nothing to the user: drop it
            msg = str(e).replace(str(Path(task).parent) + "/", "") if task not in probe_data.TASKS else str(e)
            raise user_error(msg.strip() or e) from None
    return (figure(results),) + show(results, layer) + (results,)


def show(results: list[dict] | None, layer):
    """(per-label table, summary, JSON) at one layer; the probes are not retrained."""
    if not results:
        return gr.skip(), gr.skip(), gr.skip()
    L = results[0]["num_layers"]
    asked = None if layer is None or int(layer) < 0 else int(layer)
    layer = results[0]["best_layer"] if asked is None else min(asked, L)
    data = [{**public(r), "per_tag": per_tag(r, min(layer, r["num_layers"]))} for r in results]
    note = f"\n\n⚠️ Layer {asked} was asked, but this model has layers 0 to {L}: showing layer {L}." \
        if asked is not None and asked > L else ""
    return tag_table(results, layer), summary(results, layer) + note, data


def _on_task(task: str):
    return gr.Slider(value=probe_data.DEFAULT_SAMPLE.get(task, probe_data.DEFAULT_FILE_SAMPLE)), \
        gr.File(visible=task == "file")


def layer_slider(choice):
    """The per-label layer slider fitted to the picked model: -1 (best) to its number of layers."""
    n = getattr(config_of(choice), "num_hidden_layers", None)
    return gr.Slider(maximum=n) if n else gr.skip()


def build(picker: gr.Textbox) -> None:
    n = getattr(config_of(picker.value), "num_hidden_layers", 12)
    with common.form(EXPLAIN) as side:
        with gr.Row():
            task = gr.Radio(TASKS, value="pos", label="What to probe for")
            feature = gr.Radio(FEATURES, value="first", label="Vector of a word · of a sentence",
                               info="a word split into pieces: its first piece or their mean; a sentence: [CLS] or the mean")
        with gr.Row():
            kind = gr.Radio(PROBES, value="linear", label="Probe")
            sample = gr.Slider(probe_data.MIN_SENTENCES, MAX_SAMPLE, value=probe_data.DEFAULT_SAMPLE["pos"], step=10,
                               label="Sentences to use", info=f"more: steadier numbers, slower ({time_note()})")
        upload = gr.File(label="Your file: .conll/.txt (token tag per line), .jsonl (tokens + tags), .csv (text,label)",
                         file_types=[".conll", ".conllu", ".txt", ".tags", ".bio", ".iob", ".csv", ".tsv", ".json",
                                     ".jsonl"], type="filepath", visible=False)
        with gr.Row():
            compare = gr.Dropdown([RANDOM] + models.choices(), value=[RANDOM], multiselect=True, allow_custom_value=True,
                                  label="Compare with", scale=3, min_width=200,
                                  info="besides the model picked at the top: a random init, runs, a folder or a hub id")
            layer = gr.Slider(-1, n, value=-1, step=1, label="Per-label table at layer", scale=2, min_width=200,
                              info="−1: the best layer · 0: the embeddings")
        go_btn = gr.Button("Run probes", variant="primary")
        links.copy_button("probing")
        note = gr.Markdown()
        plot = gr.Plot(label="Probe accuracy by layer")
        table = gr.Dataframe(label="Per label (held-out)", interactive=False, max_height=420, wrap=True,
                             elem_id="probe-table")
        with gr.Accordion("Numbers (JSON)", open=False):
            raw = gr.JSON(label="JSON results")
        common.examples(side, EXAMPLES, [task, feature, kind, sample])
    with gr.Accordion("The layer story: syntax low, semantics higher, the task on top?", open=False,
                      elem_id="probe-story") as story:
        gr.Markdown(STORY_EXPLAIN.format(story=speed.say(speed.here(STORY_S))))
        story_btn = gr.Button("Tell the layer story", variant="primary")
        common.scroll_to_results(story_btn)  # the chart comes under the button, below a phone's fold
        story_text = gr.Markdown()
        story_plot = gr.Plot(label="The layer story", elem_id="probe-story-plot")
        story_tab = gr.Dataframe(label="Accuracy % by layer (control task in brackets)", interactive=False, wrap=True,
                                 column_widths=["19%", "27%", "27%", "27%"], elem_id="probe-story-table")
        with gr.Accordion("Numbers (JSON)", open=False):
            story_raw = gr.JSON(label="JSON")
    view = gr.Textbox("", visible=False)  # a link's ?view=story opens the layer story
    results = gr.State()
    links.register("probing", task=task, feature=feature, probe=kind, sample=sample, layer=layer, view=view)
    view.change(lambda v: gr.Accordion(open=True) if v == "story" else gr.skip(), view, story, api_name=False)
    story_btn.click(run_story, picker, [story_plot, story_tab, story_text, story_raw], api_name="layer_story",
                    concurrency_limit=2)
    common.scroll_to_results(go_btn)
    go_btn.click(run_probes, None, [plot, table, note, raw, results], api_name="probe", concurrency_limit=2,
                 inputs_kwargs=dict(zip(FORM, (task, upload, feature, kind, sample, compare, layer, picker))))
    layer.release(show, [results, layer], [table, note, raw], api_name=False, show_progress="hidden")
    task.input(_on_task, task, [sample, upload], api_name=False)
    compare.focus(lambda: gr.Dropdown(choices=[RANDOM] + models.choices()), None, compare, api_name=False)
    picker.change(layer_slider, picker, layer, api_name=False)
