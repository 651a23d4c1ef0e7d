"""The Race tab: the form as a RaceSpec, the estimate said before a start, clear refusals, the charts of
two recipes, the table and its reading; then real tiny races started through the tab's own start
function: followed to the end, stopped by their owner only."""
import json
import time

import gradio as gr
import pytest
from browser import kill_runs_under
from test_race import write_task

from bertlab.app.identity import new_id
from bertlab.app.ui.training import jobs_ui, race_tab
from bertlab.app.ui.training.train_charts import RACE_STYLE, race_figures
from bertlab.train import speed
from bertlab.train.race import estimate_minutes, table_md, table_row
from bertlab.train.runs import Run, write_json_atomic, write_status
from bertlab.train.specs import RECIPES, RaceSpec

OWNER, OTHER = new_id("."), new_id(".")  # ids as the server mints them


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    yield tmp_path / "runs"
    kill_runs_under(tmp_path / "runs")  # a failed test leaves nothing training


def fake_rows(name: str, n: int = 5) -> list[dict]:
    """Held-out rows as a race's recipe writes them (ELECTRA's with its discriminator's AUC), and a train row."""
    rows = [{"step": 10, "time": 4.0, "split": "train", "loss": 7.0, "mlm_acc": 0.02}]
    for k in range(n):
        r = {"step": 80 * (k + 1), "time": 36.0 * (k + 1) * (1.3 if name == "electra" else 1), "split": "eval",
             "mlm_acc": 0.04 + 0.05 * k * (0.7 if name == "electra" else 1), "mlm_loss": 7 - k, "unigram_acc": 0.041}
        if name == "electra":
            r["rtd_auc"] = 0.6 + 0.06 * k
        rows.append(r)
    return rows


FLOPS = {"mlm": 2.0e10, "electra": 2.6e10}


def fake_race(root, name="fake-race", recipes=("mlm", "electra"), seeds=2, accs=((0.80, 0.78), (0.84, 0.83)),
              line: dict | None = None):
    """A finished race folder as race.race leaves it (spec, recipe runs' metrics, parts, results, table,
    status), with made-up numbers: for the view and the browser test, without training anything.
    `line`: what each fine-tune says of the task ({"majority": share, "val_examples": n})."""
    d = root / name
    spec = RaceSpec(recipes=recipes, minutes=3, seeds=seeds)
    Run(d).write_spec(spec)
    rows = []
    for n, acc in zip(recipes, accs):
        (d / "runs" / n).mkdir(parents=True)
        (d / "runs" / n / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fake_rows(n)))
        part = {"recipe": n, "label": RECIPES[n][0], "arch": RECIPES[n][1]["arch"], "steps": 400, "minutes": 3.0,
                "params": 11_200_000, "generator_params": 2_100_000 if n == "electra" else None,
                "flops_per_step": FLOPS.get(n, 2e10), "mlm_acc": fake_rows(n)[-1]["mlm_acc"], "state": "finished",
                "latency_ms": 4.2}
        (d / "parts").mkdir(exist_ok=True)
        write_json_atomic(d / "parts" / f"{n}.json", part)
        rows.append(table_row(part, [{"accuracy": a, **(line or {})} for a in acc[:seeds]]))
    res = {"state": "finished", "rows": rows, "minutes_total": 11.0, "estimate_minutes": estimate_minutes(spec),
           "threads": 1, "side_by_side": False, "task": "sentiment", "seeds": seeds}
    write_json_atomic(d / "results.json", res)
    (d / "table.md").write_text(table_md(res))
    write_status(d, state="finished", message="finished in 11 min", started=time.time() - 660, pid=None)
    return d


# ---- the form ------------------------------------------------------------------------------------

def test_a_race_that_learned_nothing_names_no_winner():
    """Issue 42, item 1: both recipes at 48.7 %, under always answering the commonest label, and the page
    said "mlm fine-tunes best". A verdict needs the gap to pass the noise and the best to pass the line."""
    def res(accs, seeds=1, line=0.509, n=1000):
        rows = [table_row({"recipe": r}, [{"accuracy": a, "majority": line, "val_examples": n} for a in acc])
                for r, acc in zip(("mlm", "electra"), accs)]
        return {"rows": rows, "task": "sentiment", "seeds": seeds}
    said = race_tab.reading_md(res([[0.487], [0.487]]))
    assert said.startswith("**No winner:**") and "line to beat" in said and "50.9%" in said and "fine-tunes best" not in said
    said = race_tab.reading_md(res([[0.62], [0.60]]))  # 2 points apart on 1,000 examples: ±3.0 by sampling alone
    assert said.startswith("**No winner:**") and "±3.0 (the sampling error of 1,000 held-out examples)" in said
    said = race_tab.reading_md(res([[0.72], [0.61]]))
    assert said.startswith("**Reading:**")
    assert "**mlm** fine-tunes best" in said and "leads electra by 11.0 points, more than the noise" in said
    assert "the line to beat is 50.9%" in said
    said = race_tab.reading_md(res([[0.72, 0.60], [0.66, 0.64]], seeds=2, n=20_000))
    assert said.startswith("**No winner:**") and "seeds' spread" in said  # 8.5 points of spread, 1 of gap
    md = table_md({"rows": [table_row({"recipe": "mlm", "label": "x", "params": 1e6, "minutes": 1, "steps": 10,
                                       "mlm_acc": None, "arch": "bert", "latency_ms": 1.0},
                                      [{"accuracy": 0.6, "majority": 0.509, "val_examples": 1000}])],
                   "task": "sentiment", "seeds": 1, "threads": 2, "side_by_side": False, "minutes_total": 3,
                   "estimate_minutes": 3})
    assert "Line to beat: always answering the commonest label scores 50.9% on the 1,000 held-out examples." in md


def test_the_form_gives_a_race_spec(runs_root, monkeypatch):
    spec = race_tab.form_spec(["mlm", "electra"], 3, False, 2)
    assert (spec.recipes, spec.minutes, spec.side_by_side, spec.seeds) == (("mlm", "electra"), 3.0, False, 2)
    assert spec.threads == race_tab.limits().job_threads and spec.corpus == "imdb" and spec.task == "sentiment"
    # an API caller may send the labels the check boxes show, and minutes as text
    assert race_tab.form_spec([race_tab.LABELS["bert"], "static"], "5", False, 1).recipes == ("bert", "static")
    monkeypatch.setenv("BERTLAB_JOB_THREADS", "4")
    side = race_tab.form_spec(["mlm", "electra", "roberta"], 10, True, 3)
    assert side.side_by_side and side.threads == 4 and side.seeds == 3


def test_the_estimate_is_said_before_the_start(monkeypatch):
    first = race_tab.estimate_md(["mlm", "electra"], 3, False, 1)  # the form as a new visitor finds it
    total = estimate_minutes(RaceSpec(recipes=("mlm", "electra"), minutes=3))  # at this machine's measured speed
    assert first.startswith(f"**About {round(total)} minutes**"), first
    assert estimate_minutes(RaceSpec(recipes=("mlm", "electra"), minutes=3), speed.REFERENCE_RATE) <= 15
    assert "6 min of pre-training (2 recipes × 3 min, one after another)" in first and "1 seed each" in first
    monkeypatch.setenv("BERTLAB_JOB_THREADS", "2")
    side = race_tab.estimate_md(["mlm", "electra"], 3, True, 2)
    assert "3 min of pre-training (2 recipes side by side, one CPU thread each)" in side and "2 seeds each" in side
    assert race_tab.estimate_md(["mlm"], 3, False, 1) == "⚠️ pick at least two recipes to race"


@pytest.mark.parametrize("form, threads, words", [
    ((["mlm"], 3, False, 1), None, "at least two recipes"),
    (([], 3, False, 1), None, "at least two recipes"),
    ((["mlm", "gpt"], 3, False, 1), None, "unknown recipe 'gpt'"),
    ((["mlm", "electra"], 4, False, 1), None, "one of 3, 5, 10, 20, got 4"),
    ((["mlm", "electra"], "lots", False, 1), None, "one of 3, 5, 10, 20"),
    ((["mlm", "electra"], None, False, 1), None, "one of 3, 5, 10, 20"),
    ((["mlm", "electra"], 3, False, 4), None, "seeds must be one of 1, 2, 3"),
    ((["mlm", "electra"], 3, False, 1.5), None, "seeds must be one of 1, 2, 3"),
    ((["mlm", "electra"], 3, True, 1), "1", "only one thread (BERTLAB_JOB_THREADS): untick 'side by side'"),
    ((["mlm", "electra", "albert"], 3, True, 1), "2", "at most 2 recipes side by side"),
])
def test_mistakes_are_refused_in_one_line(runs_root, monkeypatch, form, threads, words):
    if threads:
        monkeypatch.setenv("BERTLAB_JOB_THREADS", threads)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        race_tab.form_spec(*form)
    assert race_tab.estimate_md(*form).startswith("⚠️") and words in race_tab.estimate_md(*form)
    with pytest.raises(gr.Error) as e:  # the Start button: a message on the page, no traceback in the log
        race_tab.start(OWNER, "r1", *form)
    assert words in e.value.message and e.value.print_exception is False
    assert not (runs_root / "r1").exists()


def test_other_refusals_are_messages_too(runs_root):
    for call, words in ((lambda: race_tab.start(OWNER, "../up", ["mlm", "electra"], 3, False, 1), "bad run name"),
                        (lambda: race_tab.start(None, "r2", ["mlm", "electra"], 3, False, 1), "no browser id"),
                        (lambda: race_tab.stop(OWNER, None, []), "No race selected"),
                        (lambda: race_tab.stop(OWNER, "nothing-here", []), "not running"),
                        (lambda: race_tab.resume(OWNER, "nothing-here", []), "nothing to resume")):
        with pytest.raises(gr.Error) as e:
            call()
        assert words in e.value.message and e.value.print_exception is False


# ---- charts, table, reading ----------------------------------------------------------------------

def test_the_charts_show_every_recipe_against_minutes_and_flops():
    by_time, by_flops = race_figures({"mlm": fake_rows("mlm"), "electra": fake_rows("electra")}, FLOPS)
    for fig in (by_time, by_flops):
        names = [t.name for t in fig.data]
        assert names == ["mlm", "electra (its generator)", "electra: replaced-token AUC"], names
        mlm, gen, auc = fig.data
        assert mlm.line.color == RACE_STYLE["mlm"][0] != gen.line.color == auc.line.color == RACE_STYLE["electra"][0]
        assert mlm.marker.symbol != gen.marker.symbol  # told apart without colour too
        assert auc.yaxis == "y2" and mlm.yaxis == gen.yaxis == "y" and auc.showlegend is False  # its own panel
        assert gen.legendgroup == auc.legendgroup == "electra"  # one legend click hides both
        assert list(mlm.y) == [r["mlm_acc"] for r in fake_rows("mlm") if r["split"] == "eval"]  # held-out only
        assert fig.layout.legend.orientation == "h" and fig.layout.height >= 700
    assert list(by_time.data[0].x) == [r["time"] / 60 for r in fake_rows("mlm")[1:]]
    assert list(by_flops.data[1].x) == [r["step"] * FLOPS["electra"] for r in fake_rows("electra")[1:]]
    assert "minutes" in by_time.layout.xaxis2.title.text and "FLOPs" in by_flops.layout.xaxis2.title.text
    # BERT alone: one panel; a recipe not yet sized is left out of the FLOPs chart, and said so when none is
    by_time, by_flops = race_figures({"mlm": fake_rows("mlm"), "static": fake_rows("static")}, {"mlm": 1e9})
    assert len(by_time.data) == 2 and [t.name for t in by_flops.data] == ["mlm"] and by_time.layout.height < 700
    assert by_time.data[1].line.color == RACE_STYLE["static"][0]
    none = race_figures({"mlm": fake_rows("mlm")}, {})[1]
    assert not none.data and "FLOPs of a recipe's step" in none.layout.annotations[0].text
    empty = race_figures({"mlm": [], "electra": []})
    assert all(not f.data and "first evaluation" in f.layout.annotations[0].text for f in empty)
    assert "start a race" in race_figures({})[0].layout.annotations[0].text


def test_a_finished_race_shows_its_table_and_a_reading(runs_root):
    fake_race(runs_root)
    status, by_time, by_flops, table, note, reading, log, timer = race_tab.view("fake-race", [], OWNER)
    assert "finished" in status and "ran 11 min" in status and "width:100.0%" in status
    assert len(by_time.data) == 3 and len(by_flops.data) == 3
    for fig in (by_time, by_flops):  # the line every recipe must leave, drawn on both (issue 42, item 1)
        assert any(a.text == "unigram guess 4.1%" for a in fig.layout.annotations)
    assert table.visible and table.headers[0] == "recipe" and "sentiment accuracy (2 seeds)" in table.headers
    rows = table.value["data"]  # the command line's table, cell for cell
    assert [r[0] for r in rows] == ["mlm", "electra"]  # as the charts' legend and the form name them
    col = {h.split(" (")[0]: i for i, h in enumerate(table.headers)}
    assert rows[1][col["parameters"]] == "11.20 M (+2.10 M generator)" and len(rows[0]) == len(table.headers)
    assert rows[1][col["sentiment accuracy"]] == "83.5% ± 0.7%" and rows[0][col["steps"]] == "400"
    assert note.startswith("Pre-trained one after another") and "|" not in note
    assert reading.startswith("**Reading:**") and "**electra** fine-tunes best on sentiment (83.5%)" in reading
    assert "leads mlm by 4.5 points, more than the noise (±1.4 points, the seeds' spread)" in reading
    assert timer.active is False
    close = fake_race(runs_root, "close", accs=((0.80, 0.70), (0.81, 0.79)))
    said = race_tab.reading_md(json.loads((close / "results.json").read_text()))
    assert said.startswith("**No winner:**") and "within their noise of each other" in said and "seeds' spread" in said
    one = fake_race(runs_root, "one", seeds=1)
    assert "may be luck" in race_tab.reading_md(json.loads((one / "results.json").read_text()))
    assert race_tab.reading_md(None) == "" and "No run selected" in race_tab.view(None, [], OWNER)[0]
    (close / "spec.json").write_text('{"kind": "race", "minutes": -1}')  # a spec that does not read: no crash
    assert race_tab.race_spec("close") is None and race_tab.view("close", [], OWNER)[1].data == ()
    # a race stopped after its first recipe: what is done so far, and how to get the table
    (one / "results.json").unlink()
    (one / "parts" / "electra.json").unlink()
    write_status(one, state="stopped", message="stopped while pre-training electra: resume to go on")
    _, _, _, table, note, reading, *_ = race_tab.view("one", [], OWNER)
    assert not table.visible and reading == ""
    assert "once the race is resumed" in note and "**mlm** pre-trained: 400 steps in 3.0 min" in note


# ---- real tiny races, through the tab -----------------------------------------------------------

@pytest.fixture
def tiny_form(monkeypatch, small_corpus, tmp_path):
    """The tab's form as it is, on a tiny race: test_race.py's settings (the form offers no corpus or task)."""
    monkeypatch.setattr(race_tab, "BASE", dict(preset="tiny", corpus=str(small_corpus), max_docs=None, batch_size=8,
                                               task=str(write_task(tmp_path / "task.csv"))))
    monkeypatch.setattr(race_tab, "MINUTES", (0.04, 0.5))
    monkeypatch.setenv("BERTLAB_JOB_THREADS", "1")


def follow(name, owner, until, timeout=420):
    """Tick the view as the page's timer does until `until(status)`; every status line seen."""
    said, t0 = [], time.time()
    while time.time() - t0 < timeout:
        out = race_tab.view(name, [], owner)
        said.append(out[0])
        st = jobs_ui.status(name)
        if until(st):  # the run may have ended after that tick read it: the page's timer ticks once more
            out = race_tab.view(name, [], owner)
            return out, said + [out[0]], st
        time.sleep(1.0)
    raise AssertionError(f"{name} did not get there in {timeout} s: {said[-3:]} {jobs_ui.status(name)}")


@pytest.mark.slow
def test_a_tiny_race_started_from_the_tab_runs_to_its_table(runs_root, tiny_form):
    t0 = time.time()
    watch, status, *_ = race_tab.start(OWNER, "tiny", ["mlm", "electra"], 0.04, False, 1)
    assert watch.value == "tiny" and ("tiny", "tiny") in watch.choices and "started in this browser" in status
    with pytest.raises(gr.Error, match="another browser"):  # Stop: the owner only
        race_tab.stop(OTHER, "tiny", [])
    out, said, st = follow("tiny", OWNER, lambda st: not jobs_ui.is_live(st))
    assert st["state"] == "finished", (st, st.get("log_tail"))
    assert any("running" in s for s in said)
    status, by_time, by_flops, table, note, reading, log, timer = out
    assert {t.legendgroup for t in by_time.data} == {t.legendgroup for t in by_flops.data} == {"mlm", "electra"}
    assert any(t.name == "electra: replaced-token AUC" for t in by_time.data)
    # a race of seconds learns little: on a handful of held-out sentences its verdict is usually "no winner"
    assert [r[0] for r in table.value["data"]] == ["mlm", "electra"] and reading.startswith(("**Reading:**", "**No winner:**"))
    assert timer.active is False and "width:100.0%" in status
    d = runs_root / "tiny"
    spec = Run(d).spec()
    assert (spec.preset, spec.recipes, spec.threads, spec.side_by_side) == ("tiny", ("mlm", "electra"), 1, False)
    for n in spec.recipes:  # the FLOPs the chart computes before a recipe ends are the race's own
        part = json.loads((d / "parts" / f"{n}.json").read_text())
        race_tab._flops.put(str(d / "runs" / n), None)
        (d / "parts" / f"{n}.json").rename(d / f"{n}.json")
        assert race_tab.recipe_flops(d, n) == part["flops_per_step"], n
        (d / f"{n}.json").rename(d / "parts" / f"{n}.json")
    # a reloaded page re-opens this browser's last race, finished too; another browser's page does not
    assert jobs_ui.reopen("race")(OWNER, None)[0]["value"] == "tiny"
    assert "value" not in jobs_ui.reopen("race")(OTHER, None)[0]
    print(f"tiny race through the tab: {time.time() - t0:.0f} s")


@pytest.mark.slow
def test_a_race_stops_for_its_owner_and_resumes(runs_root, tiny_form):
    race_tab.start(OWNER, "halt", ["mlm", "static"], 0.5, False, 1)
    follow("halt", OWNER, lambda st: st["state"] == "running" and "pre-training" in st.get("message", ""))
    with pytest.raises(gr.Error, match="another browser"):
        race_tab.stop(OTHER, "halt", [])
    assert jobs_ui.status("halt")["state"] == "running"
    race_tab.stop(OWNER, "halt", [])
    out, _, st = follow("halt", OWNER, lambda st: not jobs_ui.is_live(st), timeout=120)
    assert st["state"] == "stopped" and "stopped while" in st["message"], st
    assert "once the race is resumed" in out[4] and out[5] == ""  # stopped, not run to its end
    race_tab.resume(OWNER, "halt", [])  # goes on: live again, then stopped again for the next test's sake
    follow("halt", OWNER, lambda st: st["state"] == "running", timeout=120)
    race_tab.stop(OWNER, "halt", [])
    follow("halt", OWNER, lambda st: not jobs_ui.is_live(st), timeout=120)
