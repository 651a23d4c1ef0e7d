"""Padding and the attention mask (analysis.padding) and the head-averaged map of a layer
(attention_views.layer_average), each checked against the model's own forward pass; then what the
Attention tab's two views say, against those numbers."""
import re

import gradio as gr
import pytest
import torch

from bertlab.analysis import attention_views as av
from bertlab.analysis import padding as P
from bertlab.app.ui.shared import models
from bertlab.app.ui.text import attention_padding as ap
from bertlab.app.ui.text import attention_tab as at

D = models.DEFAULT
SENTENCES = ["the film was a [MASK] .", "i loved it .",
             "the acting was great but the plot was far too long and slow ."]


@pytest.fixture(scope="module")
def shipped():
    return models.get(D)


@pytest.fixture(scope="module")
def study(shipped, single_thread):
    return P.padding_study(*shipped, SENTENCES)


def test_the_batch_is_padded_on_the_right_with_its_mask(study, shipped):
    _, tok = shipped
    T = max(study["lengths"])
    assert sorted(study["lengths"]) == study["lengths"][1:2] + study["lengths"][:1] + study["lengths"][2:]
    for text, tokens, ids, mask, n in zip(SENTENCES, study["tokens"], study["ids"], study["attention_mask"],
                                          study["lengths"]):
        assert len(ids) == T and mask == [1] * n + [0] * (T - n)
        assert ids[n:] == [tok.pad_token_id] * (T - n) and tokens[n:] == [tok.pad_token] * (T - n)
        assert ids[:n] == tok.encode(text).ids


def test_masked_batch_equals_each_sentence_alone_and_pads_get_exactly_zero(study, shipped):
    model, tok = shipped
    assert all(x == 0.0 for row in study["pad_max_masked"] for x in row)  # exactly, not nearly
    assert all(s["max_diff_masked"] < 1e-5 for s in study["sentences"])
    # the same claims straight from the model, outside padding_study
    ids, mask = torch.tensor(study["ids"]), torch.tensor(study["attention_mask"])
    with torch.no_grad():
        out = model(ids, torch.zeros_like(ids), mask, output_attentions=True)
        for b, n in enumerate(study["lengths"]):
            alone = model(ids[b:b + 1, :n]).last_hidden_state[0]
            assert (out.last_hidden_state[b, :n] - alone).abs().max() < 1e-5
    for a in out.attentions:  # (B, A, T, T): every query's weight on every pad key
        assert torch.equal(a * (1 - mask)[:, None, None, :], torch.zeros_like(a))
    g = study["sentences"][0]["mask"]
    assert g["position"] == 5 and abs(g["prob_masked"] - g["prob_alone"]) < 1e-5


def test_without_the_mask_the_numbers_differ(study, shipped):
    model, _ = shipped
    longest = max(range(3), key=lambda b: study["lengths"][b])
    for b, s in enumerate(study["sentences"]):
        if b == longest:  # no pads: the mask changes nothing for it
            assert s["pads"] == 0 and s["max_diff_unmasked"] < 1e-5
        else:
            assert s["pads"] > 0 and s["max_diff_unmasked"] > 0.1 and s["min_cos_unmasked"] < 0.99
    assert all(x > 0.01 for x in study["pad_share_layers"])
    g = study["sentences"][0]["mask"]
    assert abs(g["prob_unmasked"] - g["prob_alone"]) > 0.005
    # layer 1's share on pads, counted by hand from the unmasked forward pass
    ids, mask = torch.tensor(study["ids"]), study["attention_mask"]
    with torch.no_grad():
        a = model(ids, output_attentions=True).attentions[0]  # (B, A, T, T)
    for h in range(a.size(1)):
        shares = [float(a[b, h, q, [k for k, m in enumerate(mask[b]) if not m]].sum())
                  for b in range(3) if b != longest for q, m in enumerate(mask[b]) if m]
        assert abs(sum(shares) / len(shares) - study["pad_share_unmasked"][0][h]) < 1e-5
    assert abs(study["pad_share_layers"][0] - sum(study["pad_share_unmasked"][0]) / a.size(1)) < 1e-6


@pytest.mark.parametrize("text, words", [
    ("one sentence only .", "got 1"), ("a .\nb .\nc .\nd .", "got 4"), ("", "got 0"),
    ("the film .\nthe plot .", "nothing is padded"), ("a .\n" + "x" * (P.CHARS + 1), "at most")])
def test_mistakes_are_one_clear_line(text, words):
    with pytest.raises(gr.Error, match=re.escape(words)):
        ap.show(text, D)


def test_the_view_states_the_studys_numbers(study, single_thread):
    said, batch, per_sentence, per_layer, fig, res = ap.show("\n".join(SENTENCES), D)
    assert f"max |Δ| = **{max(s['max_diff_masked'] for s in res['sentences']):.1e}**" in said
    L, A = res["num_layers"], res["num_heads"]
    assert f"a real token gives a `[PAD]`, over all {L} layers × {A} heads: **0**" in said
    for k, x in enumerate(res["pad_share_layers"], 1):
        assert f"{x:.1%} in layer {k}" in said
    s, g = res["sentences"][0], res["sentences"][0]["mask"]
    assert (f"up to **{s['max_diff_unmasked']:.2f}** (cosine with its run alone down to "
            f"**{s['min_cos_unmasked']:.3f}**") in said
    assert f"alone, the model guesses **{g['guess']}** ({g['prob_alone']:.1%})" in said
    assert f"without it, {g['prob_unmasked']:.1%}" in said
    assert batch.count("<table") == 3 and batch.count(">[PAD]<") == sum(len(t) - n for t, n in
                                                                       zip(res["tokens"], res["lengths"]))
    assert list(per_sentence["tokens"]) == res["lengths"] and len(per_layer) == L
    assert [list(b.y) for b in fig.data] == [[row[h] for row in res["pad_share_unmasked"]] for h in range(A)]
    assert abs(res["sentences"][0]["max_diff_masked"] - study["sentences"][0]["max_diff_masked"]) < 1e-5


def test_the_note_says_what_the_model_adds():
    """The explanation's number is the bias the model's own mask builder puts on a pad key."""
    from bertlab.data.masking import IGNORE_INDEX
    from bertlab.model import attention_bias
    bias = attention_bias(torch.tensor([[1, 1, 0]]), 3, torch.float32)  # (1, 1, 3, 3)
    assert float(bias[0, 0, 0, 2]) == ap.FP32_MIN and float(bias[0, 0, 0, :2].abs().max()) == 0.0
    assert ap.FP32_MIN_SAID == "−3.4 × 10³⁸" and ap.FP32_MIN_SAID in ap.NOTE and f"pads {IGNORE_INDEX}" in ap.NOTE


def test_what_the_view_echoes_is_escaped():
    said, batch, *_ = ap.show("<b>x</b> [MASK] .\nthe acting was great but the plot was too long .", D)
    assert ">&lt;</span>" in batch and "><</span>" not in batch  # the token "<" as text, not markup
    assert "<b>x" not in said


@pytest.mark.parametrize("kind", ["albert", "distilbert", "roberta", "deberta-v2"])
def test_every_family_member_reads_a_masked_batch_as_each_sentence_alone(kind, vocab_tokenizer, single_thread):
    """Tiny random members: the same mask through their own attention (DeBERTa's masks query rows too)."""
    from bertlab import family
    torch.manual_seed(0)
    extra = {"albert": {"embedding_size": 16}, "roberta": {"pad_token_id": vocab_tokenizer.pad_token_id,
                                                          "type_vocab_size": 1, "max_position_embeddings": 66}}
    shape = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
                 max_position_embeddings=64) | extra.get(kind, {})
    cfg = family.config_class(kind)(vocab_size=vocab_tokenizer.vocab_size, model_type=kind, **shape)
    res = P.padding_study(family.build(cfg).eval(), vocab_tokenizer, ["the film was [MASK] .", "it was fun and long ."])
    assert all(x == 0.0 for row in res["pad_max_masked"] for x in row)
    short = res["sentences"][0]
    assert short["max_diff_masked"] < 1e-5 < short["max_diff_unmasked"] and short["mask"]["prob_masked"] > 0


def test_on_a_device_the_inputs_follow_the_model(vocab_tokenizer):
    """Runs with the model on torch's meta device: every tensor it builds goes where the weights are."""
    from devicecheck import assert_device_clean

    from bertlab import BertConfig, family
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=48, max_position_embeddings=64)
    model = family.build(cfg).eval().to("meta")
    assert_device_clean(P.padding_study, model, vocab_tokenizer, ["the film was [MASK] .", "it was fun and long ."])


# ---- the head-averaged map of a layer -----------------------------------------------------------

TEXT = "the cat sat on the mat because it was tired ."


@pytest.fixture(scope="module")
def run(shipped, single_thread):
    return av.run_attention(*shipped, TEXT)


def test_head_average_is_the_mean_of_the_heads(run):
    for layer in range(1, run.num_layers + 1):
        m = av.layer_average(run, layer)
        by_hand = sum(run.attentions[layer - 1, h] for h in range(run.num_heads)) / run.num_heads
        assert torch.allclose(m, by_hand, atol=1e-7)
        assert torch.allclose(m.sum(-1), torch.ones(len(run.tokens)), atol=1e-5)
        assert all((m - run.attentions[layer - 1, h]).abs().max() > 1e-3 for h in range(run.num_heads))
    assert (av.layer_average(run, run.num_layers) - av.rollout_map(run)).abs().max() > 1e-2  # one step, not all


def test_strongest_pair_skips_markers_and_self(run):
    m = av.layer_average(run, 4)
    i, j, w = av.strongest_pair(m, run.special)
    assert i != j and not run.special[i] and not run.special[j] and w == float(m[i, j])
    words = [k for k, s in enumerate(run.special) if not s]
    assert w == max(float(m[a, b]) for a in words for b in words if a != b)
    with pytest.raises(ValueError, match="two word pieces"):
        av.strongest_pair(torch.eye(3), [True, False, True])


def test_the_tab_shows_the_average_beside_the_head(run, single_thread):
    fig, said = at.average_view(TEXT, "", 4, False, D)
    m = av.layer_average(run, 4)
    assert torch.allclose(torch.from_numpy(fig.data[0].z), m, atol=1e-6)
    assert fig.layout.title.text.startswith("Layer 4, mean of 4 heads")
    i, j, w = av.strongest_pair(m, run.special)
    labels = av.unique_labels(run.tokens)
    assert f"**{labels[i]}** → **{labels[j]}**, {w:.2f}" in said and "Rollout" in said
    data = at.analyse(TEXT, "", 4, 1, False, D)[-1]
    assert torch.allclose(torch.tensor(data["layer_average"], dtype=torch.float64), m.double(), atol=1e-4)
    hidden = at.average_view(TEXT, "", 4, True, D)[0].data[0].z  # [CLS]/[SEP] hidden: rows rescaled to 1
    assert hidden.shape == (len(run.tokens) - 2,) * 2 and abs(hidden.sum(-1) - 1).max() < 1e-5
