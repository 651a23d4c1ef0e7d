"""The page around the tabs, as a student meets it: the model picker (a typo is one message and the
working model stays), and every tab reachable and readable on a phone held upright (390×844)."""
import re
import time

import pytest
from browser import DESKTOP, PHONE, ROOT, WAIT_MS, chromium_page, shot

TABS = ["Lessons", "Tokenize", "Masking lab", "Fill-mask", "Next sentence", "Attention", "Embeddings", "Architecture",
        "Pre-train", "Fine-tune", "Distil", "Race", "Scaling", "Probing"]


@pytest.mark.slow
def test_a_picker_typo_is_one_message_and_the_working_model_stays(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        card = page.locator("#model-card")
        card.get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Tokenize").click()  # the app opens on Lessons
        panel = page.locator("[role=tabpanel]:visible").first
        panel.get_by_text("tokens for").first.wait_for(timeout=WAIT_MS)  # Tokenize shows the example on load
        box = page.get_by_role("combobox", name="Model")
        box.fill("nobody/no-such-model")
        box.press("Enter")
        toast = page.locator(".toast-body").filter(has_text="no-such-model")
        toast.first.wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(4000)  # time for any other handler that would also complain
        shot(page, "picker_typo.png")
        said = page.locator(".toast-body").all_inner_texts()  # at once: a toast may go between two reads
        assert toast.count() == 1 and not re.search(r"\(\d+\)", said[0]), said  # Gradio folds repeats into "(7)"
        assert re.search(r"[.!?] Still using default \(shipped\)\.", toast.first.inner_text())  # a sentence each
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
        page.locator(".toast-body").filter(has_text="not-a-run").first.wait_for(timeout=WAIT_MS)
        assert box.input_value() == "default (shipped)"
    assert not outside, outside[:5]
    assert not errors, errors


@pytest.mark.slow
def test_every_tab_is_reachable_and_fits_a_phone(server):
    with chromium_page(PHONE) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        for i, name in enumerate(TABS):
            tab = page.get_by_role("tab", name=name)
            assert tab.is_visible(), f"the {name} tab is hidden on a phone"
            box = tab.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0], f"the {name} tab is off screen"
            tab.click()
            page.wait_for_timeout(1500)
            shot(page, f"phone_{i}_{name.lower().replace(' ', '_')}.png", full_page=True)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= PHONE[0] + 2, f"{name}: the page is {wide} px wide on a {PHONE[0]} px phone"
        card = page.locator("#model-card").bounding_box()  # the card reads across, not one word per line
        assert card["width"] > 0.8 * (PHONE[0] - 40) and card["height"] < 90
    assert not outside, outside[:5]
    assert not errors, errors


def _two_layer_run(runs) -> str:
    """A finished run whose model is the shipped one cut to 2 layers: a second model to switch to."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file
    src, run = ROOT / "assets" / "default-model", runs / "two-layers"
    shutil.copytree(src, run / "model")
    cfg = json.loads((src / "config.json").read_text())
    (run / "model" / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 2}))
    weights = load_file(src / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not re.search(r"\.layer\.[23]\.", k)},
              run / "model" / "model.safetensors")
    (run / "status.json").write_text(json.dumps({"name": "two-layers", "kind": "pretrain", "state": "finished"}))
    return "run: two-layers"


def _wait_for_layers(panel, n: str) -> None:
    """The attention tab's Layer slider reaches up to layer n (it is fitted to the model in use)."""
    slider = panel.locator("input[type=range]").first
    slider.wait_for(timeout=WAIT_MS)
    t0 = time.time()
    while slider.get_attribute("max") != n:
        assert time.time() - t0 < 120, f"the Layer slider goes to {slider.get_attribute('max')}, not {n}"
        time.sleep(0.25)


@pytest.mark.slow
def test_a_new_model_redraws_the_open_tab_and_the_others_when_opened(server, plain_runs):
    """Switching the model redraws the tab in view at once; every other tab draws the new model when
    it is opened (all fourteen redrawing at once froze a 2-core laptop's page)."""
    choice = _two_layer_run(plain_runs)
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Attention").click()
        panel = page.locator("[role=tabpanel]:visible").first
        _wait_for_layers(panel, "4")
        page.get_by_role("tab", name="Architecture").click()  # drawn for the shipped model, then left
        page.get_by_role("tab", name="Tokenize").click()
        box = page.get_by_role("combobox", name="Model")
        box.fill(choice)
        asked = []  # what the page asks the server to run from here on
        page.on("request", lambda r: asked.append(r.url) if "/queue/join" in r.url else None)
        box.press("Enter")
        page.locator("#model-card").get_by_text("two-layers").wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(5000)
        # the pick, then Tokenize's redraw; not the tabs drawn before (7 requests in all, when they did)
        assert len(asked) <= 3, asked
        page.get_by_role("tab", name="Attention").click()  # a tab left open on the old model follows
        _wait_for_layers(page.locator("[role=tabpanel]:visible").first, "2")
        shot(page, "model_switch_attention.png")
    assert not outside, outside[:5]
    assert not errors, errors


FONT_CHECK = """async ([weight, text]) => {
  await document.fonts.ready;
  await document.fonts.load(`${weight} 20px "Source Sans Pro"`, text);
  const width = (fallback, c) => {
    const s = document.createElement("span");
    s.style.cssText = `font: ${weight} 20px "Source Sans Pro", ${fallback}; position: absolute; white-space: pre`;
    s.textContent = c;
    document.body.appendChild(s);
    const w = s.getBoundingClientRect().width;
    s.remove();
    return w;
  };
  // the letters the page's font lacks at this weight: they take the fallback's width
  return [...text].filter(c => c.trim() && Math.abs(width("serif", c) - width("monospace", c)) > 0.01);
}"""


@pytest.mark.slow
def test_bold_text_is_one_font(server):
    """Issue 42, item 10: Gradio's bundled semibold face holds 55 glyphs, so bold "ALBERT" took C to Z
    from a fallback font and read "ALʙERT". A letter drawn from the page's font is as wide whatever the
    fallback; one the font lacks changes width with it."""
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        text = "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789 %-.,:()"
        for weight in (400, 600, 700):  # the prose's normal, Gradio's bold (semibold) and <b>
            missing = page.evaluate(FONT_CHECK, [weight, text])
            assert not missing, f"weight {weight}: {''.join(missing)} drawn from another font"
        bold = page.locator("#bl-intro strong, #bl-intro b").first  # a bold word the page shows
        if bold.count():
            assert "Source Sans Pro" in bold.evaluate("e => getComputedStyle(e).fontFamily")
    assert not errors, errors
