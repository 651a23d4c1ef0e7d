"""The Distil tab: the form as a DistillSpec, the teacher picker (the shipped model and the visitor's own
finished BERT runs), clear refusals, the charts and the side-by-side table from fake run files; then a
real tiny distillation started through the tab's own start function, followed to the end, its table
holding both models' guesses and its try-box filling a sentence with both."""
import json
import time

import gradio as gr
import pytest
from browser import kill_runs_under
from test_distill import tiny_bert

from bertlab.app.identity import new_id
from bertlab.app.ui.shared import models
from bertlab.app.ui.training import distill_tab, jobs_ui
from bertlab.checkpoint import save_pretrained
from bertlab.train import speed
from bertlab.train.distill import student_from_teacher
from bertlab.train.runs import Run, write_json_atomic, write_status
from bertlab.train.specs import DistillSpec, PretrainSpec

OWNER, OTHER = new_id("."), new_id(".")  # ids as the server mints them
FORM = dict(teacher=models.DEFAULT, layers=2, steps=300, temperature=2.0, alpha_kl=5.0, alpha_mlm=2.0, alpha_cos=1.0)


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    monkeypatch.setenv("BERTLAB_RUNS_DIR", str(tmp_path / "runs"))  # the model picker's "run: NAME"
    yield tmp_path / "runs"
    kill_runs_under(tmp_path / "runs")  # a failed test leaves nothing training


def plant_run(root, name, model, tok, owner=OWNER, state="finished", kind="pretrain"):
    """A web run folder as the job manager leaves it: spec, job.json with its owner, status, model/."""
    d = root / name
    save_pretrained(model, tok, d / "model")
    Run(d).write_spec(PretrainSpec(preset="tiny") if kind == "pretrain" else DistillSpec())
    write_json_atomic(d / "job.json", {"owner": owner, "pid": None, "kind": kind, "started": time.time()})
    write_status(d, state=state, step=10, total_steps=10, pid=None)
    return d


@pytest.fixture
def teachers(runs_root, vocab_tokenizer):
    """A tiny 4-layer BERT run of OWNER's, one of another visitor's, an unfinished one, and a DistilBERT."""
    t = tiny_bert(vocab_tokenizer).eval()
    plant_run(runs_root, "mine", t, vocab_tokenizer)
    plant_run(runs_root, "theirs", t, vocab_tokenizer, owner=OTHER)
    plant_run(runs_root, "half-done", t, vocab_tokenizer, state="stopped")
    plant_run(runs_root, "a-distilbert", student_from_teacher(t, 2), vocab_tokenizer, kind="distill")
    return t


def args(**kw):
    return {**FORM, **kw}


def test_the_text_counts_teacher_layers_as_the_form_does():
    """Issue 42, item 10: the form said "layers 1, 3 of 1–4" and the text "(0, 2, 4, …)"."""
    from bertlab.train.distill import teacher_layers
    assert [i + 1 for i in teacher_layers(6, 3)] == [1, 3, 5]
    assert "1, 3, 5, …" in distill_tab.EXPLAIN and "0, 2, 4" not in distill_tab.EXPLAIN


def test_the_form_gives_a_distill_spec(runs_root):
    spec = distill_tab.form_spec(**args())
    assert isinstance(spec, DistillSpec) and spec.teacher == "default" and spec.layers == 2 and spec.steps == 300
    assert (spec.temperature, spec.alpha_kl, spec.alpha_mlm, spec.alpha_cos) == (2.0, 5.0, 2.0, 1.0)
    assert spec.eval_every == 30 and spec.eval_early == 100 and spec.threads >= 1 and spec.max_docs == 2000
    spec = distill_tab.form_spec(**args(layers=3.0, steps=20_000, temperature=4, alpha_cos=0))
    assert spec.layers == 3 and spec.alpha_cos == 0.0 and spec.max_docs is None  # every review for a long run


def test_the_teacher_picker_holds_the_visitors_finished_bert_runs(teachers, runs_root):
    assert distill_tab.teacher_choices(OWNER) == [models.DEFAULT, "run: mine"]
    assert distill_tab.teacher_choices(OTHER) == [models.DEFAULT, "run: theirs"]
    assert distill_tab.teacher_choices(None) == [models.DEFAULT]  # a page without its id yet
    spec = distill_tab.form_spec(**args(teacher="run: mine", layers=1))
    assert spec.teacher == str(runs_root / "mine" / "model")
    assert distill_tab.teacher_pick(spec.teacher) == "run: mine" and distill_tab.teacher_pick("default") == models.DEFAULT
    plan = distill_tab.plan_md("run: mine", 2, 300)
    assert "fewer**" in plan and "teacher layers 1, 3 of 1–4" in plan and "min** for 300 steps" in plan


@pytest.mark.parametrize("kw, words", [
    (dict(teacher="run: a-distilbert"), "only a BERT can be the teacher here: run: a-distilbert is a DistilBERT"),
    (dict(teacher="run: nothing-here"), "is not a run with a model"),
    (dict(layers=4), "from 1 to 3 layers (fewer than the teacher's 4), got 4"),
    (dict(layers=0), "from 1 to 3 layers"),
    (dict(layers=1.5), "whole number"),
    (dict(steps=10**6), "over this server's cap of 20,000"),
    (dict(steps=0), "steps must be a whole number from 1"),
    (dict(temperature=0), "temperature must be a positive number"),
    (dict(alpha_kl=0, alpha_mlm=0, alpha_cos=0), "nothing to learn from"),
])
def test_mistakes_are_refused_as_one_line_messages(teachers, kw, words):
    form = args(teacher="run: mine", **kw) if "teacher" not in kw else args(**kw)
    with pytest.raises(gr.Error) as e:
        distill_tab.start(OWNER, "", **form)
    assert words in e.value.message and not e.value.print_exception, e.value.message
    if set(kw) <= {"teacher", "layers", "steps"}:  # the line under the form says these before a start
        assert words in distill_tab.plan_md(form["teacher"], form["layers"], form["steps"])


def test_the_step_cap_comes_from_the_environment(runs_root, monkeypatch):
    monkeypatch.setenv("BERTLAB_MAX_STEPS", "50")
    with pytest.raises(gr.Error, match="cap of 50 .BERTLAB_MAX_STEPS"):
        distill_tab.start(OWNER, "", **args(steps=51))
    monkeypatch.setenv("BERTLAB_MAX_PARAMS", "1000")
    with pytest.raises(gr.Error, match="BERTLAB_MAX_PARAMS"):
        distill_tab.start(OWNER, "", **args(steps=10))
    assert "over this server's cap" in distill_tab.plan_md(models.DEFAULT, 2, 10)


def test_the_estimate_grows_with_steps_and_layers():
    c = models.get(models.DEFAULT)[0].config
    short, long_, deep = (distill_tab.estimate_s(c, n, s, 1, machine=speed.REFERENCE_RATE)  # the reference machine
                          for n, s in ((2, 300, ), (2, 3000), (3, 3000)))
    assert 60 < short < 20 * 60 and long_ > 5 * short and deep > long_


def fake_metrics():
    rows = [{"step": s, "split": "train", "loss": 9 - s / 50, "kl": 3 - s / 100, "mlm": 4.0, "cos": 0.2, "lr": 5e-4,
             "tokens_per_s": 900.0} for s in (10, 20, 30)]
    return rows + [{"step": s, "split": "eval", "kl_loss": 2.5 - s / 100, "mlm_loss": 4.0, "cos_loss": 0.2,
                    "student_acc": 0.2 + s / 1000, "teacher_acc": 0.3, "agreement": 0.5 + s / 100, "mlm_acc": 0.2}
                   for s in (10, 30)]


def test_the_charts_show_kl_accuracy_and_agreement():
    kl, acc = distill_tab.figures({"run": fake_metrics()})
    assert {t.name for t in kl.data} == {"training batches", "held-out"}
    assert [t.name for t in acc.data] == ["teacher", "student", "student's top guess = teacher's"]
    assert list(acc.data[2].y) == [0.6, 0.8] and acc.layout.yaxis.tickformat == ".3~%"
    assert len({t.line.color for t in acc.data}) == 3 and acc.data[0].line.color == "#6b7280"  # the teacher grey
    kl2, acc2 = distill_tab.figures({"a": fake_metrics(), "b": fake_metrics()[:3]})  # an overlay: dashes apart
    assert {t.name for t in acc2.data} == {"a: teacher", "a: student", "a: student's top guess = teacher's"}
    assert {t.line.dash for t in kl2.data} == {"solid", "dash"}
    note = distill_tab.figures({"run": []})
    assert len(note) == 1 and "first points" in note[0].layout.annotations[0].text


def test_the_table_puts_both_models_side_by_side(tmp_path):
    assert distill_tab.side_by_side(tmp_path) == (distill_tab.HEADERS, [])
    g = {"the acting was [MASK] .": {"teacher": ["great", "good", "bad"], "student": ["good", "great", "."]},
         "i would [MASK] recommend this film .": {"teacher": ["not", "really", "never"], "student": ["not", "i", "it"]}}
    (tmp_path / "probes.jsonl").write_text(json.dumps({"step": 10, "guesses": {}}) + "\n" +
                                           json.dumps({"step": 50, "guesses": g}) + "\n" + '{"step": 60, "gue')
    headers, rows = distill_tab.side_by_side(tmp_path)  # the last line is still being written
    assert headers == ["sentence", "teacher's top 3", "student's top 3 (step 50)"]
    assert rows == [["the acting was [MASK] .", "great / good / bad", "good / great / ."],
                    ["i would [MASK] recommend this film .", "not / really / never", "not / i / it"]]


def test_a_page_reopens_its_last_distillation_and_only_its_owner_stops_it(teachers, runs_root, vocab_tokenizer):
    plant_run(runs_root, "old-distill", student_from_teacher(teachers, 2), vocab_tokenizer, kind="distill")
    reopened = jobs_ui.reopen("distill")(OWNER, None)
    assert reopened[0]["value"] == "old-distill"
    assert jobs_ui.reopen("distill")(OTHER, None)[0].get("value") is None
    with pytest.raises(gr.Error, match="No run selected"):
        distill_tab.stop(OWNER, None, [])
    with pytest.raises(gr.Error, match="not running"):
        distill_tab.stop(OWNER, "old-distill", [])
    with pytest.raises(gr.Error, match="another browser"):
        distill_tab.stop(OTHER, "old-distill", [])
    with pytest.raises(gr.Error, match="Pick a distillation"):
        distill_tab.try_it(None, "the film was [MASK] .")


def follow(name, timeout=300):
    t0, st = time.time(), None
    while time.time() - t0 < timeout:
        st = jobs_ui.status(name)
        if st and st["state"] in jobs_ui.ENDED:
            return st
        time.sleep(1)
    raise AssertionError(f"{name} did not end in {timeout} s: {st}")


@pytest.mark.slow
def test_a_tiny_distillation_from_the_tab_shows_both_models_guesses(teachers, runs_root, small_corpus, monkeypatch):
    monkeypatch.setattr(distill_tab, "BASE", dict(corpus=str(small_corpus), batch_size=8, max_len=24, eval_batches=2))
    out = distill_tab.start(OWNER, "tiny", **args(teacher="run: mine", layers=2, steps=20))
    assert out[0].value == "tiny" and ("tiny", "tiny") in out[0].choices and "tiny" in out[1] and len(out) == 8
    with pytest.raises(gr.Error, match="another browser"):
        distill_tab.stop(OTHER, "tiny", [])
    st = follow("tiny")
    assert st["state"] == "finished", st.get("log_tail")
    status, kl, acc, line, table, log, timer = distill_tab.view("tiny", [], OWNER)
    assert "finished" in status and "started in this browser" in status and kl.visible and acc.visible
    assert "a student of **2 layers**, started from teacher layers 1, 3" in line
    assert table.value["headers"][2] == "student's top 3 (step 20)" and len(table.value["data"]) == 3
    for sentence, teacher, student in table.value["data"]:
        assert "[MASK]" in sentence and teacher.count(" / ") == 2 and student.count(" / ") == 2
    tried = distill_tab.try_it("tiny", "the film was [MASK] and the plot was [MASK] .")
    rows = tried.value["data"]
    assert len(rows) == 10 and rows[0][0] == "[MASK] 1 · #1" and all("%)" in r[1] and "%)" in r[2] for r in rows)
    with pytest.raises(gr.Error, match="no .MASK."):
        distill_tab.try_it("tiny", "no blank here .")
    assert distill_tab.teacher_choices(OWNER) == [models.DEFAULT, "run: mine"]  # a student is no teacher


@pytest.mark.slow
def test_a_finished_distillation_resumes_to_more_steps_for_its_owner_only(teachers, runs_root, small_corpus,
                                                                          monkeypatch):
    monkeypatch.setattr(distill_tab, "BASE", dict(corpus=str(small_corpus), batch_size=8, max_len=24, eval_batches=2))
    with pytest.raises(gr.Error, match="No run selected"):
        distill_tab.resume(OWNER, None, 20, [])
    distill_tab.start(OWNER, "short", **args(teacher="run: mine", layers=2, steps=10))
    assert follow("short")["state"] == "finished"
    with pytest.raises(gr.Error, match="another browser"):
        distill_tab.resume(OTHER, "short", 20, [])
    with pytest.raises(gr.Error, match="over this server's cap"):
        distill_tab.resume(OWNER, "short", 10**9, [])
    status = distill_tab.resume(OWNER, "short", 20, [])[0]
    assert "short" in status
    st = follow("short")
    assert st["state"] == "finished" and st["step"] == 20, st.get("log_tail")
    log = (runs_root / "short" / "log.txt").read_text()
    assert "--- resumed" in log and "steps 10 -> 20" in log and "at step 10" in log  # from its checkpoint
    assert distill_tab.view("short", [], OWNER)[4].value["headers"][2] == "student's top 3 (step 20)"
