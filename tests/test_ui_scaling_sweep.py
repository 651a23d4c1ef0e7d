"""The Scaling tab's sweep: the form as a bounded ScalingSpec, its estimate said before a start, clear
refusals; the view of a sweep (the log-log law chart with the fit and Kaplan's slope, the run curves
with the compute frontier, the fit and the table), drawn as runs finish; a tiny sweep started through
the section's own start function; the served section in Chromium at 1280×900 and 390×844."""
import time

import gradio as gr
import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, kill_runs_under, shot

from bertlab.app.identity import new_id
from bertlab.app.ui.labs import scaling_sweep
from bertlab.app.ui.training import jobs_ui
from bertlab.train import scaling
from bertlab.train.runs import Run, write_json_atomic, write_status
from bertlab.train.specs import ScalingSpec

OWNER, OTHER = new_id("."), new_id(".")  # ids as the server mints them


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    yield tmp_path / "runs"
    kill_runs_under(tmp_path / "runs")


def fake_sweep(root, name="fake-sweep", done=None, alpha=0.3):
    """A sweep folder as scaling.sweep leaves it (spec, parts with curves, results, table, status), its
    losses made up along L = 30·N^-α + 3: for the view and the browser, without training anything."""
    d = root / name
    spec = ScalingSpec(sizes=("2x32", "2x64", "4x64", "2x128", "4x128"), tokens=(1e6,))
    Run(d).write_spec(spec)
    (d / "parts").mkdir()
    parts = []
    for k, (run, shape, tokens) in enumerate(scaling.points(spec)[:done]):
        rs = scaling.run_spec(spec, shape, tokens)
        n = scaling.non_embedding_params(scaling.config_of(rs))
        per = scaling.flops_per_token(rs) * rs.batch_size * rs.max_len
        final = 30 * n ** -alpha + 3
        curve = [{"step": s, "tokens": s * 4096, "flops": s * per, "loss": final + 3 * (1 - s / rs.steps) ** 2,
                  "acc": 0.1, "time": s * 0.1} for s in (10, 25, 50, 100, rs.steps // 2, rs.steps)]
        part = {"name": run, "layers": shape[0], "hidden": shape[1], "heads": shape[2], "tokens": rs.steps * 4096,
                "tokens_asked": tokens, "steps": rs.steps, "params": 10 * n, "non_embedding": n,
                "flops": rs.steps * per, "flops_6nd": 6 * n * rs.steps * 4096, "loss": final, "acc": 0.1 + k / 50,
                "minutes": 2.0, "curve": curve, "spec": rs.to_dict()}
        write_json_atomic(d / "parts" / f"{run}.json", part)
        parts.append(part)
    if done is None:
        res = scaling.results(spec, parts)
        write_json_atomic(d / "results.json", res)
        (d / "table.md").write_text(scaling.table_md(res))
    write_status(d, state="finished" if done is None else "stopped", message="", started=time.time() - 600, pid=None)
    return d


def test_the_form_is_a_bounded_spec(runs_root, monkeypatch):
    spec = scaling_sweep.form_spec(["4x64", "2x32", "2x64"], ["1M"])
    assert spec.sizes == ("2x32", "2x64", "4x64") and spec.tokens == (1e6,) and spec.mode == "size"
    assert spec.threads == scaling_sweep.limits().job_threads
    assert scaling_sweep.form_spec(["2x64"], ["2M", "250k", "1M"]).tokens == (2.5e5, 1e6, 2e6)
    for sizes, tokens, words in ((["8x1024"], ["1M"], "not offered"), (["2x32", "2x64", "4x64"], ["40M"], "not offered"),
                                 ([], ["1M"], "at least one size"), (list(scaling_sweep.SIZES), ["1M"], "at most 6 runs"),
                                 (["2x32", "2x64"], ["1M", "2M"], "not both"),
                                 (["2x32", "2x64"], ["1M"], "at least 3")):
        with pytest.raises(ValueError, match=words):
            scaling_sweep.form_spec(sizes, tokens)
    monkeypatch.setenv("BERTLAB_MAX_STEPS", "300")  # a host's caps hold for every run of a sweep
    with pytest.raises(ValueError, match="at most 300"):
        scaling_sweep.form_spec(["2x32", "2x64", "4x64"], ["2M"])
    monkeypatch.setenv("BERTLAB_MAX_PARAMS", "1000000")
    with pytest.raises(ValueError, match="parameters"):
        scaling_sweep.form_spec(["2x32", "2x64", "4x256"], ["250k"])
    monkeypatch.delenv("BERTLAB_MAX_STEPS")
    monkeypatch.delenv("BERTLAB_MAX_PARAMS")
    assert scaling_sweep.estimate_md(*scaling_sweep.EXAMPLES[0]).startswith("**About ")
    assert scaling_sweep.estimate_md(["2x32"], ["1M"]).startswith("⚠️")
    with pytest.raises(gr.Error, match="not offered"):  # from the page: one message, no traceback
        scaling_sweep.start(OWNER, "x", ["99x99"], ["1M"])


def test_the_view_draws_the_law_the_fit_and_the_frontier(runs_root):
    fake_sweep(runs_root, alpha=0.3)
    status, law, curves, fit, table, log, timer = scaling_sweep.view("fake-sweep", [], OWNER)
    assert "finished" in status and timer.active is False
    assert law.layout.xaxis.type == law.layout.yaxis.type == "log"
    names = [t.name for t in law.data]
    assert names[0] == "runs" and len(law.data[0].x) == 5
    assert any(n.startswith("fit a·x^-α + c: α 0.300") for n in names), names  # the made-up law, recovered
    assert any("Kaplan's slope α = 0.076" == n for n in names)
    assert [t.name for t in curves.data][:5] == ["2x32x1", "2x64x1", "4x64x1", "2x128x2", "4x128x2"]
    frontier = curves.data[-1]
    assert frontier.name.startswith("compute frontier") and set(frontier.text) <= {t.name + "-1M" for t in curves.data[:5]}
    assert "**α = 0.300**" in fit and "Kaplan's α = 0.076" in fit
    assert table.count("| 2x") + table.count("| 4x") == 5
    # half way (two runs done): points and curves so far, the fit said to come
    fake_sweep(runs_root, "half", done=2)
    _, law, curves, fit, table, *_ = scaling_sweep.view("half", [], OWNER)
    assert len(law.data[0].x) == 2 and len(curves.data) == 3 and "once 3 runs have finished (2 so far)" in fit
    # nothing picked, or not a sweep
    out = scaling_sweep.view(None, [], OWNER)
    assert "No run selected" in out[0] and out[3] == "" and out[4] == ""


@pytest.mark.slow
def test_a_tiny_sweep_started_from_the_section_runs_to_its_table(runs_root, monkeypatch, small_corpus):
    monkeypatch.setattr(scaling_sweep, "TOKENS", (("tiny", 384),))
    monkeypatch.setattr(scaling_sweep, "SIZES", ("1x16", "1x32", "2x32", "2x48"))
    monkeypatch.setattr(scaling_sweep, "BASE", dict(corpus=str(small_corpus), vocab_size=120, max_len=16,
                                                    batch_size=8, eval_batches=1, lr=3e-3))
    monkeypatch.setenv("BERTLAB_JOB_THREADS", "1")
    watch, status, *_ = scaling_sweep.start(OWNER, "tiny", list(scaling_sweep.SIZES), ["tiny"])
    assert watch.value == "tiny" and "started in this browser" in status
    with pytest.raises(gr.Error, match="another browser"):
        scaling_sweep._act("stop")(OTHER, "tiny", [])
    t0 = time.time()
    while jobs_ui.is_live(jobs_ui.status("tiny")) and time.time() - t0 < 300:
        scaling_sweep.view("tiny", [], OWNER)  # as the page's timer does, while it trains
        time.sleep(1.0)
    st = jobs_ui.status("tiny")
    assert st["state"] == "finished", (st, st.get("log_tail"))
    status, law, curves, fit, table, log, timer = scaling_sweep.view("tiny", [], OWNER)
    assert len(law.data[0].x) == 4 and "α =" in fit and table.count("| 1x") + table.count("| 2x") == 4
    assert "width:100.0%" in status and timer.active is False
    assert jobs_ui.reopen("scaling")(OWNER, None)[0]["value"] == "tiny"


@pytest.mark.slow
def test_the_sweep_section_in_a_browser(server, plain_runs):
    fake_sweep(plain_runs)
    for size, png in ((DESKTOP, "scaling_sweep_desktop.png"), (PHONE, "scaling_sweep_phone.png")):
        with chromium_page(size) as (browser, page, outside, errors):
            page.goto(server + "?tab=scaling")  # the app's deep link opens the tab
            page.get_by_role("tab", name="Scaling", selected=True).wait_for(timeout=WAIT_MS)
            tab = page.locator("[role=tabpanel]:visible").first
            tab.locator("#sweep-estimate").get_by_text("About").wait_for(timeout=WAIT_MS)
            if size == DESKTOP:  # an example fills the form, and the estimate follows
                tab.get_by_role("button", name="data: 2x64 × 4 budgets").click()
                tab.locator("#sweep-estimate").get_by_text("size 2x64 × 4 token budgets").wait_for(timeout=WAIT_MS)
            picker = tab.locator("#sweep-run input")
            picker.fill("fake-sweep")
            picker.press("Enter")
            tab.locator("#sweep-fit").get_by_text("Kaplan's α = 0.076").wait_for(timeout=WAIT_MS)
            tab.locator("#sweep-plots .js-plotly-plot").nth(1).wait_for()
            page.wait_for_timeout(500)
            figures_fit(page, tab.locator("#sweep-plots"), size[0])
            shot(tab.locator("#sweep-plots"), png)
            assert not outside and not errors, (outside, errors)
