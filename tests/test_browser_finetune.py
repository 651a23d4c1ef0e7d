"""The Fine-tune tab as a student meets it (issue 15, item 1 and the smaller items): a comparison keeps
refreshing until all three runs have ended and shows all three; a reloaded page shows the visitor's
last run (finished too) with the comparison's overlay; the form reads at 1280×900 and at 390×844."""
import re
import time

import pytest
from browser import DESKTOP, PHONE, SHOTS, chromium_page

NAMES = {"cmp-full", "cmp-frozen", "cmp-lora"}


def _scored(tab) -> set[str]:
    """The summary table's runs that show a validation accuracy."""
    rows = tab.locator("#finetune-summary [role=row].virtual-row").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))")
    return {r[0] for r in rows if len(r) > 3 and re.search(r"\d+\.\d%", r[3])}


def _box(locator) -> dict:
    return locator.evaluate("e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, "
                            "h: r.height, lh: parseFloat(getComputedStyle(e).lineHeight) || 20}; }")


def _check_readable(tab, size) -> None:
    """Labels on one or two lines, the empty notes inside their charts, table headers unbroken."""
    label = tab.get_by_text("Layer-wise LR decay", exact=False).first
    b = _box(label)
    assert b["h"] <= 2.5 * b["lh"] and b["w"] >= 120, f"decay label squeezed at {size}: {b}"
    for plot in ("#finetune-plot", "#finetune-confusion"):
        notes = tab.locator(f"{plot} .annotation-text")
        frame = _box(tab.locator(f"{plot} .main-svg").first)
        for i in range(notes.count()):
            n = _box(notes.nth(i))
            assert frame["x"] - 1 <= n["x"] and n["x"] + n["w"] <= frame["x"] + frame["w"] + 1, \
                f"a note of {plot} is clipped at {size}: {n} in {frame}"
    for th in tab.locator("#finetune-summary thead th").all():
        overflow = th.evaluate("e => [...e.querySelectorAll('span, div')].some(s => s.scrollWidth > s.clientWidth + 1)")
        b = _box(th)
        assert not overflow and b["h"] <= 3 * b["lh"] + 24, f"summary header squeezed at {size}: {th.inner_text()!r} {b}"


@pytest.mark.slow
def test_compare_shows_all_three_and_survives_a_reload(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.get_by_role("tab", name="Fine-tune").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.get_by_text("More options").click()
        tab.locator("#finetune-params").get_by_text("parameters").wait_for()
        _check_readable(tab, DESKTOP)
        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.wait_for_timeout(500)
        _check_readable(tab, PHONE)
        page.screenshot(path=str(SHOTS / "finetune_phone_empty.png"), full_page=True)
        page.set_viewport_size({"width": DESKTOP[0], "height": DESKTOP[1]})

        tab.get_by_label("Use N examples (0 = all)").fill("40")
        tab.get_by_label("Tokens per text").fill("16")
        tab.get_by_label("Batch size").fill("8")
        tab.get_by_label("Epochs").fill("1")
        tab.get_by_label("Run name").fill("cmp")
        tab.locator("#finetune-compare").click()
        t0, said = time.time(), set()
        while time.time() - t0 < 150:  # the page refreshes by itself until every run of the comparison ended
            said.add(tab.locator("#finetune-status").inner_text())
            if _scored(tab) == NAMES:
                break
            page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "finetune_compare.png"), full_page=True)
        assert _scored(tab) == NAMES, (tab.locator("#finetune-summary").inner_text(), said)
        assert any(re.search(r"[12] of 3 runs finished", s) for s in said), said  # said while the others ran
        tab.get_by_text("3 of 3 runs finished").wait_for(timeout=10_000)

        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.reload()  # a finished comparison comes back: the run, its overlay and all three rows
        page.get_by_role("tab", name="Fine-tune").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.get_by_text("3 of 3 runs finished").wait_for(timeout=20_000)
        assert tab.locator("#finetune-run input").input_value() == "cmp-full"
        assert {"cmp-frozen", "cmp-lora"} <= set(re.findall(r"cmp-\w+", tab.locator("#finetune-overlay").inner_text()))
        assert _scored(tab) == NAMES
        tab.get_by_text("More options").click()
        _check_readable(tab, PHONE)
        page.screenshot(path=str(SHOTS / "finetune_phone_reloaded.png"), full_page=True)
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors
