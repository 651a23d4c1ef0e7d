"""Fill-mask and NSP scores, checked against transformers' pipeline; the CLI on top of them."""
import json
import subprocess
import sys

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, save_pretrained
from bertlab.analysis.predict import fill_mask, nsp_scores

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
             max_position_embeddings=24)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, vocab_tokenizer):
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)).eval()
    return save_pretrained(m, vocab_tokenizer, tmp_path_factory.mktemp("m") / "model"), m


def test_fill_mask_matches_transformers_pipeline(model_dir, vocab_tokenizer):
    import transformers
    path, m = model_dir
    ours = fill_mask(m, vocab_tokenizer, "the acting was [MASK] .", top_k=5)[0]
    pipe = transformers.pipeline("fill-mask", model=str(path), tokenizer=str(path), top_k=30)
    theirs = [c for c in pipe("the acting was [MASK] .") if c["token"] not in vocab_tokenizer.special_ids][:5]
    assert [c["token"] for c in ours] == [c["token"] for c in theirs]
    for a, b in zip(ours, theirs):
        assert abs(a["score"] - b["score"]) < 1e-5 and a["token_str"] == b["token_str"]
    assert ours[0]["sequence"].startswith("the acting was ")
    assert set(ours[0]) == {"score", "token", "token_str", "sequence"}


def test_several_masks_lower_case_and_left_context(model_dir, vocab_tokenizer):
    _, m = model_dir
    res = fill_mask(m, vocab_tokenizer, "the [mask] was [MASK] .", top_k=3)
    assert len(res) == 2 and all(len(r) == 3 for r in res)
    assert "[MASK]" in res[0][0]["sequence"]  # the other gap stays visible
    left = fill_mask(m, vocab_tokenizer, "the acting was [MASK] .", causal=True)
    assert left[0][0]["score"] != fill_mask(m, vocab_tokenizer, "the acting was [MASK] .")[0][0]["score"]


@pytest.mark.parametrize("text, match", [
    ("", "empty"), ("   \n", "empty"), ("no gap here", "no \\[MASK\\]"),
    ("[MASK] " * 21, "at most"), ("word " * 40 + "[MASK]", "cut off"), (None, "empty"),
])
def test_fill_mask_bad_input(model_dir, vocab_tokenizer, text, match, monkeypatch):
    _, m = model_dir
    monkeypatch.setattr(vocab_tokenizer, "model_max_length", 24)
    with pytest.raises(ValueError, match=match):
        fill_mask(m, vocab_tokenizer, text)


def test_odd_unicode_does_not_crash(model_dir, vocab_tokenizer):
    _, m = model_dir
    for t in ("😀 [MASK] \u200b\u0301 é", "日本語 [MASK]", "\x00\x07 [MASK] \u202e"):
        assert len(fill_mask(m, vocab_tokenizer, t)[0]) == 5


def test_nsp_scores_are_probabilities(model_dir, vocab_tokenizer):
    _, m = model_dir
    s = nsp_scores(m, vocab_tokenizer, "the film was great .", ["i love it .", "the bank of the river ."])
    assert len(s) == 2 and all(0 <= p <= 1 for p in s)
    with pytest.raises(ValueError):
        nsp_scores(m, vocab_tokenizer, "x", [])


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "bertlab", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_fill_mask_json_and_info(model_dir):
    path, _ = model_dir
    r = run_cli("fill-mask", "--model", str(path), "--json", "--top-k", "3", "the film was [MASK] .")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out) == 3 and {"score", "token", "token_str", "sequence"} <= set(out[0])
    r = run_cli("info", str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["params"]["total"] == sum(p.numel() for p in model_dir[1].parameters())
    r = run_cli("info", "base")
    assert r.returncode == 0 and "109,482,240" in r.stdout
    r = run_cli("fill-mask", "--model", str(path), "--in-turn", "--json", "the [MASK] [MASK] was good .")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["masks"] == 2 and len(out["in_turn"]["order"]) == 2 and len(out["independent"]["chain"]) == 2
    r = run_cli("fill-mask", "--model", str(path), "--in-turn", "the [MASK] was good .")
    assert r.returncode == 2 and "two or more" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path):
    r = run_cli("fill-mask", "--model", str(tmp_path / "nope"), "a [MASK]")
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    r = run_cli("fill-mask", "--model", str(tmp_path), "a [MASK]")
    assert r.returncode == 2 and "config.json" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_export_fp16(model_dir, tmp_path):
    path, m = model_dir
    r = run_cli("export", str(path), str(tmp_path / "half"), "--fp16")
    assert r.returncode == 0, r.stderr
    from bertlab import load_model
    half = load_model(tmp_path / "half")
    assert (tmp_path / "half" / "model.safetensors").stat().st_size < (path / "model.safetensors").stat().st_size
    for k, v in m.state_dict().items():
        assert torch.allclose(v, half.state_dict()[k], atol=1e-3, rtol=1e-3), k
    r = run_cli("export", str(path), str(tmp_path / "d"), "--dropout", "0.25")  # what fine-tuning will use
    assert r.returncode == 0, r.stderr
    d = load_model(tmp_path / "d")
    assert d.config.hidden_dropout_prob == d.config.attention_probs_dropout_prob == 0.25
    assert all(torch.equal(v, d.state_dict()[k]) for k, v in m.state_dict().items())


def test_logit_lens_last_row_is_fill_mask(model_dir, vocab_tokenizer):
    """The lens applies the MLM head to every layer's [MASK] vector: its last row is fill_mask's answer
    (to float rounding: the head runs on L+1 rows here and on the masked rows there, and some CPUs'
    matmul kernels round differently by shape)."""
    from bertlab.analysis.lens import logit_lens
    (_, model), tok = model_dir, vocab_tokenizer
    for text, which, causal in [("the film was [MASK] .", 0, False), ("the [MASK] was [MASK] !", 1, True)]:
        lens = logit_lens(model, tok, text, top_k=6, mask_index=which, causal=causal)
        assert len(lens["top"]) == model.config.num_hidden_layers + 1 == len(lens["layers"])
        fm = fill_mask(model, tok, text, top_k=6, causal=causal)[which]
        assert [c["token"] for c in lens["top"][-1]] == [c["token"] for c in fm]
        assert [c["score"] for c in lens["top"][-1]] == pytest.approx([c["score"] for c in fm], rel=1e-5, abs=1e-8)
        assert lens["top"][0] != lens["top"][-1]  # the embeddings row is another guess
    with pytest.raises(ValueError, match="pick one from 1 to 1"):
        logit_lens(model, tok, "a [MASK] film", mask_index=1)


def test_nsp_accuracy_counts(model_dir, vocab_tokenizer):
    from bertlab.analysis.predict import nsp_accuracy, nsp_scores
    from bertlab.data.nsp_pairs import draw_pairs
    (_, model), tok = model_dir, vocab_tokenizer
    docs = [f"the film was good and {w} . the acting was very {w} . i would not watch it again ."
            for w in ("bad", "fun", "great")]
    pairs = draw_pairs(docs, n=4, seed=1)
    assert [y for _, _, y in pairs] == [1, 0, 1, 0]
    acc = nsp_accuracy(model, tok, pairs, batch_size=3)
    p = nsp_scores(model, tok, pairs[0][0], [pairs[0][1]])[0]
    said = [nsp_scores(model, tok, a, [b])[0] > 0.5 for a, b, _ in pairs]
    assert acc["accuracy"] == sum(s == bool(y) for s, (_, _, y) in zip(said, pairs)) / 4 and 0 <= p <= 1
    assert acc["next_said_next"] == (said[0] + said[2]) / 2 and acc["random_said_next"] == (said[1] + said[3]) / 2


def test_masks_filled_in_one_pass_and_in_turn_follow_fill_mask(model_dir, vocab_tokenizer):
    """issue 32, item 3: the one-pass filling is fill-mask's top guess at each gap; the one-at-a-time
    filling takes the surest gap first and re-runs with its word in place; both are scored by the chain
    rule, each gap's probability (fill-mask's own) given the text with the gaps before it filled."""
    import math

    from bertlab.analysis.predict import fill_in_turn
    _, m = model_dir
    text = "the [MASK] [MASK] was good ."
    res = fill_in_turn(m, vocab_tokenizer, text)
    top = fill_mask(m, vocab_tokenizer, text, top_k=100)
    one, turn = res["independent"], res["in_turn"]
    assert one["tokens"] == [g[0]["token_str"] for g in top]
    assert [round(p, 5) for p in one["alone"]] == [round(g[0]["score"], 5) for g in top]
    first = max(range(2), key=lambda i: top[i][0]["score"])  # the surest gap goes first
    assert turn["order"][0] == first and turn["tokens"][first] == top[first][0]["token_str"]
    other = 1 - first
    filled = text.replace("[MASK]", "{}").format(*[turn["tokens"][first] if i == first else "[MASK]" for i in range(2)])
    assert turn["tokens"][other] == fill_mask(m, vocab_tokenizer, filled, top_k=1)[0][0]["token_str"]
    enc = vocab_tokenizer.encode(text)  # the first gap filled with its one-pass word, by id (a piece need not
    ids = list(enc.ids)                  # read back as the same piece once written into the text)
    gaps = [i for i, t in enumerate(ids) if t == vocab_tokenizer.mask_token_id]
    ids[gaps[0]] = vocab_tokenizer.token_to_id(one["tokens"][0])
    with torch.no_grad():
        probs = m(torch.tensor([ids]), torch.tensor([enc.token_type_ids])).mlm_logits[0, gaps[1]].softmax(-1)
    probs[sorted(vocab_tokenizer.special_ids)] = 0.0
    p = probs[vocab_tokenizer.token_to_id(one["tokens"][1])].item()
    assert abs(one["chain"][0] - one["alone"][0]) < 1e-6 and abs(one["chain"][1] - p) < 1e-5
    assert abs(one["chain_log_prob"] - sum(math.log(c) for c in one["chain"])) < 1e-9
    with pytest.raises(ValueError, match="two or more"):
        fill_in_turn(m, vocab_tokenizer, "the [MASK] was good .")
