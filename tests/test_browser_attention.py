"""The Attention tab in Chromium, as a student uses it: bertviz opens on the layer and head the sliders
pick (numbered from 1, as everywhere on the page), a clicked token becomes [MASK] with the model's
guesses, the worked Q·K → softmax → ·V example agrees with the map, the layer's head average sits beside
the head (under it on a phone), lesson 5's links open the sparse and padding views, and plot titles
fit on a phone."""
import re

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, shot

# What bertviz draws for each head: the `fill` of its square; a head not shown gets a lightened rgb(...)
SQUARES = """() => [...document.querySelectorAll('#vis svg > g > rect')]
    .filter(r => r.getAttribute('width') === '20' && r.getAttribute('height') === '20')
    .map(r => r.getAttribute('fill'))"""


def _attention(page, server):
    page.goto(server)
    page.get_by_role("tab", name="Attention").click()
    panel = page.locator("[role=tabpanel]:visible").first
    panel.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)  # the example is drawn on load
    return panel


def _set(panel, label: str, value: int):
    box = panel.get_by_label(f"number input for {label}")
    box.fill(str(value))
    box.press("Tab")  # leaving the box is the slider's "release"


@pytest.mark.slow
def test_bertviz_opens_on_the_sliders_layer_and_head(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        panel = _attention(page, server)
        _set(panel, "Layer", 3)
        _set(panel, "Head", 2)
        panel.get_by_text("Layer 3, head 2").first.wait_for(timeout=WAIT_MS)  # the caption
        page.wait_for_timeout(1500)  # the bertviz pages follow the redraw
        page.get_by_role("tab", name="bertviz").click()
        frame = page.frame_locator("iframe:visible").first
        frame.locator("#vis svg").first.wait_for(timeout=WAIT_MS)
        assert frame.locator("#layer option:checked").inner_text() == "3"  # the dropdown counts from 1 too
        assert [o.inner_text() for o in frame.locator("#layer option").all()] == ["1", "2", "3", "4"]
        fills = page.locator("iframe:visible").first.element_handle().content_frame().evaluate(SQUARES)
        assert len(fills) == 4 and [i for i, f in enumerate(fills) if f.startswith("#")] == [1], fills
        shot(page.locator("iframe:visible").first, "attention_bertviz_l3h2.png")
    assert not outside, outside[:5]
    assert not errors, errors


ONE_HEAD_ROW = """(row) => { const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g.layout && g.layout.title && String(g.layout.title.text).includes('each row shares out'));
    return gd ? Array.from(gd._fullData[0].z[row]) : null; }"""
COLUMN = """([id, name]) => { const root = document.querySelector(`#${id}`);  // a Gradio 6 Dataframe's rows
    const heads = [...root.querySelectorAll('[role=columnheader]')].map(th => th.innerText.trim());
    const i = heads.findIndex(h => h.includes(name));
    return [...root.querySelectorAll('div[role=row]')].map(r => r.querySelectorAll('[role=gridcell]')[i].innerText.trim()); }"""


AVERAGE = """() => { const gd = document.querySelector('#attn-average .js-plotly-plot'),
        head = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout && g.layout.title
            && String(g.layout.title.text).includes('each row shares out'));
    if (!gd || !gd._fullData || !gd._fullData.length || !head) return null;
    const box = g => { const r = g.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {title: String(gd.layout.title.text), z: Array.from(gd._fullData[0].z, r => Array.from(r)), box: box(gd),
            head: box(head)}; }"""


def _average(page, layer: int = 2):
    """The drawn head-average plot, checked against the library's own map of the page's example."""
    import torch

    from bertlab.analysis import attention_views as av
    from bertlab.app.ui.shared import models
    from bertlab.app.ui.text import attention_tab as at
    ready = f"() => ({AVERAGE})() && ({AVERAGE})().title.startsWith('Layer {layer}, mean')"
    page.wait_for_function(ready, timeout=WAIT_MS)
    drawn = page.evaluate(AVERAGE)
    m = av.layer_average(av.run_attention(*models.get(models.DEFAULT), at.EXAMPLES[0][0]), layer)
    assert (torch.tensor(drawn["z"]) - m).abs().max() < 1e-3
    assert "Strongest link" in page.locator("#attn-average-said").inner_text()
    return drawn


@pytest.mark.slow
def test_click_to_mask_and_the_worked_qkv_example(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        _attention(page, server)  # the example "the cat sat on the mat ...", layer 2, head 1
        page.wait_for_timeout(1000)
        drawn = _average(page)  # beside the head's map: same top, to its right
        assert abs(drawn["box"][1] - drawn["head"][1]) < 40 and drawn["box"][0] >= drawn["head"][2] - 1, drawn
        shot(page.locator("#attn-average"), "attention_average_desktop.png")
        row = page.evaluate(ONE_HEAD_ROW, 1)  # the One head map's row of token 1 ("the"), as drawn
        assert row and abs(sum(row) - 1) < 1e-3
        page.get_by_role("tab", name="Q·K·V by hand").click()
        scores = page.locator("#attn-math-scores")
        scores.get_by_text("1 the").first.wait_for(timeout=WAIT_MS)
        assert "query token 1 the" in page.locator("#attn-math-steps").inner_text()
        weights = [float(x) for x in page.evaluate(COLUMN, ["attn-math-scores", "softmax weight"])]
        assert len(weights) == len(row) and max(abs(a - b) for a, b in zip(weights, row)) <= 6e-5, (weights, row)
        assert abs(sum(weights) - 1) < 1e-3
        shot(page, "attention_qkv.png", full_page=True)

        page.get_by_role("tab", name="Click to mask").click()
        tokens = page.locator("#attn-mask-tokens")
        tokens.get_by_text("mat", exact=True).click()
        said = page.locator("#attn-mask-said")
        said.get_by_text("Masked").wait_for(timeout=WAIT_MS)
        assert "[MASK]" in said.inner_text() and "mat" in said.inner_text()
        assert tokens.get_by_text("[MASK]", exact=True).count() == 1  # the clicked token now reads [MASK]
        assert tokens.get_by_text("mat", exact=True).count() == 0
        guesses = page.evaluate(COLUMN, ["attn-mask-guesses", "guess"])
        probs = [float(x) for x in page.evaluate(COLUMN, ["attn-mask-guesses", "probability"])]
        assert len(guesses) == 10 and all(guesses) and probs == sorted(probs, reverse=True) and probs[0] > 0
        shot(page, "attention_mask.png", full_page=True)
    assert not outside, outside[:5]
    assert not errors, errors


TITLES = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.offsetParent).flatMap(g => {
    const r = g.getBoundingClientRect();
    return [...g.querySelectorAll('.gtitle, .g-xtitle, .g-ytitle')].map(t => { const b = t.getBoundingClientRect();
        return [t.textContent, b.left >= r.left - 1 && b.right <= r.right + 1]; }); })"""


@pytest.mark.slow
def test_phone_sees_every_view_and_whole_plot_titles(server):
    with chromium_page(PHONE) as (browser, page, outside, errors):
        _attention(page, server)
        drawn = _average(page)  # under the head's map on a phone
        assert drawn["box"][1] >= drawn["head"][3] - 1, drawn
        shot(page, "attention_average_phone.png", full_page=True)
        for name in ["One head", "All heads of the layer", "Overview", "Rollout"]:
            tab = page.get_by_role("tab", name=name)
            assert tab.is_visible(), f"the sub-tab {name!r} is hidden behind '…' on a phone"
            tab.click()
            page.wait_for_timeout(600)
            titles = page.evaluate(TITLES)
            assert titles and all(inside for _, inside in titles), (name, titles)
        assert all(page.get_by_role("tab", name=n).is_visible()
                   for n in ("bertviz", "Click to mask", "Q·K·V by hand", "Padding and the mask"))
        shot(page, "attention_phone_rollout.png", full_page=True)
    assert not outside, outside[:5]
    assert not errors, errors


def test_mask_and_qkv_apis(client):
    from gradio_client.exceptions import AppError
    text = "the river bank was muddy ."
    data = client.predict(text=text, pair="", layer=2, head=1, position=3, api_name="/attention_mask")
    assert data["original"] == "bank" and data["masked_tokens"][3] == "[MASK]" and len(data["top"]) == 10
    steps, scores, values, qkv = client.predict(text=text, pair="", layer=2, head=1, query=3,
                                                api_name="/attention_qkv")
    assert qkv["query"] == 3 and abs(sum(qkv["weights"]) - 1) < 1e-6
    assert max(abs(a - b) for a, b in zip(qkv["weights"], qkv["model_attention"])) <= 1e-5
    with pytest.raises(AppError, match="start or a sentence end"):
        client.predict(text=text, pair="", layer=2, head=1, position=0, api_name="/attention_mask")


def test_padding_api(client):
    """/attention_padding: the padded batch and the mask's numbers, the same as the library's; a mistake is
    one line."""
    from gradio_client.exceptions import AppError

    from bertlab.analysis import padding
    from bertlab.app.ui.shared import models
    sentences = ["[MASK] .", "this is one of the best films i have seen this year ."]
    said, batch, per_sentence, per_layer, fig, data = client.predict(sentences="\n".join(sentences),
                                                                     api_name="/attention_padding")
    res = padding.padding_study(*models.get(models.DEFAULT), sentences)
    assert data["attention_mask"] == res["attention_mask"] and data["tokens"][0][-1] == "[PAD]"
    assert all(x == 0 for row in data["pad_max_masked"] for x in row)
    assert all(s["max_diff_masked"] < 1e-5 for s in data["sentences"])
    assert max(abs(a - b) for a, b in zip(data["pad_share_layers"], res["pad_share_layers"])) < 1e-5
    short = data["sentences"][0]
    assert abs(short["min_cos_unmasked"] - res["sentences"][0]["min_cos_unmasked"]) < 1e-5
    assert short["min_cos_unmasked"] < 0.99 and short["max_diff_unmasked"] > 0.1  # without the mask it moves
    assert short["mask"]["guess"] == res["sentences"][0]["mask"]["guess"] and "Traceback" not in said
    with pytest.raises(AppError, match="2 or 3 sentences, one per line") as e:
        client.predict(sentences="only one sentence .", api_name="/attention_padding")
    assert "Traceback" not in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_sparse_patterns_and_padding_from_lesson_5s_links(server, size):
    """Lesson 5's link opens the Sparse patterns sub-tab on its sentence: the pattern and the head, what it
    keeps, the FLOPs table; picking BigBird redraws with more pairs computed. The padding view shows the
    padded batch and the mask's numbers, as the library computes them: on a phone from the lesson's link, on
    a laptop from its sub-tab (one page load less), where an example then pads three sentences."""
    from bertlab.app.lessons import course_a
    link = next(t for t in course_a.ATTENTION.try_its if t.params.get("view") == "sparse")
    from bertlab.app.ui.shared import links
    with chromium_page(size) as (browser, page, outside, errors):
        page.goto(server.rstrip("/") + "/" + links.url(link.tab, **link.params))
        page.get_by_role("tab", name="Sparse patterns", selected=True).wait_for(timeout=WAIT_MS)
        said = page.locator("#attn-sparse-said")
        said.get_by_text("Longformer").wait_for(timeout=WAIT_MS)
        first = said.inner_text()
        m = re.search(r"computes (\d+) of (\d+)² = (\d+) pairs", first)
        assert m and int(m[2]) ** 2 == int(m[3]) and int(m[1]) < int(m[3]), first
        assert re.search(r"keeps \d+% of this head's attention", first)
        flops = page.locator("#attn-sparse-flops").inner_text()
        assert "4,096" in flops and "BigBird" in flops and "1.3 T" in flops
        page.wait_for_timeout(800)
        name = "desktop" if size == DESKTOP else "phone"
        shot(page, f"attention_sparse_{name}.png", full_page=True)
        page.locator("#attn-sparse-kind").get_by_text("BigBird").click()
        page.wait_for_function("t => { const s = document.querySelector('#attn-sparse-said').innerText; "
                               "return s.includes('BigBird') && s !== t; }", arg=first, timeout=WAIT_MS)
        more = re.search(r"computes (\d+) of", said.inner_text())
        assert int(more[1]) > int(m[1])  # random keys on top of the window and the global token
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
        _padding(page, server, size, course_a)
    assert not outside, outside[:5]
    assert not errors, errors


def _padding(page, server, size, course_a):
    from bertlab.analysis import padding
    from bertlab.app.ui.shared import links, models
    from bertlab.app.ui.text import attention_padding as ap
    if size == PHONE:
        link = next(t for t in course_a.ATTENTION.try_its if t.params.get("view") == "padding")
        page.goto(server.rstrip("/") + "/" + links.url(link.tab, **link.params))
    else:
        page.get_by_role("tab", name="Padding and the mask").click()
    page.get_by_role("tab", name="Padding and the mask", selected=True).wait_for(timeout=WAIT_MS)
    said = page.locator("#attn-pad-said")
    said.get_by_text("With the mask", exact=True).wait_for(timeout=WAIT_MS)
    res = padding.padding_study(*models.get(models.DEFAULT), ap.EXAMPLES[0][0].splitlines())
    text = said.inner_text()
    assert f"over all {res['num_layers']} layers × {res['num_heads']} heads: 0." in text
    assert float(re.search(r"max \|Δ\| = (\S+) \(", text)[1]) < 1e-5
    assert all(f"{x:.1%} in layer {k}" in text for k, x in enumerate(res["pad_share_layers"], 1)), text
    batch = page.locator("#attn-pad-batch")
    pads = res["lengths"][1] - res["lengths"][0]
    assert batch.locator("table").count() == 2 and batch.get_by_text("[PAD]", exact=True).count() == pads
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1  # the rows scroll in their box
    shot(page, f"attention_padding_{'phone' if size == PHONE else 'desktop'}.png", full_page=True)
    if size == PHONE:
        return
    page.locator("#attn-pad-examples").get_by_text("i loved it .", exact=False).first.click()  # three sentences
    page.wait_for_function("() => document.querySelectorAll('#attn-pad-batch table').length === 3", timeout=WAIT_MS)
    said.get_by_text("Sentence 2's").wait_for(timeout=WAIT_MS)
