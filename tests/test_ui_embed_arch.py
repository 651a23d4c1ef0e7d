"""Embeddings and Architecture tabs: the handlers called directly with the shipped default model.

Never checks what the model predicts (a better default replaces it later): only facts that hold
for any BERT — identical inputs give identical layer-0 vectors, matrices are symmetric, sizes
match bertlab.analysis.sizing.
"""
import json
import math
import os
import re

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from bertlab.analysis import embeddings as E  # noqa: E402
from bertlab.analysis import sizing  # noqa: E402
from bertlab.app.ui.labs import architecture_tab as at  # noqa: E402
from bertlab.app.ui.shared import models  # noqa: E402
from bertlab.app.ui.text import embeddings_tab as et  # noqa: E402
from bertlab.config import MODEL_TYPES, preset, preset_names  # noqa: E402

D = models.DEFAULT
BASE = (12, 768, 12, 3072, 30522, 512)


@pytest.fixture(scope="module")
def model_tok():
    return models.get(D)


def run(word, sentences, layer=-1, pooling="mean", special=False):
    return et.compare(word, sentences, layer, pooling, special, D)


def compute(*values):
    """The Architecture tab's view with the form's values in the API's order (at.INPUTS)."""
    return at.compute(**dict(zip(at.INPUTS, values)))


def error_of(fn, *args) -> str:
    with pytest.raises(gr.Error) as e:
        fn(*args)
    return str(e.value)


# ---- same word, different sentences -------------------------------------------------------------
def test_layer0_is_identical_at_the_same_position_and_drifts_above():
    """Layer 0 = LayerNorm(word + position + segment): same word, same position -> same vector."""
    _, _, _, _, res = run("bank", "the bank was closed on sunday .\nthe bank was steep and muddy .")
    w = res["word"]
    assert w["positions"] == [[2], [2]]
    sim = w["pairs"][0]["similarity"]
    assert len(sim) == res["num_layers"] + 1 == len(w["layers"])
    assert sim[0] == pytest.approx(1.0, abs=1e-9)
    assert max(sim[1:]) < 1 - 1e-6  # the contexts differ from layer 1 on
    assert all(-1 <= s <= 1 for s in sim)


def test_layer0_differs_when_only_the_position_differs():
    """The same word at another position already differs at layer 0 (position embeddings)."""
    _, _, _, _, res = run("bank", "the bank was closed .\nyesterday we walked past the old bank .")
    p0, p1 = res["word"]["positions"]
    assert p0 != p1
    assert res["word"]["pairs"][0]["similarity"][0] < 1 - 1e-6


def test_pairs_and_mean_cover_all_sentences():
    fig, _, _, _, res = run(*et.EXAMPLES[0])
    n = len(res["sentences"])
    assert n == 4
    assert [(p["a"], p["b"]) for p in res["word"]["pairs"]] == [(a, b) for a in range(1, n + 1)
                                                               for b in range(a + 1, n + 1)]
    assert len(res["word"]["mean_similarity"]) == res["num_layers"] + 1
    assert isinstance(fig, go.Figure) and len(fig.data) == 6 + 1  # one line per pair + the mean
    json.dumps(res)  # the API returns it as JSON


def test_word_made_of_several_pieces_is_averaged(model_tok):
    _, tok = model_tok
    word = "blorptastically"
    pieces = tok.encode(word).tokens[1:-1]
    assert len(pieces) > 1
    _, _, _, _, res = run(word.upper() if tok.lowercase else word,
                          f"a {word} long film .\nthe cast was {word} good .")
    assert res["word"]["pieces"] == [pieces, pieces]
    for pos in res["word"]["positions"]:
        assert pos == list(range(pos[0], pos[0] + len(pieces)))


def test_missing_word_names_the_sentence():
    msg = error_of(run, "bank", "the bank was closed .\ni liked this film a lot .\nthe bank was steep .")
    assert "sentence 2" in msg and "sentence 1" not in msg and "sentence 3" not in msg
    assert "i liked this film" in msg


def test_word_must_be_a_whole_word():
    """'film' is not found inside 'filmmaker', however the vocabulary splits it."""
    msg = error_of(run, "film", "the film was long .\nthe filmmaker was young .")
    assert "sentence 2" in msg


def test_repeated_word_uses_the_first_and_says_so():
    _, _, _, notes, res = run("film", "the film was a film about films .\na good film .")
    assert res["word"]["positions"][0] == [2]
    assert "2 times" in notes


def test_word_cut_off_by_the_length_limit_is_reported(model_tok):
    _, tok = model_tok
    long = "the " * (tok.model_max_length + 10) + "bank ."
    msg = error_of(run, "bank", f"the bank was closed .\n{long}")
    assert "sentence 2" in msg and "limit" in msg


# ---- sentence matrix and token map --------------------------------------------------------------
@pytest.mark.parametrize("pooling", E.POOLINGS)
def test_pooling_gives_a_symmetric_matrix_with_unit_diagonal(pooling):
    _, fig, _, _, res = run("", et.EXAMPLES[-1][1], 2, pooling)
    m = torch.tensor(res["matrix"]["values"])
    assert m.shape == (4, 4)
    assert torch.equal(m, m.T)
    assert torch.all(m.diagonal() == 1.0)
    assert torch.all(m.abs() <= 1.0)
    assert res["matrix"]["pooling"] == pooling and res["matrix"]["layer"] == 2
    assert isinstance(fig, go.Figure)


def test_pooled_vectors_match_their_definition(model_tok):
    model, tok = model_tok
    states = E.hidden_states(model, tok, ["a good film .", "the plot was bad ."])
    h = states.hidden[-1]
    assert torch.equal(E.pool(states, -1, "cls"), h[:, 0])
    n = len(states.tokens[0])
    assert torch.allclose(E.pool(states, -1, "mean")[0], h[0, 1:n - 1].mean(0))
    assert torch.equal(E.pool(states, -1, "max")[0], h[0, 1:n - 1].max(0).values)
    with pytest.raises(ValueError, match="pooling"):
        E.pool(states, -1, "sum")


def test_padding_does_not_change_the_vectors(model_tok):
    model, tok = model_tok
    short = E.hidden_states(model, tok, ["a good film .", "a bad film ."])
    mixed = E.hidden_states(model, tok, ["a good film .", "a much much longer and rather boring film ."])
    n = len(short.tokens[0])
    assert torch.allclose(short.hidden[:, 0, :n], mixed.hidden[:, 0, :n], atol=1e-5)


def test_pca_map_has_one_point_per_token():
    _, _, fig, _, res = run("film", "a good film .\nthe film was bad .", 1, "mean", False)
    pts = res["pca"]["points"]
    assert len(pts) == 4 + 5  # [CLS]/[SEP] left out
    assert {p["sentence"] for p in pts} == {1, 2}
    assert sum(p["target"] for p in pts) == 2
    assert all(math.isfinite(p["x"]) and math.isfinite(p["y"]) for p in pts)
    r1, r2 = res["pca"]["explained_variance"]
    assert 1 >= r1 >= r2 >= 0 and r1 + r2 <= 1 + 1e-9
    _, _, _, _, res = run("film", "a good film .\nthe film was bad .", 1, "mean", True)
    assert len(res["pca"]["points"]) == 4 + 5 + 4
    assert len(fig.data) == 2  # one trace per sentence
    stars = [x for t in fig.data for x in t.text if x]  # the followed word's stars, named by sentence
    assert stars == ["S1", "S2"] and "film" in fig.layout.title.text  # (the word twice over piled up)


def test_pca_2d_is_exact_and_deterministic():
    t = torch.linspace(-1, 1, 7, dtype=torch.float64)
    x = torch.stack([3 * t, -6 * t, torch.zeros_like(t)], 1)  # all on one line
    c, ratio = E.pca_2d(x)
    assert c.shape == (7, 2)
    assert ratio[0] == pytest.approx(1.0) and ratio[1] == pytest.approx(0.0, abs=1e-12)
    assert torch.allclose(c[:, 0].abs(), (t * math.sqrt(45)).abs())
    assert torch.allclose(c[:, 1], torch.zeros(7, dtype=torch.float64), atol=1e-9)
    assert torch.equal(E.pca_2d(x)[0], c)
    one, r = E.pca_2d(torch.ones(1, 5))
    assert one.shape == (1, 2) and torch.all(one == 0) and r == [0.0, 0.0]


def test_layer_choice():
    n = models.get(D)[0].config.num_hidden_layers
    _, _, _, notes, res = run("", "a good film .\na bad film .", 99)
    assert res["matrix"]["layer"] == n and f"{n} layers" in notes
    _, _, _, _, res = run("", "a good film .\na bad film .", 0)
    assert res["pca"]["layer"] == 0
    with pytest.raises(ValueError, match="layer"):
        E.check_layer(-(n + 2), n)
    assert E.check_layer(-1, n) == n


# ---- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("sentences, expect", [
    ("", "empty"), ("   \n \n", "empty"), (None, "empty"), ("only one sentence .", "at least 2"),
    ("\n".join(["a film ."] * 9), "at most 8"), ("a film .\n\x00\x01\x02", "sentence 2"),
    ("x" * (et.MAX_CHARS + 1), "characters"),
])
def test_bad_sentences_give_one_clear_line(sentences, expect):
    assert expect in error_of(run, "", sentences)


def test_bad_word_and_layer():
    assert "text" in error_of(run, 3, "a film .\na film .")
    assert "whole number" in error_of(run, "", "a film .\na film .", "top")
    assert "no tokens" in error_of(run, "\u200b", "a film .\na film .")


def test_odd_unicode_and_huge_sentences_work(model_tok):
    _, tok = model_tok
    odd = ["naïve café — 😀 🎬 ok", "שלום עולם مرحبا", "e\u0301\u0301 zero\u200bwidth \ud800 lone",
           "日本語の映画はすごい", "the film " * 2000]
    *figs, notes, res = run("", "\n".join(odd))
    assert len(res["sentences"]) == 5
    assert "5" in notes and "limit" in notes  # the huge one was cut, and it says so
    assert max(len(t) for t in res["tokens"]) <= tok.model_max_length
    json.dumps(res)
    _, _, _, _, res = run("😀", "i 😀 this film .\nwhat a 😀 night .")  # an [UNK] word is still found
    assert len(res["word"]["pairs"]) == 1


def test_empty_word_still_compares_sentences():
    fig, _, _, _, res = run("  ", "a good film .\na bad film .")
    assert "word" not in res and isinstance(fig, go.Figure)


# ---- architecture -------------------------------------------------------------------------------
def test_architecture_numbers_equal_sizing():
    summary, pfig, mfig, ffig, table, card, data = compute(*BASE, 32, 128, D)
    c = preset("base")
    assert data["params"] == sizing.param_counts(c)
    assert data["params"]["encoder_total"] == 109_482_240
    assert data["memory"]["training"]["bf16"] == sizing.memory(c, 32, 128, "bf16", training=True)
    assert data["memory"]["inference"]["fp32"] == sizing.memory(c, 32, 128, "fp32")
    assert data["flops"] == sizing.flops(c, 128)
    assert data["attention_share"] == pytest.approx(
        (data["flops"]["attention_scores"] + data["flops"]["attention_values"]) / data["flops"]["total"])
    shares = [s["attention_share"] for s in data["flops_vs_length"]]
    assert shares == sorted(shares) and shares[-1] > 2 * shares[0]  # attention grows with length
    for name, d in data["known_models"].items():
        assert d["computed"] == sizing.known_model_params(name)
    assert data["known_models"]["BERT-base"]["published"] == 110_000_000
    assert [r[0] for r in table] == list(sizing.KNOWN_MODELS) + ["your config (BERT)"]
    assert "110.1M" in summary
    assert all(isinstance(f, go.Figure) for f in (pfig, mfig, ffig))
    assert sum(pfig.data[0].x) == data["params"]["total"]
    json.dumps(data)


def test_picked_model_card_counts_its_weights():
    _, _, _, _, _, card, data = compute(*BASE, 1, 64, D)
    picked = data["picked_model"]
    assert picked["parameters_counted"] == picked["parameters_formula"]
    model = models.get(D)[0]
    assert picked["config"] == model.config.to_dict()
    family, box, *values = at.fill_picked(D)
    assert family == model.config.model_type and box["value"] == "custom" and "custom" in box["choices"]
    assert values == [model.config.num_hidden_layers, model.config.hidden_size, model.config.num_attention_heads,
                      model.config.intermediate_size, model.config.vocab_size,
                      model.config.max_position_embeddings, 0, 1]  # E: 0 = no factorising, not a blank box
    bad = compute(*BASE, 1, 64, "/no/such/model")
    assert "could not load" in bad[5] and "error" in bad[6]["picked_model"]


@pytest.mark.parametrize("family, name", [(f, n) for f in MODEL_TYPES for n in preset_names(f)])
def test_presets_fill_the_form(family, name):
    vals = at.fill_preset(name, family)
    c = preset(name, model_type=family)
    assert vals[:6] == [c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size,
                        c.vocab_size, c.max_position_embeddings]
    assert vals[6:] == [c.embedding_size if c.embedding_dim != c.hidden_size else 0, c.num_hidden_groups]
    assert at.preset_of(family, *vals) == name or (family, name) == ("electra", "small-generator")  # = small
    data = compute(*vals[:6], 8, 64, D, family, *vals[6:])[-1]
    assert data["params"] == sizing.param_counts(c) and data["family"] == family


@pytest.mark.parametrize("i, value, field", [
    (2, 5, "Attention heads"), (0, 0, "Layers"), (1, None, "Hidden size"),
    (0, 12.5, "Layers"), (3, float("inf"), "Feed-forward size"), (5, "abc", "Max positions"),
    (4, 3, "Vocabulary"), (1, 10**9, "Hidden size"), (2, -4, "Attention heads"), (4, float("nan"), "Vocabulary"),
])
def test_impossible_configs_name_the_box_in_the_forms_words(i, value, field):
    """The message names the box as the page labels it, never the config's own field name (issue 31,
    item 2: 'hidden_size (256) must be divisible by num_attention_heads (12)')."""
    args = list(BASE)
    args[i] = value
    msg = error_of(compute, *args, 32, 128, D)
    assert field in msg and "Traceback" not in msg
    assert not re.search(r"\b(num_hidden_layers|hidden_size|num_attention_heads|intermediate_size|vocab_size|"
                         r"max_position_embeddings)\b", msg), msg


def test_length_beyond_max_positions_is_clamped_and_said():
    summary, *_, data = compute(12, 768, 12, 3072, 30522, 64, 4, 4096, D)
    assert data["seq_len"] == 64 and "64 positions" in summary
    assert data["flops"] == sizing.flops(preset("base", max_position_embeddings=64), 64)
    data = compute(*BASE, None, None, D)[-1]  # empty sliders fall back to 1
    assert data["batch_size"] == 1 and data["seq_len"] == 1


def test_tabs_build_with_their_api_names():
    with gr.Blocks() as demo:
        picker = gr.Dropdown([D], value=D)
        with gr.Tab("Embeddings"):
            et.build(picker)
        with gr.Tab("Architecture"):
            at.build(picker)
    names = {f.api_name for f in demo.fns.values()}
    assert {"embeddings", "architecture"} <= names


def test_preset_box_names_the_fields_and_huge_numbers_read_well():
    assert at.preset_of("bert", *at.fill_preset("large")) == "large"
    assert at.preset_of("bert", 4, 256, 4, 1024, 8192, 128, None, 1) == at.CUSTOM
    assert at.preset_of("albert", 24, 1024, 16, 4096, 30000, 512, 128, 1) == "large"
    assert at.preset_of("albert", 24, 1024, 16, 4096, 30000, 512, 128, 2) == at.CUSTOM
    assert at.fill_preset(at.CUSTOM) == [gr.skip()] * (len(at.FIELDS) + len(at.EXTRA))
    msg = error_of(compute, 12, 1e30, 12, 3072, 30522, 512, 32, 128, D)
    assert "Hidden size" in msg and "1e+30" in msg and "000000" not in msg


def test_heatmap_has_one_fixed_scale_and_few_map_labels():
    _, fig, pca, notes, res = run(*et.EXAMPLES[1], 0, "cls")
    h = fig.data[0]
    assert (h.zmin, h.zmax) == (-1.0, 1.0) and list(h.colorbar.tickvals) == et.COS_TICKS
    labels = [t for tr in pca.data for t in tr.text if t]
    assert labels and len(labels) == sum(p["target"] for p in res["pca"]["points"])
    assert "senses here: river (S1, S3), money (S2, S4)" in notes


def test_contexts_and_positions(model_tok):
    from bertlab.analysis import contexts as C
    from bertlab.app.ui.text import positions_view as pv
    model, tok = model_tok
    sents = ["the bank was closed .", "we sat on the river bank .", "a good film ."]
    ix = C.build_index(model, tok, sents)
    assert ix.vectors.shape[:2] == (model.config.num_hidden_layers + 1, sum(len(tok.encode(x)) - 2 for x in sents))
    assert ix.vectors.dtype == torch.float16
    vec, tid, piece = C.query_vector(model, tok, "the bank was closed .", "bank", 0)
    rows = C.nearest(ix, vec, 0, 5, tid)
    assert piece == "bank" and len(rows) == 2 and rows[0]["sentence"] == sents[0]
    assert rows[0]["similarity"] == pytest.approx(1.0, abs=1e-2)  # the same sentence: the same vector
    assert sents[0][slice(*rows[0]["span"])] == "bank"
    small = C.build_index(model, tok, sents, max_bytes=(2 * model.config.hidden_size * 5 + 11) * 6)
    assert len(small.sentences) == 1  # the byte bound keeps the first sentence only
    with pytest.raises(ValueError, match="not in the sentence"):
        C.find_token(tok, "a good film .", "bank")
    fig, summary, data = pv.show(D)
    assert fig.data[0].zmin == -1 and data["positions"] == model.config.max_position_embeddings
    assert data["mean_by_distance"][0] == pytest.approx(1.0, abs=1e-5)
    from bertlab.analysis.positions import by_distance, similarity
    from bertlab.model import sinusoidal_table
    sines = sinusoidal_table(model.config.max_position_embeddings, model.config.hidden_size)
    assert data["sinusoidal_mean_by_distance"] == pytest.approx(by_distance(similarity(sines)))
    assert len(fig.data) == 4 and not data["fixed_sinusoidal"] and "sinusoidal" in summary


def test_the_shuffle_on_the_shipped_model(model_tok):
    """Positions off: every vector comes back (float rounding); on: [CLS] itself moves, so the order mattered."""
    from bertlab.app.ui.text import positions_view as pv
    said, rows, res = pv.shuffle(D, pv.SHUFFLE_EXAMPLE, 0)
    assert res["max_diff_without"] < 1e-4 and all(r[4] == "1.000" for r in rows)
    assert res["cls_with"] < 0.99 and min(float(r[3]) for r in rows) < 0.9
    assert [r[0] for r in rows] == res["tokens"] and "Shuffled" in said
    with pytest.raises(gr.Error, match="different words"):
        pv.shuffle(D, "the the", 0)
    said, *_ = pv.shuffle(D, "<b>bold</b> words", 1)
    assert "<" not in said and "&lt;" in said  # what is echoed is escaped


# ---- architecture: the BERT family --------------------------------------------------------------
def test_typed_family_shapes_size_as_published():
    """The issue: typed into the form, ELECTRA-small showed 17.5 M and ALBERT-large about 334 M."""
    summary, pfig, *_, table, _, data = compute(12, 256, 4, 1024, 30522, 512, 8, 128, D, "electra", 128, 1)
    assert data["params"]["encoder_total"] == 13_483_008 and data["architecture"] == "ElectraForPreTraining"
    assert "17.5M" in summary and "generator" in summary and "electra_pair" in data
    assert "Replaced-token head" in pfig.data[0].y and "Pooler" not in pfig.data[0].y  # only what it has
    summary, *_, table, _, data = compute(24, 1024, 16, 4096, 30000, 512, 8, 128, D, "albert", 128, 1)
    assert data["params"]["encoder_total"] == 17_683_968
    assert (data["layers_stored"], data["layers_run"]) == (1, 24) and "runs 24 layers" in summary
    assert data["as_bert"]["encoder_total"] > 18 * data["params"]["encoder_total"]
    assert data["flops"]["qkv"] == sizing.flops(sizing.as_bert(preset("large", model_type="albert")), 128)["qkv"]
    rows = {r[0]: r for r in table}
    assert rows["ALBERT-large"][6:8] == ["17.7M", "334.6M"] and rows["ELECTRA-small"][6] == "13.5M"
    assert rows["DistilBERT"][6] == "66.4M" and rows["RoBERTa-base"][6] == "124.6M"
    assert rows["your config (ALBERT)"][3] == 128
    data = compute(12, 768, 12, 3072, 50265, 514, 2, 4096, D, "roberta", None, 1)[-1]
    assert data["seq_len"] == 512 and data["config"]["type_vocab_size"] == 1  # 2 of 514 rows unused
    assert data["params"]["pooler"] == 0 and data["params"]["encoder_total"] == 124_645_632
    data = compute(6, 768, 12, 3072, 30522, 512, 2, 64, D, "distilbert", None, None)[-1]
    assert data["params"]["encoder_total"] == 66_362_880


def test_family_selector_and_notes():
    box, *vals = at.pick_family("albert")
    assert box["value"] == "base" and "xlarge" in box["choices"] and vals == at.fill_preset("base", "albert")
    assert at.pick_family("electra")[0]["value"] == "small"
    note = at.family_note()
    assert "ALBERT saves parameters, not compute" in note and "17.7M" in note and "generator adds" in note
    deb = at.deberta_note()  # transformers' DebertaModel / DebertaV2Model hold these (test_sizing)
    assert "138.6M parameters" in deb and "85.4M in its layers and 98.4M" in deb and "+50 % on a BERT" in deb
    with gr.Blocks() as demo:
        at.build(gr.Dropdown([D], value=D))
    fn = next(f for f in demo.fns.values() if f.api_name == "architecture")
    labels = [c.label for c in fn.inputs]  # the API keeps its parameters' order: the shape, ..., the members' own
    assert fn.input_parameter_names == list(at.INPUTS)
    assert labels[:6] == [label for label, *_ in at.FIELDS]
    assert labels[-3:] == ["Family", "Embedding size E (ALBERT, ELECTRA; 0 = no factorising)", "Layer groups (ALBERT)"]


@pytest.mark.parametrize("family, embedding, groups, field", [
    ("gpt", None, 1, "Family"), ("bert", 128, 1, "Embedding size E"), ("electra", 2.5, 1, "Embedding size E"),
    ("electra", -3, 1, "Embedding size E"), ("albert", 128, 5, "Layer groups"),
    ("bert", None, 2, "Layer groups"),
    ("albert", 10**30, 1, "Embedding size"), ("roberta", None, 0, "Layer groups"),
])
def test_family_mistakes_name_the_box(family, embedding, groups, field):
    msg = error_of(compute, *BASE, 4, 64, D, family, embedding, groups)
    assert field in msg and "Traceback" not in msg
    assert not re.search(r"\b(model_type|embedding_size|num_hidden_groups)\b", msg), msg
