"""Embeddings → Static vs contextual: a word's table row is one vector whatever the sentence; its
contextual vectors are the model's hidden states (transformers is the oracle); neighbours leave out
the special tokens; a bad word is one message; the view says the analysis' own numbers; a link opens it."""
import html
import json
import os
import re

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bertlab.analysis import static_vectors as SV  # noqa: E402
from bertlab.app.ui.shared import models  # noqa: E402
from bertlab.app.ui.text import static_view as V  # noqa: E402
from bertlab.tokenizer import special_token_ids  # noqa: E402

D = models.DEFAULT
BANK = ["we had a picnic on the river bank .", "the bank refused to lend them any money ."]


@pytest.fixture(scope="module")
def model_tok():
    return models.get(D)


@pytest.fixture(scope="module")
def bank(model_tok):
    return SV.static_vs_contextual(*model_tok, "bank", BANK)


def test_the_static_row_is_the_same_in_every_sentence(model_tok, bank):
    model, tok = model_tok
    (i,) = tok.encode("bank").ids[1:-1]
    assert bank["static"]["identical"] and bank["static"]["pairs"] == [{"a": 1, "b": 2, "cosine": 1.0, "identical": True}]
    assert bank["static"]["spellings"] == [{"pieces": ["bank"], "neighbours": bank["static"]["spellings"][0]["neighbours"]}]
    assert bank["table"] == list(model.bert.embeddings.word_embeddings.weight.shape)
    assert [p[0] for p in bank["positions"]] == [9, 2]  # the two positions differ, so layer 0 already differs
    assert bank["pairs"][0]["similarity"][0] < 0.99
    assert tok.encode(BANK[0]).ids[9] == tok.encode(BANK[1]).ids[2] == i


def test_a_word_in_pieces_is_the_mean_of_its_rows(model_tok):
    model, tok = model_tok
    res = SV.static_vs_contextual(model, tok, *V.EXAMPLES[-1][:1], V.EXAMPLES[-1][1:])
    ids = tok.encode("mesmerizing").ids[1:-1]
    assert len(ids) > 1 and res["static"]["spellings"][0]["pieces"] == tok.encode("mesmerizing").tokens[1:-1]
    mean = SV.table(model)[ids].mean(0)
    top = res["static"]["spellings"][0]["neighbours"][0]
    assert top["cosine"] == pytest.approx(float(F.cosine_similarity(mean, SV.table(model)[top["id"]], dim=0)), abs=1e-12)


def test_the_contextual_cosines_are_the_models_hidden_states(model_tok, bank):
    """transformers' BertModel on the shipped folder, each sentence alone: the same cosines at every layer."""
    transformers = pytest.importorskip("transformers")
    _, tok = model_tok
    ref = transformers.BertModel.from_pretrained(str(models.resolve(D)), dtype=torch.float32,  # stored in float16
                                                 attn_implementation="eager").eval()
    vecs = []
    for s, pos in zip(BANK, bank["positions"]):
        ids = torch.tensor([tok.encode(s).ids])
        with torch.no_grad():
            hs = ref(ids, output_hidden_states=True).hidden_states  # L+1 of (1, T, H)
        vecs.append(torch.stack([h[0, pos].mean(0).double() for h in hs]))  # (L+1, H)
    want = F.cosine_similarity(vecs[0], vecs[1], dim=-1).tolist()
    assert bank["pairs"][0]["similarity"] == pytest.approx(want, abs=1e-5)
    assert len(want) == bank["num_layers"] + 1 == len(bank["neighbours"])
    # the nearest word of S1's "bank" at the last layer, from the oracle's vectors too
    top = bank["neighbours"][-1][0][0]
    s = top["sentence"] - 1
    enc = tok.encode(BANK[s])
    span = [t for t, (a, b) in enumerate(enc.offsets) if BANK[s][a:b] and BANK[s].find(top["word"]) <= a < b <=
            BANK[s].find(top["word"]) + len(top["word"]) and not enc.special_tokens_mask[t]]
    with torch.no_grad():
        h = ref(torch.tensor([enc.ids]), output_hidden_states=True).hidden_states[-1][0]
    assert top["cosine"] == pytest.approx(float(F.cosine_similarity(h[span].mean(0).double(), vecs[0][-1], dim=0)), abs=1e-5)


def test_neighbours_leave_out_specials_the_word_and_punctuation(model_tok, bank):
    model, tok = model_tok
    ids = special_token_ids(tok)
    (own,) = tok.encode("bank").ids[1:-1]
    every = SV.nearest_rows(tok, SV.table(model), SV.table(model)[own], k=10**6, leave_out={own})
    got = {n["id"] for n in every}
    assert got == set(ids.random.tolist()) - {own} and not got & set(ids.all)  # specials and [unusedN] out
    cos = [n["cosine"] for n in every]
    assert cos == sorted(cos, reverse=True) and bank["static"]["spellings"][0]["neighbours"] == every[:SV.NEIGHBOURS]
    for layer in bank["neighbours"]:
        for per in layer:
            assert len(per) == SV.NEIGHBOURS
            assert all(n["word"] != "bank" and re.search(r"\w", n["word"]) for n in per)


def test_a_bad_word_is_one_clear_message(model_tok):
    with pytest.raises(gr.Error, match="word is empty"):
        V.show(" ", *BANK, D)
    with pytest.raises(gr.Error, match="not in sentence S2"):
        V.show("river", *BANK, D)
    with pytest.raises(gr.Error, match=r"read as \[UNK\]"):
        V.show("☃", "a ☃ in the snow .", "the ☃ melted .", D)
    with pytest.raises(ValueError, match="not in sentence 2"):
        SV.static_vs_contextual(*model_tok, "river", BANK)


def test_the_view_says_the_analysis_numbers(bank):
    said, fig, table, res = V.show("bank", *BANK, D)
    rows = V.neighbour_rows(res)
    assert table.count("<tr>") == len(rows) + 1
    assert all(f">{html.escape(x)}<" in table for r in rows for c in r for x in c.split(" · "))
    sim = bank["pairs"][0]["similarity"]
    assert res["pairs"] == bank["pairs"] and res["neighbours"] == bank["neighbours"]
    assert "cosine **1.000**" in said and f"cosine **{sim[0]:.3f}**" in said and f"**{sim[-1]:.3f}**" in said
    near = bank["static"]["spellings"][0]["neighbours"]
    assert ", ".join(f"{n['token']} {n['cosine']:.2f}" for n in near) in said
    assert list(fig.data[0].y) == [1.0, *sim]
    assert [r[0] for r in rows] == ["0 emb", *map(str, range(1, bank["num_layers"] + 1))]
    first = bank["neighbours"][-1][0][0]
    assert rows[-1][1].startswith(f"{first['word']}{'' if first['sentence'] == 1 else ' (S2)'} {first['cosine']:.2f}")
    own = sum(n["sentence"] == i for i, per in enumerate(bank["neighbours"][-1], 1) for n in per)
    assert f"**{own}** at layer {bank['num_layers']}" in said
    evil = V.show("bank", "the *bank* <b>x</b> .", BANK[1], D)
    assert "<b>" not in evil[0] and "<b>" not in evil[2]
    assert "<b>" not in V.neighbour_html([["1", "<b>x</b> 0.50", "y 0.40"]]) and "&lt;b&gt;x" in V.neighbour_html(
        [["1", "<b>x</b> 0.50", "y 0.40"]])  # another tokenizer may keep such a word whole


def test_a_link_opens_the_view_with_the_example():
    """?tab=embeddings&view=static&word=star: the sub-tab is selected, its word and the example's two
    sentences filled; the first sub-tab, which reads the same word, gets that word's sentences too."""
    from bertlab.app.ui.shared import links
    from bertlab.app.ui.text import embeddings_tab as et
    with gr.Blocks() as demo:
        picker = gr.Dropdown([D], value=D)
        model = gr.Textbox(D)
        with gr.Tabs() as tabs:
            with gr.Tab("Embeddings", id="embeddings"):
                et.build(model)
        links.install(demo, tabs, ["embeddings"], picker, model)
    run = next(f for f in demo.fns.values() if f.name == "run_listeners")
    out = list(zip(run.outputs, run.fn(json.dumps({"tab": "embeddings", "values": {"view": "static", "word": "star"}}))))
    by = {c.elem_id or getattr(c, "label", None): v for c, v in out}
    star = next(e for e in V.EXAMPLES if e[0] == "star")
    assert [by["static-word"], by["Sentence S1"], by["Sentence S2"]] == star
    assert by["Sentences"] == next(e for e in et.EXAMPLES if e[0] == "star")[1]
    assert any(isinstance(c, gr.Tabs) and v.selected == "static" for c, v in out)
    assert links.url("embeddings", view="static", word="bank") == "?tab=embeddings&view=static&word=bank"
    # a word without an example takes the link's own sentences that hold it
    out = run.fn(json.dumps({"tab": "embeddings", "values": {"view": "static", "word": "fan",
                                                              "sentences": "a fan of it .\nno .\nturn the fan on ."}}))
    assert {"fan", "a fan of it .", "turn the fan on ."} <= set(v for v in out if isinstance(v, str))
