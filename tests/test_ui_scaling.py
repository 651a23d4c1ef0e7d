"""The Scaling tab: the calculator's view of a form (table, formulas, Kaplan chart), the published BERTs
one click away, mistakes said as one message; then the served tab in Chromium at 1280×900 and 390×844
and its /scaling endpoint through gradio_client."""
import gradio as gr
import orjson
import pytest
from browser import DESKTOP, PHONE, WAIT_MS, box, chromium_page, figures_fit, shot

from bertlab.analysis import compute
from bertlab.app.ui.labs import scaling_tab
from bertlab.app.ui.shared import common
from bertlab.config import preset


def calc(*values, picker=None):
    """The calculator with the form's values in the page's order (the model picked at the top last)."""
    return scaling_tab.calculate(**dict(zip((*scaling_tab.INPUTS, "picker"), (*values, picker)[:13])))


CUT_WORDS = """(sel) => {  // the words of a table's cells wider than their cell: the browser cut them
    const out = [], ctx = document.createElement('canvas').getContext('2d');
    for (const cell of document.querySelectorAll(sel + ' td, ' + sel + ' th')) {
        const st = getComputedStyle(cell);
        ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
        const room = cell.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
        for (const w of cell.innerText.split(/\\s+/)) if (w && ctx.measureText(w).width > room + 1) out.push(w);
    }
    return out;
}"""


def test_bert_base_example_reads_four_days_and_electras_figure():
    summary, table_md, formulas, fig, data = calc(*scaling_tab.example_row("bert-base"))
    table = {r[0]: r[1] for r in data["table"]}
    assert "| tokens D | **4.26e10** |" in table_md
    assert "4.0 days" in summary and "6.4e19" in summary
    assert table["tokens D"] == "4.26e10" and table["ELECTRA's train FLOPs (printed)"] == "6.4e19"
    assert table["ELECTRA's way, counted here"].startswith("6.4")
    assert formulas.count("**") == 2 * 8 and r"\approx 6ND" in formulas  # 8 formulas, no cost without a price
    assert data["flops_exact"]["flops"] == compute.worked_example("bert-base")["flops_exact"]["flops"]
    orjson.dumps(data)  # what gr.JSON does with it: string keys only
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    line, marker = fig.data
    (note,) = fig.layout.annotations  # placed on the log axis at log10 of L(D)
    assert 10 ** note.y == pytest.approx(data["kaplan_d"]["loss"]) and "L(D)" in note.text
    assert marker.x[0] == compute.non_embedding_params(preset("base")) and marker.text[0] == "BERT-base"


def test_the_corpus_the_paper_and_roberta():
    """issue 32, item 14: BERT's 3.3 B words read about 13 times at the appendix's schedule; the paper's
    "approximately 40 epochs" is the same run at 512 tokens a step; RoBERTa read 49 times the tokens."""
    p = compute.corpus_passes("bert-base")
    assert p["tokens"] == 1_000_000 * 256 * (0.9 * 128 + 0.1 * 512)
    assert p["passes"] == pytest.approx(p["tokens"] / 3.3e9) and round(p["passes"]) == 13
    assert round(p["passes_at_512"]) == p["published"] == 40
    assert p["roberta_tokens"] == 500_000 * 8192 * 512 and round(p["roberta_over_bert"]) == 49
    summary, _, _, _, data = calc(*scaling_tab.example_row("bert-base"))
    table = {r[0]: r[1] for r in data["table"]}
    assert table["corpus (published)"] == "3.3 B words" and table["passes over the corpus"] == "12.9"
    assert table["the paper's ≈ 40 epochs"] == "39.7" and table["RoBERTa's longest run read"] == "2.10e12"
    assert "read about **13 times**" in summary and "**49×** the tokens" in summary
    with pytest.raises(ValueError, match="example must be one of"):
        compute.corpus_passes("gpt-2")


def test_large_example_and_cost():
    row = scaling_tab.example_row("bert-large")
    assert row[0] == "large" and row[8] == 64
    row[10] = 4.5  # dollars per chip-hour
    summary, _, formulas, _, data = calc(*row)
    assert data["cost"]["dollars"] == pytest.approx(4 * 24 * 4.5 * 64, rel=0.01)  # utilisation rounded
    assert "1.9e20" in summary and formulas.count("**") == 2 * 9 and "**Cost**" in formulas


def test_tokens_custom_speed_budget_and_other_members():
    summary, _, _, _, data = calc("tiny", None, 32, "128", 1e7, scaling_tab.CUSTOM, "bf16",
                                                      0.4, 1, 1e9, None, 1e18)
    assert data["tokens"]["tokens"] == pytest.approx(1e7) and data["rate"]["flops_per_second"] == 1e9
    assert data["budget"] == 1e18 and "ELECTRA" not in summary
    _, _, _, fig, data = calc("roberta:base", 1000, 8, "512", None, "h100", "bf16", 0.5, 2, None,
                                               None, None)
    assert data["rate"]["flops_per_second"] == 989e12 and fig.data[1].text[0] == "roberta base"


def test_measured_cpu_and_the_picked_model(monkeypatch):
    monkeypatch.setattr(scaling_tab, "cpu_rate", lambda: 5e9)
    _, _, _, _, data = calc("mini", 100, 8, "128", None, scaling_tab.CPU, "fp32", 1, 1, None, None, None)
    assert data["rate"]["flops_per_second"] == 5e9
    monkeypatch.setattr(common, "config_of", lambda choice: preset("small") if choice == "ok" else None)
    _, _, _, fig, _ = calc(scaling_tab.PICKED, 100, 8, "128", None, "t4", "fp32", 0.5, 1, None, None, None,
                           picker="ok")
    assert "picked model" in fig.data[1].text[0]
    with pytest.raises(gr.Error, match="does not load"):
        calc(scaling_tab.PICKED, 100, 8, "128", None, "t4", "fp32", 0.5, 1, None, None, None, picker="gone")


@pytest.mark.parametrize("change, message", [
    ({1: -5}, "steps must be more than 0"), ({1: None}, "give the steps"), ({3: "128:0.5"}, "add up to 1"),
    ({5: "tpu-v9"}, "accelerator must be one of"), ({5: scaling_tab.CUSTOM}, "type the FLOP/s"),
    ({5: "tpu-v3", 6: "fp32"}, "no fp32"), ({8: 0}, "count must be more than 0"), ({10: -2}, "price_per_hour"),
    ({11: 1e40}, "at most"), ({0: "nope:base"}, "model_type"), ({2: "lots"}, "must be a number"),
])
def test_mistakes_are_one_message(change, message):
    row = scaling_tab.example_row("bert-base")
    for i, v in change.items():
        row[i] = v
    with pytest.raises(gr.Error, match=message) as e:
        calc(*row)
    assert e.value.print_exception is False


@pytest.mark.slow
def test_the_scaling_tab_in_a_browser_and_its_api(server, client):
    res = client.predict(*scaling_tab.example_row("bert-large"), "", api_name="/scaling")
    assert "1.9e20" in res[0] and "4.0 days" in res[0]
    from gradio_client.exceptions import AppError
    for change, words in (({1: -1}, "Steps"), ({5: "tpu-v9"}, "not in the list of choices")):  # one clear line, no traceback
        row = scaling_tab.example_row("bert-base")
        for i, v in change.items():
            row[i] = v
        with pytest.raises(AppError) as e:
            client.predict(*row, "", api_name="/scaling")
        assert words in str(e.value) and "Traceback" not in str(e.value), str(e.value)
    for size, name in ((DESKTOP, "scaling_desktop.png"), (PHONE, "scaling_phone.png")):
        with chromium_page(size) as (browser, page, outside, errors):
            page.goto(server)
            page.get_by_role("tab", name="Scaling").click()
            tab = page.locator("[role=tabpanel]:visible").first
            tab.locator("#scaling-summary").get_by_text("4.0 days").first.wait_for(timeout=WAIT_MS)  # on load
            tab.get_by_role("button", name="BERT-large").click()
            tab.locator("#scaling-summary").get_by_text("1.9e20").wait_for(timeout=WAIT_MS)
            tab.locator("#scaling-formulas .katex").first.wait_for(timeout=WAIT_MS)  # the LaTeX is typeset
            tab.locator("#scaling-plots .js-plotly-plot").first.wait_for()
            page.wait_for_timeout(500)
            figures_fit(page, tab.locator("#scaling-plots"), size[0])
            for m in tab.locator("#scaling-formulas .katex").all():  # long lines wrap, none is cut off
                b = box(m)
                assert b["x"] >= 0 and b["x"] + b["w"] <= size[0] + 1, (size, b, m.inner_text()[:80])
            table = box(tab.locator("#scaling-table table"))
            assert table["x"] + table["w"] <= size[0] + 1, table
            assert not page.evaluate(CUT_WORDS, "#scaling-table"), size  # issue 42, item 7: "quantit|y"
            shot(page, name, full_page=True)
            assert not outside and not errors, (outside, errors)
