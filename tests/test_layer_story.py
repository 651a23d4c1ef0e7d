"""Issue 32, item 13: the layer story. The silver polarity task (lexicon sign, flipped by a negator in
the words before it; other words unlabelled and left out) and the story of three probes on one model."""
import json

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining
from bertlab.data import probe as probe_data
from bertlab.data.probe import IGNORE, ProbeData
from bertlab.train import probing

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=64)


@pytest.fixture(scope="module")
def tiny(vocab_tokenizer):
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)).eval(), vocab_tokenizer


def labelled(text):
    words, ys, flips = probe_data.silver_polarity([text])
    return {w: (y, f) for w, y, f in zip(words[0], ys[0], flips[0]) if y != IGNORE} if words else {}


def test_polarity_labels_flip_under_a_negator_and_skip_other_words():
    assert labelled("a good film .") == {"good": (1, False)}  # "a", "film", "." carry no opinion: no label
    assert labelled("the film is not good .") == {"good": (0, True)}
    assert labelled("it does n't feel boring") == {"boring": (1, True)}  # ptb_words splits "doesn't" into does n't
    assert labelled("never a very awful moment") == {"awful": (1, True)}  # "very" is an intensifier, 3 words back
    assert labelled("not long , but great fun") == {"great": (1, False), "fun": (1, False)}  # a clause break ends it
    assert labelled("not that the whole thing was bad") == {"bad": (0, False)}  # more than 3 words back
    assert labelled("more of the same film") == {}  # a quantifier the lexicon scores, left out: no sentence at all


def test_polarity_task_sizes_and_notes():
    d = probe_data.load("polarity", sample=400)
    assert d.kind == "word" and d.labels == ["negative", "positive"] and d.subset[0] == "flipped by a negator"
    n = sum(y != IGNORE for ys in d.y for y in ys)
    k = sum(map(sum, d.subset[1]))
    assert 0 < len(d.sentences) < 400 and n >= len(d.sentences) and 0 < k < 0.1 * n
    assert f"{k} of {n} evaluative words" in d.notes[0] and d.summary().endswith(f", {n} words")
    assert all(f is False or y != IGNORE for ys, fs in zip(d.y, d.subset[1]) for y, f in zip(ys, fs))
    assert probe_data.DEFAULT_SAMPLE["polarity"] >= 8530  # every sentence: ~1 evaluative word in 2


def test_unlabelled_words_are_no_items_and_the_subset_is_scored_apart(tiny):
    model, tok = tiny
    sents = [["the", "film", "was", "good"], ["the", "film", "was", "not", "bad"]] * 20
    y = [[IGNORE, IGNORE, IGNORE, 1], [IGNORE] * 4 + [1]] * 20
    flags = [[False] * 4, [False] * 4 + [True]] * 20
    data = ProbeData("pol", "word", sents, y, ["negative", "positive"], ("pol-test",), subset=("negated", flags))
    f = probing.compute_features(model, tok, data)
    assert f.X.shape[1] == 40 and f.dropped == 0 and f.flag.tolist() == [False, True] * 20
    y[0] = [0, IGNORE, IGNORE, 1]
    r = probing.probe(model, tok, ProbeData("pol2", "word", sents, y, ["negative", "positive"], ("pol2",),
                                            subset=("negated", flags)))
    assert r["counts"]["train"] + r["counts"]["validation"] == 41 and r["subset"]["name"] == "negated"
    assert r["subset"]["validation"] > 0 and all(0 <= x["subset_acc"] <= 1 for x in r["layers"])


def test_center_of_gravity_by_hand():
    # best so far 0.5 0.7 0.7 0.9: gains 0.2 at layer 1, 0 at layer 2 (a drop is no gain), 0.2 at layer 3
    assert probing.center_of_gravity([0.5, 0.7, 0.6, 0.9]) == pytest.approx((1 * 0.2 + 3 * 0.2) / 0.4)
    assert probing.center_of_gravity([0.5, 0.5, 0.5, 0.8]) == 3.0
    assert probing.center_of_gravity([0.9, 0.8, 0.85]) is None  # nothing beats the embeddings


def test_story_on_a_tiny_model(tiny):
    model, tok = tiny
    seen = []
    s = probing.layer_story(model, tok, name="tiny", samples={"pos": 30, "polarity": 300, "sentiment": 60},
                            progress=lambda p, d: seen.append(p))
    assert [t["task"] for t in s["tasks"]] == list(probing.STORY) and s["num_layers"] == 2 and s["model"] == "tiny"
    for t in s["tasks"]:
        assert len(t["acc"]) == len(t["control_acc"]) == len(t["gain"]) == 3 and t["gain"][0] == 0
        assert t["center"] == probing.center_of_gravity(t["acc"])
        assert t["gain"] == [round(a - t["acc"][0], 4) for a in t["acc"]]
    pol = s["tasks"][1]
    assert pol["subset"]["name"] == "flipped by a negator" and len(pol["subset"]["acc"]) == 3
    assert s["tasks"][2]["counts"]["unit"] == "sentences" and seen == sorted(seen) and seen[-1] == 1.0
    assert json.loads(json.dumps(s)) == s  # JSON-ready: no tensors
    text = probing.describe(s)
    assert text.count("peaks at layer") == 3 and "flipped by a negator" in text


def test_story_chart_table_and_a_bad_model():
    import gradio as gr

    from bertlab.app.ui.labs import probe_tab as pt
    layers = lambda accs, sub=None: [{"acc": a, "control_acc": 0.5, "selectivity": a - 0.5,  # noqa: E731
                                      **({"subset_acc": sub[i]} if sub else {})} for i, a in enumerate(accs)]
    runs = [{"task": "pos", "layers": layers([0.8, 0.9, 0.85]), "best_layer": 1},
            {"task": "polarity", "layers": layers([0.9, 0.8, 0.8], [0.1, 0.2, 0.4]), "best_layer": 0,
             "subset": {"name": "flipped by a negator", "validation": 10, "share": 0.04}},
            {"task": "sentiment", "layers": layers([0.6, 0.6, 0.7]), "best_layer": 2}]
    for r in runs:
        r.update(model="m", num_layers=2, probe="linear", most_selective_layer=0, majority=0.5, counts={}, seconds=1.0)
    s = probing.story(runs)
    fig = pt.story_figure(s)
    names = [t.name for t in fig.data]
    assert names[:2] == ["pos", None] and "polarity: only the 10 negated words" in names
    centers = {t.hovertemplate.split(":")[0]: t.x[0] for t in fig.data if t.marker.symbol == "diamond"}
    assert centers == {"pos": 1.0, "sentiment": 2.0}  # polarity never beats its embeddings: no diamond
    # ... and the chart says so where the text compares three (issue 42, item 9)
    assert [a.text for a in fig.layout.annotations] == ["no ◆ for polarity:<br>no layer beats the embeddings"]
    sub = next(t for t in fig.data if t.name and "negated" in t.name)
    assert list(sub.y) == pytest.approx([0, 10, 30])  # points over its own layer 0
    table = pt.story_table(s)
    assert list(table.columns) == ["layer", "pos", "polarity", "sentiment"] and table["pos"][1] == "90.0 (50)"
    with pytest.raises(gr.Error):
        pt.run_story("/no/such/model", progress=lambda *a, **k: None)


def test_cli_story_table(tiny, monkeypatch, capsys):
    from bertlab.app.probe_cli import report_story
    from bertlab.train.specs import ProbeSpec
    for task, n in {"pos": 30, "polarity": 300, "sentiment": 60}.items():
        monkeypatch.setitem(probing.STORY_SAMPLE, task, n)
    assert ProbeSpec.from_dict({"kind": "probe", "story": True}).story
    assert report_story(*tiny, ProbeSpec(story=True), as_json=False) == 0
    out = capsys.readouterr().out
    assert "embeddings" in out and "layer 2" in out and "center of gravity (expected layer" in out
    assert "only the" in out and "flipped by a negator" in out
