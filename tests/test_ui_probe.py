"""Probing tab: its API (/probe) with good and bad input, and the default probe run in Chromium."""

import pytest
from browser import WAIT_MS, chromium_page, shot

from bertlab.cache import LRU

RANDOM = "random init (same config)"


def test_probe_api_good_and_bad(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError
    out = client.predict(task="pos", file=None, sample=60, compare=[RANDOM], layer=0, api_name="/probe")
    chart, table, note, data = out
    assert [r["model"] for r in data] == ["default (shipped)", RANDOM]
    assert all(len(r["layers"]) == 5 and {"acc", "control_acc", "selectivity"} <= set(r["layers"][0]) for r in data)
    assert "per-label table at layer 0" in note and table["headers"][0] == "label"
    nouns = ["film", "movie", "plot", "story", "actor", "scene"]
    (tmp_path / "mine.conll").write_text("".join(f"the DT\n{nouns[i % 6]} NN\nwas VBD\n\n" for i in range(30)))
    _, _, note, data = client.predict(task="file", file=handle_file(str(tmp_path / "mine.conll")), compare=[],
                                      api_name="/probe")
    assert [r["task"] for r in data] == ["mine.conll"] and data[0]["labels"] == ["DT", "NN", "VBD"]
    bad = {"no file": (dict(task="file", file=None), "upload a file"),
           "tiny sample": (dict(task="pos", file=None, sample=3), "minimum"),
           "unknown model": (dict(task="pos", file=None, sample=60, compare=["/no/such/model"]), "cannot load")}
    (tmp_path / "x.conll").write_text("the\nfilm\n")
    bad["no labels"] = (dict(task="file", file=handle_file(str(tmp_path / "x.conll"))), "token tag")
    for what, (kw, words) in bad.items():
        with pytest.raises(AppError) as e:
            client.predict(**kw, api_name="/probe")
        msg = str(e.value)
        assert words in msg.lower() and "Traceback" not in msg and "/tmp" not in msg and len(msg) < 400, (what, msg)


@pytest.mark.slow
def test_default_probe_in_chromium(server):
    with chromium_page() as (browser, page, outside, errors):
        page.goto(server)  # not "networkidle": Gradio keeps a heartbeat stream open
        page.get_by_role("tab", name="Probing").click()
        panel = page.locator("[role=tabpanel]:visible").first
        panel.get_by_text("What does each layer know?").wait_for(timeout=WAIT_MS)
        panel.get_by_role("button", name="Run probes").click()  # the defaults: POS, 1,000 sentences, + random init
        try:
            panel.locator(".js-plotly-plot").first.wait_for(timeout=150_000)
        finally:
            shot(page, "7_probing.png", full_page=True)
        panel.get_by_text("most selective layer").first.wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(800)
        traces = panel.locator(".js-plotly-plot .scatterlayer .trace").count()
        assert traces >= 6  # accuracy, control, selectivity for each of two models
        assert panel.locator("#probe-table").get_by_text("NN", exact=True).count() >= 1  # the per-label table
        fit = panel.locator("#probe-table table").first.evaluate(  # the whole table in its box: nothing cut on the right
            "t => t.getBoundingClientRect().right <= t.closest('#probe-table').getBoundingClientRect().right + 1")
        assert fit
        assert panel.get_by_text("Traceback").count() == 0
        shot(page, "7_probing.png", full_page=True)
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors


def test_a_layer_past_the_models_last_says_so():
    """The slider may reach past a smaller model's layers (another model was picked when it was drawn)."""
    import torch

    from bertlab.app.ui.labs.probe_tab import show
    layer = {"acc": 0.8, "control_acc": 0.5, "selectivity": 0.3}
    r = {"num_layers": 2, "best_layer": 1, "most_selective_layer": 1, "layers": [layer] * 3, "labels": ["DT", "NN"],
         "_y_val": torch.tensor([0, 1, 1]), "_pred": [torch.tensor([0, 1, 0])] * 3, "_train_share": [0.5, 0.5],
         "task": "pos", "model": "m", "probe": "linear", "feature": "first", "control": "random tag per word",
         "majority": 0.6, "seconds": 1.0, "notes": [],
         "counts": {"sentences": 3, "train": 2, "validation": 3, "unit": "words", "labels": 2}}
    _, note, data = show([r], 9)
    assert "per-label table at layer 2" in note and "Layer 9 was asked, but this model has layers 0 to 2" in note
    assert data[0]["per_tag"][0]["label"] == "NN"
    assert "was asked" not in show([r], 1)[1] and "was asked" not in show([r], -1)[1]  # -1: the best layer


def test_lru_cache_drops_the_least_recently_used_by_count_and_by_bytes():
    """The cache behind the model, probe-result and feature caches."""
    c = LRU(2)
    c.put("a", 1), c.put("b", 2), c.get("a"), c.put("c", 3)
    assert (c.get("a"), c.get("b"), c.get("c"), len(c)) == (1, None, 3, 2)
    assert c.put("a", 4) == 4 and c.get("a") == 4 and len(c) == 2  # replaced, not duplicated
    b = LRU(max_bytes=10, size=len)
    b.put(1, "x" * 6), b.put(2, "y" * 6)
    assert b.get(1) is None and b.get(2) == "y" * 6
    b.put(3, "z" * 50)  # over the bound on its own: the newest entry stays, alone
    assert len(b) == 1 and b.get(3) == "z" * 50
    assert LRU(0).put("k", 1) == 1  # size 0: keeps nothing, still hands the value back
