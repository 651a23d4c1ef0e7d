"""The page around the tabs, as a student meets it: the model picker (a typo is one message and the
working model stays), and every tab reachable and readable on a phone held upright (390×844)."""
import re

import pytest
from browser import DESKTOP, PHONE, SHOTS, chromium_page

TABS = ["Lessons", "Tokenize", "Masking lab", "Fill-mask", "Next sentence", "Attention", "Embeddings", "Architecture",
        "Pre-train", "Fine-tune", "Distil", "Race", "Scaling", "Probing"]


@pytest.mark.slow
def test_a_picker_typo_is_one_message_and_the_working_model_stays(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        card = page.locator("#model-card")
        card.get_by_text("default (shipped)").wait_for(timeout=30_000)
        page.get_by_role("tab", name="Tokenize").click()  # the app opens on Lessons
        panel = page.locator("[role=tabpanel]:visible").first
        panel.get_by_text("tokens for").first.wait_for(timeout=30_000)  # Tokenize shows the example on load
        box = page.get_by_role("combobox", name="Model")
        box.fill("nobody/no-such-model")
        box.press("Enter")
        toast = page.locator(".toast-body").filter(has_text="no-such-model")
        toast.first.wait_for(timeout=30_000)
        page.wait_for_timeout(4000)  # time for any other handler that would also complain
        page.screenshot(path=str(SHOTS / "picker_typo.png"))
        said = page.locator(".toast-body").all_inner_texts()  # at once: a toast may go between two reads
        assert toast.count() == 1 and not re.search(r"\(\d+\)", said[0]), said  # Gradio folds repeats into "(7)"
        assert "Still using default (shipped)" in toast.first.inner_text()
        assert "check the name" in said[0] and "HF_HUB" not in said[0], said  # a typo, not server settings
        assert box.input_value() == "default (shipped)"  # the picker is back on the model in use
        assert "default (shipped)" in card.inner_text()
        assert page.locator(".error").count() == 0  # no tab's outputs turned into "Error" badges
        for tab in ("Fill-mask", "Tokenize"):  # and the tabs still work on the working model
            page.get_by_role("tab", name=tab).click()
            panel = page.locator("[role=tabpanel]:visible").first
            panel.get_by_role("button", name={"Fill-mask": "Predict"}.get(tab, tab), exact=True).click()
            page.wait_for_timeout(1500)
            assert page.locator(".toast-body").count() <= 1 and page.locator(".error").count() == 0
        box.fill("run: not-a-run")  # a run name that is not there: one message again
        box.press("Enter")
        page.locator(".toast-body").filter(has_text="not-a-run").first.wait_for(timeout=30_000)
        assert box.input_value() == "default (shipped)"
    assert not outside, outside[:5]
    assert not errors, errors


@pytest.mark.slow
def test_every_tab_is_reachable_and_fits_a_phone(server):
    with chromium_page(PHONE) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=30_000)
        for i, name in enumerate(TABS):
            tab = page.get_by_role("tab", name=name)
            assert tab.is_visible(), f"the {name} tab is hidden on a phone"
            box = tab.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0], f"the {name} tab is off screen"
            tab.click()
            page.wait_for_timeout(1500)
            page.screenshot(path=str(SHOTS / f"phone_{i}_{name.lower().replace(' ', '_')}.png"), full_page=True)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= PHONE[0] + 2, f"{name}: the page is {wide} px wide on a {PHONE[0]} px phone"
        card = page.locator("#model-card").bounding_box()  # the card reads across, not one word per line
        assert card["width"] > 0.8 * (PHONE[0] - 40) and card["height"] < 90
    assert not outside, outside[:5]
    assert not errors, errors
