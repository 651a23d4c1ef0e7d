"""The app as people use it: a real server, its API through gradio_client, the page in Chromium."""

import pytest
from browser import WAIT_MS, chromium_page, shot

API = {  # api name: (good keyword arguments, bad keyword arguments, words expected in the error)
    "/tokenize": ({"text": "the river bank", "pair": "it was muddy ."}, {"text": "   "}, "empty"),
    "/mask_preview": ({"text": "the acting was great and the plot was fun ."}, {"text": ""}, "empty"),
    "/fill_mask": ({"text": "the acting was [MASK] ."}, {"text": "no gap here"}, "[MASK]"),
    "/nsp": ({"first": "the film was long .", "candidates": "i liked it .\nthe bank raised rates ."},
             {"first": "the film was long .", "candidates": ""}, "candidate sentence"),
    "/attention": ({"text": "the river bank was muddy .", "pair": ""}, {"text": "\u200b\u200b"}, "no tokens"),
    "/embeddings": ({"word": "bank", "sentences": "the river bank was muddy .\nthe bank raised rates ."},
                    {"word": "bank", "sentences": "the river bank was muddy .\nwe went home ."}, "we went home"),
    "/architecture": ({"layers": 2, "hidden": 128, "heads": 2}, {"hidden": 100, "heads": 3}, "divisible"),
}


def test_api_endpoints_are_named(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert set(API) <= names


@pytest.mark.parametrize("name", API)
def test_each_api_gives_data_and_clear_errors(client, name):
    from gradio_client.exceptions import AppError
    good, bad, words = API[name]
    out = client.predict(**good, api_name=name)
    assert out is not None and "Traceback" not in str(out)
    with pytest.raises(AppError) as e:
        client.predict(**bad, api_name=name)
    msg = str(e.value)
    assert words.lower() in msg.lower() and "Traceback" not in msg and len(msg) < 400, msg


def test_fill_mask_api_returns_widget_fields(client):
    out = client.predict(text="the acting was [MASK] .", api_name="/fill_mask")
    data = next(o for o in out if isinstance(o, list))  # the JSON output: one list per [MASK]
    assert {"score", "token", "token_str", "sequence"} <= set(data[0][0])
    scores = [c["score"] for c in data[0]]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("   \n\t", "empty"), ("no gap here", "[MASK]"), ("[MASK] " * 50, "at most"),
])
def test_fill_mask_bad_input_messages(client, text, words):
    from gradio_client.exceptions import AppError
    with pytest.raises(AppError) as e:
        client.predict(text=text, api_name="/fill_mask")
    assert words.lower() in str(e.value).lower()


def test_a_number_out_of_range_names_its_field(client):
    from gradio_client.exceptions import AppError
    with pytest.raises(AppError, match=r"How many guesses \(top-k\): Value 50 is greater than maximum value 20"):
        client.predict(text="the acting was [MASK] .", top_k=50, api_name="/fill_mask")


def test_long_and_odd_text_is_served(client):
    long = ("the acting was [MASK] . " + "the film was long and slow . " * 400)[:10_000]
    assert client.predict(text=long, api_name="/fill_mask")
    for odd in ("😀 [MASK] 🎬", "日本語の[MASK]映画", "مرحبا [MASK] العالم", "a\x00b\x07 [MASK] \u202e"):
        assert client.predict(text=odd, api_name="/fill_mask")
    tok = client.predict(text=long, pair="", api_name="/tokenize")
    assert "cut" in str(tok).lower()


def test_unknown_models_are_clear_errors_and_the_server_lives(client):
    from gradio_client.exceptions import AppError
    for choice, words in (("/no/such/folder", "no such folder"), ("nobody/no-such-bert", "hub")):
        with pytest.raises(AppError) as e:
            client.predict(text="a [MASK] film .", choice=choice, api_name="/fill_mask")
        assert words in str(e.value) and "Traceback" not in str(e.value)
    assert client.predict(text="a [MASK] film .", api_name="/fill_mask")  # still serving


TABS = [  # tab, button to press (None: the tab shows its example on load), what must render
    ("Tokenize", "Tokenize", "text=[CLS]"),
    ("Masking lab", "Mask", ".js-plotly-plot"),
    ("Fill-mask", "Predict", ".js-plotly-plot"),
    ("Next sentence", "Rank the B's", ".js-plotly-plot"),
    ("Attention", "Show attention", ".js-plotly-plot"),
    ("Embeddings", "Compare", ".js-plotly-plot"),
    ("Architecture", "Size it", ".js-plotly-plot"),
]


@pytest.mark.slow
def test_every_tab_in_chromium(server):
    with chromium_page() as (browser, page, outside, errors):
        page.goto(server)  # not "networkidle": Gradio keeps a heartbeat stream open
        page.get_by_text("bertlab").first.wait_for()
        for i, (tab, button, check) in enumerate(TABS):
            page.get_by_role("tab", name=tab).click()
            panel = page.locator("[role=tabpanel]:visible").first
            panel.get_by_role("button", name=button, exact=True).first.click()
            panel.locator(check).first.wait_for(timeout=WAIT_MS)
            page.wait_for_timeout(500)
            shot(page, f"{i}_{tab.lower().replace(' ', '_')}.png", full_page=True)
            assert panel.get_by_text("Traceback").count() == 0
        page.get_by_role("tab", name="Attention").click()  # the offline bertviz view draws into an svg
        page.get_by_role("tab", name="bertviz").click()
        frame = page.frame_locator("iframe:visible").first
        frame.locator("svg").first.wait_for(timeout=WAIT_MS)
        shot(page.locator("iframe:visible").first, "bertviz_head_view.png")
        page.get_by_role("tab", name="Fill-mask").click()
        box = page.get_by_label("Text with [MASK]")
        box.fill("")
        page.get_by_role("button", name="Predict").click()
        page.wait_for_timeout(2000)
        shot(page, "error.png")
        page.get_by_text("text is empty").first.wait_for(timeout=WAIT_MS)  # a clear message, not a traceback
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors
