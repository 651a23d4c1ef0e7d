"""The Race tab in Chromium at 1280×900 and 390×844: the form, its estimate shown (and updated) before
anything starts, a refusal said beside the form; a finished race picked under 'Race' shows both charts,
a colour per recipe in a readable legend, the table and its reading, with nothing cut off on a phone."""
import re

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, serving, shot
from browser import box as rect
from test_ui_race import fake_race

from bertlab.app.ui.training import race_tab
from bertlab.app.ui.training.train_charts import RACE_STYLE
from bertlab.train.specs import RECIPES

THREADS = "3"  # the server lends a job 3 threads: side by side takes at most 3 recipes


@pytest.fixture(scope="module")
def race_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("race-app")
    fake_race(folder / "runs")
    fake_race(folder / "runs", "all-seven", recipes=tuple(RECIPES), seeds=1, accs=[(0.7 + i / 100,) for i in range(7)])
    fake_race(folder / "runs", "learned-nothing", seeds=1, accs=((0.487,), (0.487,)),  # issue 42, item 1
              line={"majority": 0.509, "val_examples": 1000})
    with serving(["app.py"], folder, env={"BERTLAB_JOB_THREADS": THREADS}) as (url, log):
        yield url
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


def _expected(monkeypatch, *form) -> str:
    """The estimate as the page shows it, its minutes left out: they come from the server's own measure of
    its speed (bertlab.train.speed), which this process cannot repeat to the minute."""
    monkeypatch.setenv("BERTLAB_JOB_THREADS", THREADS)
    return _minutes_out(re.sub(r"\*\*", "", race_tab.estimate_md(*form)))


def _minutes_out(text: str) -> str:
    return re.sub(r"\b([Aa]bout) \d+ min", r"\1 N min", text)


def _fits(page, tab, width: int) -> None:
    figures_fit(page, tab.locator("#race-plots"), width, ".legend, .annotation-text")


def _table_reads(tab, size) -> None:
    """The table's two rows, each recipe named; its headers whole words, not cut inside one."""
    rows = tab.locator("#race-table [role=row].virtual-row").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))")
    assert [r[0] for r in rows] == ["mlm", "electra"], rows
    for th in tab.locator("#race-table thead th").all():
        cut = th.evaluate("e => [...e.querySelectorAll('span, div')].some(s => s.scrollWidth > s.clientWidth + 1)")
        assert not cut, f"a header of the table is cut at {size}: {th.inner_text()!r}"


@pytest.mark.slow
def test_the_race_tab_reads_at_both_sizes(race_server, monkeypatch):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(race_server)
        page.get_by_role("tab", name="Race").click()
        tab = page.locator("[role=tabpanel]:visible").first
        estimate = tab.locator("#race-estimate")
        first = _expected(monkeypatch, ["mlm", "electra"], 3, False, 1)
        estimate.get_by_text(re.compile("About")).wait_for(timeout=WAIT_MS)  # said before anything starts
        assert _minutes_out(estimate.inner_text().strip()) == first and first.startswith("About N minutes")
        tab.get_by_text("No measurements yet").first.wait_for()
        assert tab.locator("#race-plots .xtick").count() == 0, "empty axes before any race"
        shot(page, "race_desktop_form.png", full_page=True)

        tab.locator("#race-minutes").get_by_text("5", exact=True).click()  # every change re-estimates
        tab.locator("#race-side").get_by_role("checkbox").check()
        estimate.get_by_text("side by side, one CPU thread each").wait_for()
        assert _minutes_out(estimate.inner_text().strip()) == _expected(monkeypatch, ["mlm", "electra"], 5, True, 1)
        for name in ("roberta", "albert"):  # four recipes, three threads: refused beside the form, said why
            tab.locator("#race-recipes").get_by_text(race_tab.LABELS[name]).click()
        estimate.get_by_text("at most 3 recipes side by side").wait_for()
        tab.locator("#race-start").click()
        page.locator(".toast-body").filter(has_text="at most 3 recipes").first.wait_for(timeout=WAIT_MS)
        shot(page, "race_desktop_refused.png", full_page=True)

        box = tab.locator("#race-run input")  # a finished race: charts, table and reading
        box.fill("fake-race")
        box.press("Enter")
        tab.locator("#race-reading").get_by_text("fine-tunes best").wait_for(timeout=WAIT_MS)
        tab.locator("#race-plots .legend").first.wait_for()
        _table_reads(tab, DESKTOP)
        colours = tab.locator("#race-plots .js-plotly-plot").first.evaluate(
            "f => [...f.querySelectorAll('.legend .traces .legendlines path')].map(p => getComputedStyle(p).stroke)")
        want = [RACE_STYLE[n][0] for n in ("mlm", "electra")]
        assert colours == [f"rgb({int(c[1:3], 16)}, {int(c[3:5], 16)}, {int(c[5:], 16)})" for c in want], colours
        _fits(page, tab, DESKTOP[0])
        tab.locator("#race-status").scroll_into_view_if_needed()
        shot(page, "race_desktop_finished.png", full_page=True)
        box.fill("learned-nothing")  # issue 42, item 1: both at 48.7 %, the line to beat at 50.9 %
        box.press("Enter")
        reading = tab.locator("#race-reading")
        reading.get_by_text("No winner").wait_for(timeout=WAIT_MS)
        assert "fine-tunes best" not in reading.inner_text() and "50.9%" in reading.inner_text()
        shot(page, "race_desktop_no_winner.png", full_page=True)
        box.fill("fake-race")
        box.press("Enter")
        reading.get_by_text("fine-tunes best").wait_for(timeout=WAIT_MS)

        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.wait_for_timeout(1500)
        _fits(page, tab, PHONE[0])
        _table_reads(tab, PHONE)
        label = rect(tab.locator("#race-recipes").get_by_text(race_tab.LABELS["electra"]))
        assert label["w"] >= 200, f"a recipe label squeezed on a phone: {label}"
        shot(page, "race_phone_finished.png", full_page=True)
    with chromium_page(PHONE) as (browser, page, outside2, errors2):
        page.goto(race_server)  # a new visitor on a phone: the form and its estimate first
        page.get_by_role("tab", name="Race").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.locator("#race-estimate").get_by_text(re.compile("About")).wait_for(timeout=WAIT_MS)
        _fits(page, tab, PHONE[0])
        shot(page, "race_phone_form.png", full_page=True)
        box = tab.locator("#race-run input")  # every recipe at once: seven colours, a legend that wraps inside
        box.fill("all-seven")
        box.press("Enter")
        tab.locator("#race-reading").get_by_text("fine-tunes best").wait_for(timeout=WAIT_MS)
        legend = tab.locator("#race-plots .js-plotly-plot").first.locator(".legend .traces")
        assert legend.count() == 7
        _fits(page, tab, PHONE[0])
        shot(tab.locator("#race-plots"), "race_phone_seven.png")
    assert not outside and not outside2, (outside + outside2)[:5]
    assert not errors and not errors2, errors + errors2
