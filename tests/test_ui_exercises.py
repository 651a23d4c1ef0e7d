"""The course's exercises in the app (issue 20): the Masking lab's "Score a draw", the Architecture
tab's variants table and the Attention tab's head finder; their handlers called directly with the
shipped model, then their endpoints through gradio_client and the sections in Chromium at a laptop's
and a phone's size. Never checks what the model predicts, only what holds for any model."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, shot  # noqa: E402

from bertlab.app.ui.labs import architecture_variants as variants  # noqa: E402
from bertlab.app.ui.shared import models  # noqa: E402
from bertlab.app.ui.text import attention_finder as finder  # noqa: E402
from bertlab.app.ui.text import masking_score, masking_tab  # noqa: E402
from bertlab.data.masking import KEPT, MASKED, RANDOM  # noqa: E402

D = models.DEFAULT
TEXT = "the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable ."
CAT = "the cat sat on the mat because it was tired ."


def test_score_a_draw_colours_every_rule_as_the_lab_does():
    assert masking_score.COLORS == {"[MASK]": masking_tab.RULE_COLOR[MASKED], "random": masking_tab.RULE_COLOR[RANDOM],
                                    "kept": masking_tab.RULE_COLOR[KEPT]}
    said, fig, table, data = masking_score.score(TEXT, 0.5, False, 2, 0.4, 0.3, D)
    rules = {p["rule"] for p in data["positions"]}
    assert len(table) == len(data["positions"]) == data["summary"]["selected"] >= 5
    assert {t.name for t in fig.data} == {masking_score.LEGEND[r] for r in rules}
    for t in fig.data:  # one bar per selected position, in its rule's colour, its height the loss
        rule = next(r for r, name in masking_score.LEGEND.items() if name == t.name)
        assert t.marker.color == masking_score.COLORS[rule]
        assert sorted(t.y) == sorted(p["loss"] for p in data["positions"] if p["rule"] == rule)
    assert all(len(p["top"]) == 5 for p in data["positions"])
    assert "Draw #2" in said and f"{data['summary']['mean_loss']:.2f}" in said


def test_the_ablation_masks_every_selected_position_of_the_same_draw():
    *_, usual = masking_score.score(TEXT, 0.5, False, 4, 0.8, 0.1, D)
    *_, ablation = masking_score.score(TEXT, 0.5, False, 4, *masking_score.RECIPES[1], D)
    assert masking_score.RECIPE_LABELS[1].startswith("100 % [MASK]")
    assert [p["position"] for p in ablation["positions"]] == [p["position"] for p in usual["positions"]]
    assert {p["rule"] for p in ablation["positions"]} == {"[MASK]"}
    assert all(p["seen"] == "[MASK]" for p in ablation["positions"])


@pytest.mark.parametrize("args, message", [
    ((TEXT, 0.15, False, 0, 0.8, 0.5), "add up to 130%"), ((TEXT, 0.15, False, 0, 1.5, 0.0), "from 0 to 1"),
    ((TEXT, 0.15, False, 0, "lots", 0.1), "must be a number"), ((TEXT, 0.0, False, 0, 0.8, 0.1), "masking rate"),
    ((TEXT, 0.15, False, -1, 0.8, 0.1), "seed"), (("", 0.15, False, 0, 0.8, 0.1), "empty"),
])
def test_score_a_draw_mistakes_are_one_message(args, message):
    with pytest.raises(gr.Error, match=message) as e:
        masking_score.score(*args, D)
    assert e.value.print_exception is False


def test_variants_section_draws_every_family():
    table, fig, data = variants.variants(128, variants.SCOPES[0])
    from bertlab import family
    assert {t.name for t in fig.data} == set(family.NAMES.values())  # BERT, ALBERT, ..., every record's
    assert sum(len(t.x) for t in fig.data) == len(table) == len(data["variants"])
    for bad, message in ((0, "sequence length"), (100_000, "sequence length"), ("x", "whole number")):
        with pytest.raises(gr.Error, match=message):
            variants.variants(bad, variants.SCOPES[0])
    with pytest.raises(gr.Error, match="Count must be one of"):
        variants.variants(128, "everything")


def test_head_finder_grid_is_the_attention_of_every_head():
    from bertlab.analysis import attention_views as av
    xd, yd, fig, caption, data = finder.tokens_row(CAT, "", D)
    run = av.run_attention(*models.get(D), CAT)
    assert (run.tokens[xd.value], run.tokens[yd.value]) == ("it", "cat")  # a pronoun and the noun before it
    L, A = run.num_layers, run.num_heads
    assert len(data["grid"]) == L and len(data["grid"][0]) == A
    for layer in range(L):
        for head in range(A):
            assert data["grid"][layer][head] == pytest.approx(float(run.attentions[layer, head, 8, 2]), abs=1e-4)
    assert fig.data[0].z.shape == (L, A) and "layer" in caption
    # kept where they still point inside a new text
    assert finder.tokens_row("a b c d e f g h i j", "", D, 3, 1)[0].value == 3
    for x, message in ((None, "Pick the from token"), (99, "0 to 12"), (1.5, "0 to 12")):
        with pytest.raises(gr.Error, match=message):
            finder.pair_view(CAT, "", x, 2, D)


@pytest.mark.slow
def test_the_three_sections_through_the_api_and_in_a_browser(server, client):
    from gradio_client.exceptions import AppError
    said, fig, table, data = client.predict(TEXT, 0.3, False, 0, 1.0, 0.0, D, api_name="/mask_score")
    assert {p["rule"] for p in data["positions"]} == {"[MASK]"}
    table, fig, data = client.predict(128, variants.SCOPES[0], api_name="/variants")
    assert len(data["variants"]) == len(variants.variant_rows())
    data = client.predict(CAT, "", 8, 2, D, api_name="/attention_pair")
    assert data["from_token"] == "it" and data["to_token"] == "cat"
    fig, table, data = client.predict(D, api_name="/head_finder")
    assert set(data["relations"]) == {"neighbours", "subject–verb", "long-range"} and data["sentences"] == 50
    for call, words in (((TEXT, 0.3, False, 0, 0.9, 0.2, D), "at most 100%"), ((CAT, "", 8, 40, D), "0 to 12")):
        with pytest.raises(AppError) as e:
            client.predict(*call, api_name="/mask_score" if len(call) == 7 else "/attention_pair")
        assert words in str(e.value) and "Traceback" not in str(e.value), str(e.value)

    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.get_by_role("tab", name="Masking lab").click(timeout=WAIT_MS)  # the page settles slowly on 2 busy cores
        panel = page.locator("[role=tabpanel]:visible").first
        panel.locator("#mask-score-said").get_by_text("Draw #0").wait_for(timeout=WAIT_MS)  # on load
        panel.get_by_role("button", name=masking_score.RECIPE_LABELS[1]).click()
        panel.locator("#mask-score-said").get_by_text("100% [MASK] / 0% random").wait_for(timeout=WAIT_MS)
        slider = panel.get_by_label("number input for random share (kept = the rest)", exact=True)  # 100 % + 50 %: one clear line
        slider.fill("0.5")
        slider.press("Enter")
        page.get_by_text("at most 100% (kept is the rest)").first.wait_for(timeout=WAIT_MS)
        panel.get_by_role("button", name=masking_score.RECIPE_LABELS[0]).click()  # back to BERT's recipe
        panel.locator("#mask-score-said").get_by_text("80% [MASK] / 10% random").wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Architecture").click()
        page.locator("#arch-variants-table").get_by_text("ALBERT", exact=True).first.wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Attention").click()
        panel = page.locator("[role=tabpanel]:visible").first
        panel.get_by_role("tab", name="Head finder").click()
        panel.locator("#finder-caption").get_by_text("Strongest").wait_for(timeout=WAIT_MS)
        page.locator("#finder-ranking").get_by_text("long-range").first.wait_for(timeout=WAIT_MS)
        shoot(page, DESKTOP, "desktop")
        assert not outside and not errors, (outside, errors)
    with chromium_page(PHONE) as (browser, page, outside, errors):  # a fresh page: a phone lays out on load
        page.goto(server)
        page.get_by_role("tab", name="Attention").click(timeout=WAIT_MS)
        panel = page.locator("[role=tabpanel]:visible").first
        panel.get_by_role("tab", name="Head finder").click()
        page.locator("#finder-ranking").get_by_text("long-range").first.wait_for(timeout=WAIT_MS)
        shoot(page, PHONE, "phone")
        assert not outside and not errors, (outside, errors)


def shoot(page, size, tag):
    """Each section's figures inside the window, and a screenshot of each tab to look at."""
    for name, plots in (("Masking lab", ["#mask-score-plot"]), ("Architecture", ["#arch-variants-plot"]),
                        ("Attention", ["#finder-grid", "#finder-rank-plot"])):
        page.get_by_role("tab", name=name, exact=True).first.click()
        page.locator(plots[0]).locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
        page.locator(plots[0]).scroll_into_view_if_needed()
        page.wait_for_timeout(700)
        for plot in plots:
            figures_fit(page, page.locator(plot), size[0])
        what = {"Masking lab": "score_draw", "Architecture": "variants", "Attention": "head_finder"}[name]
        shot(page, f"exercise_{what}_{tag}.png", full_page=True)
