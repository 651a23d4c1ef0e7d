"""Deep links in Chromium, as a teacher shares them: a link opened in a fresh page shows exactly the
view that clicking through shows (the same figure data, read from the page), the copy-link button
gives a link that reproduces the view, and a hostile link is one message on a page that still works."""
import json
import re
from urllib.parse import urlparse

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, box, chromium_page, new_page, shot

from bertlab.app.ui.shared.links import url

# Every trace of a panel's plotly figures: its x, y and z (typed arrays made plain, rounded) and titles
FIGURES = """root => [...root.querySelectorAll('.js-plotly-plot')].map(gd => ({
    title: ((gd.layout || {}).title || {}).text || '',
    data: (gd.data || []).map(t => {
        const plain = a => a == null ? null : Array.from(a, v => (typeof v === 'object' && v !== null)
            ? plain(v) : (typeof v === 'number' ? Math.round(v * 1e5) / 1e5 : v));
        return {type: t.type, x: plain(t.x), y: plain(t.y), z: plain(t.z)}; })}))"""


def _panel(page):
    return page.locator("[role=tabpanel]:visible").first


def _figures(page, title_has: str, timeout: int = 60_000) -> list:
    """The open tab's figures once one of them has a title that says `title_has` (the view is drawn)."""
    page.wait_for_function(
        "want => [...document.querySelectorAll('[role=tabpanel] .js-plotly-plot')].some(gd =>"
        " gd.offsetParent !== null && gd.layout && ((gd.layout.title || {}).text || '').includes(want))",
        arg=title_has, timeout=timeout)
    page.wait_for_timeout(1500)  # anything still running would redraw now
    return _panel(page).evaluate(FIGURES)


def _new_page(browser, size, errors):
    """A fresh page (the first one closed), its JavaScript errors collected with the first's."""
    page = new_page(browser, size)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(90_000)
    return page


def _table(page) -> str:
    """The token table's text, without the timer Gradio shows over it while it runs."""
    text = page.locator("#bl-token-table").inner_text()
    return "\n".join(line for line in text.splitlines() if not re.fullmatch(r"[\d.]+s|\s*", line))


def _toasts(page) -> list[str]:
    return page.locator(".toast-body").all_inner_texts()  # at once: a toast may go between two reads


def _set_slider(panel, label: str, value: int):
    b = panel.get_by_label(f"number input for {label}")
    b.fill(str(value))
    b.press("Tab")


ATT_TEXT = "the dog chased the ball because it was bored ."
MASK_TEXT = "the acting was [MASK] and the plot was [MASK] ."
TOK_TEXT = "the overacting in this rewatchable sequel"
TOK_PAIR_LABEL = "Second sentence (optional: makes a pair, segment B)"
TABLE_HAS = "want => (document.querySelector('#bl-token-table') || {innerText: ''}).innerText.includes(want)"


@pytest.mark.slow
def test_links_reproduce_views_and_survive_strangers(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        # 1. Clicking through: Attention at layer 3, head 2; its copied link; Fill-mask; Tokenize
        page.set_default_timeout(90_000)  # the page opens 14 tabs' views at once: on 2 busy cores it stalls a while
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for()
        page.get_by_role("tab", name="Attention").click()
        clicked = _panel(page)
        clicked.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
        clicked.get_by_label("Text", exact=True).fill(ATT_TEXT)
        _set_slider(clicked, "Layer", 3)
        _set_slider(clicked, "Head", 2)
        clicked.get_by_role("button", name="Show attention").click()
        page.wait_for_function("() => document.body.innerText.includes('bored')", timeout=WAIT_MS)
        att_by_hand = _figures(page, "Layer 3, head 2")
        clicked.get_by_role("button", name="Copy link").click()
        link_box = clicked.locator(".bl-link-url textarea, .bl-link-url input").first
        page.wait_for_function("e => e.value.startsWith('http')", arg=link_box.element_handle())
        copied = link_box.input_value()
        assert "tab=attention" in copied and "layer=3" in copied and "head=2" in copied, copied
        shot(page, "links_attention_desktop.png")

        page.get_by_role("tab", name="Fill-mask").click()
        clicked = _panel(page)
        clicked.get_by_label("Text with [MASK]").fill(MASK_TEXT)
        _set_slider(clicked, "How many guesses (top-k)", 7)
        clicked.get_by_role("button", name="Predict", exact=True).click()
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(gd => "
                               "(gd.data || []).length === 2 && gd.data[0].y.length === 7)", timeout=WAIT_MS)
        mask_by_hand = _figures(page, "Guesses for the [MASK]s")

        page.get_by_role("tab", name="Tokenize").click()
        clicked = _panel(page)
        clicked.get_by_label("Text", exact=True).fill(TOK_TEXT)
        clicked.get_by_label(TOK_PAIR_LABEL).fill("a great film")
        clicked.get_by_role("button", name="Tokenize", exact=True).click()
        page.wait_for_function(TABLE_HAS, arg="film", timeout=WAIT_MS)
        page.wait_for_timeout(1000)
        table_by_hand = _table(page)
        assert "[SEP]" in table_by_hand and "##" in table_by_hand

        # 2. The same views from links, each opened in a fresh page
        page.close()
        page = _new_page(browser, DESKTOP, errors)
        page.goto(copied)
        _figures(page, "Layer 3, head 2")
        linked = _figures(page, "Layer 3, mean of")  # the layer's head average is drawn after the head
        assert linked == att_by_hand
        assert "10 bored" in json.dumps(linked[0]["data"][0]["x"])
        assert page.get_by_role("tab", name="Attention", selected=True).count() == 1
        assert _panel(page).get_by_label("Text", exact=True).input_value() == ATT_TEXT

        page.goto(server + url("fill-mask", text=MASK_TEXT, k=7))
        linked = _figures(page, "Guesses for the [MASK]s")
        assert [len(t["y"]) for t in linked[0]["data"]] == [7, 7]
        assert linked == mask_by_hand

        page.goto(server + url("tokenize", text=TOK_TEXT, pair="a great film"))
        page.wait_for_function(TABLE_HAS, arg="film", timeout=WAIT_MS)
        page.wait_for_timeout(1500)
        assert _table(page) == table_by_hand

        # 3. A hostile link: one message naming what was wrong; the page still works
        page.close()
        page = _new_page(browser, DESKTOP, errors)
        page.goto(server + "?tab=attention&layer=99&head=zz&hide=maybe&bogus=1&model=nobody%2Fnothing&text="
                  + "x" * 3000)
        panel = _panel(page)
        page.locator(".toast-body").first.wait_for()
        said = _toasts(page)  # read at once: a toast closes itself after a few seconds
        figs = _figures(page, "Layer ")
        assert len(said) == 1 and len(_toasts(page)) <= 1, (said, _toasts(page))
        assert all(w in said[0] for w in ("text", "layer", "head", "hide", "nobody/nothing")), said
        layers = panel.get_by_label("number input for Layer").input_value()
        assert int(layers) > 1 and figs[0]["title"].startswith(f"Layer {layers}, head 1"), (figs[0]["title"], layers)
        assert page.locator("#model-card").get_by_text("default (shipped)").count() == 1
        assert page.locator(".error").count() == 0

        # 4. On a phone: an unknown tab is one message and the first tab; its copy button fits
        page.close()
        phone = _new_page(browser, PHONE, errors)
        fetched = []  # a link's markup must stay text: no tracking pixel fetched, no live link shown
        phone.on("request", lambda r: fetched.append(r.url) if urlparse(r.url).path.endswith("pixel1") else None)
        phone.goto(server + "?tab=no-such-tab%3Cimg%20src%3D%2Fpixel1%3E&text=hello")
        phone.locator(".toast-body").first.wait_for()
        said = _toasts(phone)
        phone.wait_for_timeout(1500)
        assert len(said) == 1 and len(_toasts(phone)) <= 1 and "no-such-tab<img src=/pixel1>" in said[0], said
        assert not fetched and phone.locator(".toast-body img").count() == 0, fetched
        assert phone.get_by_role("tab").first.get_attribute("aria-selected") == "true"  # the first tab, as without a link
        phone.get_by_role("tab", name="Tokenize").click()
        panel = _panel(phone)
        panel.get_by_role("button", name="Copy link").click()
        link_box = panel.locator(".bl-link-url textarea, .bl-link-url input").first
        phone.wait_for_function("e => e.value.includes('tab=tokenize')", arg=link_box.element_handle())
        panel.locator(".bl-link").first.scroll_into_view_if_needed()
        shot(phone, "links_phone.png")
        for part in (panel.get_by_role("button", name="Copy link"), link_box):
            b = box(part)
            assert b["x"] >= 0 and b["x"] + b["w"] <= PHONE[0], b
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE[0] + 2
        assert phone.locator(".error").count() == 0
    assert not outside, outside[:5]
    assert not errors, errors


@pytest.mark.slow
def test_a_reload_comes_back_to_the_open_tab(server):
    """issue 42, item 5: a reload landed on the Lessons; the address now names the open tab."""
    with chromium_page(DESKTOP) as (_, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Attention").click()
        page.wait_for_function("() => new URL(location.href).searchParams.get('tab') === 'attention'",
                               timeout=WAIT_MS)
        page.reload()
        page.get_by_role("tab", name="Attention", selected=True).wait_for(timeout=WAIT_MS)
        _panel(page).locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)  # its view drawn, not only its name
        page.get_by_role("tab", name="Scaling").click()  # another tab replaces it
        page.wait_for_function("() => location.search === '?tab=scaling'", timeout=WAIT_MS)
        assert not outside and not errors, (outside, errors)
