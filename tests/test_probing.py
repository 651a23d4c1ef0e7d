"""Probing lab backend: features equal a direct forward pass, controls follow Hewitt & Liang, probes
learn what is learnable, bad files fail clearly, and the default model shows real signal."""
import json
import random
import subprocess
import sys

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, save_pretrained
from bertlab.data import probe as probe_data
from bertlab.data.probe import ProbeData
from bertlab.train import probing

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=64)
LEXICON = {"the": "DT", "a": "DT", "this": "DT", "film": "NN", "movie": "NN", "plot": "NN", "story": "NN",
           "actor": "NN", "scene": "NN", "great": "JJ", "good": "JJ", "bad": "JJ", "boring": "JJ",
           "was": "VB", "is": "VB", "were": "VB", "and": "CC", "but": "CC", ".": "."}


@pytest.fixture(scope="module")
def tiny(vocab_tokenizer):
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)).eval(), vocab_tokenizer


def lexicon_task(n=80, seed=0, name="lexicon") -> ProbeData:
    """Sentences whose tags are a function of the word: decodable from the embeddings alone."""
    rng, words = random.Random(seed), list(LEXICON)
    sents = [[rng.choice(words) for _ in range(rng.randint(3, 8))] for _ in range(n)]
    names = sorted(set(LEXICON.values()))
    y = [[names.index(LEXICON[w]) for w in s] for s in sents]
    return ProbeData(name, "word", sents, y, names, (name, n, seed))


def direct(model, tok, words):
    """Hidden states of one sentence alone, no padding: (L+1, T, H), and each piece's word index."""
    enc = tok.backend.encode(words, is_pretokenized=True, add_special_tokens=False)
    ids = torch.tensor([[tok.cls_token_id] + enc.ids + [tok.sep_token_id]])
    with torch.no_grad():
        hs = model.bert(ids, output_hidden_states=True).hidden_states
    return torch.stack(hs)[:, 0], enc.word_ids


# ---- features --------------------------------------------------------------------------------------
def test_word_features_equal_a_direct_forward(tiny):
    model, tok = tiny
    sents = [["the", "overacting", "film"], ["a", "bank"], ["the", "acting", "was", "unwatchable", "."]]
    data = ProbeData("w", "word", sents, [[0, 1, 0], [0, 1], [0, 1, 0, 1, 0]], ["a", "b"], ("w",))
    first = probing.compute_features(model, tok, data, "first", batch_size=2)
    mean = probing.compute_features(model, tok, data, "mean", batch_size=2)
    assert first.X.shape == (3, 10, 32) and first.dropped == 0
    assert first.group.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2, 2]
    row = 0
    for s in sents:
        h, word_ids = direct(model, tok, s)
        for w in range(len(s)):
            pos = [t + 1 for t, wi in enumerate(word_ids) if wi == w]
            torch.testing.assert_close(first.X[:, row].float(), h[:, pos[0]], atol=1e-2, rtol=1e-2)
            torch.testing.assert_close(mean.X[:, row].float(), h[:, pos].mean(1), atol=1e-2, rtol=1e-2)
            if len(pos) > 1:  # a split word: first piece and mean really differ
                assert (first.X[:, row] - mean.X[:, row]).abs().max() > 0.05
            row += 1


def test_sentence_and_position_features(tiny):
    model, tok = tiny
    texts = ["the film was great .", "a bank", "the plot was boring and the acting was bad ."] * 2
    data = ProbeData("s", "sentence", texts, [1, 0, 0, 1, 0, 0], ["neg", "pos"], ("s",))
    cls = probing.compute_features(model, tok, data, "cls")
    mean = probing.compute_features(model, tok, data, "mean")
    for i, t in enumerate(texts[:3]):
        h, _ = direct(model, tok, t.split())
        torch.testing.assert_close(cls.X[:, i].float(), h[:, 0], atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(mean.X[:, i].float(), h[:, 1:-1].mean(1), atol=1e-2, rtol=1e-2)
    long = " ".join(["film"] * 30)
    pos = probing.compute_features(model, tok, ProbeData("p", "token", [long, "a film"], None, [], ("p",)))
    M = probe_data.MAX_POSITION
    assert pos.y.tolist() == list(range(M)) + [0, 1]  # position i+1 has label i, capped at MAX_POSITION
    h, _ = direct(model, tok, long.split())
    torch.testing.assert_close(pos.X[:, 5].float(), h[:, 6], atol=1e-2, rtol=1e-2)


def test_fingerprint_and_feature_cache(tiny):
    model, tok = tiny
    data = lexicon_task(20, name="cache")
    f1 = probing.features(model, tok, data)
    assert probing.features(model, tok, data) is f1  # cached
    assert probing.features(model, tok, data, "mean") is not f1
    other = probing.random_init(model, seed=1)
    assert probing.fingerprint(other, tok) != probing.fingerprint(model, tok)
    assert probing.fingerprint(probing.random_init(model, seed=1), tok) == probing.fingerprint(other, tok)
    with torch.no_grad():
        other.bert.encoder.layer[1].output.dense.bias.add_(1.0)  # one small change: a new identity
    assert probing.fingerprint(other, tok) != probing.fingerprint(probing.random_init(model, seed=1), tok)


# ---- controls, splits, probes ----------------------------------------------------------------------
def test_control_labels_fixed_per_type_and_drawn_from_the_label_distribution(tiny):
    model, tok = tiny
    f = probing.features(model, tok, lexicon_task(300))
    tr, va = probing.split_rows(f, seed=0)
    c1, c2 = probing.control_labels(f, tr, "word", 0), probing.control_labels(f, tr, "word", 0)
    assert torch.equal(c1, c2) and not torch.equal(c1, probing.control_labels(f, tr, "word", 5))
    for t in f.types.unique():
        assert len(c1[f.types == t].unique()) == 1  # one label per word type, wherever it occurs
    assert not torch.equal(c1, f.y)
    s = probing.control_labels(f, tr, "sentence", 0)  # sentence tasks: a permutation of the labels
    assert torch.equal(torch.bincount(s), torch.bincount(f.y)) and not torch.equal(s, f.y)


def test_split_is_by_sentence(tiny):
    model, tok = tiny
    data = lexicon_task(60)
    data.sentences[1] = list(data.sentences[0])  # a duplicate must not straddle the split
    data.y[1] = list(data.y[0])
    f = probing.compute_features(model, tok, data)
    tr, va = probing.split_rows(f, seed=0)
    assert len(tr) + len(va) == len(f.y) and not set(f.group[tr].tolist()) & set(f.group[va].tolist())
    side = {int(g): i in set(va.tolist()) for i, g in enumerate(f.group.tolist())}
    assert side[0] == side[1]


def test_linear_probe_learns_a_linear_rule_and_mlp_learns_xor():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(600, 8, generator=g)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).long()
    pred, train_acc = probing.train_probe(X[:400], y[:400], X[400:], 2)
    assert (pred == y[400:]).float().mean() > 0.95 and train_acc > 0.95
    noise = torch.randint(5, (600,), generator=g)  # memorising noise is sensitive to every detail
    for kind in ("linear", "mlp"):
        torch.manual_seed(1)
        a, acc_a = probing.train_probe(X[:400], noise[:400], X[400:], 5, kind)
        torch.manual_seed(2)  # the global RNG (shared with other threads) must not matter
        b, acc_b = probing.train_probe(X[:400], noise[:400], X[400:], 5, kind)
        assert torch.equal(a, b) and acc_a == acc_b, kind
    xor = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).long()
    lin, _ = probing.train_probe(X[:400], xor[:400], X[400:], 2, "linear")
    mlp, _ = probing.train_probe(X[:400], xor[:400], X[400:], 2, "mlp")
    assert (lin == xor[400:]).float().mean() < 0.7 < 0.85 < (mlp == xor[400:]).float().mean()


def test_probe_result_on_a_tiny_model(tiny):
    model, tok = tiny
    seen = []
    r = probing.probe(model, tok, lexicon_task(120), name="tiny", progress=lambda p, d: seen.append(p))
    assert r["num_layers"] == 2 and [x["layer"] for x in r["layers"]] == [0, 1, 2]
    for x in r["layers"]:
        assert 0 <= x["control_acc"] <= 1 and x["selectivity"] == pytest.approx(x["acc"] - x["control_acc"], abs=2e-4)
    assert r["layers"][0]["acc"] > 0.9 > r["majority"]  # the tag is a function of the word: in the embeddings
    assert sum(t["count"] for t in r["per_tag"]) == r["counts"]["validation"]
    assert r["control"] == "random label per word type" and seen[-1] == 1.0 and seen == sorted(seen)
    assert json.loads(json.dumps(probing.public(r)))["layers"] == r["layers"]
    r2 = probing.probe(model, tok, lexicon_task(120), name="tiny")
    assert r2["layers"] == r["layers"]
    assert probing.per_tag(r, 0)[0]["label"] == r["per_tag"][0]["label"]
    with pytest.raises(ValueError, match="layer must be between 0 and 2"):
        probing.per_tag(r, 3)


def test_shipped_tasks_on_a_tiny_model(tiny):
    model, tok = tiny
    s = probing.probe(model, tok, "sentiment", sample=60, feature="mean")
    assert s["kind"] == "sentence" and s["control"] == "shuffled labels" and s["labels"] == ["negative", "positive"]
    assert s["counts"]["train"] + s["counts"]["validation"] == 60
    p = probing.probe(model, tok, "position", sample=40)
    assert p["layers"][0]["acc"] > 0.9  # position embeddings are added at layer 0
    assert p["layers"][0]["selectivity"] > 0 and p["control"] == "random label per token type"
    w = probing.probe(model, tok, "pos", sample=30)
    assert w["kind"] == "word" and "NN" in w["labels"] and w["counts"]["sentences"] <= 30


# ---- files and bad input ---------------------------------------------------------------------------
def conll(rows=12, tags=("DT", "NN")):
    nouns, adjs = ["film", "movie", "plot", "story", "actor", "scene"], ["good", "bad", "great", "boring"]
    return "\n\n".join(f"the\t{tags[0]}\n{nouns[i % 6]}\t{tags[-1]}\nwas\tVB\n{adjs[i % 4]}\tJJ"
                       for i in range(rows)) + "\n"


def test_file_tasks(tmp_path, tiny):
    model, tok = tiny
    (tmp_path / "a.conll").write_text(conll())
    d = probe_data.load(str(tmp_path / "a.conll"))
    assert d.kind == "word" and d.labels == ["DT", "JJ", "NN", "VB"] and len(d.sentences) == 12
    rows = [{"tokens": ["the", "film", "was", "good"], "ner_tags": [0, 1, 0, 2]}] * 15
    (tmp_path / "t.jsonl").write_text("\n".join(map(json.dumps, rows)))
    d = probe_data.load(str(tmp_path / "t.jsonl"))
    assert d.kind == "word" and d.labels == ["0", "1", "2"]
    (tmp_path / "s.csv").write_text("text,label\n" + "".join(f"the film {i},{'good' if i % 2 else 'bad'}\n" for i in range(30)))
    d = probe_data.load(str(tmp_path / "s.csv"), sample=20)
    assert d.kind == "sentence" and d.labels == ["bad", "good"] and len(d.sentences) == 20
    r = probing.probe(model, tok, str(tmp_path / "a.conll"))
    assert r["task"] == "a.conll" and len(r["layers"]) == 3


BAD = {  # file name: (content, words in the error)
    "empty.conll": ("", "empty"),
    "binary.conll": (b"\x00\x01\x02abc", "binary"),
    "nolabels.conll": ("the\nfilm\nwas\n", "expected 'token tag'"),
    "oneclass.conll": ("".join(f"w{i}\tX\n\n" for i in range(20)), "same tag"),
    "few.conll": (conll(rows=3), "at least 10"),
    "mismatch.jsonl": ('{"tokens": ["a", "film"], "tags": ["DT"]}\n', "2 tokens but 1 tags"),
    "notags.jsonl": ('{"tokens": ["a", "film"]}\n', "no labels"),
    "nolabel.csv": ("text\n" + "a film\n" * 20, "no label column"),
    "oneclass.csv": ("text,label\n" + "".join(f"film {i},1\n" for i in range(20)), "same label"),
    "odd.pdf": ("whatever", "unsupported file type"),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_files_give_clear_errors(tmp_path, name):
    content, words = BAD[name]
    p = tmp_path / name
    p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
    with pytest.raises(ValueError) as e:
        probe_data.load(str(p))
    assert words in str(e.value) and len(str(e.value)) < 300, str(e.value)


@pytest.mark.parametrize("kw, words", [
    (dict(task="nonsense"), "not a task"), (dict(task=""), "task must be"), (dict(task="pos", sample=3), "sample must be"),
    (dict(task="pos", sample=30, feature="cls"), "feature must be one of first, mean"),
    (dict(task="sentiment", sample=30, feature="first"), "feature must be one of cls, mean"),
    (dict(task="pos", probe="svm"), "probe must be one of"),
])
def test_bad_arguments(tiny, kw, words):
    with pytest.raises(ValueError, match=words):
        probing.probe(*tiny, **kw)


# ---- CLI -------------------------------------------------------------------------------------------
def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "bertlab", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cli_table_json_and_errors(tmp_path, tiny):
    folder = save_pretrained(tiny[0], tiny[1], tmp_path / "model")
    (tmp_path / "a.conll").write_text(conll(20))
    r = run_cli("probe", "--model", str(folder), "--task", str(tmp_path / "a.conll"), "--json", "--compare-random", "--mlp")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [o["model"] for o in out] == [str(folder), "random init (same config)"] and out[0]["probe"] == "mlp"
    assert all(len(o["layers"]) == 3 and "control_acc" in o["layers"][0] for o in out)
    r = run_cli("probe", "--model", str(folder), "--task", str(tmp_path / "a.conll"), "--feature", "mean", "--per-tag",
                "--layer", "1")
    assert r.returncode == 0, r.stderr
    assert "selectivity" in r.stdout and "embeddings" in r.stdout and "per label at layer 1" in r.stdout
    assert "feature mean" in r.stdout and "random label per word type" in r.stdout
    (tmp_path / "bad.conll").write_text("the\nfilm\n")
    r = run_cli("probe", "--model", str(folder), "--task", str(tmp_path / "bad.conll"))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "token tag" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---- the real signal -------------------------------------------------------------------------------
@pytest.mark.slow
def test_default_model_pos_beats_random_init_and_is_selective():
    """The issue's acceptance test: on the shipped model, the best layer's POS probe beats the same
    probe on a random model of the same config by a clear margin; its selectivity is positive;
    the control is reported for every layer. (Its time is a benchmark's business, not a test's: on a
    loaded 2-core CI machine it took over a minute.)"""
    from bertlab.checkpoint import load_pretrained
    model, tok = load_pretrained()
    r = probing.probe(model, tok, "pos")
    base = probing.probe(probing.random_init(model), tok, "pos")
    best = r["layers"][r["best_layer"]]
    assert r["counts"]["validation"] > 2000 and r["seconds"] > 0
    assert best["acc"] > max(x["acc"] for x in base["layers"]) + 0.08
    assert best["selectivity"] > 0.1 and best["acc"] > 3 * r["majority"]
    assert all(0 < x["control_acc"] < 1 for x in r["layers"] + base["layers"])
    assert len(r["layers"]) == model.config.num_hidden_layers + 1
    torch.manual_seed(1)  # a fixed seed: the same figures whatever the global RNG did before
    small = probing.probe(model, tok, "pos", sample=300)
    torch.manual_seed(2)
    assert probing.probe(model, tok, "pos", sample=300)["layers"] == small["layers"]
