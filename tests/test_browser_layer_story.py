"""Issue 32, item 13 in Chromium: lesson 9's link (?tab=probing&view=story) opens the layer story; its
button draws one chart (three tasks, the negated words, the centers of gravity) and the computed text,
and both read at 1280x900 and at 390x844."""
import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, shot


@pytest.mark.slow
def test_the_layer_story_from_its_link_at_both_widths(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server + "?tab=probing&view=story")
        story = page.locator("#probe-story")
        button = story.get_by_role("button", name="Tell the layer story")
        button.wait_for(timeout=WAIT_MS)  # visible: the link opened the section
        assert story.get_by_text("center of gravity", exact=False).first.is_visible()
        button.click()
        try:
            story.get_by_text("peaks at layer", exact=False).first.wait_for(timeout=240_000)
        finally:
            shot(page, "probe_story_desktop_page.png")
        plot = story.locator("#probe-story-plot")
        plot.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_timeout(800)
        legend = plot.locator(".legend").text_content()
        assert all(t in legend for t in ("pos", "polarity", "sentiment", "negated words")), legend
        assert plot.locator(".scatterlayer .trace").count() >= 5  # three tasks, the negated words, >= 1 center
        cells = story.locator("#probe-story-table [role=gridcell]").all_inner_texts()
        assert [c.strip() for c in cells][:1] == ["emb"] and len(cells) == 5 * 4, cells  # 5 layers x (layer + 3 tasks)
        text = story.inner_text()
        assert "On default (shipped) (4 layers)" in text and "flipped by a negator" in text
        assert "Traceback" not in text and "Error" not in text
        figures_fit(page, story, DESKTOP[0])
        shot(story, "probe_story_desktop.png")
        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.wait_for_timeout(1000)
        figures_fit(page, story, PHONE[0])
        fit = story.locator("#probe-story-table table").first.evaluate(  # every column in its box: none cut on the right
            "t => t.getBoundingClientRect().right <= t.closest('#probe-story-table').getBoundingClientRect().right + 1")
        assert fit
        shot(story, "probe_story_phone.png")
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors
