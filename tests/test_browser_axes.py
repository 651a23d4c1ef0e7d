"""No percentage axis shows the same tick label twice (issue 31, item 1: the Race chart's y-axis read
"5% 5% 5% 4% 4%", so the gap between recipes could not be read). Every tab is opened as a student
would, and every plotly axis whose ticks are percentages is read."""
import pytest
from browser import DESKTOP, WAIT_MS, chromium_page
from test_browser_shell import TABS

AXES_JS = """() => [...document.querySelectorAll('[role=tabpanel] .js-plotly-plot')].filter(p => p.offsetParent)
  .flatMap(p => [...p.querySelectorAll('.xaxislayer-above, .yaxislayer-above')].map(layer =>
    [...layer.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent)))"""


@pytest.mark.slow
def test_no_percentage_axis_repeats_a_tick_label(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        seen = []
        for name in TABS:
            page.get_by_role("tab", name=name).click()
            page.wait_for_timeout(4000)  # the tab draws as it opens
            for ticks in page.evaluate(AXES_JS):
                if ticks and all(t.endswith("%") for t in ticks):
                    seen.append((name, ticks))
                    assert len(set(ticks)) == len(ticks), (name, ticks)
        print(seen)
        assert len(seen) >= 2, seen  # the Masking lab's and Fill-mask's at least: the test reads some
    assert not errors, errors
