"""Pre-train a BERT (or a RoBERTa or ALBERT) from the page and watch it learn: live curves, probe
sentences, stop and resume.

The run is a `python -m bertlab pretrain` subprocess owned by the job manager, never by a Gradio
event: closing the tab does not kill it, and a reloaded page finds it again.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import gradio as gr

from .... import family
from ....analysis import sizing
from ....config import PRESETS, BertConfig, preset, preset_names
from ....data.corpus import HUB_PREFIX, is_hub_dataset, load_documents
from ....data.tasks import TASK_CORPUS
from ....train.electra import generator_config
from ....train.pretrain import cache_dir as pretrain_cache_dir
from ....train.runs import Run
from ....train import objectives, speed
from ....train.specs import PretrainSpec
from ... import classroom, traffic
from ...jobs import check_name
from ...limits import check_upload, limits
from ..shared import common, forms, links, models
from ..shared.common import user_error
from . import jobs_ui
from .train_charts import empty_figure, metrics, pretrain_figures, probe_rows

EXPLAIN = """**Train your own BERT.** Pre-training hides 15 % of the words of a text and teaches the
model to guess them back (*masked language modelling*), and, in original BERT, to tell whether
sentence B really follows sentence A. Nothing is labelled by hand: the text is its own teacher.

Watch the **masked-token accuracy** against the dotted *unigram guess* (always answering the most
common word): a model that has only learned word frequencies sits on that line. Leaving it means
the model uses the context — at the same moment the **attention to neighbours** rises, because the
words next to a blank are the best clues. Short 32-token examples leave that plateau much sooner
on a CPU than BERT's textbook 128 tokens (compare the *textbook* recipe with the *quick demo*).
The short recipes train without dropout: a small model that sees each word only a few times is far
from memorising, so dropout would only slow it down. The **loss** panel compares like with like: the
masked words' loss on the training batches and on held-out text (the loss the model minimises also
adds the next-sentence task's, or ELECTRA's weighted replaced-token loss).

**Adapting a model you already have** (*domain-* and *task-adaptive pre-training*, Gururangan et al.
2020): start from the shipped model and keep training it on text like the text you care about — a
domain's (*DAPT*: upload it) or the fine-tuning task's own sentences (*TAPT*: the *Adapt ... (TAPT)*
recipe). The TAPT corpus leaves out the sentences the Fine-tune tab holds out (its default 10 % and seed),
so the score after stays honest; then fine-tune with *Start from* this run and compare with the shipped
model on the same task. A fine-tuning with another split says how many of its held-out sentences the
adaptation read. **Loss** picks the masked-word loss: each is one registered function
(`bertlab/train/objectives.py`, where yours can go), judged on the same held-out masked words.

A first run spends a little while building its vocabulary and examples (the status says which step;
they are cached, so the next run with the same data starts at once), then measures itself often at
the start (steps 10, 25, 50, ...), where the curves move most, and regularly after that."""

SCRATCH = "scratch (random weights)"
# Recipes are partial specs: the fields they set; the form keeps every other one. Their labels add how
# long each takes on this machine (recipe_choices).
RECIPES = {
    # The two short recipes read the first 12,000 of the 25,000 reviews (~95,000 examples): preparing
    # them from scratch takes 16 s instead of 33 s (2-core EPYC), and both share that one cache.
    "Quick demo: mini BERT, 32-token examples": dict(
        preset="mini", max_len=32, batch_size=128, steps=800, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0,
        max_docs=12_000),
    "Class model: 4,000 short steps, as the shipped model began": dict(
        preset="mini", max_len=32, batch_size=128, steps=4000, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0),
    "Textbook BERT: 128-token examples (slow to leave the plateau on a CPU)": dict(
        preset="mini", max_len=128, batch_size=32, steps=1500, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.1),
    # bench/RECIPE.md: tiny runs ~4x more tokens/s than mini and leads it for the first ~10 minutes.
    # Continued pre-training (TAPT): the shipped model reads the sentiment task's unlabelled sentences, then
    # fine-tunes from this run; a smaller rate than from scratch, dropout as the model was fine-tuned with.
    "Adapt the shipped model to the sentiment task (TAPT)": dict(
        start_from=models.DEFAULT, corpus=TASK_CORPUS + "sentiment", max_len=32, batch_size=64, steps=300, lr=3e-4,
        mask_rate=0.15, objective="mlm", dropout=0.1),
    "Tiny and fast: a 2-layer model (~25 % of masks right)": dict(
        preset="tiny", max_len=32, batch_size=128, steps=2000, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0,
        max_docs=12_000),
}
FROM_RUN = "The settings of the run shown below"  # what the recipe box says once the form shows a run's
# The corpus box's choices: the shipped reviews (the spec's own "imdb"), an upload, a hub dataset
CORPORA = {"IMDB movie reviews (shipped)": "imdb",
           "The sentiment task's own sentences, its held-out ones left out (TAPT)": TASK_CORPUS + "sentiment",
           "Upload a file": "upload", "Hugging Face dataset": "hub"}
OBJECTIVES = {"MLM + next sentence (BERT)": "nsp", "MLM + sentence order (ALBERT)": "sop",
              "MLM only (RoBERTa; ELECTRA's generator)": "mlm",
              **{f"Replaced-token detection ({', '.join(m.label for m in family.RECORDS if m.trainer_objective == o)})": o
                 for o in family.PAIR_OBJECTIVES},  # a record's own pair of generator and discriminator
              "Next token, left to right (GPT)": "causal"}
# The members pre-training trains here, as their records say (distillation is another job).
ARCHS = {m.label + (f" ({m.pretrain_note})" if m.pretrain_note else ""): n
         for n, m in family.MEMBERS.items() if n in PretrainSpec.ARCHS}
# Spec fields the server sets, never a visitor: where and how fast a job runs, how often it writes,
# and the model it continues (the form's "Start from" picks that).
SERVER = ("init_from", "threads", "device", "compile", "log_every", "eval_every", "save_every", "save_every_s", "keep_last",
          "max_position", "stop_at")
OWN = ("start_from", "upload", "hub_name")  # the form's own inputs, read into spec fields here
SHAPE = ("layers", "hidden", "heads", "intermediate")
# what a continued model keeps as its own
MODEL_FIELDS = ("arch", "preset", *SHAPE, "vocab_size", "embedding_size", "layer_groups", "pre_ln", "generator_size",
                "rtd_weight", "positions")
SIZE_INPUTS = ("preset", *SHAPE, "vocab_size", "embedding_size", "layer_groups", "max_len", "batch_size", "arch",
               "generator_size", "start_from")


def preset_values(name: str) -> dict:
    L, H, A = PRESETS[name]
    return dict(layers=L, hidden=H, heads=A, intermediate=4 * H)


def recipe_values(recipe: str, arch: str = "bert") -> dict:
    """The fields a recipe sets, by name: its preset's shape too, and its objective where the architecture
    has that pair task (else the architecture's own). A field another recipe sets and this one leaves
    goes back to its default. Nothing for FROM_RUN: the form already holds the run's settings."""
    if recipe not in RECIPES:
        return {}
    fields = {**{f.name: f.default for f in dataclasses.fields(PretrainSpec)}, "start_from": SCRATCH}
    r = {**{k: fields[k] for other in RECIPES.values() for k in other}, **RECIPES[recipe]}
    arch = ARCHS.get(arch, arch)
    if arch != "bert":
        r["objective"] = PretrainSpec.DEFAULT_OBJECTIVE.get(arch, "mlm")
    return {**r, **preset_values(r["preset"])}


RECIPE_FIELDS = tuple(dict.fromkeys(k for r in RECIPES for k in recipe_values(r)))


def default_spec() -> PretrainSpec:
    """The run the form starts when nothing is changed: the first recipe, on the shipped reviews."""
    return form_spec(**recipe_values(next(iter(RECIPES))), bf16=True)


def recipe_seconds(recipe: str, machine: float | None = None, **change) -> float:
    """How long the recipe's run (with fields `change`d) takes on this machine (speed.pretrain_s), its
    data prepared first unless they are cached or are the default recipe's, which the server prepares as
    it starts."""
    spec = form_spec(**{**recipe_values(recipe), **change})
    config = (BertConfig.from_json_file(Path(spec.init_from) / "config.json") if spec.init_from else
              model_config(spec))
    gen = generator_config(config, spec.generator_size) if family.trains_generator(spec.arch) else None
    cache = pretrain_cache_dir(spec)
    ready = spec.init_from is not None or cache is None or cache.is_dir() or cache == pretrain_cache_dir(default_spec())
    return speed.pretrain_s(spec, config, gen, prepared=ready, machine=machine)


def recipe_choices() -> list[tuple[str, str]]:
    """The recipe box's (label, value) pairs: each name with its time here, measured, not promised."""
    return [(f"{r}, about {speed.say(recipe_seconds(r))} here", r) for r in RECIPES]


def warm_default_recipe() -> subprocess.Popen | None:
    """Prepare the default recipe's data in the background, at low priority, as the server starts (see
    pretrain.warm_cache): on a Space every restart empties the cache, and the first student's run
    would spend its first minute there. None when the cache already holds it."""
    spec = default_spec()
    cache = pretrain_cache_dir(spec)
    if cache is None or (cache / "examples.pt").exists():
        return None
    code = ("import json, os, sys; os.nice(10); from bertlab.train.pretrain import warm_cache; "
            "from bertlab.train.specs import PretrainSpec; warm_cache(PretrainSpec.from_dict(json.loads(sys.argv[1])))")
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(spec.to_dict())], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _arch_preset(name: str, arch: str) -> str:
    """The member's preset of that name, or its tiny one: the form gives the whole shape anyway, so the
    preset only lends the member's own defaults (activation, LayerNorm epsilon, token types)."""
    return name if name in preset_names(arch) else "tiny"


def _model_arch(folder) -> str:
    """The architecture of a model a run continues: its own, whatever the form says."""
    kind = BertConfig.from_json_file(folder / "config.json").model_type
    if kind not in PretrainSpec.ARCHS:
        raise ValueError(f"pre-training continues BERT, RoBERTa or ALBERT models; this one is {kind}")
    if family.trains_generator(kind):
        raise ValueError(f"an {family.NAMES[kind]} model trains from scratch here (a generator with its discriminator): "
                         "choose 'from scratch', or resume its run to train it longer")
    return kind


def _spec_fields(form: dict) -> dict:
    """The form's spec fields: none of the server's; choices given by their label (older API callers)
    read as their value; ELECTRA's two boxes (hidden for the others) only for ELECTRA."""
    v = forms.spec_fields(PretrainSpec, form, exclude=(*SERVER, "corpus"))
    v["arch"] = ARCHS.get(v.get("arch", "bert"), v.get("arch", "bert"))
    if "objective" in v:
        v["objective"] = OBJECTIVES.get(v["objective"], v["objective"])
    if not family.trains_generator(v["arch"]):
        v.pop("generator_size", None), v.pop("rtd_weight", None)
    if "preset" in v:
        v["preset"] = _arch_preset(v["preset"], v["arch"])
    return v


def model_config(spec: PretrainSpec) -> BertConfig:
    """The config a new model of this spec gets (its vocabulary the size asked for: the tokenizer
    trained on the corpus sets the ids later)."""
    return preset(spec.preset, spec.arch, **spec.config_overrides(), vocab_size=spec.vocab_size)


def size_md(**form) -> str:
    if form.get("start_from") not in (None, "", SCRATCH):
        return f"Continues **{form['start_from']}**: its own architecture and vocabulary are kept."
    try:
        spec = PretrainSpec(**_spec_fields(form))
        c = model_config(spec)
        n, need = training_size(c, spec.arch, spec.generator_size, spec.batch_size, spec.max_len)
    except (ValueError, TypeError) as e:
        return f"⚠️ {e}"
    cap = limits().max_params
    warn = f" ⚠️ over this server's cap of {sizing.humanize(cap)} parameters" if n > cap else ""
    return (f"**{sizing.humanize(n)} parameters** ({n:,}) in {c.num_hidden_layers} layers of width "
            f"{c.hidden_size}; training memory about {sizing.humanize(need, 'B')} at this batch size.{warn}")


def training_size(c, arch: str, generator_size, batch: int, seq_len: int) -> tuple[int, int]:
    """(parameters trained, bytes of memory a training step peaks at, fp32) of a new model: ELECTRA
    trains its generator too (sharing the embeddings), so a generator as wide as the discriminator
    doubled what the parameter cap let through."""
    n = sizing.param_counts(c)["total"]
    need = sizing.memory(c, batch_size=max(1, batch), seq_len=seq_len, dtype="fp32", training=True,
                         sparse_mlm=True)["total"]
    if family.trains_generator(arch):
        try:
            g = generator_config(c, float(generator_size))
        except (TypeError, ValueError):
            return n, need  # the spec says what is wrong with the size
        counts = sizing.param_counts(g)
        n += counts["total"] - counts["embeddings"]
        need += sizing.memory(g, batch_size=max(1, batch), seq_len=seq_len, dtype="fp32", training=True,
                              sparse_mlm=True)["total"]
    return n, need


def form_spec(**form) -> PretrainSpec:
    """The form (fields by name, as the API sends them) as a PretrainSpec, checked here so that mistakes
    show at once, not in a log. Fields left out keep the spec's defaults; the server's own (SERVER) are
    never read from a form."""
    lim = limits()
    v = _spec_fields(form)
    start_from, source = form.get("start_from") or SCRATCH, CORPORA.get(form.get("corpus"), form.get("corpus"))
    if start_from != SCRATCH:  # the model's own architecture, shape and vocabulary
        folder = models.resolve(start_from)
        v = {k: x for k, x in v.items() if k not in MODEL_FIELDS}
        v.update(arch=_model_arch(folder), init_from=str(folder))
    spec = PretrainSpec(**v, threads=lim.job_threads)
    if spec.steps * spec.accum > lim.max_steps:
        raise ValueError(f"{spec.steps:,} steps{f' of {spec.accum} micro-batches' if spec.accum > 1 else ''} is over "
                         f"this server's cap of {lim.max_steps:,} (BERTLAB_MAX_STEPS)")
    spec = spec.replace(log_every=max(1, spec.steps // 200), eval_every=max(20, spec.steps // 12),
                        save_every=max(50, spec.steps // 5))
    if spec.init_from is None:
        n, need = training_size(model_config(spec), spec.arch, spec.generator_size, spec.batch_size, spec.max_len)
        if n > lim.max_params:
            raise ValueError(f"this model has {n:,} parameters; this server trains at most {lim.max_params:,} "
                             f"(BERTLAB_MAX_PARAMS): choose fewer layers or a smaller hidden size")
        if need > lim.job_mb * 2**20:
            raise ValueError(f"this run would need about {sizing.humanize(need, 'B')} of memory; a training job here "
                             f"gets at most {sizing.humanize(lim.job_mb * 2**20, 'B')} (BERTLAB_JOB_MB): "
                             f"choose a smaller batch, fewer tokens or a smaller model")
    if source == "upload":
        traffic.check_owner(form.get("upload"))  # another visitor's upload is not this page's to use
        src = check_upload(form.get("upload"), "corpus")
        if src.suffix.lower() not in (".txt", ".csv", ".json", ".jsonl"):
            raise ValueError(f"{src.name}: a corpus is a .txt, .csv, .json or .jsonl file")
        with jobs_ui.upload_named(src):  # empty, binary, wrong column: said now
            load_documents(src, spec.text_column, spec.max_docs)
        return spec.replace(corpus=str(jobs_ui.stage_upload(src)))
    if source == "hub":
        hub_name = (form.get("hub_name") or "").strip()
        if not hub_name:
            raise ValueError("type a Hugging Face dataset name, e.g. stanfordnlp/imdb")
        if not is_hub_dataset(hub_name):
            raise ValueError(f"{hub_name[:80]!r} is not a Hugging Face dataset name (owner/name): "
                             f"to train on your own text, upload it")
        return spec.replace(corpus=HUB_PREFIX + hub_name)  # the hub's, never a path of this server
    if source in CORPORA.values() and source.startswith(TASK_CORPUS):  # one of ours, never a path
        return spec.replace(corpus=source)
    if source not in (None, "imdb"):
        raise ValueError(f"corpus must be one of {', '.join(CORPORA.values())}, got {str(source)[:80]!r}")
    return spec


def form_values(name) -> dict:
    """The form's values (by field) as the run `name` was started, so that a reloaded page, or a run
    picked to watch, shows the settings of the run it shows. Nothing for a run without a pre-training
    spec; the corpus of an upload and the model a run continued stay as they are (a server path is
    never shown)."""
    try:
        spec = Run(jobs_ui.run_dir(name)).spec() if jobs_ui.valid(name) else None
        c = model_config(spec) if isinstance(spec, PretrainSpec) else None
    except (ValueError, TypeError, KeyError, OSError):
        return {}
    if c is None:
        return {}
    v = {k: x for k, x in spec.to_dict().items() if k not in (*SERVER, "corpus", "kind") and x is not None}
    if spec.init_from is not None:  # a continued model's shape is its own, not the form's to show
        v = {k: x for k, x in v.items() if k not in (*SHAPE, "preset", "vocab_size", "embedding_size")}
    else:
        v.update(layers=c.num_hidden_layers, hidden=c.hidden_size, heads=c.num_attention_heads,
                 intermediate=c.intermediate_size)
        if spec.preset not in PRESETS:
            v.pop("preset")
    if spec.corpus == "imdb" or spec.corpus in CORPORA.values() and spec.corpus.startswith(TASK_CORPUS):
        v["corpus"] = spec.corpus
    elif spec.corpus.startswith(HUB_PREFIX) and is_hub_dataset(spec.corpus.removeprefix(HUB_PREFIX)):
        v.update(corpus="hub", hub_name=spec.corpus.removeprefix(HUB_PREFIX))
    v.setdefault("max_docs", None)
    return v


def charts(runs: dict) -> list:
    """The three figures; before the first measurement only the first one, a note without axes."""
    if not any(runs.values()):
        first = empty_figure("No measurements yet: start a run, or pick one to watch." if not runs else
                             "No measurements yet: the first points appear a few seconds after training starts.")
        return [gr.Plot(first, visible=True), gr.Plot(visible=False), gr.Plot(visible=False)]
    return [gr.Plot(f, visible=True) for f in pretrain_figures(runs)]


def view(name, overlay, owner):
    """Status, curves (this run and the overlaid ones), probe sentences, log; the timer runs while live."""
    name = name if jobs_ui.valid(name) else None
    st = jobs_ui.status(name)
    runs = {n: metrics(jobs_ui.run_dir(n)) for n in jobs_ui.shown_runs(name, overlay)}
    header, body = probe_rows(jobs_ui.run_dir(name)) if name else (["sentence"], [])
    table = gr.Dataframe(value=body, headers=header) if body else gr.Dataframe(
        value=[["The probe sentences' top guesses appear at each evaluation."]], headers=["sentence"])
    log = (st or {}).get("log_tail", "")
    return (jobs_ui.status_html(st, owner), *charts(runs), table, log, gr.Timer(active=jobs_ui.is_live(st)))


def start(owner, name, overlay=None, student="", **form):
    """Validate the form and launch the run (or queue it). The form comes by field name, as the API
    sends it: `/pretrain_start` takes a spec's fields (steps=, lr=, ...) and the form's own inputs
    (start_from, corpus = imdb | upload | hub, upload, hub_name). `student`: the name the class chart
    shows for the run (optional)."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("pretrain"))
        student = classroom.check_display_name(student)
        jobs_ui.launch(owner, name, form_spec(**form))
        if student:
            classroom.name_run(jobs_ui.manager(), name, jobs_ui.visitor(owner), student)
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return (gr.Dropdown(choices=jobs_ui.runs_of("pretrain"), value=name), *view(name, overlay, owner))


def stop(owner, name, overlay):
    if not name:
        raise user_error("No run selected.")
    try:
        jobs_ui.manager().stop(name, jobs_ui.visitor(owner))
    except (ValueError, PermissionError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def resume(owner, name, steps, overlay):
    if not name:
        raise user_error("No run selected: pick the run to resume under 'Run'.")
    try:
        steps = PretrainSpec(steps=steps).steps  # a whole number from 1, or said
        if steps > limits().max_steps:
            raise ValueError(f"{steps:,} steps is over this server's cap of {limits().max_steps:,}")
        jobs_ui.manager().resume(name, jobs_ui.visitor(owner), {"steps": steps})
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def build(picker: gr.Dropdown) -> None:
    owner, opened = jobs_ui.session()
    first = next(iter(RECIPES))
    form = forms.Form(PretrainSpec, "pretrain", values=recipe_values(first))
    with gr.Row():
        with gr.Column(scale=3):
            recipe = gr.Dropdown(recipe_choices(), value=first, label="Recipe", elem_id="pretrain-recipe",
                                 info="fills in the settings below; change any of them afterwards")
            with gr.Row():
                name = gr.Textbox(label="Run name", placeholder="blank: pretrain-<date>-<time>", max_length=64,
                                  min_width=280)  # 280: side by side on a laptop, one above the other on a phone
                student = gr.Textbox("", label="Your name (shown on the class chart)", placeholder="optional",
                                     max_length=classroom.MAX_NAME, min_width=280, elem_id="pretrain-student")
                start_from = form.add("start_from", gr.Dropdown(
                    [SCRATCH] + models.choices(), value=SCRATCH, label="Start from", min_width=280,
                    elem_id="pretrain-start-from",
                    info="continue a model (e.g. at 128 tokens after a 32-token run)"))
            with gr.Accordion("Model", open=False, elem_id="pretrain-model"):
                arch = form("arch", choices=[(k, v) for k, v in ARCHS.items()],
                            info="picks its tokenizer and objective (distillation has its own tab)")
                with gr.Row(visible=False) as electra_row:  # ELECTRA's own two settings
                    form("generator_size", help=False, minimum=0.01, min_width=280)
                    form("rtd_weight", help=False, min_width=280)
                with gr.Row():
                    size_preset = form("preset", help=False)
                    form("layers", help=False, maximum=48)
                    form("hidden", help=False, minimum=8, maximum=2048)
                    form("heads", help=False, maximum=32)
                    form("intermediate", help=False, minimum=8, maximum=8192)
                    form("vocab_size", help=False, minimum=100, maximum=60000)
                with gr.Row():
                    form("dropout", info="0 suits short runs: the model is far from overfitting", maximum=0.9)
                    form("pre_ln", help=False)
                form("positions", gr.Radio, info="sinusoidal: the Transformer paper's fixed table, never trained "
                     "(Embeddings → Position embeddings compares the two)")
            with gr.Accordion("Data", open=False, elem_id="pretrain-data"):
                form("corpus", gr.Radio, help=False, choices=[(k, v) for k, v in CORPORA.items()], value="imdb")
                with gr.Row():
                    form.add("upload", gr.File(label="Your corpus (.txt: documents split by blank lines; .csv/.jsonl: "
                                                     "a text column)", file_types=[".txt", ".csv", ".json", ".jsonl"],
                                               elem_id="pretrain-upload"))
                    with gr.Column():
                        form("text_column", help=False)
                        form.add("hub_name", gr.Textbox(label="Hugging Face dataset (when online)", max_length=200,
                                                        placeholder="stanfordnlp/imdb"))
                        form("max_docs", help=False, label="Use the first N documents (0 = all)")
            with gr.Row():
                form("max_len", help=False, maximum=512)
                form("batch_size", help=False, maximum=1024)
                form("steps", help=False)
                form("lr", help=False)
                form("mask_rate", gr.Slider, help=False, minimum=0.05, maximum=0.5, step=0.01)
            with gr.Row():
                form("objective", gr.Radio, help=False, choices=[(k, v) for k, v in OBJECTIVES.items()],
                     min_width=280)
                form("loss", gr.Dropdown, help=False, choices=[(o.label, o.name) for o in objectives.REGISTRY.values()],
                     min_width=280, info="a function registered in bertlab/train/objectives.py; every loss is "
                                         "judged on the same held-out masked words")
                with gr.Column(min_width=280):  # a checkbox alone keeps no min_width: squeezed on a phone
                    form("bf16", help=False, value=True)
            with gr.Accordion("More settings", open=False, elem_id="pretrain-more"):
                gr.Markdown("Every other setting of a pre-training run, as `python -m bertlab pretrain --help` "
                            "lists it. The defaults are the CPU recipe's (bench/RECIPE.md).")
                form.rest(hide=SERVER, static_masks={"maximum": 10}, accum={"maximum": 64},
                          eval_batches={"maximum": 64}, eval_early={"maximum": 10_000})
            size = gr.Markdown(elem_id="pretrain-size")
        with gr.Column(scale=2):
            gr.Markdown(EXPLAIN)
    controls = jobs_ui.Controls("pretrain", min_width=None)
    links.register("pretrain", recipe=recipe, arch=arch)  # the recipe fills the rest (a link never starts a run)
    with gr.Row():
        watch = gr.Dropdown([], label="Run", allow_custom_value=True, info="the run shown below (yours or anyone's)",
                            scale=2, elem_id="pretrain-run")
        overlay = gr.Dropdown([], multiselect=True, allow_custom_value=True, label="Overlay other runs", scale=3,
                              elem_id="pretrain-overlay")
    status = gr.HTML(elem_id="pretrain-status")
    with gr.Row(elem_id="pretrain-plot"):  # three narrow figures: side by side here, stacked on a phone
        plots = [gr.Plot(empty_figure("No measurements yet: start a run, or pick one to watch."), show_label=False,
                         min_width=320, elem_id=f"pretrain-plot-{k}", visible=k == 0) for k in range(3)]
    gr.Markdown("**Watch it learn**: the same sentences, the model's top three guesses at each evaluation.")
    probes = gr.Dataframe(interactive=False, wrap=True, elem_id="pretrain-probes")
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=10, max_lines=30, show_label=False, autoscroll=True)
    timer = gr.Timer(jobs_ui.TICK_S, active=False)

    w = form.widgets
    outs = [status, *plots, probes, log, timer]
    size_in = form.inputs(*SIZE_INPUTS)
    arch.input(lambda a: {w["objective"]: PretrainSpec.DEFAULT_OBJECTIVE[a], electra_row: gr.Row(visible=family.trains_generator(a))},
               arch, [w["objective"], electra_row], api_name=False)  # each architecture's own pair task and options
    def fill_recipe(r, a):  # (Gradio reads an empty dict as one value; one skip() skips every output)
        return form.fill(recipe_values(r, a)) or gr.skip()

    recipe.change(fill_recipe, [recipe, arch], [w[k] for k in RECIPE_FIELDS], api_name=False)
    size_preset.input(lambda p: form.fill(preset_values(p)), size_preset, [w[k] for k in SHAPE], api_name=False)
    gr.on([c.change for c in size_in.values()], size_md, None, size, inputs_kwargs=size_in, api_name=False,
          show_progress="hidden")
    start_from.focus(lambda: gr.Dropdown(choices=[SCRATCH] + models.choices()), None, start_from, api_name=False)
    controls.start.click(start, [owner, name, overlay, student], [watch, *outs], inputs_kwargs=form.inputs(),
                         api_name="pretrain_start", concurrency_limit=1)
    controls.wire(owner, watch, overlay, outs, view, stop, resume, [w["steps"]])

    def show_run(run):  # the form as the shown run was started; the recipe box says so
        v = form_values(run)
        return {**form.fill(v), electra_row: gr.Row(visible=family.trains_generator(v["arch"])),
                recipe: gr.update(choices=[*recipe_choices(), (FROM_RUN, FROM_RUN)], value=FROM_RUN)} if v else gr.skip()

    shown = [recipe, electra_row, *[x for k, x in w.items() if k not in OWN or k == "hub_name"]]
    jobs_ui.wire_run_view("pretrain", (owner, opened), watch, overlay, timer, view, outs, (show_run, shown))
    common.on_open(size_md, None, size, inputs_kwargs=size_in)
