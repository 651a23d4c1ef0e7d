"""A bad input leaves no stale answer (issue 42, item 3): the Scaling calculator with a huge number of
steps showed the previous figures under one toast and four "Error" badges. One message now, and the
results that answered the previous input are gone."""
import pytest
from browser import DESKTOP, WAIT_MS, chromium_page, shot

pytestmark = pytest.mark.slow


def test_a_huge_number_in_scaling_clears_the_old_results(server):
    with chromium_page(DESKTOP) as (_, page, outside, errors):
        page.goto(server.rstrip("/") + "/?tab=scaling")
        panel = page.locator("[role=tabpanel]:visible").first
        summary = page.locator("#scaling-summary")
        summary.get_by_text("FLOP").first.wait_for(timeout=WAIT_MS)  # BERT-base's numbers on open
        panel.locator("#scaling-plots .js-plotly-plot").first.wait_for(timeout=WAIT_MS)
        steps = panel.get_by_label("Steps", exact=True)
        steps.fill("1e30")
        page.locator("#scaling-go").click()
        page.locator(".toast-body").filter(has_text="steps must be at most").first.wait_for(timeout=WAIT_MS)
        page.wait_for_function("""() => !document.querySelector('#scaling-plots .js-plotly-plot')
            && !document.querySelector('#scaling-summary')?.innerText.trim()
            && !document.querySelector('#scaling-table')?.innerText.trim()""", timeout=WAIT_MS)
        page.wait_for_timeout(1500)  # time for a second message, if any view also complained
        said = page.locator(".toast-body").all_inner_texts()
        assert len(said) == 1 and "(2)" not in said[0], said  # one message
        assert page.locator("#scaling-formulas").inner_text().strip() == ""
        shot(page, "scaling_huge_number_desktop.png", full_page=True)
        assert not outside and not errors, (outside, errors)
