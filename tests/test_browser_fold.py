"""Results in view after the button (issue 31, item 3): at 1280x900 Attention's heatmap started near
y = 870 after "Show attention" (only its title showed), Embeddings' near 830 and Probing's chart off
screen; on a phone Fill-mask's and Next sentence's results needed a scroll below the button."""
import time

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page

SEEN = 250  # at least this many pixels of the result on screen


def _open(page, server, name, drawn=True):
    page.goto(server)
    page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
    page.get_by_role("tab", name=name).click()
    panel = page.locator("[role=tabpanel]:visible").first
    if drawn:  # the tab drew its view as it opened (Probing waits for its button: probes are slow)
        panel.locator(".js-plotly-plot:visible").first.wait_for(timeout=WAIT_MS)
    return panel


def _top_of(page, panel, css: str) -> float:
    """Viewport y of the first visible `css` in the panel, once the page stopped scrolling. The answer
    may replace the element between two reads (a chart redrawn): then wait for its successor."""
    loc = panel.locator(f"{css}:visible").first
    last, still, t0 = None, 0, time.time()
    while still < 2:
        loc.wait_for(timeout=WAIT_MS)
        box = loc.bounding_box()
        y = box["y"] if box else None
        still = still + 1 if (y is not None and y == last) else 0
        last = y
        assert time.time() - t0 < WAIT_MS / 1000, f"{css} never came to rest"
        page.wait_for_timeout(300)
    return last


@pytest.mark.slow
def test_results_come_into_view_on_a_laptop(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        for name, button in (("Attention", "Show attention"), ("Embeddings", "Compare")):
            panel = _open(page, server, name)
            panel.get_by_role("button", name=button, exact=True).click()
            y = _top_of(page, panel, ".js-plotly-plot")
            assert y < DESKTOP[1] - SEEN, f"{name}: the chart starts at y = {y:.0f}"
        panel = _open(page, server, "Probing", drawn=False)
        panel.get_by_role("button", name="Run probes").click()
        y = _top_of(page, panel, ".js-plotly-plot")  # the accuracy-by-layer chart
        assert y < DESKTOP[1] - SEEN, f"Probing: the results start at y = {y:.0f}"
    assert not errors, errors


@pytest.mark.slow
def test_results_come_into_view_on_a_phone(server):
    with chromium_page(PHONE) as (browser, page, outside, errors):
        for name, button, result in (("Fill-mask", "Predict", "mark"), ("Next sentence", "Rank the B's", ".js-plotly-plot")):
            panel = _open(page, server, name)
            panel.get_by_role("button", name=button, exact=True).click()
            y = _top_of(page, panel, result)
            assert y < PHONE[1] - SEEN, f"{name}: the result starts at y = {y:.0f}"
    assert not errors, errors
