"""Lesson 7's new links in Chromium (issue 32, items 10 and 15): the TAPT recipe fills the Pre-train form
(start from the shipped model, the task's own sentences as the corpus, MLM only) and a short run of it
finishes on the server; the race link ticks BERT's loss and all-tokens. At a laptop's and a phone's width."""
import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, shot


@pytest.mark.slow
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_lesson_7s_tapt_recipe_and_loss_race(server, size):
    from bertlab.app.lessons import course_b
    from bertlab.app.ui.shared import links
    tag = "desktop" if size == DESKTOP else "phone"
    tapt = next(t for t in course_b.PRETRAIN.try_its if "TAPT" in str(t.params.get("recipe")))
    race = next(t for t in course_b.PRETRAIN.try_its if t.tab == "race")
    with chromium_page(size) as (browser, page, outside, errors):
        page.goto(server.rstrip("/") + "/" + links.url(tapt.tab, **tapt.params))
        panel = page.locator("[role=tabpanel]:visible").first
        panel.locator("#pretrain-size").get_by_text("Continues").wait_for(timeout=WAIT_MS)
        assert "default (shipped)" in panel.locator("#pretrain-size").inner_text()
        assert page.locator("#pretrain-start-from input").input_value() == "default (shipped)"
        assert page.locator("#pretrain-loss input").input_value() == "masked words (BERT's)"
        panel.locator("#pretrain-data").get_by_text("Data", exact=True).click()
        task = page.get_by_label("The sentiment task's own sentences, its held-out ones left out (TAPT)")
        assert task.is_checked()
        panel.get_by_text("Adapting a model you already have").scroll_into_view_if_needed()
        page.wait_for_timeout(400)
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
        shot(page, f"pretrain_tapt_{tag}.png")
        if size == DESKTOP:  # the recipe runs: 4 steps of the shipped model on the task's sentences
            panel.get_by_label("Steps").first.fill("4")
            panel.get_by_label("Run name").first.fill("tapt-short")
            panel.locator("#pretrain-start").click()
            panel.locator("#pretrain-status").get_by_text("finished").wait_for(timeout=180_000)

        page.goto(server.rstrip("/") + "/" + links.url(race.tab, **race.params))
        boxes = page.locator("#race-recipes")
        boxes.get_by_text("loss-all-tokens").wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(1500)  # the link's values land after the page opens
        ticked = boxes.locator("input:checked").evaluate_all("xs => xs.map(x => x.closest('label').textContent.trim())")
        assert len(ticked) == 2 and any(t.startswith("mlm:") for t in ticked) and \
            any(t.startswith("loss-all-tokens:") for t in ticked), ticked
        page.get_by_text("Your own loss.").scroll_into_view_if_needed()
        page.wait_for_timeout(400)
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
        shot(page, f"race_loss_{tag}.png")
    assert not outside, outside[:5]
    assert not errors, errors
