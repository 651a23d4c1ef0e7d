"""GPT-2's and T5's counts (bertlab.analysis.shapes) against transformers' own classes: parameters by part on
the meta device, forward FLOPs against torch's FLOP counter on tiny configs."""
import re

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.analysis import shapes, sizing

transformers = pytest.importorskip("transformers")

GPT2_PART = [("wte", "embeddings"), ("wpe", "positions"), (".attn.", "attention"), (".mlp.", "feed_forward"),
             ("ln_", "norms"), ("lm_head", "head")]
T5_PART = [("relative_attention_bias", "positions"), ("shared", "embeddings"), ("SelfAttention", "attention"),
           ("EncDecAttention", "cross_attention"), ("DenseReluDense", "feed_forward"), ("layer_norm", "norms"),
           ("lm_head", "head")]


def by_part(model, table) -> dict:
    """transformers' parameters (tied ones once) summed by our parts, each name matched by its first rule."""
    d = dict.fromkeys(shapes.PARTS, 0)
    for name, p in model.named_parameters():  # named_parameters skips a tied weight's second name
        d[next(part for key, part in table if key in name)] += p.numel()
    d["total"] = sum(d.values())
    return d


def gpt2(n_layer, n_embd, n_head, device="meta", **kw):
    cfg = transformers.GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, **kw)
    with torch.device(device):
        return transformers.GPT2LMHeadModel(cfg)


def t5(d_model, d_ff, num_layers, num_heads, device="meta", **kw):
    cfg = transformers.T5Config(d_model=d_model, d_ff=d_ff, num_layers=num_layers, num_heads=num_heads, **kw)
    with torch.device(device):
        return transformers.T5ForConditionalGeneration(cfg)


@pytest.mark.parametrize("name", ["GPT-2 small", "GPT-2 medium"])
def test_gpt2_parts_match_transformers(name):
    assert shapes.gpt2_params(*shapes.GPT2[name]) == by_part(gpt2(*shapes.GPT2[name]), GPT2_PART)


@pytest.mark.parametrize("name", ["T5-small", "T5-base"])
def test_t5_v1_0_parts_match_transformers(name):
    assert shapes.t5_params(*shapes.T5[name]) == by_part(t5(*shapes.T5[name]), T5_PART)


def test_t5_v1_1_gated_and_uneven_stacks_match_transformers():
    """v1.1's gated feed-forward, a decoder of other depth, other buckets and d_kv. transformers 5 ties T5's
    output layer always (its config forces it), so v1.1's untied head is checked against lm_head's shape."""
    kw = dict(d_kv=24, num_decoder_layers=3, vocab_size=1000, relative_attention_num_buckets=16)
    model = t5(96, 256, 2, 4, feed_forward_proj="gated-gelu", **kw)
    mine = dict(d_kv=24, num_decoder_layers=3, vocab=1000, buckets=16, gated=True)
    assert shapes.t5_params(96, 256, 2, 4, **mine) == by_part(model, T5_PART)
    untied = shapes.t5_params(96, 256, 2, 4, tied=False, **mine)
    assert untied["head"] == model.lm_head.weight.numel() == untied["total"] - by_part(model, T5_PART)["total"]


def test_bert_parts_sum_to_the_sizing_encoder():
    for name in ("BERT-base", "BERT-large"):
        c = sizing.known_config(name)
        assert shapes.bert_params(c)["total"] == sizing.param_counts(c, heads=False)["encoder_total"]


def counted(model, *inputs, **kw) -> int:
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(*inputs, **kw)
    return fc.get_total_flops()


@pytest.mark.parametrize("T", [7, 16])
def test_gpt2_flops_match_the_counter(T):
    model = gpt2(3, 48, 4, device="cpu", vocab_size=101, n_positions=32, attn_implementation="eager").eval()
    f = shapes.gpt2_flops(3, 48, 4, vocab=101, seq_len=T)
    assert f["total"] * T == counted(model, torch.randint(0, 101, (1, T)))
    assert f["attention"] == 3 * 4 * T * 48


@pytest.mark.parametrize("S,T", [(9, 4), (5, 11)])
def test_t5_flops_match_the_counter(S, T):
    kw = dict(d_kv=12, num_decoder_layers=3, vocab_size=97)
    for gated in (False, True):
        model = t5(40, 72, 2, 4, device="cpu", feed_forward_proj="gated-gelu" if gated else "relu",
                   attn_implementation="eager", **kw).eval()
        f = shapes.t5_flops(40, 72, 2, 4, d_kv=12, num_decoder_layers=3, vocab=97, gated=gated, source=S, target=T)
        n = counted(model, input_ids=torch.randint(0, 97, (1, S)), decoder_input_ids=torch.randint(0, 97, (1, T)))
        assert f["total"] * (S + T) == pytest.approx(n, rel=1e-12) and f["tokens"] == S + T


def test_published_table():
    rows = {r["name"]: r for r in shapes.shapes(512, 128)}
    assert list(rows) == list(shapes.MODELS)
    for name, r in rows.items():  # every count within 5 % of a published figure (T5-large is the farthest)
        assert min(abs(p["diff"]) for p in r["published"]) < 0.05, name
        assert r["params"]["total"] == sum(r["params"][k] for k in shapes.PARTS)
    assert rows["GPT-2 small"]["params"]["total"] == 124_439_808 and rows["T5-base"]["params"]["total"] == 222_903_552
    assert rows["T5-base"]["params"]["cross_attention"] > 0 == rows["GPT-2 small"]["params"]["cross_attention"]
    # the released GPT-2 counts within 0.5 % of their names; the paper's within 0.5 % of GPT-1's tables
    gap = shapes.gpt2_gap()
    for name, g in gap["models"].items():
        assert abs(g["released"] - rows[name]["published"][1]["params"]) < 0.005 * g["released"]
        assert abs(g["with_gpt1_tables"] - g["paper"]) <= gap["worst"] * g["paper"] < 0.005 * g["paper"]
    assert rows["BERT-base"]["flops_per_token"]["total"] == sizing.flops(sizing.known_config("BERT-base"), 512,
                                                                           heads=False)["total"] / 512
    for bad in (0, 513, "x", 2.5):
        with pytest.raises(ValueError, match=re.escape("seq_len")):
            shapes.shapes(bad)


def test_span_corruption_and_t5s_lengths():
    src, tgt = shapes.corrupt("a b c d e f g".split(), [(4, 2), (1, 1)])
    assert (src, tgt) == ("a <extra_id_0> c d <extra_id_1> g", "<extra_id_0> b <extra_id_1> e f <extra_id_2>")
    pair = shapes.pretraining_pair(512)  # T5's 512 inputs and 114 targets (a 568-token text)
    assert (pair["raw"], pair["inputs"], pair["targets"]) == (568, 512, 114)
    assert shapes.span_lengths(pair["raw"] + 1)["inputs"] > 512
    with pytest.raises(ValueError, match="overlap"):
        shapes.corrupt("a b c".split(), [(0, 2), (1, 1)])


def test_the_architecture_section_states_the_librarys_numbers():
    import gradio as gr

    from bertlab.app.ui.labs import architecture_shapes as view
    said, df, data = view.compare(256, 64)
    rows = {r["name"]: r for r in shapes.shapes(256, 64)}
    assert data["models"] == list(rows.values()) and list(df["model"]) == list(rows)
    for (_, row), r in zip(df.iterrows(), rows.values()):
        assert row["parameters"] == view.millions(r["params"]["total"])
        assert row["FLOPs a token"] == sizing.humanize(r["flops_per_token"]["total"], "FLOPs")
    gpt, bert, t5 = rows["GPT-2 small"], rows["BERT-base"], rows["T5-base"]
    assert f"costs {sizing.humanize(gpt['flops_per_token']['total'], 'FLOPs')} against BERT-base's " \
           f"{sizing.humanize(bert['flops_per_token']['total'], 'FLOPs')}" in said
    assert f"{100 * t5['params']['cross_attention'] / t5['params']['total']:.0f} % of its" in said
    assert f"within {100 * shapes.gpt2_gap()['worst']:.1f} %" in said and "1,557.6M" in said
    src, tgt = shapes.corrupt(view.SENTENCE.split(), view.SPANS)
    assert f"`{src}`" in view.explain() and f"`{tgt}`" in view.explain()
    for bad in (0, 600, "x"):
        with pytest.raises(gr.Error):
            view.compare(bad, 64)
