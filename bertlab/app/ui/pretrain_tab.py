"""Pre-train a BERT (or a RoBERTa or ALBERT) from the page and watch it learn: live curves, probe
sentences, stop and resume.

The run is a `python -m bertlab pretrain` subprocess owned by the job manager, never by a Gradio
event: closing the tab does not kill it, and a reloaded page finds it again.
"""
from __future__ import annotations

import json
import subprocess
import sys

import gradio as gr

from ...analysis import sizing
from ...config import PRESETS, BertConfig, preset, preset_names
from ...data.corpus import HUB_PREFIX, is_hub_dataset, load_documents
from ...train.electra import generator_config
from ...train.pretrain import cache_dir as pretrain_cache_dir
from ...train.runs import Run
from ...train.specs import PretrainSpec
from .. import classroom
from ..jobs import check_name
from ..limits import check_upload, limits
from . import common, jobs_ui, links, models
from .common import user_error
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

A first run spends a little while building its vocabulary and examples (the status says which step;
they are cached, so the next run with the same data starts at once), then measures itself often at
the start (steps 10, 25, 50, ...), where the curves move most, and regularly after that."""

SCRATCH = "scratch (random weights)"
RECIPES = {
    # The two short recipes read the first 12,000 of the 25,000 reviews (~95,000 examples): preparing
    # them from scratch takes 16 s instead of 33 s (2-core EPYC), and both share that one cache.
    "Quick demo: mini BERT, 32-token examples, ~6 min": dict(
        preset="mini", max_len=32, batch_size=128, steps=800, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0,
        max_docs=12_000),
    "Class model: 4,000 short steps, as the shipped model began, ~30 min": dict(
        preset="mini", max_len=32, batch_size=128, steps=4000, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0),
    "Textbook BERT: 128-token examples (slow to leave the plateau on a CPU)": dict(
        preset="mini", max_len=128, batch_size=32, steps=1500, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.1),
    # bench/RECIPE.md: tiny runs ~4x more tokens/s than mini and leads it for the first ~10 minutes.
    "Tiny and fast: a 2-layer model, ~5 min (~25 % of masks right)": dict(
        preset="tiny", max_len=32, batch_size=128, steps=2000, lr=1e-3, mask_rate=0.15, objective="nsp", dropout=0.0,
        max_docs=12_000),
}
CORPORA = ["IMDB movie reviews (shipped)", "Upload a file", "Hugging Face dataset"]
OBJECTIVES = {"MLM + next sentence (BERT)": "nsp", "MLM + sentence order (ALBERT)": "sop",
              "MLM only (RoBERTa; ELECTRA's generator)": "mlm"}
# The members pre-training trains here (distillation is another job).
ARCHS = {"BERT": "bert", "RoBERTa (byte-level BPE, MLM only)": "roberta",
         "ALBERT (factorised embeddings, shared layers; WordPiece, not SentencePiece)": "albert",
         "ELECTRA (a 1/4-width generator fills the masks, the discriminator spots its replacements)": "electra"}


DEFAULT_VOCAB = 8192  # the form's vocabulary (the recipes leave it)


def default_spec() -> PretrainSpec:
    """The run the form starts when nothing is changed: the first recipe, on the shipped reviews."""
    names = ("preset_name", "layers", "hidden", "heads", "inter", "max_len", "batch", "steps", "lr", "mask_rate",
             "objective", "dropout", "max_docs")
    return form_spec(**dict(zip(names, recipe_fields(next(iter(RECIPES))))), vocab=DEFAULT_VOCAB,
                     start_from=SCRATCH, corpus=CORPORA[0], upload=None, text_column="text", hub_name="", bf16=True)


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


def preset_fields(name: str):
    L, H, A = PRESETS[name]
    return L, H, A, 4 * H


FROM_RUN = "The settings of the run shown below"  # what the recipe box says once the form shows a run's


def recipe_fields(recipe: str, arch: str = "BERT"):
    """The recipe's form values; its objective is BERT's, so another architecture keeps its own."""
    if recipe not in RECIPES:  # FROM_RUN: the form already holds the run's settings
        return (gr.skip(),) * 13
    r = RECIPES[recipe]
    objective = r["objective"] if ARCHS.get(arch, "bert") == "bert" else \
        PretrainSpec.DEFAULT_OBJECTIVE[ARCHS.get(arch, arch)]
    return (r["preset"], *preset_fields(r["preset"]), r["max_len"], r["batch_size"], r["steps"], r["lr"],
            r["mask_rate"], next(k for k, v in OBJECTIVES.items() if v == objective), r["dropout"],
            r.get("max_docs", 0))


def _int(v, what: str) -> int:
    if v is None or (isinstance(v, float) and not v.is_integer()):
        raise ValueError(f"{what} must be a whole number, got {v!r}")
    return int(v)


def model_config(preset_name, layers, hidden, heads, inter, vocab, max_len, arch="bert"):
    kw = dict(num_hidden_layers=_int(layers, "layers"), hidden_size=_int(hidden, "hidden size"),
              num_attention_heads=_int(heads, "heads"), intermediate_size=_int(inter, "feed-forward size"),
              vocab_size=_int(vocab, "vocabulary size"),
              max_position_embeddings=max(128, _int(max_len, "tokens per example")))  # room for a later 128-token stage
    arch = ARCHS.get(arch, arch)
    if arch == "bert":
        return preset(preset_name, **kw)
    name = _arch_preset(preset_name, arch)
    if arch in ("albert", "electra"):  # PretrainSpec's default: ALBERT 128, ELECTRA the preset's; at most H
        kw["embedding_size"] = min(128 if arch == "albert" else preset(name, arch).embedding_dim, kw["hidden_size"])
    return preset(name, arch, **kw)


def _arch_preset(name: str, arch: str) -> str:
    """The member's preset of that name, or its tiny one: the form gives the whole shape anyway, so the
    preset only lends the member's own defaults (activation, LayerNorm epsilon, token types)."""
    return name if name in preset_names(arch) else "tiny"


def _model_arch(folder) -> str:
    """The architecture of a model a run continues: its own, whatever the form says."""
    kind = BertConfig.from_json_file(folder / "config.json").model_type
    if kind not in PretrainSpec.ARCHS:
        raise ValueError(f"pre-training continues BERT, RoBERTa or ALBERT models; this one is {kind}")
    if kind == "electra":
        raise ValueError("an ELECTRA model trains from scratch here (a generator with its discriminator): "
                         "choose 'from scratch', or resume its run to train it longer")
    return kind


def size_md(preset_name, layers, hidden, heads, inter, vocab, max_len, batch, start_from, arch="bert") -> str:
    if start_from and start_from != SCRATCH:
        return f"Continues **{start_from}**: its own architecture and vocabulary are kept."
    try:
        c = model_config(preset_name, layers, hidden, heads, inter, vocab, max_len, arch)
        n = sizing.param_counts(c)["total"]
        mem = sizing.memory(c, batch_size=max(1, _int(batch, "batch size")), seq_len=_int(max_len, "tokens"),
                            dtype="fp32", training=True, sparse_mlm=True)
    except (ValueError, TypeError) as e:
        return f"⚠️ {e}"
    cap = limits().max_params
    warn = f" ⚠️ over this server's cap of {sizing.humanize(cap)} parameters" if n > cap else ""
    return (f"**{sizing.humanize(n)} parameters** ({n:,}) in {c.num_hidden_layers} layers of width "
            f"{c.hidden_size}; training memory about {sizing.humanize(mem['total'], 'B')} at this batch size.{warn}")


def training_size(c, arch: str, generator_size, batch: int, seq_len: int) -> tuple[int, int]:
    """(parameters trained, bytes of memory a training step peaks at, fp32) of a new model: ELECTRA
    trains its generator too (sharing the embeddings), so a generator as wide as the discriminator
    doubled what the parameter cap let through."""
    n = sizing.param_counts(c)["total"]
    need = sizing.memory(c, batch_size=max(1, batch), seq_len=seq_len, dtype="fp32", training=True,
                         sparse_mlm=True)["total"]
    if arch == "electra":
        try:
            g = generator_config(c, float(generator_size))
        except (TypeError, ValueError):
            return n, need  # the spec says what is wrong with the size
        counts = sizing.param_counts(g)
        n += counts["total"] - counts["embeddings"]
        need += sizing.memory(g, batch_size=max(1, batch), seq_len=seq_len, dtype="fp32", training=True,
                              sparse_mlm=True)["total"]
    return n, need


def form_spec(preset_name, layers, hidden, heads, inter, vocab, start_from, corpus, upload, text_column, hub_name,
              max_docs, max_len, batch, steps, lr, mask_rate, objective, bf16, dropout=0.0, pre_ln=False,
              arch="bert", generator_size=0.25, rtd_weight=50.0) -> PretrainSpec:
    """The form as a PretrainSpec, checked here so that mistakes show at once, not in a log."""
    lim = limits()
    steps = _int(steps, "steps")
    if steps > lim.max_steps:
        raise ValueError(f"{steps:,} steps is over this server's cap of {lim.max_steps:,} (BERTLAB_MAX_STEPS)")
    arch = ARCHS.get(arch, arch)
    continued = bool(start_from and start_from != SCRATCH)
    if continued:
        arch = _model_arch(models.resolve(start_from))
    spec = PretrainSpec(arch=arch, max_len=max_len, batch_size=batch, steps=steps, lr=lr, warmup=0.05,
                        mask_rate=mask_rate,
                        objective=OBJECTIVES.get(objective, objective), log_every=max(1, steps // 200),
                        eval_every=max(20, steps // 12), save_every=max(50, steps // 5), threads=lim.job_threads,
                        dropout=dropout, bf16=bool(bf16), text_column=text_column or "text",
                        max_docs=_int(max_docs or 0, "max documents") or None)
    if continued:
        spec = spec.replace(init_from=str(models.resolve(start_from)))
    else:
        c = model_config(preset_name, layers, hidden, heads, inter, vocab, max_len, arch)
        n, need = training_size(c, arch, generator_size, _int(batch, "batch size"), _int(max_len, "tokens"))
        if n > lim.max_params:
            raise ValueError(f"this model has {n:,} parameters; this server trains at most {lim.max_params:,} "
                             f"(BERTLAB_MAX_PARAMS): choose fewer layers or a smaller hidden size")
        if need > lim.job_mb * 2**20:
            raise ValueError(f"this run would need about {sizing.humanize(need, 'B')} of memory; a training job here "
                             f"gets at most {sizing.humanize(lim.job_mb * 2**20, 'B')} (BERTLAB_JOB_MB): "
                             f"choose a smaller batch, fewer tokens or a smaller model")
        spec = spec.replace(preset=preset_name if arch == "bert" else _arch_preset(preset_name, arch),
                            layers=c.num_hidden_layers, hidden=c.hidden_size,
                            heads=c.num_attention_heads, intermediate=c.intermediate_size, vocab_size=c.vocab_size,
                            max_position=c.max_position_embeddings, pre_ln=bool(pre_ln))
        if arch == "electra":  # the spec checks them (0 < size <= 1, weight > 0)
            spec = spec.replace(generator_size=generator_size, rtd_weight=rtd_weight)
    if corpus == CORPORA[1]:
        src = check_upload(upload, "corpus")
        if src.suffix.lower() not in (".txt", ".csv", ".json", ".jsonl"):
            raise ValueError(f"{src.name}: a corpus is a .txt, .csv, .json or .jsonl file")
        with jobs_ui.upload_named(src):  # empty, binary, wrong column: said now
            load_documents(src, spec.text_column, spec.max_docs)
        return spec.replace(corpus=str(jobs_ui.stage_upload(src)))
    if corpus == CORPORA[2]:
        hub_name = (hub_name or "").strip()
        if not hub_name:
            raise ValueError("type a Hugging Face dataset name, e.g. stanfordnlp/imdb")
        if not is_hub_dataset(hub_name):
            raise ValueError(f"{hub_name[:80]!r} is not a Hugging Face dataset name (owner/name): "
                             f"to train on your own text, upload it")
        return spec.replace(corpus=HUB_PREFIX + hub_name)  # the hub's, never a path of this server
    return spec


def form_of_run(name) -> tuple:
    """The form as the run `name` was started (see `build`'s `shown` outputs), so that a reloaded page,
    or a run picked to watch, shows the settings of the run it shows. Nothing changes for a run without
    a pre-training spec; the corpus of an upload and the model a run continued stay as they are (a
    server path is never shown)."""
    keep = (gr.skip(),) * 24
    try:
        spec = Run(jobs_ui.run_dir(name)).spec() if jobs_ui.valid(name) else None
        c = preset(spec.preset, spec.arch, **spec.config_overrides()) if isinstance(spec, PretrainSpec) else None
    except (ValueError, TypeError, KeyError, OSError):
        return keep
    if c is None:
        return keep
    label = {v: k for k, v in ARCHS.items()}
    shape = (gr.skip(),) * 6 if spec.init_from is not None else (
        spec.preset if spec.preset in PRESETS else gr.skip(), c.num_hidden_layers, c.hidden_size,
        c.num_attention_heads, c.intermediate_size, spec.vocab_size)
    if spec.corpus == "imdb":
        corpus = (CORPORA[0], gr.skip())
    elif spec.corpus.startswith(HUB_PREFIX) and is_hub_dataset(spec.corpus.removeprefix(HUB_PREFIX)):
        corpus = (CORPORA[2], spec.corpus.removeprefix(HUB_PREFIX))
    else:
        corpus = (gr.skip(), gr.skip())
    return (gr.update(choices=[*RECIPES, FROM_RUN], value=FROM_RUN), label[spec.arch],
            gr.Row(visible=spec.arch == "electra"), *shape,
            gr.skip() if spec.dropout is None else spec.dropout, spec.pre_ln, *corpus, spec.text_column,
            spec.max_docs or 0, spec.max_len, spec.batch_size, spec.steps, spec.lr, spec.mask_rate,
            next(k for k, v in OBJECTIVES.items() if v == spec.objective), spec.bf16, spec.generator_size,
            spec.rtd_weight)


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


def start(owner, name, preset_name, layers, hidden, heads, inter, vocab, start_from, corpus, upload, text_column,
          hub_name, max_docs, max_len, batch, steps, lr, mask_rate, objective, bf16, dropout, pre_ln, overlay,
          arch="BERT", generator_size=0.25, rtd_weight=50.0, student=""):
    """Validate the form and launch the run (or queue it); named so the API reads like the form.
    `student`: the name the class chart shows for the run (optional)."""
    try:
        name = check_name((name or "").strip() or jobs_ui.default_name("pretrain"))
        student = classroom.check_display_name(student)
        spec = form_spec(preset_name, layers, hidden, heads, inter, vocab, start_from, corpus, upload, text_column,
                         hub_name, max_docs, max_len, batch, steps, lr, mask_rate, objective, bf16, dropout, pre_ln,
                         arch, generator_size, rtd_weight)
        jobs_ui.launch(owner, name, spec)
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
        steps = _int(steps, "steps")
        if steps > limits().max_steps:
            raise ValueError(f"{steps:,} steps is over this server's cap of {limits().max_steps:,}")
        jobs_ui.manager().resume(name, jobs_ui.visitor(owner), {"steps": steps})
    except (ValueError, PermissionError, OSError) as e:
        raise jobs_ui.owner_error(e) from None
    return view(name, overlay, owner)


def build(picker: gr.Dropdown) -> None:
    owner, opened = jobs_ui.session()
    first = next(iter(RECIPES))
    r0 = recipe_fields(first)
    with gr.Row():
        with gr.Column(scale=3):
            recipe = gr.Dropdown(list(RECIPES), value=first, label="Recipe", elem_id="pretrain-recipe",
                                 info="fills in the settings below; change any of them afterwards")
            with gr.Row():
                name = gr.Textbox(label="Run name", placeholder="blank: pretrain-<date>-<time>", max_length=64,
                                  min_width=280)  # 280: side by side on a laptop, one above the other on a phone
                student = gr.Textbox("", label="Your name (shown on the class chart)", placeholder="optional",
                                     max_length=classroom.MAX_NAME, min_width=280, elem_id="pretrain-student")
                start_from = gr.Dropdown([SCRATCH] + models.choices(), value=SCRATCH, label="Start from",
                                         info="continue a model (e.g. at 128 tokens after a 32-token run)",
                                         min_width=280)
            with gr.Accordion("Model", open=False, elem_id="pretrain-model"):
                arch = gr.Dropdown(list(ARCHS), value=next(iter(ARCHS)), label="Architecture",
                                   info="picks its tokenizer and objective (distillation has its own tab)")
                with gr.Row(visible=False) as electra_row:  # ELECTRA's own two settings
                    generator_size = gr.Number(0.25, label="ELECTRA generator width (share of the discriminator's)",
                                               minimum=0.01, maximum=1, min_width=280)
                    rtd_weight = gr.Number(50, label="ELECTRA weight of the replaced-token loss (λ)", minimum=0,
                                           min_width=280)
                with gr.Row():
                    size_preset = gr.Dropdown(list(PRESETS), value=r0[0], label="Size preset")
                    layers = gr.Number(r0[1], label="Layers", precision=0, minimum=1, maximum=48)
                    hidden = gr.Number(r0[2], label="Hidden size", precision=0, minimum=8, maximum=2048)
                    heads = gr.Number(r0[3], label="Heads", precision=0, minimum=1, maximum=32)
                    inter = gr.Number(r0[4], label="Feed-forward size", precision=0, minimum=8, maximum=8192)
                    vocab = gr.Number(DEFAULT_VOCAB, label="Vocabulary", precision=0, minimum=100, maximum=60000)
                with gr.Row():
                    dropout = gr.Number(r0[11], label="Dropout", minimum=0, maximum=0.9,
                                        info="0 suits short runs: the model is far from overfitting")
                    pre_ln = gr.Checkbox(False, label="Pre-LN: LayerNorm before each block (stable at higher "
                                                      "learning rates; not BERT's layout, saved as MegatronBert)")
            with gr.Accordion("Data", open=False, elem_id="pretrain-data"):
                corpus = gr.Radio(CORPORA, value=CORPORA[0], label="Corpus")
                with gr.Row():
                    upload = gr.File(label="Your corpus (.txt: documents split by blank lines; .csv/.jsonl: a text "
                                           "column)", file_types=[".txt", ".csv", ".json", ".jsonl"],
                                     elem_id="pretrain-upload")
                    with gr.Column():
                        text_column = gr.Textbox("text", label="Text column (.csv/.jsonl)", max_length=100)
                        hub_name = gr.Textbox(label="Hugging Face dataset (when online)", placeholder="stanfordnlp/imdb",
                                              max_length=200)
                        max_docs = gr.Number(r0[12], label="Use the first N documents (0 = all)", precision=0, minimum=0)
            with gr.Row():
                max_len = gr.Number(r0[5], label="Tokens per example", precision=0, minimum=8, maximum=512)
                batch = gr.Number(r0[6], label="Batch size", precision=0, minimum=1, maximum=1024)
                steps = gr.Number(r0[7], label="Steps", precision=0, minimum=1)
                lr = gr.Number(r0[8], label="Learning rate", minimum=0)
                mask_rate = gr.Slider(0.05, 0.5, r0[9], step=0.01, label="Mask rate")
            with gr.Row():
                objective = gr.Radio(list(OBJECTIVES), value=r0[10], label="Objective", min_width=280)
                with gr.Column(min_width=280):  # a checkbox alone keeps no min_width: squeezed on a phone
                    bf16 = gr.Checkbox(True, label="bfloat16 where the CPU computes it natively (~1.5x faster); "
                                                   "fp32 elsewhere")
            size = gr.Markdown(elem_id="pretrain-size")
        with gr.Column(scale=2):
            gr.Markdown(EXPLAIN)
    with gr.Row():
        start_btn = gr.Button("Start", variant="primary", elem_id="pretrain-start")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="pretrain-stop")
        resume_btn = gr.Button("Resume", elem_id="pretrain-resume")
        delete_btn = gr.Button("Delete", elem_id="pretrain-delete")
    links.copy_button("pretrain")
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

    model_fields = [size_preset, layers, hidden, heads, inter, vocab]
    form = [*model_fields, start_from, corpus, upload, text_column, hub_name, max_docs, max_len, batch, steps, lr,
            mask_rate, objective, bf16, dropout, pre_ln]
    outs = [status, *plots, probes, log, timer]
    size_in = [*model_fields, max_len, batch, start_from, arch]
    arch.input(lambda a: (next(k for k, v in OBJECTIVES.items() if v == PretrainSpec.DEFAULT_OBJECTIVE[ARCHS[a]]),
                          gr.Row(visible=ARCHS[a] == "electra")),
               arch, [objective, electra_row], api_name=False)  # each architecture's own pair task and options
    recipe.change(recipe_fields, [recipe, arch], [size_preset, layers, hidden, heads, inter, max_len, batch, steps, lr,
                                          mask_rate, objective, dropout, max_docs], api_name=False)
    size_preset.input(preset_fields, size_preset, [layers, hidden, heads, inter], api_name=False)
    gr.on([c.change for c in size_in], size_md, size_in, size, api_name=False, show_progress="hidden")
    start_from.focus(lambda: gr.Dropdown(choices=[SCRATCH] + models.choices()), None, start_from, api_name=False)
    start_btn.click(start, [owner, name, *form, overlay, arch, generator_size, rtd_weight, student], [watch, *outs],
                    api_name="pretrain_start",
                    concurrency_limit=1)
    stop_btn.click(stop, [owner, watch, overlay], outs, api_name="pretrain_stop", show_progress="minimal")
    resume_btn.click(resume, [owner, watch, steps, overlay], outs, api_name="pretrain_resume", show_progress="minimal")
    delete_btn.click(jobs_ui.delete, [owner, watch, gr.State("pretrain")], [watch, overlay], api_name="pretrain_delete",
                     show_progress="minimal").then(view, [watch, overlay, owner], outs, api_name=False)
    shown = [recipe, arch, electra_row, *model_fields, dropout, pre_ln, corpus, hub_name, text_column, max_docs,
             max_len, batch, steps, lr, mask_rate, objective, bf16, generator_size, rtd_weight]
    jobs_ui.wire_run_view("pretrain", opened, owner, watch, overlay, timer, view, outs, (form_of_run, shown))
    common.on_open(size_md, size_in, size)
