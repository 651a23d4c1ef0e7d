"""The class view: every student's pre-training runs ranked by held-out accuracy, names students put on
their runs (their own only, shown as typed, never as HTML), and the teacher's clearing of the class's
runs (the server's token only, wrong guesses rate-limited, web runs only, nothing outside the runs
folder). Run folders are written here as the trainer and the job manager write them."""
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, serving, shot

from bertlab.app import classroom, jobs
from bertlab.app.identity import new_id
from bertlab.app.jobs import JobManager
from bertlab.train import runs
from bertlab.train.specs import FinetuneSpec, PretrainSpec

TOKEN = "chalk-and-talk-2026"
ANN, BOB, CAT, EVE = (new_id(".") for _ in range(4))  # ids as the server mints them


def pretrain_run(root: Path, name: str, owner: str | None, accs: list[float], state: str = "finished",
                 spec=None, pid: int = 1, returncode: int | None = 0) -> Path:
    """A pre-training run as runs.py leaves it: spec, status, train rows every 5 steps and an
    evaluation every 10 (held-out accuracy `accs`), and job.json when the web started it."""
    d = root / name
    runs.Run(d).write_spec(spec or PretrainSpec(steps=10 * max(1, len(accs))))
    for i, acc in enumerate(accs, 1):
        for s, a in ((10 * i - 5, (acc + (accs[i - 2] if i > 1 else 0.0)) / 2), (10 * i, acc)):
            runs.append_metrics(d, {"step": s, "time": s / 10, "lr": 1e-3, "loss": 9 - a * 5, "mlm_loss": 7 - a * 5,
                                    "mlm_acc": a * 0.9, "split": "train", "total_steps": 10 * len(accs)})
        runs.append_metrics(d, {"step": 10 * i, "time": i, "split": "eval", "mlm_loss": 7 - acc * 4, "mlm_acc": acc,
                                "unigram_acc": 0.04})
    runs.write_status(d, state=state, step=10 * len(accs), total_steps=10 * len(accs), pid=pid)
    if owner is not None:
        runs.write_json_atomic(d / jobs.JOB, {"pid": pid, "owner": owner, "started": time.time(),
                                              "returncode": returncode, "kind": "pretrain"})
    return d


@pytest.fixture
def mgr(tmp_path, monkeypatch):
    m = JobManager(tmp_path / "runs")
    monkeypatch.setattr(jobs, "_default", m)
    return m


def test_every_students_runs_are_listed_ranked_and_tell_no_secrets(mgr):
    root = mgr.root
    pretrain_run(root, "ann-1", ANN, [0.05, 0.20])
    pretrain_run(root, "ann-2", ANN, [0.05, 0.30, 0.35])
    pretrain_run(root, "bob-1", BOB, [0.10, 0.25])
    pretrain_run(root, "cli-1", None, [0.40])
    pretrain_run(root, "new-1", CAT, [])  # not evaluated yet: listed last, unranked
    ft = root / "ft-1"
    runs.Run(ft).write_spec(FinetuneSpec())
    runs.write_status(ft, state="finished", step=1, total_steps=1, pid=1)
    classroom.name_run(mgr, "ann-1", ANN, "  Ada   Lovelace ")
    classroom.name_run(mgr, "bob-1", BOB, "<b>Bob</b> & <script>x</script>")
    assert sorted(classroom.name_my_runs(mgr, ANN, "Ada Lovelace")) == ["ann-1", "ann-2"]
    rows = classroom.class_runs(mgr, fresh=True)
    assert [r["run"] for r in rows] == ["cli-1", "ann-2", "bob-1", "ann-1", "new-1"]  # the fine-tune is no pre-training
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, None]
    assert [r["held_out_acc"] for r in rows][:4] == [0.40, 0.35, 0.25, 0.20]
    by = {r["run"]: r for r in rows}
    assert by["ann-1"]["student"] == by["ann-2"]["student"] == "Ada Lovelace"
    assert by["bob-1"]["student"] == "<b>Bob</b> & <script>x</script>" and by["cli-1"]["student"] == ""
    assert by["ann-1"]["group"] == by["ann-2"]["group"] != by["bob-1"]["group"] != by["cli-1"]["group"]
    assert by["ann-2"]["curves"]["held_out_acc"] == [(10, 0.05), (20, 0.30), (30, 0.35)]
    assert by["ann-2"]["curves"]["train_loss"][-1] == (30, 7 - 0.35 * 5)  # the masked-word loss, not "loss"
    text = json.dumps(rows)
    for secret in (ANN, BOB, CAT, str(root), str(root.parent)):
        assert secret not in text

    from bertlab.app.ui.training import class_view
    fig, table = class_view.view()
    names = [t.name for t in fig.data if t.showlegend]
    assert "&lt;b&gt;Bob&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt; · bob-1" in names and "<b>" not in str(names)
    assert "(no name) · cli-1" in names and len(fig.data) == 2 * 4  # new-1 has no points yet: not drawn
    color = {t.legendgroup: t.line.color for t in fig.data}
    assert color["ann-1"] == color["ann-2"] != color["bob-1"] != color["cli-1"]  # one colour per student
    assert table[0][:4] == [1, "(no name)", "cli-1", "40.0%"]


def test_bounds_hold(mgr):
    for i in range(5):
        pretrain_run(mgr.root, f"long-{i}", f"student-{i}-browser-id", [min(0.5, k / 1000) for k in range(1, 401)])
    rows = classroom.class_runs(mgr, max_runs=3, max_points=50, fresh=True)
    assert len(rows) == 3
    for r in rows:
        acc, loss = r["curves"]["held_out_acc"], r["curves"]["train_loss"]
        assert len(acc) == len(loss) == 50 and acc[0][0] == 10 and acc[-1][0] == 4000 and loss[-1][0] == 4000
    assert len(classroom.class_runs(mgr, fresh=True)) == 5 and classroom.MAX_RUNS <= 100
    with pytest.raises(ValueError, match="at most 40"):
        classroom.check_display_name("x" * 41)
    for bad in ("a\x00b", "right\u202eleft", "zero\u200bwidth"):
        with pytest.raises(ValueError, match="cannot be shown"):
            classroom.check_display_name(bad)
    assert classroom.check_display_name("x" * 40) == "x" * 40 and classroom.check_display_name(None) == ""
    assert classroom.check_display_name(" a\tb\n c ") == "a b c"


def test_only_a_runs_owner_names_it_and_a_queued_run_gets_its_name_when_it_starts(mgr, monkeypatch):
    pretrain_run(mgr.root, "ann-1", ANN, [0.1])
    pretrain_run(mgr.root, "cli-1", None, [0.1])
    with pytest.raises(PermissionError, match="another session"):
        classroom.name_run(mgr, "ann-1", BOB, "Not Ann")
    with pytest.raises(PermissionError, match="read-only"):
        classroom.name_run(mgr, "cli-1", BOB, "Mine now")
    with pytest.raises(ValueError, match="no run"):
        classroom.name_run(mgr, "nobody", BOB, "x")
    with pytest.raises(ValueError, match="bad run name"):
        classroom.name_run(mgr, "../ann-1", ANN, "x")
    assert not (mgr.root / "ann-1" / classroom.STUDENT).exists() and not (mgr.root / "cli-1" / classroom.STUDENT).exists()
    assert classroom.name_my_runs(mgr, BOB, "Bob") == []  # nothing of bob's: nothing named
    classroom.name_run(mgr, "ann-1", jobs.TEACHER, "Ann (by the teacher)")
    assert classroom.display_name(mgr.root / "ann-1") == "Ann (by the teacher)"

    def launch(job):  # a job that "trains" until told otherwise, without a process
        (mgr.root / job.name).mkdir(parents=True, exist_ok=True)
        runs.write_json_atomic(mgr.root / job.name / jobs.JOB, {"owner": job.owner, "started": time.time()})
        job.proc, job.state, job.position = SimpleNamespace(poll=lambda: None, returncode=None), "running", None
    monkeypatch.setattr(mgr, "_launch", launch)
    monkeypatch.setattr(mgr, "_running_pid", lambda name: None)
    first = mgr.start("bob-a", PretrainSpec(steps=5), owner=BOB)
    assert mgr.start("bob-b", PretrainSpec(steps=5), owner=BOB).state == "queued"
    with pytest.raises(PermissionError, match="another session"):
        classroom.name_run(mgr, "bob-b", ANN, "Ann")
    classroom.name_run(mgr, "bob-b", BOB, "Bob")
    assert not (mgr.root / "bob-b").exists()  # a queued run has no folder: its name waits
    first.proc = SimpleNamespace(poll=lambda: 0, returncode=0)
    mgr.poll()  # bob-a ended: bob-b starts
    classroom.class_runs(mgr, fresh=True)
    assert classroom.display_name(mgr.root / "bob-b") == "Bob" and not classroom._pending


def test_the_token_is_checked_and_wrong_guesses_wait_longer_each_time(monkeypatch):
    now = [1000.0]
    guard = classroom.Guard(free=3, max_delay_s=60, window_s=600, clock=lambda: now[0])
    monkeypatch.delenv("BERTLAB_TEACHER_TOKEN", raising=False)
    with pytest.raises(ValueError, match="off on this server"):
        classroom.check_token(TOKEN, "a", guard)
    monkeypatch.setenv("BERTLAB_TEACHER_TOKEN", TOKEN)
    classroom.check_token(TOKEN, "a", guard)
    delays = []
    for wrong in ("", None, 12345, TOKEN[:-1], TOKEN + "x", "é" * 300):
        with pytest.raises(classroom.WrongToken, match="not this server's") as e:
            classroom.check_token(wrong, "b", guard)
        delays.append(e.value.delay)
        now[0] += 1
    assert delays == [0, 0, 0, 1, 2, 4]  # three free, then doubling
    classroom.check_token(TOKEN, "b", guard)  # the right token is never refused: no lock-out
    with pytest.raises(classroom.WrongToken) as e:
        classroom.check_token("guess", "c", guard)
    assert e.value.delay == 0  # another address pays nothing for b's guesses
    now[0] += 601
    with pytest.raises(classroom.WrongToken) as e:
        classroom.check_token("guess", "b", guard)
    assert e.value.delay == 0  # old failures age out


def test_clearing_stops_and_deletes_every_web_run_and_nothing_else(mgr, tmp_path, monkeypatch):
    root = mgr.root
    pretrain_run(root, "ann-1", ANN, [0.2])
    pretrain_run(root, "bob-1", BOB, [0.3])
    pretrain_run(root, "cli-1", None, [0.4])
    outside = pretrain_run(tmp_path / "elsewhere", "not-a-class-run", ANN, [0.5])  # looks like a run, lies outside
    (root / "link-run").symlink_to(outside, target_is_directory=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "bertlab"], start_new_session=True)
    try:
        pretrain_run(root, "cat-live", CAT, [0.1], state="running", pid=live.pid, returncode=None)
        mgr = JobManager(root)  # a restarted server adopts the live job
        monkeypatch.setattr(jobs, "_default", mgr)
        queued = mgr.start("eve-q", PretrainSpec(steps=5), owner=EVE)  # the one slot is cat's
        assert queued.state == "queued" and mgr.status("cat-live")["alive"]
        out = classroom.clear_class(mgr, kill_timeout=5)
        assert live.wait(timeout=10) is not None
    finally:
        live.kill()
    assert sorted(out["removed"]) == ["ann-1", "bob-1", "cat-live", "eve-q"]
    assert out["stopped"] == 2 and out["kept"] == 1 and list(out["failed"]) == ["link-run"]
    assert sorted(p.name for p in root.iterdir()) == ["cli-1", "link-run"]
    assert (outside / runs.SPEC).exists() and (outside / jobs.JOB).exists()  # nothing followed through the link
    assert mgr.status("eve-q")["state"] == "unknown"  # it left the queue: it will not start later
    mgr.poll()
    assert not any(p.name == "eve-q" for p in root.iterdir())


def _students(root: Path) -> None:
    """Three students' runs (one named in HTML), a stranger with none, a command-line run."""
    for name, owner, accs, student in (("ada-1", ANN, [0.04, 0.12, 0.22, 0.31], "Ada"),
                                       ("bob-1", BOB, [0.04, 0.09, 0.18, 0.26, 0.29], "<i>Bob</i>"),
                                       ("cy-1", CAT, [0.04, 0.07, 0.15], "Cy Young"),
                                       ("cli-1", None, [0.04, 0.1], None)):
        d = pretrain_run(root, name, owner, accs)
        if student:
            runs.write_json_atomic(d / classroom.STUDENT, {"display_name": student})


@pytest.fixture(scope="module")
def classroom_app(tmp_path_factory):
    from gradio_client import Client
    folder = tmp_path_factory.mktemp("class")
    _students(folder / "runs")
    env = {"BERTLAB_CLASSROOM": "1", "BERTLAB_TEACHER_TOKEN": TOKEN}
    with serving(["app.py"], folder, env) as (url, log):
        yield url, Client(url, verbose=False, analytics_enabled=False, download_files=False), folder / "runs"
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


def _refused(client, api: str, **kw) -> str:
    from gradio_client.exceptions import AppError
    with pytest.raises(AppError) as e:
        client.predict(**kw, api_name=api)
    assert "Traceback" not in str(e.value) and TOKEN not in str(e.value)
    return str(e.value)


@pytest.mark.slow
def test_the_class_section_in_a_browser_and_through_the_api(classroom_app):
    url, client, root = classroom_app
    fig, table = client.predict(api_name="/class_runs")
    assert [r[1:4] for r in table["data"]] == [["Ada", "ada-1", "31.0%"], ["<i>Bob</i>", "bob-1", "29.0%"],
                                               ["Cy Young", "cy-1", "15.0%"], ["(no name)", "cli-1", "10.0%"]]
    names = [t["name"] for t in json.loads(fig["plot"])["data"] if t.get("showlegend", True)]
    assert names == ["Ada · ada-1", "&lt;i&gt;Bob&lt;/i&gt; · bob-1", "Cy Young · cy-1", "(no name) · cli-1"]
    assert ANN not in json.dumps([fig, table]) and str(root) not in json.dumps([fig, table])

    for name, api, extra in (("ada-1", "/pretrain_stop", {}), ("ada-1", "/pretrain_delete", {}),
                             ("ada-1", "/finetune_delete", {}), ("ada-1", "/pretrain_resume", {"steps": 99}),
                             ("cli-1", "/pretrain_delete", {})):
        msg = _refused(client, api, owner=EVE, name=name, **extra)
        assert "another browser" in msg or "read-only" in msg or "not running" in msg
    note, _, table = client.predict(owner=EVE, name="Eve", api_name="/class_name")
    assert "no pre-training runs" in note and [r[1] for r in table["data"]][:2] == ["Ada", "<i>Bob</i>"]
    assert "40" in _refused(client, "/class_name", owner=EVE, name="E" * 41)

    with chromium_page(DESKTOP) as (_, page, outside, errors):  # one page load, then a phone's width
        page.goto(url)
        page.locator("#bl-tabs").wait_for(timeout=WAIT_MS)
        lessons = page.locator("#bl-tabs [role=tab]").filter(has_text="Lessons").first
        if lessons.get_attribute("aria-selected") != "true":  # the first tab: open already
            lessons.click()
        plot = page.locator("#class-plot")
        for size, tag in ((DESKTOP, "desktop"), (PHONE, "phone")):
            page.set_viewport_size({"width": size[0], "height": size[1]})
            page.locator("#class-plot .legend").wait_for(timeout=WAIT_MS)
            plot.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # plotly redraws at the new width
            assert page.locator("#class-plot .legendtext").filter(has_text="<i>Bob</i> · bob-1").count() == 1
            assert page.locator("#class-plot .legend [style*=italic]").count() == 0  # as typed, not in italics
            cells = page.locator("#class-table").inner_text()
            assert "<i>Bob</i>" in cells and "Cy Young" in cells
            figures_fit(page, plot, size[0])
            shot(plot, f"class-chart-{tag}.png")
            page.locator("#class-title").scroll_into_view_if_needed()
            shot(page, f"class-chart-section-{tag}.png")
        assert not outside and not errors, (outside, errors)

    assert "not this server's" in _refused(client, "/class_clear", token="guess", confirm=True)
    assert "not this server's" in _refused(client, "/class_clear", token="", confirm=True)
    assert "Tick" in _refused(client, "/class_clear", token=TOKEN, confirm=False)
    assert {p.name for p in root.iterdir()} >= {"ada-1", "bob-1", "cy-1", "cli-1"}
    msg, _, _, table = client.predict(token=TOKEN, confirm=True, api_name="/class_clear")
    assert msg.startswith("Removed 3 runs") and "1 run made from the command line stays" in msg
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["cli-1"]
    assert [r[2] for r in table["data"]] == ["cli-1"]
    for i in range(4):  # with the two above: six wrong from this address, the last answered after 1 s
        _refused(client, "/class_clear", token=f"guess-{i}", confirm=True)
    msg, *_ = client.predict(token=TOKEN, confirm=True, api_name="/class_clear")  # the teacher is never locked out
    assert msg.startswith("Removed 0 runs")


def test_the_command_line_ranks_and_clears(tmp_path, monkeypatch, capsys):
    from bertlab.app.class_cli import main

    def cli(argv):  # what `python -m bertlab class ...` runs
        return main(argv[1:])
    root = tmp_path / "runs"
    pretrain_run(root, "ann-1", ANN, [0.1, 0.3])
    pretrain_run(root, "cli-1", None, [0.2])
    runs.write_json_atomic(root / "ann-1" / classroom.STUDENT, {"display_name": "Ann"})
    assert cli(["class", "--runs", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Ann" in lines[1] and "ann-1" in lines[1] and "30.0%" in lines[1] and "cli-1" in lines[2]
    monkeypatch.delenv("BERTLAB_TEACHER_TOKEN", raising=False)
    assert cli(["class", "--runs", str(root), "--clear"]) != 0
    assert "BERTLAB_TEACHER_TOKEN" in capsys.readouterr().err and (root / "ann-1").exists()
    monkeypatch.setenv("BERTLAB_TEACHER_TOKEN", TOKEN)
    assert cli(["class", "--runs", str(root), "--clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == ["ann-1"]
    assert sorted(p.name for p in root.iterdir()) == ["cli-1"]


def test_the_pretrain_form_puts_the_students_name_on_the_run(mgr, monkeypatch):
    import gradio as gr

    from bertlab.app.ui.training import pretrain_tab

    def launch(job):  # the folder and job.json as _launch writes them, without a training process
        runs.Run(mgr.root / job.name).write_spec(job.spec)
        runs.write_json_atomic(mgr.root / job.name / jobs.JOB, {"pid": None, "owner": job.owner, "kind": "pretrain"})
        job.proc, job.state = SimpleNamespace(poll=lambda: 0, returncode=0), "running"
    monkeypatch.setattr(mgr, "_launch", launch)
    form = dict(preset="tiny", layers=2, hidden=64, heads=2, intermediate=256, vocab_size=500,
                start_from=pretrain_tab.SCRATCH, corpus="imdb", upload=None, text_column="text", hub_name="",
                max_len=32, batch_size=8, steps=10, lr=1e-3, mask_rate=0.15, objective="nsp", bf16=False,
                dropout=0.0, pre_ln=False, overlay=[])
    with pytest.raises(gr.Error, match="at most 40"):
        pretrain_tab.start(ANN, "ann-web", **form, student="A" * 41)
    assert not (mgr.root / "ann-web").exists()  # a bad name starts nothing
    pretrain_tab.start(ANN, "ann-web", **form, student=" Ann  <b>B.</b> ")
    assert classroom.display_name(mgr.root / "ann-web") == "Ann <b>B.</b>"
    pretrain_tab.start(BOB, "bob-web", **form)  # no name: the chart says "(no name)"
    assert not (mgr.root / "bob-web" / classroom.STUDENT).exists()
    assert sorted(r["student"] for r in classroom.class_runs(mgr, fresh=True)) == ["", "Ann <b>B.</b>"]
