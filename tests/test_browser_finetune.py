"""The Fine-tune tab as a student meets it (issues 15 and 18): each method shows its own fields and a
plain note; a comparison of methods is one job that says its ETA before its first run and keeps
refreshing until it ends, then shows its table, its chart and overlaid curves; the try-it box answers
with a run of the comparison; a reloaded page finds the comparison again; the form reads at 1280×900
and at 390×844."""
import re
import time

import pytest
from browser import DESKTOP, PHONE, WAIT_MS, chromium_page, figures_fit, shot


def _box(locator) -> dict:
    return locator.evaluate("e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, "
                            "h: r.height, lh: parseFloat(getComputedStyle(e).lineHeight) || 20}; }")


def _rows(tab) -> list[list[str]]:
    return tab.locator("#finetune-summary [role=row].virtual-row").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))")


def _check_readable(tab, size) -> None:
    """Labels on one or two lines, the empty notes inside their charts, table headers unbroken."""
    label = tab.get_by_text("Layer-wise LR decay", exact=False).first
    b = _box(label)
    assert b["h"] <= 2.5 * b["lh"] and b["w"] >= 120, f"decay label squeezed at {size}: {b}"
    for plot in ("#finetune-plot", "#finetune-confusion"):
        notes = tab.locator(f"{plot} .annotation-text")
        frame = _box(tab.locator(f"{plot} .main-svg").first)
        for i in range(notes.count()):
            n = _box(notes.nth(i))
            assert frame["x"] - 1 <= n["x"] and n["x"] + n["w"] <= frame["x"] + frame["w"] + 1, \
                f"a note of {plot} is clipped at {size}: {n} in {frame}"
    for th in tab.locator("#finetune-summary thead th").all():
        overflow = th.evaluate("e => [...e.querySelectorAll('span, div')].some(s => s.scrollWidth > s.clientWidth + 1)")
        b = _box(th)
        assert not overflow and b["h"] <= 3 * b["lh"] + 24, f"summary header squeezed at {size}: {th.inner_text()!r} {b}"


def _pick_method(tab, label: str) -> None:
    tab.locator("#finetune-method").get_by_text(label, exact=True).click()


@pytest.mark.slow
def test_methods_a_tiny_comparison_try_it_and_a_reload(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.get_by_role("tab", name="Fine-tune").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.locator("#finetune-params").get_by_text("parameters").wait_for()
        assert not tab.locator("#finetune-lora").is_visible() and tab.locator("#finetune-unfreeze").is_visible()
        _pick_method(tab, "LoRA")
        tab.get_by_label("LoRA rank r").wait_for()
        assert tab.locator("#finetune-lora-targets").is_visible() and not tab.locator("#finetune-unfreeze").is_visible()
        tab.locator("#finetune-method-note").get_by_text("low-rank").wait_for()
        tab.locator("#finetune-lora-targets").get_by_text("key", exact=True).click()  # key off: the count follows
        tab.locator("#finetune-params").get_by_text(re.compile(r"LoRA\*\* trains|LoRA trains")).wait_for()
        shot(page, "finetune_lora_fields.png")
        _pick_method(tab, "Prefix tuning")
        tab.get_by_label("Virtual tokens").wait_for()
        assert not tab.locator("#finetune-lora").is_visible() and not tab.locator("#finetune-adapter").is_visible()
        tab.locator("#finetune-method-note").get_by_text("virtual tokens", exact=False).first.wait_for()
        _pick_method(tab, "Adapters (Houlsby)")
        tab.get_by_label("Adapter size (bottleneck width)").wait_for()
        assert not tab.locator("#finetune-virtual").is_visible()
        tab.get_by_text("More options").click()
        _check_readable(tab, DESKTOP)
        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.wait_for_timeout(500)
        _check_readable(tab, PHONE)
        shot(page, "finetune_phone_empty.png", full_page=True)
        page.set_viewport_size({"width": DESKTOP[0], "height": DESKTOP[1]})

        tab.get_by_label("Use N examples (0 = all)").fill("40")
        tab.get_by_label("Tokens per text").fill("16")
        tab.get_by_label("Batch size").fill("8")
        tab.get_by_label("Epochs").fill("1")
        tab.get_by_label("Run name").fill("cmp")
        tab.locator("#finetune-compare-options").get_by_text("Methods to compare").click()
        box = tab.locator("#finetune-compare-methods")
        for label in ("Full fine-tuning", "BitFit (biases only)", "IA³", "Prefix tuning", "Prompt tuning",
                      "Adapters (Houlsby)"):
            box.get_by_text(label, exact=True).click()  # unticked: frozen and LoRA stay
        tab.get_by_text("2 runs").first.wait_for()
        tab.locator("#finetune-compare").click()
        tab.locator("#finetune-status").get_by_text(re.compile("about .* in all|timing")).first.wait_for(timeout=WAIT_MS)
        tab.locator("#finetune-try").click()  # too early: no run has ended (issue 31, item 2)
        page.locator(".toast-body").filter(has_text=re.compile("no finished run yet|no saved model yet")).first \
            .wait_for(timeout=WAIT_MS)
        assert tab.locator(".error:visible").count() >= 1  # the Error badge over the try-it box
        t0, said = time.time(), []
        while time.time() - t0 < 240:  # the page refreshes by itself until the comparison ended
            said.append(tab.locator("#finetune-status").inner_text())
            if re.search(r"finished in", said[-1]):
                break
            page.wait_for_timeout(400)
        shot(page, "finetune_compare.png", full_page=True)
        assert "finished in" in said[-1], said[-5:]
        eta = next(i for i, s in enumerate(said) if re.search(r"about .* in all", s))
        assert eta <= next((i for i, s in enumerate(said) if "[1/2]" in s), len(said)), said  # the ETA came first
        assert any(re.search(r"run [12] of 2", s) for s in said), said
        assert [r[0].split(":")[0] for r in _rows(tab)] == ["frozen", "lora"]
        assert all(re.search(r"\d+\.\d%", r[2]) for r in _rows(tab)), _rows(tab)
        chart = tab.locator("#finetune-compare-plot")
        assert chart.is_visible() and chart.locator(".scatterlayer .trace").count() == 2
        assert tab.locator("#finetune-plot .legendtext").filter(has_text=re.compile("^(frozen|lora)$")).count() == 2
        figures_fit(page, tab.locator("#finetune-compare-plot, #finetune-plot"), DESKTOP[0])
        chart.scroll_into_view_if_needed()
        shot(page, "finetune_compare_chart.png")

        assert tab.locator("#finetune-try-run").is_visible()
        # the first run's model took over the box: its answer, and no Error badge left from the early try
        tab.locator("#finetune-label").get_by_text(re.compile("positive|negative")).first.wait_for(timeout=WAIT_MS)
        assert tab.locator(".error:visible").count() == 0
        tab.locator("#finetune-try").click()
        tab.locator("#finetune-label").get_by_text(re.compile("positive|negative")).first.wait_for(timeout=WAIT_MS)
        tab.locator("#finetune-try").scroll_into_view_if_needed()
        shot(page, "finetune_try_it.png")

        # issue 32, item 12: the comparison's runs placed by learning rate, BERT-base's band beside them
        tab.locator("#finetune-rates").get_by_text("Runs by learning rate or labelled examples").click()
        tab.locator("#finetune-rates-go").click()
        tab.locator("#finetune-rates-said").get_by_text("2 runs placed").wait_for(timeout=WAIT_MS)
        rates = tab.locator("#finetune-rates-plot")
        assert rates.locator(".scatterlayer .trace").count() == 2
        assert "BERT-base" in rates.inner_text()
        figures_fit(page, rates, DESKTOP[0])
        rates.scroll_into_view_if_needed()
        shot(page, "finetune_rates_desktop.png")
        tab.locator("#finetune-rates-by").get_by_text("labelled examples").click()  # item 9: a learning curve
        tab.locator("#finetune-rates-said").get_by_text("2 runs placed by labelled examples").wait_for(timeout=WAIT_MS)
        assert rates.locator(".scatterlayer .trace").count() == 2 and "BERT-base" not in rates.inner_text()
        assert "labelled examples" in rates.inner_text()
        shot(page, "finetune_learning_curve_desktop.png")

        # issue 32, item 4: what the comparison's runs kept of masked-word skill, measured from a click
        tab.locator("#finetune-forgetting").get_by_text("What fine-tuning forgot").click()
        tab.locator("#finetune-forgetting-go").click()
        said = tab.locator("#finetune-forgetting-said")
        said.get_by_text("kept").first.wait_for(timeout=WAIT_MS)
        lines = said.inner_text().splitlines()
        assert len(lines) == 2 and "cmp/frozen-seed0" in lines[0] and "100% kept" in lines[0], lines
        assert re.search(r"(\d+\.\d)% → (\d+\.\d)% of masked words", lines[1]), lines
        forgot = tab.locator("#finetune-forgetting-plot")
        assert forgot.locator(".barlayer .point").count() == 2
        figures_fit(page, forgot, DESKTOP[0])
        forgot.scroll_into_view_if_needed()
        shot(page, "finetune_forgetting_desktop.png")

        page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
        page.reload()  # a finished comparison comes back: its table and chart
        page.get_by_role("tab", name="Fine-tune").click()
        tab = page.locator("[role=tabpanel]:visible").first
        tab.locator("#finetune-status").get_by_text("finished in").wait_for(timeout=WAIT_MS)
        assert tab.locator("#finetune-run input").input_value() == "cmp"
        assert [r[0].split(":")[0] for r in _rows(tab)] == ["frozen", "lora"]
        tab.get_by_text("More options").click()
        _check_readable(tab, PHONE)
        score = _box(tab.locator("#finetune-summary thead th").nth(2))  # the score, without a sideways scroll
        assert score["x"] + score["w"] <= PHONE[0], f"the comparison's score is off the screen: {score}"
        title, frame = (_box(tab.locator(f"#finetune-confusion {s}").first) for s in (".gtitle", ".main-svg"))
        assert frame["x"] - 1 <= title["x"] and title["x"] + title["w"] <= frame["x"] + frame["w"] + 1, \
            f"the confusion matrix's title is clipped: {title} in {frame}"
        figures_fit(page, tab.locator("#finetune-compare-plot, #finetune-plot"), PHONE[0])
        joins = []  # a finished comparison's page is quiet: storing the picks once set the overlay off in a loop
        page.on("request", lambda r: joins.append((r.post_data or "")[:200]) if "queue/join" in r.url else None)
        page.wait_for_timeout(6000)
        assert len(joins) <= 2, f"{len(joins)} server calls in 6 s on a page that shows a finished run: {joins[:4]}"
        page.wait_for_function("() => !document.querySelector('[role=tabpanel] .progress-text')", timeout=WAIT_MS)
        shot(page, "finetune_phone_compare.png", full_page=True)
        tab.locator("#finetune-rates").get_by_text("Runs by learning rate or labelled examples").click()
        tab.locator("#finetune-rates-go").click()
        tab.locator("#finetune-rates-said").get_by_text("2 runs placed").wait_for(timeout=WAIT_MS)
        figures_fit(page, tab.locator("#finetune-rates-plot"), PHONE[0])
        tab.locator("#finetune-rates-plot").scroll_into_view_if_needed()
        shot(page, "finetune_rates_phone.png")
        tab.locator("#finetune-forgetting").get_by_text("What fine-tuning forgot").click()
        tab.locator("#finetune-forgetting-go").click()  # measured once: the page's answer comes from the cache
        tab.locator("#finetune-forgetting-said").get_by_text("kept").first.wait_for(timeout=WAIT_MS)
        forgot = tab.locator("#finetune-forgetting-plot")
        figures_fit(page, forgot, PHONE[0])
        forgot.scroll_into_view_if_needed()
        shot(page, "finetune_forgetting_phone.png")
        assert page.get_by_text("Traceback").count() == 0
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors


@pytest.mark.slow
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_lesson_8s_last4_and_random_weights_links(server, size):
    """issue 32, items 11 and 9: lesson 8's links open Fine-tune on a frozen encoder with the last four
    layers' [CLS] picked (the line under the form counts the wider head and says what it reads), and on
    full fine-tuning from random weights (picked, and said); both within the screen's width."""
    from bertlab.app.lessons import course_b
    from bertlab.app.ui.shared import links
    tag = "desktop" if size == DESKTOP else "phone"
    last4 = next(t for t in course_b.FINETUNE.try_its if t.params.get("pooling") == "last4")
    scratch = next(t for t in course_b.FINETUNE.try_its if t.params.get("init") == "random")
    with chromium_page(size) as (browser, page, outside, errors):
        page.goto(server.rstrip("/") + "/" + links.url(last4.tab, **last4.params))
        note = page.locator("#finetune-params")
        note.get_by_text("last 4 layers side by side").wait_for(timeout=WAIT_MS)
        text = note.inner_text()
        assert "Frozen encoder" in text and "4 × 256 = 1,024 numbers" in text and "trains 2,050 of" in text
        assert "random weights" not in text
        page.get_by_text("Your own data and the task").first.click()
        assert page.locator("#finetune-pooling input").input_value() == "last 4 layers' [CLS], side by side"
        note.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
        shot(page, f"finetune_last4_{tag}.png")

        page.goto(server.rstrip("/") + "/" + links.url(scratch.tab, **scratch.params))
        note = page.locator("#finetune-params")
        note.get_by_text("From random weights").wait_for(timeout=WAIT_MS)
        assert "Full fine-tuning" in note.inner_text() and "last 4 layers" not in note.inner_text()
        page.get_by_text("More options").first.click()
        assert page.locator("#finetune-init input").input_value() == "random weights"
        page.locator("#finetune-init").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        assert page.evaluate("document.documentElement.scrollWidth") <= size[0] + 1
        shot(page, f"finetune_random_init_{tag}.png")

        bert_rate = next(t for t in course_b.FINETUNE.try_its if t.params.get("lr"))
        page.goto(server.rstrip("/") + "/" + links.url(bert_rate.tab, **bert_rate.params))
        note = page.locator("#finetune-params")
        note.get_by_text("at learning rate 3e-05").wait_for(timeout=WAIT_MS)
        assert "this method's default" not in note.inner_text() and "random weights" not in note.inner_text()
    assert not outside, outside[:5]
    assert not errors, errors
