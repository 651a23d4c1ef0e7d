"""The Pre-train tab as a student first meets it (issue 15, items 3, 4 and 6): the tiny recipe says
what it is preparing, shows guesses, attention and the unigram line within seconds, its charts tell
their lines apart by colour, and the tab reads at phone width."""
import re
import time

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, new_page, shot

WAIT_S = 300  # a cap on the wait for the first evaluation (~20 s on a quiet 2-core EPYC); the test checks its step


def _legend_colours(page) -> list[list[str]]:
    """Per figure: the stroke colour of each legend entry's line."""
    return page.locator("#pretrain-plot .js-plotly-plot").evaluate_all(
        "figs => figs.map(f => [...f.querySelectorAll('.legend .traces .legendlines path')]"
        ".map(p => getComputedStyle(p).stroke))")


def _boxes(page, sel) -> list[dict]:
    return page.locator(sel).evaluate_all("els => els.map(e => { const r = e.getBoundingClientRect();"
                                          " return {x: r.x, y: r.y, w: r.width, h: r.height, text: e.textContent}; })")


@pytest.mark.slow
def test_first_pretraining_run_is_alive_early_and_readable(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.get_by_role("tab", name="Pre-train").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.locator("#pretrain-size").get_by_text("parameters").wait_for()
        # before any run: a note, not a grid of empty axes
        tab.get_by_text("No measurements yet").first.wait_for()
        assert tab.locator("#pretrain-plot .xtick").count() == 0, "empty axes before any run"

        tab.get_by_label("Recipe").click()
        page.get_by_role("option", name=re.compile("Tiny and fast")).click()
        tab.locator("#pretrain-data").get_by_text("Data", exact=True).click()
        tab.get_by_label("Use the first N documents (0 = all)").fill("3000")  # the shipped IMDB corpus, cold
        tab.get_by_label("Run name").first.fill("first-run")
        t0 = time.time()
        tab.locator("#pretrain-start").click()
        said, first_eval = set(), None
        while time.time() - t0 < WAIT_S:
            said.add(tab.locator("#pretrain-status").inner_text())
            header = tab.locator("#pretrain-probes thead").inner_text()
            if m := re.search(r"step (\d+)", header):
                first_eval = (int(m.group(1)), time.time() - t0)
                break
            page.wait_for_timeout(250)
        print(f"first evaluation at step {first_eval and first_eval[0]}, "
              f"{first_eval and first_eval[1]:.1f} s after Start; said: {sorted(said)}")
        assert any(re.search(r"preparing the data.*(vocabulary|tokenising|reading)", s, re.S) and
                   "cached for next time" in s for s in said), said
        assert first_eval is not None and first_eval[0] <= 25, f"first evaluation {first_eval} (was step 166)"

        # every panel: data (guesses above, attention, unigram line) or a note in its own panel
        page.wait_for_function("() => document.querySelectorAll('#pretrain-plot .js-plotly-plot').length === 3",
                               timeout=WAIT_MS)
        page.wait_for_timeout(2000)  # the next tick draws the evaluation
        # a figure being redrawn (a busy machine) has legend lines with no style yet: read a settled one
        legends, t = _legend_colours(page), time.time()
        while not all(c and c != "none" for f in legends for c in f) and time.time() - t < WAIT_MS / 1000:
            page.wait_for_timeout(500)
            legends = _legend_colours(page)
        names = [t.text_content() for t in tab.locator("#pretrain-plot .legend .legendtext").all()]
        for want in ("unigram guess", "mass on previous token", "held-out MLM acc.", "train MLM loss"):
            assert want in names, (want, names)
        for colours in legends:  # one run: every series of a figure in a colour of its own
            assert len(colours) >= 2 and len(set(colours)) == len(colours), legends
        assert len({c for f in legends for c in f}) >= 8, legends
        shot(page, "pretrain_first_minute.png", full_page=True)

        phone = new_page(browser, PHONE)
        phone.goto(server)
        phone.get_by_role("tab", name="Pre-train").click()
        ptab = phone.locator("[role=tabpanel]:visible").first
        ptab.locator("#pretrain-run input").click()
        phone.get_by_role("option", name="first-run").click()
        phone.wait_for_function("() => document.querySelectorAll('#pretrain-plot .js-plotly-plot').length === 3",
                                timeout=WAIT_MS)
        phone.wait_for_timeout(1000)
        titles = _boxes(phone, "#pretrain-plot .annotation")
        assert len(titles) >= 6, titles
        for t in titles:  # inside the screen, on one line
            assert t["x"] >= 0 and t["x"] + t["w"] <= PHONE[0] and t["h"] < 30, t
        for a in titles:  # no title over another
            for b in titles:
                if a is not b:
                    assert (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or
                            a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]), (a, b)
        start_from = ptab.get_by_label("Start from").bounding_box()
        bf16 = ptab.get_by_text("bfloat16 where the hardware").bounding_box()
        assert start_from["width"] >= 250 and bf16["width"] >= 250, ("squeezed on a phone", start_from, bf16)
        for _ in range(20):  # the run redraws the charts every tick: a label caught mid-redraw has no size yet
            ticks = _boxes(phone, "#pretrain-plot .xtick text")
            small = [t for t in ticks if t["h"] < 9]
            if ticks and not small:
                break
            phone.wait_for_timeout(500)
        assert ticks and not small, ("tick labels too small to read", small[:5])
        shot(phone, "pretrain_phone.png", full_page=True)

        tab.locator("#pretrain-stop").click()  # free the CPU for the next tests
        page.wait_for_function("() => /stopped/.test(document.querySelector('#pretrain-status').innerText)",
                               timeout=WAIT_MS)
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors
