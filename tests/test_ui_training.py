"""The training tabs: form checks with clear messages, and the whole loop in Chromium: start a tiny
pre-training in the page, watch its chart move, stop, fight over it from another browser, reload,
resume, then fine-tune to a confusion matrix and try the model."""
import re
import shutil
import time
from pathlib import Path

import gradio as gr
import pytest
from browser import WAIT_MS, chromium_page, new_page, shot, upload
from conftest import write_corpus

from bertlab.app.ui.training import finetune_tab, pretrain_tab
from bertlab.train.specs import PretrainSpec

TINY = dict(preset="tiny", layers=1, hidden=32, heads=2, intermediate=64, vocab_size=300, start_from=pretrain_tab.SCRATCH,
            corpus="imdb", upload=None, text_column="text", hub_name="", max_docs=None, max_len=32,
            batch_size=8, steps=100, lr=1e-3, mask_rate=0.15, objective="nsp", bf16=False)


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    return tmp_path / "runs"


def pre_args(**kw):
    return pretrain_tab.form_spec(**{**TINY, **kw})


def test_pretrain_form_gives_a_spec(runs_root):
    a = pre_args()
    assert a.corpus == "imdb" and a.layers == 1 and a.hidden == 32
    assert a.objective == "nsp" and a.steps == 100 and not a.bf16
    assert a.init_from is None and a.threads >= 1
    a = pre_args(start_from=pretrain_tab.models.DEFAULT, objective="mlm", bf16=True, pre_ln=True)
    assert a.init_from and a.layers is None and a.bf16 and a.objective == "mlm"
    assert not a.pre_ln  # a continued model keeps its own layout
    a = pre_args(dropout=0, pre_ln=True)
    assert a.pre_ln and a.dropout == 0.0


@pytest.mark.parametrize("kw", [dict(steps=600, mask_rate=0.2, bf16=True, max_docs=500),
                                dict(arch="electra", generator_size=0.5, rtd_weight=20.0, objective="mlm"),
                                dict(corpus="hub", hub_name="someone/texts", pre_ln=True),
                                dict(whole_word=True, static_masks=2, warmup=0.1, seed=3, accum=2)])
def test_the_form_shows_the_run_it_shows(runs_root, kw):
    """form -> spec -> spec.json -> form gives the same spec: a reloaded page (or a run picked to watch)
    shows the settings of the run it shows, whichever recipe the box said before."""
    from bertlab.train.runs import Run
    spec = pre_args(**kw)
    Run(runs_root / "shown").write_spec(spec)
    got = pretrain_tab.form_values("shown")
    assert pretrain_tab.recipe_values(pretrain_tab.FROM_RUN) == {}  # the box fills nothing
    again = pretrain_tab.form_spec(**{**TINY, **got})
    assert again.to_dict() == spec.to_dict()
    assert pretrain_tab.form_values("nothing-here") == pretrain_tab.form_values("../../etc") == {}


def test_the_warmed_recipe_is_the_one_the_untouched_form_starts(runs_root):
    """The server warms the cache for `default_spec()`: the very data of the form as the page opens."""
    import app
    from bertlab.train.pretrain import cache_dir
    demo = app.build_app()
    fn = next(f for f in demo.fns.values() if f.api_name == "pretrain_start")
    values = dict(zip(fn.input_parameter_names, [c.value for c in fn.inputs]))  # owner, name, overlay, student, form
    shown = pretrain_tab.form_spec(**{k: v for k, v in values.items() if k not in ("owner", "name", "overlay")})
    assert cache_dir(shown) == cache_dir(pretrain_tab.default_spec()) is not None


@pytest.mark.parametrize("kw, words", [
    (dict(hidden=30, heads=4), "divisible"),
    (dict(steps=0), "steps"),
    (dict(steps=2.5), "whole number"),
    (dict(lr=-1), "lr"),
    (dict(mask_rate=1.0), "mask_rate"),
    (dict(max_len=4), "max_len"),
    (dict(dropout=1.0), "dropout"),
    (dict(corpus="upload"), "no corpus uploaded"),
    (dict(corpus="hub"), "dataset name"),
    (dict(corpus="/etc/passwd"), "corpus must be one of"),
    (dict(steps=60, accum=1000), "micro-batches is over"),
])
def test_pretrain_form_errors(runs_root, kw, words):
    with pytest.raises(ValueError, match=words):
        pre_args(**kw)


def test_caps_from_the_environment(runs_root, monkeypatch):
    monkeypatch.setenv("BERTLAB_MAX_STEPS", "50")
    with pytest.raises(ValueError, match="cap of 50"):
        pre_args(steps=51)
    monkeypatch.setenv("BERTLAB_MAX_PARAMS", "1000")
    with pytest.raises(ValueError, match="BERTLAB_MAX_PARAMS"):
        pre_args(steps=10)
    assert "over this server's cap" in pretrain_tab.size_md(**TINY)
    monkeypatch.setenv("BERTLAB_MAX_STEPS", "lots")
    with pytest.raises(ValueError, match="not a number"):
        pre_args()


def test_a_run_is_refused_by_its_memory_and_electra_counts_its_generator(runs_root, monkeypatch):
    """A 42.8 M-parameter model under the 50 M cap at batch 1,024 × 512 tokens (the app's own estimate:
    ~456 GB) was accepted, and an ELECTRA with a generator as wide as itself trained 86.7 M parameters
    against the 50 M cap (issue 30, item 2)."""
    big = dict(preset="small", layers=12, hidden=512, heads=8, intermediate=2048, vocab_size=512, max_len=512)
    with pytest.raises(ValueError, match="BERTLAB_JOB_MB"):
        pre_args(**big, batch_size=1024)
    assert pre_args(**big, batch_size=2).layers == 12  # the same model at a batch that fits
    electra = dict(TINY, arch="electra", objective="mlm", layers=4, hidden=256, heads=4, intermediate=1024,
                   vocab_size=8192, max_len=128)
    shape = PretrainSpec(arch="electra", preset="mini", layers=4, hidden=256, heads=4, intermediate=1024,
                         vocab_size=8192, max_len=128)
    n_alone = pretrain_tab.training_size(pretrain_tab.model_config(shape), "electra", 0.25, 8, 128)[0]
    monkeypatch.setenv("BERTLAB_MAX_PARAMS", str(n_alone))
    assert pretrain_tab.form_spec(**{**electra, "generator_size": 0.25}).generator_size == 0.25
    with pytest.raises(ValueError, match="BERTLAB_MAX_PARAMS"):  # a generator as wide as the discriminator
        pretrain_tab.form_spec(**{**electra, "generator_size": 1.0})


def test_a_job_process_gets_a_memory_cap(tmp_path):
    import resource
    import sys

    from bertlab.app import jobs
    from bertlab.train.specs import PretrainSpec
    mgr = jobs.JobManager(tmp_path / "runs", python=sys.executable, memory_mb=700, nice=0)
    mgr.start("capped", PretrainSpec(corpus=str(tmp_path / "missing.txt")))
    pid = mgr.status("capped")["pid"]
    try:
        soft, hard = resource.prlimit(pid, resource.RLIMIT_DATA)
        assert soft == hard == 700 * 2**20
    except ProcessLookupError:
        pytest.skip("the job ended before its limit could be read")
    finally:
        mgr.stop("capped")


def test_bad_uploads_are_refused_with_reasons(runs_root, tmp_path, monkeypatch):
    def up(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        return pre_args(corpus="upload", upload=str(p))
    with pytest.raises(ValueError, match="empty"):
        up("e.txt", b"")
    with pytest.raises(ValueError, match="binary|not text|UTF-8"):
        up("b.txt", bytes(range(256)) * 40)
    with pytest.raises(ValueError, match="upload a"):
        up("x.exe", b"hello")
    with pytest.raises(ValueError, match="review"):
        up("c.csv", b"review,stars\ngood film,5\n")  # no 'text' column: the columns are listed
    monkeypatch.setenv("BERTLAB_MAX_UPLOAD_MB", "0.001")
    with pytest.raises(ValueError, match="at most 0.001 MB"):
        up("big.txt", b"word " * 1000)
    monkeypatch.delenv("BERTLAB_MAX_UPLOAD_MB")
    a = up("ok.txt", write_corpus(tmp_path / "docs.txt").read_bytes())
    staged = Path(a.corpus)
    assert staged.parent == runs_root / ".uploads" and staged.read_bytes() == (tmp_path / "docs.txt").read_bytes()


def test_finetune_form_checks_and_parameter_counts(runs_root, tmp_path):
    form = dict(model=None, task="sentiment", upload=None, text_column="text", label_column="label", method="LoRA",
                epochs=1, lr=0, lora_rank=4, lora_alpha=8, layer_decay=1.0, gradual_unfreeze=False, max_examples=50,
                max_len=32, batch_size=8)
    a = finetune_tab.form_spec(**form)
    assert a.model == "default" and a.method == "lora" and a.task == "sentiment"
    assert a.lr == a.DEFAULT_LR["lora"] and a.max_examples == 50  # lr 0 in the form: the method's default
    md = finetune_tab.params_md(**form)
    assert re.search(r"trains \*\*[\d,]+\*\* of [\d,]+ parameters", md) and "default" in md
    frozen = finetune_tab.params_md(**{**form, "method": "Frozen encoder (head only)"})
    assert "trains **514** of" in frozen  # the default's hidden 256: a 256 x 2 head and 2 biases
    # gradual unfreezing is full's own box, shown only for it: a ticked box left behind does not count
    assert not finetune_tab.form_spec(**{**form, "gradual_unfreeze": True}).gradual_unfreeze
    assert finetune_tab.form_spec(**{**form, "gradual_unfreeze": True, "method": "full"}).gradual_unfreeze
    with pytest.raises(ValueError, match="BERTLAB_MAX_EPOCHS"):
        finetune_tab.form_spec(**{**form, "epochs": 1000})
    csv = next(iter(k for k, v in finetune_tab.TASKS.items() if v == "upload-csv"))
    bad = {"one.csv": ("text,label\n" + "a film,pos\n" * 30, "same label"),
           "cols.csv": ("review,stars\n" + "a film,pos\nbad one,neg\n" * 20, "no text column|column"),
           "empty.csv": ("", "empty")}
    for name, (content, words) in bad.items():
        (tmp_path / name).write_text(content)
        with pytest.raises(ValueError, match=words):
            finetune_tab.form_spec(**{**form, "task": csv, "upload": str(tmp_path / name)})  # read once, at once


def test_training_api_says_what_is_wrong(client):
    from gradio_client.exceptions import AppError
    bad = [("/pretrain_start", dict(steps=0), "less than minimum value 1"),  # Gradio's own check of the field
           ("/pretrain_start", dict(steps=10**6), "BERTLAB_MAX_STEPS"),
           ("/pretrain_start", dict(steps=10**9), "greater than maximum value"),  # the spec's own range, Gradio's check
           ("/pretrain_start", dict(name="../x"), "bad run name"),
           ("/pretrain_start", dict(hidden=30, heads=4), "divisible"),
           ("/pretrain_stop", dict(name=None), "No run selected"),
           ("/pretrain_resume", dict(name="nothing-here"), "nothing to resume"),
           ("/finetune_start", dict(epochs=1000), "BERTLAB_MAX_EPOCHS"),
           ("/finetune_start", dict(task="upload-csv"), "no labelled file uploaded"),
           ("/finetune_compare", dict(methods=["lora"]), "pick at least two methods"),
           ("/finetune_compare", dict(seeds=4), "Seeds"),  # Gradio's own range check, named
           ("/finetune_compare", dict(epochs=1000), "BERTLAB_MAX_EPOCHS"),
           ("/finetune_try", dict(name="nothing-here", text="good film"), "no saved model yet"),
           ("/finetune_try", dict(name="../../etc", text="good film"), "bad run name"),
           ("/pretrain_stop", dict(name="../../etc"), "bad run name")]
    from bertlab.app.identity import new_id
    me = new_id(".")  # a browser id the server signed (BERTLAB_SECRET is the tests'): a made-up one is refused first
    for api, kw, words in bad:
        base = {"/finetune_try": {}, "/pretrain_start": {"owner": me, "name": "", "upload": None, "hub_name": ""},
                "/finetune_start": {"owner": me, "name": "", "upload": None},
                "/finetune_compare": {"owner": me, "name": "", "upload": None}}.get(api, {"owner": me})
        with pytest.raises(AppError) as e:
            client.predict(**{**base, **kw}, api_name=api)
        assert words in str(e.value) and "Traceback" not in str(e.value), (api, str(e.value))


def _plot_signature(page, sel):
    """The drawn lines of a plotly chart: changes whenever a new point arrives."""
    return page.locator(f"{sel} .scatterlayer path.js-line").evaluate_all("els => els.map(e => e.getAttribute('d')).join('|')")


def _wait_status(page, sel, pattern, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        text = page.locator(sel).inner_text()
        if re.search(pattern, text):
            return text
        page.wait_for_timeout(300)
    shot(page, "failed_wait.png", full_page=True)
    raise AssertionError(f"{sel} never matched {pattern!r}; last: {text!r}")


@pytest.mark.slow
def test_train_in_the_browser(server, tmp_path, tmp_path_factory):
    corpus = write_corpus(tmp_path / "docs.txt", n_docs=200)
    with chromium_page() as (browser, page, outside, errors):
        page.goto(server)  # not "networkidle": Gradio keeps a heartbeat stream open
        page.get_by_role("tab", name="Pre-train").click()
        page.locator("#pretrain-size").get_by_text("parameters").wait_for()
        page.get_by_label("Recipe").click()
        page.get_by_role("option", name=re.compile("Tiny and fast")).click()
        page.locator("#pretrain-model").get_by_text("Model", exact=True).click()
        page.get_by_label("Vocabulary").fill("300")
        page.locator("#pretrain-data").get_by_text("Data", exact=True).click()
        page.get_by_label("Upload a file").check()
        page.locator("#pretrain-upload").wait_for(state="visible")  # shown by the server's answer to the tick
        upload(page, "#pretrain-upload", corpus)
        page.get_by_label("Steps").fill("5000")
        page.get_by_label("Run name").first.fill("ui-tiny")
        page.locator("#pretrain-start").click()
        _wait_status(page, "#pretrain-status", r"running · step")
        seen = [_plot_signature(page, "#pretrain-plot")]
        t0 = time.time()
        while len(set(seen)) < 3 and time.time() - t0 < 90:  # the chart redrew with new points twice
            page.wait_for_timeout(500)
            seen.append(_plot_signature(page, "#pretrain-plot"))
        assert len(set(s for s in seen if s)) >= 2 and len(set(seen)) >= 3, "the chart did not update twice"
        shot(page, "8_pretrain_running.png", full_page=True)

        other = new_page(browser, (1400, 1000))  # another student: own storage
        other.goto(server)
        other.get_by_role("tab", name="Pre-train").click()
        other.locator("#pretrain-run input").click()
        other.get_by_role("option", name="ui-tiny").click()
        _wait_status(other, "#pretrain-status", "another visitor's run")
        other.locator("#pretrain-stop").click()
        other.get_by_text("started in another browser").first.wait_for(timeout=WAIT_MS)
        shot(other, "8_pretrain_other_session.png")
        assert "running" in page.locator("#pretrain-status").inner_text()

        page.reload()  # the reloaded page finds its own running job again, and the form shows its settings
        page.get_by_role("tab", name="Pre-train").click()
        _wait_status(page, "#pretrain-status", r"ui-tiny · running .*started in this browser")
        page.wait_for_function("() => document.querySelector('#pretrain-recipe input').value.startsWith('The settings')",
                               timeout=WAIT_MS)
        steps = page.get_by_label("Steps")  # not the recipe's 2,000: the run's own (the box may fill a tick later)
        page.wait_for_function("e => e.value === '5000'", arg=steps.element_handle(), timeout=WAIT_MS)
        page.locator("#pretrain-model").get_by_text("Model", exact=True).click()
        assert page.get_by_label("Vocabulary").input_value() == "300" and page.get_by_label("Layers").input_value() == "2"
        page.locator("#pretrain-stop").click()
        stopped = _wait_status(page, "#pretrain-status", r"stopped · step")
        step = int(re.search(r"step ([\d,]+)", stopped).group(1).replace(",", ""))
        page.locator("#pretrain-resume").click()
        resumed = _wait_status(page, "#pretrain-status", r"running · step (?!%d )" % step)
        page.locator("#pretrain-stop").click()
        _wait_status(page, "#pretrain-status", r"stopped · step")
        assert int(re.search(r"step ([\d,]+)", resumed).group(1).replace(",", "")) >= step
        shot(page, "8_pretrain_stopped.png", full_page=True)

        folder = next(tmp_path_factory.getbasetemp().glob("app*/runs/ui-tiny"))  # a second ended run to overlay
        shutil.copytree(folder, folder.with_name("ui-copy"))
        page.locator("#pretrain-overlay input").click()
        page.get_by_role("option", name="ui-copy").click()
        page.keyboard.press("Escape")
        page.wait_for_timeout(1500)  # the browser stores what it shows
        page.reload()  # the overlay comes back with the run it was laid on
        page.get_by_role("tab", name="Pre-train").click()
        page.locator("#pretrain-overlay").get_by_text("ui-copy").wait_for(timeout=WAIT_MS)
        assert page.locator("#pretrain-run input").input_value() == "ui-tiny"

        page.get_by_role("tab", name="Fine-tune").click()
        # a slow reload's link chain (?tab=pretrain) once pulled the page back to Pre-train after this click
        page.locator("#bl-tabs [role=tab][aria-selected=true]", has_text="Fine-tune").wait_for(timeout=WAIT_MS)
        page.get_by_text("More options").click()
        page.get_by_label("Use N examples (0 = all)").fill("160")
        page.get_by_label("Epochs").fill("1")
        page.locator("#finetune-params").get_by_text("parameters").wait_for()
        page.locator("#finetune-start").click()
        _wait_status(page, "#finetune-status", r"finished", timeout=180)
        page.locator("#finetune-confusion").get_by_text("Confusion matrix (validation").wait_for(timeout=WAIT_MS)
        assert page.locator("#finetune-confusion .heatmaplayer, #finetune-confusion .hm").count() >= 1
        page.locator("#finetune-try").click()
        page.locator("#finetune-label").get_by_text(re.compile("positive|negative")).first.wait_for(timeout=WAIT_MS)
        assert "finetune-" in page.locator("#finetune-summary").inner_text()
        shot(page, "9_finetune.png", full_page=True)
        assert page.get_by_text("Traceback").count() == 0
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors


def test_charts_overlay_runs_and_read_partial_files(tmp_path):
    from bertlab.app.ui.training import train_charts
    rows = [{"step": s, "split": "train", "loss": 5 - s / 10, "mlm_loss": 4.5 - s / 10, "mlm_acc": s / 100, "lr": 1e-3,
             "tokens_per_s": 9e3}
            for s in (10, 20)] + [{"step": 20, "split": "eval", "mlm_loss": 4.0, "mlm_acc": 0.2, "unigram_acc": 0.04}]
    fig = train_charts.pretrain_figure({"a": rows, "b": rows[:1]})
    names = {t.name for t in fig.data}
    assert {"a: train MLM loss", "b: train MLM loss", "a: held-out MLM acc.", "a: unigram guess"} <= names
    assert "b: held-out MLM acc." not in names  # b has no evaluation yet
    notes = [a.text for a in fig.layout.annotations]
    assert "appears at the first evaluation" in notes and "not measured in this run" in notes  # attention, NSP
    conf = {"labels": ["neg", "pos"], "confusion": [[3, 1], [0, 4]], "accuracy": 0.875}
    heat = train_charts.confusion_figure(conf).data[0]
    assert [list(r) for r in heat.z] == [[0.75, 0.25], [0.0, 1.0]] and "87.5%" in train_charts.confusion_figure(conf).layout.title.text
    (tmp_path / "probes.jsonl").write_text('{"step": 5, "top3": {"the acting was [MASK] .": ["the", ".", ","]}}\n'
                                           '{"step": 10, "top3": {"the acting was [MASK] .": ["good", "great"')
    header, body = train_charts.probe_rows(tmp_path)  # the second line is still being written
    assert header == ["sentence", "step 5"] and body == [["the acting was [MASK] .", "the / . / ,"]]


def test_short_recipes_read_fewer_documents_so_they_start_sooner():
    docs = {name.split(":")[0]: pretrain_tab.recipe_values(name)["max_docs"] for name in pretrain_tab.RECIPES}
    assert docs["Quick demo"] == docs["Tiny and fast"] == 12_000  # one shared cache for both
    assert docs["Class model"] is docs["Textbook BERT"] is None  # all 25,000 reviews
