"""The text tabs in Chromium, as a student uses them (issue 15): a token table on the first page and
headers that read at phone width, a paste cut at the box's limit is said, the masking lab re-runs on a
typed seed and names the field it refuses, fill-mask shows the filled sentence and the predictions at
every layer, next sentence shows the measured accuracy and a ranking."""
import re

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, cut_columns, new_page, shot

pytestmark = pytest.mark.slow
RIVER = ["We sat on the river bank.", "My phone battery died yesterday.\nThe water was cold and brown.\n"
         "The bank raised its interest rates."]


def tab(page, name):
    page.get_by_role("tab", name=name).click()
    return page.locator("[role=tabpanel]:visible").first


@pytest.fixture(scope="module")
def laptop(server):
    """One desktop page for the laptop checks, opened once; no JavaScript error, nothing fetched outside."""
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.browser_errors = errors  # the phone page reports its errors here too
        yield page
    assert not outside, outside[:5]
    assert not errors, errors


def test_tokenize_shows_tokens_on_load_and_says_a_paste_was_cut(laptop):
    page = laptop
    panel = tab(page, "Tokenize")
    rows = panel.locator("#bl-token-table [role=row]:has([role=gridcell]):visible")
    rows.first.wait_for(timeout=WAIT_MS)  # no click: the example's tokens are there on load
    assert rows.count() >= 5
    box = panel.get_by_label("Text", exact=True)
    box.fill("")
    box.focus()
    page.keyboard.insert_text("word " * 40_001)  # 200,005 characters typed: the box keeps 200,000
    assert len(box.input_value()) == 200_000
    panel.get_by_role("button", name="Tokenize").click()
    panel.get_by_text("your browser cut the rest off").first.wait_for(timeout=WAIT_MS)


def test_masking_lab_reruns_on_a_typed_seed_and_names_the_field(laptop):
    page = laptop
    panel = tab(page, "Masking lab")
    panel.get_by_text("Draw #0").first.wait_for(timeout=WAIT_MS)
    seed = panel.get_by_label("Seed (draw number)")
    seed.fill("7")  # typing alone re-runs: no button
    panel.get_by_text("Draw #7").first.wait_for(timeout=WAIT_MS)
    seed.fill("-5")
    page.get_by_text(re.compile(r"seed \(draw number\) must be 0 or more")).first.wait_for(timeout=WAIT_MS)
    page.wait_for_timeout(3000)  # time for the score section below, which re-runs on the seed too
    said = page.locator(".toast-body").all_inner_texts()  # at once: a toast may go between two reads
    assert len(said) == 1 and not re.search(r"\(\d+\)|4611686018427387904", said[0]), said  # one message
    panel.get_by_text("Fix the draw above first").first.wait_for(timeout=WAIT_MS)  # the section's own note


def test_fill_mask_shows_the_filled_sentence_and_every_layer(laptop):
    page = laptop
    panel = tab(page, "Fill-mask")
    panel.get_by_label("Text with [MASK]").fill("the acting was [MASK] .")
    panel.get_by_role("button", name="Predict").click()
    mark = panel.locator("mark").first
    mark.wait_for(timeout=WAIT_MS)  # the filled sentence, the guessed word highlighted
    assert mark.inner_text().strip() and "[MASK]" not in mark.inner_text()
    assert "the acting was" in panel.locator("li:has(mark)").first.inner_text()
    # the logit lens's figure (its title, not the explanation beside it, which says "after each layer" too)
    panel.locator("svg text", has_text=re.compile("after each layer")).first.wait_for(timeout=WAIT_MS)
    panel.locator("svg text", has_text=re.compile("^embeddings$")).first.wait_for(timeout=WAIT_MS)
    for row in ("embeddings", "layer 1", "layer 4"):
        assert panel.locator("svg text", has_text=re.compile(f"^{row}$")).count() == 1, row
    shot(page, "text_fill_mask_desktop.png", full_page=True)
    panel.get_by_label("Text with [MASK]").fill("no gap in this one .")
    panel.get_by_role("button", name="Predict").click()
    page.locator(".toast-body").filter(has_text="No [MASK]").first.wait_for(timeout=WAIT_MS)
    seen = []  # for 2.5 s (time for the logit lens, which follows the same button), however long toasts stay
    for _ in range(10):
        said = "\n".join(page.locator(".toast-body").all_inner_texts())  # Gradio folds toasts: "Error (2)"
        seen.append(said.count("No [MASK]"))
        page.wait_for_timeout(250)
    assert max(seen) == 1, seen  # the fill-mask view's message, never the lens's too
    # issue 42, item 3: what answered the previous sentence does not stay on screen under the message
    # (the quiz and Generate below have forms and answers of their own, which this error leaves alone)
    page.wait_for_function("""() => {
        const p = [...document.querySelectorAll('[role=tabpanel]')].find(e => e.offsetParent !== null);
        const mine = sel => p && [...p.querySelectorAll(sel)]
            .filter(e => !e.closest('#facts-view, #generate-view, #generate-masks'));
        return p && !mine('mark').length && !mine('.js-plotly-plot').length
            && !(document.querySelector('#fill-in-turn')?.innerText.trim()); }""", timeout=WAIT_MS)
    assert panel.locator("svg text", has_text="after each layer").count() == 0
    assert panel.locator(".error").filter(has_text="Error").count() == 0  # no "Error" badge left on a cleared view
    shot(page, "text_fill_mask_error_desktop.png", full_page=True)


def test_next_sentence_river_bank_shows_accuracy_and_ranking(laptop):
    page = laptop
    panel = tab(page, "Next sentence")
    panel.get_by_label("Sentence A").fill(RIVER[0])
    panel.get_by_label("Candidate sentences B (one per line)").fill(RIVER[1])
    panel.get_by_role("button", name="Rank the B's").click()
    trust = panel.get_by_text(re.compile(r"held-out sentence pairs")).first
    trust.wait_for(timeout=WAIT_MS)  # measured once per model: 200 pairs
    assert re.search(r"right \d+% of the time", trust.inner_text())
    ranked = panel.get_by_text("The model ranks the candidates").locator("..")
    # the page may show an earlier ranking (the example's, run on load) until this one arrives
    ranked.filter(has_text="My phone battery").wait_for(timeout=WAIT_MS)
    assert "1st" in ranked.inner_text() and "2nd" in ranked.inner_text() and "3rd" in ranked.inner_text()
    assert "My phone battery died yesterday." in ranked.inner_text()
    page.wait_for_timeout(300)
    shot(page, "text_nsp_desktop.png")


def test_text_tabs_on_a_phone(server, laptop):
    """At 390 px: token-table headers on one line, plot titles inside their plots (same browser, a phone's page)."""
    page = new_page(laptop.context.browser, PHONE)
    page.on("pageerror", lambda e: laptop.browser_errors.append(str(e)))
    page.goto(server)
    panel = tab(page, "Tokenize")
    panel.locator("#bl-token-table [role=row]:has([role=gridcell]):visible").first.wait_for(timeout=WAIT_MS)
    heads = panel.locator("#bl-token-table [role=columnheader]:visible")
    assert heads.count() >= 7
    line = min(h.bounding_box()["height"] for h in heads.all())
    for h in heads.all():  # a header on one line, never broken into 2-letter pieces
        assert h.bounding_box()["height"] <= line * 1.3, h.inner_text()
    assert not cut_columns(panel.locator("#bl-token-table")), cut_columns(panel.locator("#bl-token-table"))
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= PHONE[0] + 2, f"the page is {wide} px wide"  # the examples too (a 2-column table was cut)
    assert panel.locator("button").filter(has_text="the plot , however").count() == 1  # an example, as a button
    shot(page, "text_tokenize_phone.png", full_page=True)
    for name in ("Masking lab", "Fill-mask", "Next sentence"):
        panel = tab(page, name)
        panel.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(500)
        for plot in panel.locator(".js-plotly-plot").all():  # plot titles inside their plot
            frame = plot.bounding_box()
            for title in plot.locator(".gtitle").all():
                box = title.bounding_box()
                assert frame["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1, name
        if name == "Masking lab":  # the score table's headers on one line: it broke "posi/ti/on" (issue 31, item 7)
            heads = panel.locator("#mask-score-table [role=columnheader]:visible")
            heads.first.wait_for(timeout=WAIT_MS)
            one_line = [h.bounding_box()["height"] for h in heads.all()]
            assert len(one_line) >= 8 and max(one_line) <= 1.3 * min(one_line) and max(one_line) < 45, one_line
        shot(page, f"text_{name.lower().replace(' ', '_')}_phone.png", full_page=True)
    page.close()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_two_masks_one_pass_against_one_at_a_time(server, laptop, size):
    """issue 32, item 3: the lesson's example, one click away under Fill-mask's examples, shows 'the the'
    from one pass beside the one-at-a-time filling, the table within the screen's width."""
    phone = size == PHONE
    page = new_page(laptop.context.browser, size)
    page.on("pageerror", lambda e: laptop.browser_errors.append(str(e)))
    page.goto(server)
    panel = tab(page, "Fill-mask")
    panel.locator("mark").first.wait_for(timeout=WAIT_MS)  # the tab's own first result
    panel.get_by_text("i saw it in [MASK] [MASK] last year .").first.click()  # the example
    view = panel.locator("#fill-in-turn")
    rows = view.locator("tr")
    rows.nth(2).wait_for(timeout=WAIT_MS)
    assert rows.count() == 3
    assert "the the" in rows.nth(1).inner_text() and "the the" not in rows.nth(2).inner_text()
    assert "as likely" in view.inner_text()
    box = view.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 1, box  # the table scrolls inside, if at all
    view.scroll_into_view_if_needed()
    shot(page, f"text_fill_in_turn_{'phone' if phone else 'desktop'}.png")
    page.close()


@pytest.mark.slow
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_spans_from_lesson_2s_link(server, laptop, size):
    """Lesson 2's span link: the box is ticked, the draw says spans and how long the runs were. The page
    comes from the module's browser: a second sync Playwright inside the first one's loop is refused."""
    from bertlab.app.lessons import course_a
    from bertlab.app.ui.shared import links
    link = next(t for t in course_a.MASKING.try_its if t.params.get("spans"))
    phone = size == PHONE
    page = new_page(laptop.context.browser, size)
    page.on("pageerror", lambda e: laptop.browser_errors.append(str(e)))
    page.goto(server.rstrip("/") + "/" + links.url(link.tab, **link.params))
    panel = page.locator("[role=tabpanel]:visible").first
    panel.get_by_text("spans of whole words").first.wait_for(timeout=WAIT_MS)
    assert page.locator("#masking-spans input[type=checkbox]").is_checked()
    said = panel.get_by_text("came in runs of").first.inner_text()
    # issue 42, item 4: the draw spends the rate's budget (35 % of this sentence was hidden before), and
    # the runs are said in the pieces shown and in words
    chosen, maskable = map(int, re.search(r"(\d+) of (\d+) maskable pieces selected", said).groups())
    assert abs(chosen - round(link.params["rate"] * maskable)) <= 1 < chosen
    pieces, words = map(float, re.search(r"runs of ([\d.]+) pieces \(([\d.]+) words\)", said).groups())
    assert 1 < words <= pieces <= round(link.params["rate"] * maskable) + 1
    page.wait_for_timeout(800)
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
    shot(page, f"masking_spans_{'phone' if phone else 'desktop'}.png")
    page.close()


def test_mask_gradient_through_the_api(client):
    """issue 44, item 7: the API gives lesson 2's draw's gradient, and what it says are its own numbers
    (tests/test_mlm_gradient.py checks those against the library and autograd)."""
    from gradio_client.exceptions import AppError

    from bertlab.app.lessons import course_a
    from bertlab.app.ui.shared import models
    q = next(t for t in course_a.MASKING.try_its if t.params.get("view") == "gradient").params
    args = (q["text"], q["rate"], q["whole_word"], q["seed"], q["position"], models.DEFAULT, False)
    said, fig, table, rows_said, rows, data = client.predict(*args, api_name="/mask_gradient")
    assert data["max_abs_diff"] < 1e-6 and f"is **{data['max_abs_diff']:.1e}** (fp32)" in said
    assert f"{data['M']} of {data['T']} positions selected" in said and f"= **{data['loss']:.3f}**" in said
    assert data["unselected_max"] == 0.0 and "exactly 0" in said
    assert all(p["norm"] == 0 for p in data["positions"] if p["original"] is None)
    entries = data["inspected"]["entries"]
    assert data["inspected"]["position"] == [p["position"] for p in data["positions"] if p["original"]][q["position"] - 1]
    assert [r[0] for r in table["data"]] == [e["token"] for e in entries] and entries[0]["token"] == \
        data["inspected"]["original"] and entries[0]["p_minus_onehot"] < 0 < entries[1]["p_minus_onehot"]
    assert f"**{data['table']['out_rows']:,} of {data['V']:,} rows**" in rows_said
    with pytest.raises(AppError, match="Selected piece to inspect"):
        client.predict(*args[:4], 0, *args[5:], api_name="/mask_gradient")


def test_lesson_2s_gradient_link_opens_the_view(server, laptop):
    """issue 44, item 7: lesson 2's link opens the Masking lab on its gradient sub-tab with the piece filled;
    the view says the autograd check and shows a bar a position and the entries, at a laptop's width and
    then, the same page narrowed (no second load), at a phone's."""
    from bertlab.app.lessons import course_a
    from bertlab.app.ui.shared import links
    link = next(t for t in course_a.MASKING.try_its if t.params.get("view") == "gradient")
    page = new_page(laptop.context.browser, DESKTOP)
    page.on("pageerror", lambda e: laptop.browser_errors.append(str(e)))
    page.goto(server.rstrip("/") + "/" + links.url(link.tab, **link.params))
    page.wait_for_function("() => [...document.querySelectorAll('[role=tab]')].some(t => t.innerText.trim() === "
                           "'The gradient of the loss' && t.getAttribute('aria-selected') === 'true')", timeout=WAIT_MS)
    said = page.locator("#mask-grad-said")
    said.filter(has_text=f"Draw #{link.params['seed']}").wait_for(timeout=WAIT_MS)
    text = said.inner_text()
    assert float(re.search(r"scores is (\S+) \(fp32\)", text).group(1)) < 1e-6 and "exactly 0" in text
    assert page.locator("#mask-grad-position input").input_value() == str(link.params["position"])
    assert re.search(rf"The {link.params['position']}th selected piece: position \d+", text)
    page.locator("#mask-grad-plot .js-plotly-plot").wait_for(timeout=WAIT_MS)
    table = page.locator("#mask-grad-entries")
    table.locator("[role=columnheader]").first.wait_for(timeout=WAIT_MS)
    for width, height in (DESKTOP, PHONE):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(800)
        high = [h.bounding_box()["height"] for h in table.locator("[role=columnheader]:visible").all()]
        assert len(high) == 7 and max(high) <= 1.3 * min(high), (width, high)  # each header on one line
        assert width < 600 or not cut_columns(table), cut_columns(table)  # a phone scrolls the table inside
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        said.scroll_into_view_if_needed()
        shot(page, f"masking_gradient_{'phone' if width < 600 else 'desktop'}.png", full_page=True)
    page.close()


def test_what_bert_knows_through_the_api_and_from_lesson_3s_link(server, laptop, client):
    """issue 44, item 9: /facts gives the shipped model's own numbers and one message for a relation that is
    not offered; lesson 3's link opens the quiz on capitals in view, its tables within 1280 and 390 px."""
    from gradio_client.exceptions import AppError

    import bertlab
    from bertlab.analysis import facts
    from bertlab.app.lessons import course_a
    from bertlab.app.ui.shared import links
    view, raw = client.predict(relation="genre", api_name="/facts")
    want = facts.score(*bertlab.load_pretrained(), "genre")
    assert raw["relations"] == want["relations"]
    assert [r["rank"] for r in raw["rows"]] == [r["rank"] for r in want["rows"]]
    assert "P@10" in view and "Traceback" not in view
    with pytest.raises(AppError) as e:
        client.predict(relation="capitals", api_name="/facts")
    assert "capitals" in str(e.value) and "Traceback" not in str(e.value)
    link = next(t for t in course_a.FILL.try_its if "relation" in t.params)
    page = new_page(laptop.context.browser, DESKTOP)
    page.on("pageerror", lambda e: laptop.browser_errors.append(str(e)))
    page.goto(server.rstrip("/") + "/" + links.url(link.tab, **link.params))
    quiz = page.locator("#facts-view")
    quiz.get_by_text("a country's capital city").first.wait_for(timeout=WAIT_MS)
    assert quiz.get_by_text("the capital of france is [MASK] .").count() == 1
    assert quiz.get_by_text("the exorcist is a famous").count() == 0  # one relation: capitals only
    page.wait_for_timeout(300)  # the scroll, after the answer is drawn
    top = page.evaluate("document.getElementById('facts-relation').getBoundingClientRect().top")
    assert 0 <= top < DESKTOP[1] / 2, top  # the link brings the quiz, far down the tab, into view
    for size in (DESKTOP, PHONE):
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.wait_for_timeout(500)
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1, size
        box = quiz.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 1, (size, box)
        page.locator("#facts-relation").scroll_into_view_if_needed()
        shot(page, f"text_facts_{'phone' if size == PHONE else 'desktop'}.png")
    page.close()


def test_generate_through_the_api_and_one_click_away(server, laptop, client):
    """issue 44, item 1: /generate gives analysis.generate's steps on the shipped (masked-word) model, says
    why it fails, and one message for an empty prompt; an example under Fill-mask shows it (on the laptop
    page, already open), within 1280 and 390 px."""
    from gradio_client.exceptions import AppError

    import bertlab
    from bertlab.analysis.generate import generate
    from bertlab.app.ui.text import generate_view
    view, _, raw = client.predict(prompt="the plot was", new_tokens=4, how="greedy", k=10, seed=0,
                                  api_name="/generate")
    want = generate(*bertlab.load_pretrained(), "the plot was", 4)
    assert raw["mode"] == "masked" and [s["id"] for s in raw["steps"]] == [s["id"] for s in want["steps"]]
    assert "masked-word model" in view and "Traceback" not in view
    with pytest.raises(AppError) as e:
        client.predict(prompt="  ", new_tokens=4, how="greedy", k=10, seed=0, api_name="/generate")
    assert "opening is empty" in str(e.value) and "Traceback" not in str(e.value)
    prompt, n, _ = generate_view.EXAMPLES[2]
    page = laptop
    panel = tab(page, "Fill-mask")
    panel.get_by_text(prompt).first.click()  # the example: sampled, 15 tokens
    out = panel.locator("#generate-view")
    out.get_by_text(f"out of {n}").first.wait_for(timeout=WAIT_MS)
    assert "masked-word model" in out.inner_text()
    try:
        for size in (DESKTOP, PHONE):
            page.set_viewport_size({"width": size[0], "height": size[1]})
            page.wait_for_timeout(300)
            assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1, size
            box = out.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 1, (size, box)
            out.scroll_into_view_if_needed()
            shot(page, f"text_generate_{'phone' if size == PHONE else 'desktop'}.png")
            shot(page.locator("#generate-masks"), f"text_generate_masks_{'phone' if size == PHONE else 'desktop'}.png")
    finally:
        page.set_viewport_size({"width": DESKTOP[0], "height": DESKTOP[1]})  # the laptop page, as it was
