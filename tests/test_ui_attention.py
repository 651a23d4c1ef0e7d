"""The attention tab's handlers and the offline bertviz page, called directly with the default model."""
import html
import json
import re

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

from bertlab.analysis import attention_views as av
from bertlab.analysis import bertviz_offline as bv
from bertlab.app.ui.shared import models
from bertlab.app.ui.text import attention_tab as at

TEXT = "we walked along the river bank and then went to the bank to get some money ."
D = models.DEFAULT


@pytest.fixture(scope="module")
def sizes():
    c = models.get(D)[0].config
    return c.num_hidden_layers, c.num_attention_heads


@pytest.fixture(scope="module")
def other_model(tmp_path_factory, vocab_tokenizer):
    """A tiny random model of another shape (3 layers, 12 heads), loaded from a folder like any choice."""
    from bertlab.checkpoint import save_pretrained
    from bertlab.config import BertConfig
    from bertlab.model import BertForPreTraining
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=48, num_hidden_layers=3,
                     num_attention_heads=12, intermediate_size=64, max_position_embeddings=32)
    return str(save_pretrained(BertForPreTraining(cfg).eval(), vocab_tokenizer,
                               tmp_path_factory.mktemp("m") / "tiny"))


@pytest.fixture(scope="module")
def result():
    return at.analyse(TEXT, "", 1, 1, False, D)


def rows_sum_to_one(m):
    t = torch.tensor(m, dtype=torch.float64)
    assert torch.allclose(t.sum(-1), torch.ones(t.shape[0], dtype=torch.float64), atol=1e-3)


def test_analyse_outputs(result, sizes):
    L, A = sizes
    head, grid, overview, roll, table, caption, data = result
    assert all(isinstance(f, go.Figure) for f in (head, grid, overview, roll))
    assert len(grid.data) == A and len(overview.data) == 1
    assert isinstance(table, pd.DataFrame) and len(table) == L * A
    assert list(table.columns[:3]) == ["layer", "head", "pattern"]
    assert set(table["pattern"]) <= set(av.PATTERNS)
    assert "Layer 1, head 1" in caption
    json.dumps(data)  # the API result must be plain JSON
    T = len(data["tokens"])
    assert data["tokens"][0] == "[CLS]" and data["tokens"][-1] == "[SEP]" and data["positions"] == list(range(T))
    assert len(data["attention"]) == T and len(data["rollout"]) == T
    rows_sum_to_one(data["attention"])
    rows_sum_to_one(data["rollout"])
    assert len(data["head_stats"]) == L * A and data["head_stats"][0]["layer"] == 1
    labels = list(head.data[0].x)
    assert len(set(labels)) == len(labels) and labels[0] == "0 [CLS]"  # "position token": unique axis labels
    assert any(lab.endswith(" bank") for lab in labels)


def test_hide_specials_renormalises(result):
    full = torch.tensor(result[-1]["attention"], dtype=torch.float64)
    data = at.analyse(TEXT, "", 1, 1, True, D)[-1]
    assert "[CLS]" not in data["tokens"] and "[SEP]" not in data["tokens"]
    keep = data["positions"]
    assert keep == list(range(1, len(full) - 1))
    # exact reference from the model itself (the JSON is rounded, and a row that gave most of its
    # attention to [CLS]/[SEP] magnifies that rounding when renormalised)
    from bertlab.app.ui.shared import models
    model, tok = models.get(D)
    with torch.no_grad():
        a = model(torch.tensor([tok.encode(TEXT).ids]), output_attentions=True).attentions[0][0, 0].double()
    sub = a[keep][:, keep]
    expected = sub / sub.sum(-1, keepdim=True)
    assert torch.allclose(torch.tensor(data["attention"], dtype=torch.float64), expected, atol=2e-4)
    rows_sum_to_one(data["attention"])
    rows_sum_to_one(data["rollout"])
    caption = at.analyse(TEXT, "", 1, 1, True, D)[5]
    assert "hidden" in caption and "sum to 1" in caption


def test_a_paste_that_fills_the_box_is_said_to_be_cut():
    """The browser cuts a 200,000-character paste at the box's 20,000 quietly: the caption says so."""
    full = ("the cat sat on the mat . " * 1000)[:at.MAX_TEXT]
    caption = at.analyse(full, "", 1, 1, False, D)[5]
    assert "fills its box: 20,000 characters" in caption and "cut the rest off" in caption
    assert "fills its box" not in at.analyse(TEXT, "", 1, 1, False, D)[5]
    assert "second sentence fills its box" in at.select_head(TEXT, full, 1, 1, False, D)[2]


def test_restrict_is_exact():
    m = torch.softmax(torch.randn(2, 3, 6, 6), -1)
    sub = av.restrict(m, [1, 2, 4])
    assert sub.shape == (2, 3, 3, 3)
    assert torch.allclose(sub.sum(-1), torch.ones(2, 3, 3))
    assert torch.allclose(av.restrict(m, [1, 2, 4], renormalise=False), m[..., [1, 2, 4], :][..., [1, 2, 4]])


@pytest.mark.parametrize("layer,head,msg", [(0, 1, "layer 0 does not exist"), (99, 1, "layer 99 does not exist"),
                                            (1, 0, "head 0 does not exist"), (1.5, 1, "whole number"),
                                            ("2", 1, "whole number"), (True, 1, "whole number"),
                                            (float("nan"), 1, "whole number")])
def test_layer_head_bounds(layer, head, msg, sizes):
    with pytest.raises(gr.Error, match=msg) as e:
        at.analyse(TEXT, "", layer, head, False, D)
    if "exist" in msg:
        assert f"1 to {sizes[0] if 'layer' in msg else sizes[1]}" in str(e.value)


def test_last_layer_and_head_accepted_as_floats(sizes):
    L, A = sizes
    data = at.analyse(TEXT, "", float(L), float(A), False, D)[-1]
    assert (data["layer"], data["head"]) == (L, A)


@pytest.mark.parametrize("text", ["", "   \n\t", None])
def test_empty_text(text):
    with pytest.raises(gr.Error, match="empty"):
        at.analyse(text, "", 1, 1, False, D)


def test_only_control_characters():
    with pytest.raises(gr.Error, match="no tokens"):
        at.analyse("\x00\x01\x02", "", 1, 1, False, D)


def test_huge_text_is_cut_and_said(sizes):
    out = at.analyse("the film was long . " * 5000, "", 1, 1, False, D)
    data, caption = out[-1], out[5]
    max_len = models.get(D)[0].config.max_position_embeddings
    assert data["truncated"] and len(data["tokens"]) <= max_len
    assert "cut to" in caption


ODD = ["naïve café, Straße 😍🎬 👩‍👩‍👧", "שלום עולם مرحبا", "zero\u200bwidth e\u0301", "lone \ud800 surrogate",
       "漢字とかな", "[MASK] [SEP] [CLS]"]


@pytest.mark.parametrize("text", ODD)
def test_odd_unicode(text):
    head, *_, caption, data = at.analyse(text, "", 1, 1, False, D)
    rows_sum_to_one(data["attention"])
    json.dumps(data)


def test_pair_and_bertviz_sentence_filter():
    data = at.analyse("the acting was great .", "the plot was a mess .", 1, 1, False, D)[-1]
    assert data["tokens"].count("[SEP]") == 2
    head_html, model_html = at.bertviz_views("the acting was great .", "the plot was a mess .", 1, 1, False, D)
    doc = html.unescape(re.search(r'srcdoc="([^"]*)"', head_html).group(1))
    assert "Sentence A -&gt; Sentence B" in doc or "Sentence A -> Sentence B" in doc


def test_select_head_and_model_sliders(sizes):
    L, A = sizes
    fig, grid, caption = at.select_head(TEXT, "", L, A, True, D)
    assert isinstance(fig, go.Figure) and isinstance(grid, go.Figure) and f"head {A}" in caption
    layer, head = at.on_model(D, 99, 0)
    assert (layer.maximum, layer.value, head.maximum, head.value) == (L, L, A, 1)


def _doc(iframe_html: str) -> str:
    assert iframe_html.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in iframe_html
    assert "<script" not in iframe_html  # everything is inside the (escaped) srcdoc
    return html.unescape(re.search(r'srcdoc="([^"]*)"', iframe_html).group(1))


@pytest.mark.parametrize("hide", [False, True])
def test_bertviz_offline(hide):
    head_html, model_html = at.bertviz_views(TEXT, "", 2, 1, hide, D)
    for doc in (_doc(head_html), _doc(model_html)):
        assert "cdnjs" not in doc and "require.js" not in doc and "require.min.js" not in doc
        assert not re.search(r"<script[^>]*\bsrc=", doc, re.I)
        assert not re.search(r"""src\s*=\s*["']?https?:""", doc, re.I)
        assert "d3js.org v5.7.0" in doc and "jQuery v3.7.1" in doc  # both inlined
        assert "window.requirejs" in doc and "PYTHON_PARAMS" not in doc
        assert ('"[CLS]"' in doc) != hide and '"bank"' in doc
    assert 'id="layer"' in _doc(head_html)


def test_bertviz_escapes_closing_tags():
    att = torch.full((1, 1, 3, 3), 1 / 3)
    doc = bv.head_view_html(att, ["[CLS]", "</script><b>x", "[SEP]"])
    body = doc.split('<div id="vis">')[1]
    assert "</script><b>" not in body and "\\u003c/script>" in body
    assert doc.count("</script>") == doc.count('<script type="text/javascript">') == 4


def test_bertviz_big_input_keeps_one_layer():
    att = torch.full((12, 12, 128, 128), 1 / 128)
    assert not bv.fits(att, whole_model=True) and bv.fits(att, whole_model=False)
    doc = bv.head_view_html(att[:, :, :2, :2] * 64, ["a", "b"], layer=3)  # small: every layer kept
    assert '"include_layers": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]' in doc
    big = bv.head_view_html(torch.full((12, 12, 120, 120), 1 / 120), [str(i) for i in range(120)], layer=3)
    assert '"include_layers": [3]' in big and "Only layer 4" in big  # said from 1
    with pytest.raises(ValueError, match="T = 2 tokens"):
        bv.head_view_html(att[:1, :1, :3, :3], ["a", "b"])


def test_bertviz_params_match_bertviz_own():
    """Our page feeds bertviz's JS the same parameters as bertviz's own Python (which needs IPython)."""
    try:
        from bertviz import head_view
    except ImportError:
        pytest.skip("bertviz's Python side (IPython) is not installed")
    att = torch.softmax(torch.randn(2, 3, 5, 5), -1)
    tokens = ["[CLS]", "a", "[SEP]", "b", "[SEP]"]
    theirs = head_view([a[None] for a in att], tokens, sentence_b_start=3, html_action="return").data
    ours = bv.head_view_html(att, tokens, sentence_b_start=3)

    def params(page):
        p = json.loads(re.search(r"const params = (\{.*?\}); //", page).group(1))
        p.pop("root_div_id")
        return p
    a, b = params(theirs), params(ours)
    assert [d["name"] for d in a["attention"]] == [d["name"] for d in b["attention"]]
    for x, y in zip(a["attention"], b["attention"]):
        assert x["left_text"] == y["left_text"] and x["right_text"] == y["right_text"]
        assert torch.allclose(torch.tensor(x["attn"]), torch.tensor(y["attn"]), atol=1e-4)
    assert {k: v for k, v in a.items() if k != "attention"} == {k: v for k, v in b.items() if k != "attention"}


def test_grid_is_cropped_for_long_inputs():
    T, A = 330, 12
    att = torch.softmax(torch.randn(1, A, T, T), -1)
    run = av.AttentionRun(tokens=["[CLS]"] + ["w"] * (T - 2) + ["[SEP]"], ids=[2] + [9] * (T - 2) + [3],
                          token_type_ids=[0] * T, attentions=att, special=[True] + [False] * (T - 2) + [True],
                          truncated=False, max_length=512, cls_id=2, sep_id=3)
    keep, labels = at._shown(run, False)
    fig, note = at.layer_grid(run, keep, labels, 1)
    n = int((at.GRID_CELLS / A) ** 0.5)
    assert f"first {n} tokens" in note and len(fig.data) == A and fig.data[0].z.shape == (n, n)
    assert torch.allclose(torch.from_numpy(fig.data[0].z), att[0, 0, :n, :n])  # cropped, not rescaled


def test_other_model_shapes(other_model):
    layer, head = at.on_model(other_model, 4, 7)
    assert (layer.maximum, layer.value, head.maximum, head.value) == (3, 3, 12, 7)
    head_fig, grid, overview, roll, table, caption, data = at.analyse(TEXT, "", 3, 12, False, other_model)
    assert len(grid.data) == 12 and len(table) == 36 and (data["num_layers"], data["num_heads"]) == (3, 12)
    assert len(overview.data[0].z) == 3 and len(overview.data[0].z[0]) == 12
    with pytest.raises(gr.Error, match="1 to 3"):
        at.analyse(TEXT, "", 4, 1, False, other_model)
    long = at.analyse("the film was good . " * 40, "", 1, 1, False, other_model)[-1]
    assert long["truncated"] and len(long["tokens"]) == 32


def test_bertviz_opens_on_the_picked_layer_and_head_numbered_from_1():
    doc = _doc(at.bertviz_views(TEXT, "", 3, 2, False, D)[0])
    p = json.loads(re.search(r"const params = (\{.*?\}); //", doc).group(1))
    assert p["layer"] == 2 and p["heads"] == [1]  # bertviz's own 0-based parameters for layer 3, head 2
    assert ".text(layer + 1)" in doc and '"head " + (i + 1)' in doc  # ... and its labels say them from 1
    model_doc = _doc(at.bertviz_views(TEXT, "", 3, 2, False, D)[1])
    assert ".text(config.layers[i] + 1)" in model_doc and ".text(config.heads[i] + 1)" in model_doc


def test_titles_fit_a_phone_and_rollout_says_what_its_axes_say(result):
    head, grid, overview, roll, *_ = result
    for fig in (head, grid, overview, roll):
        first_line = re.sub(r"<[^>]+>", "", fig.layout.title.text.split("<br>")[0])
        assert len(first_line) <= 40, first_line
    assert "final token" in roll.layout.title.text and "input token" in roll.layout.title.text
    assert "final token" in roll.layout.yaxis.title.text and "input token" in roll.layout.xaxis.title.text


@pytest.mark.parametrize("layer,head,query", [(1, 1, 0), (2, 3, 6), (4, 4, 15)])
def test_worked_qkv_equals_the_models_attention(layer, head, query):
    from bertlab.analysis import qkv
    model, tok = models.get(D)
    enc = tok.encode(TEXT)
    with torch.no_grad():  # the model's own probabilities, from a separate plain forward pass
        own = model(torch.tensor([enc.ids]), output_attentions=True).attentions[layer - 1][0, head - 1, query]
    m = qkv.head_math(model, enc.ids, enc.token_type_ids, layer, head, query)
    d = model.config.hidden_size // model.config.num_attention_heads
    assert m.d_head == d and m.q.shape == (d,) and m.k.shape == m.v.shape == (len(enc.ids), d)
    assert (m.weights - own.double()).abs().max() <= 1e-5
    assert torch.allclose(m.scores, m.k @ m.q / d ** 0.5) and torch.allclose(m.output, m.weights @ m.v)
    with pytest.raises(ValueError, match="out of range"):
        qkv.head_math(model, enc.ids, enc.token_type_ids, layer, head, len(enc.ids))


def test_worked_qkv_view():
    from bertlab.app.ui.text import attention_math as amath
    steps, scores, values, data = amath.worked(TEXT, "", 2, 3, 6, D)
    assert "Layer 2, head 3" in steps and "6 bank" in steps and "√d" in steps
    assert list(scores["key token"])[6] == "6 bank" and len(values) == len(scores) + 1  # + the output row
    assert (scores["softmax weight"] - scores["model's attention"]).abs().max() <= 1e-4
    assert abs(scores["softmax weight"].sum() - 1) < 1e-3
    json.dumps(data)
    picked, *_ = amath.refresh("the film .", "", 2, 3, 6, D)  # position 6 is gone: the first word piece
    assert picked.constructor_args["value"] == 1


def test_click_to_mask():
    from bertlab.app.ui.text import attention_mask as am
    row, said, table, fig, data = am.mask_at(TEXT, "", 2, 1, 6, D)
    assert data["masked_tokens"][6] == "[MASK]" and data["original"] == "bank"
    assert row.constructor_args["value"] == 6 and ("[MASK]", 6) in row.constructor_args["choices"]
    assert all(v not in (0, len(data["masked_tokens"]) - 1) for _, v in row.constructor_args["choices"])  # no [CLS]/[SEP]
    assert "[MASK]" in said and "bank" in said and len(table) == 10
    assert list(table["probability"]) == sorted(table["probability"], reverse=True)
    assert len(fig.data) == 4 and fig.data[1].x[6].endswith("[MASK]")
    # the masked run is the model's own forward pass on the masked ids
    model, tok = models.get(D)
    ids = tok.encode(TEXT).ids
    ids[6] = tok.mask_token_id
    with torch.no_grad():
        own = model(torch.tensor([ids]), output_attentions=True).attentions[1][0, 0]
    assert torch.allclose(torch.tensor(data["row_after"]), own[6], atol=1e-4)
    for bad, msg in [(0, "start or a sentence end"), (999, "no token 999"), (None, "click a token")]:
        with pytest.raises(gr.Error, match=msg):
            am.mask_at(TEXT, "", 2, 1, bad, D)
