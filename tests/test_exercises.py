"""The course's exercises (issue 20), below the UI: scoring one masking draw (the losses are the
model's own cross-entropy at exactly the selected positions; the shares move the rule counts as
promised), the head finder's scores on synthetic attention, the annotated sentence set, and the
variants table against the size model."""
import json

import pytest
import torch
import torch.nn.functional as F

from bertlab.analysis import draw_score, sizing
from bertlab.analysis import head_finder as hf
from bertlab.config import MODEL_TYPES, BertConfig, preset, preset_names
from bertlab.data import head_set, masking_lab
from bertlab.data.masking import KEPT, MASKED, NOT_SELECTED, RANDOM
from bertlab.model import BertForPreTraining

TEXT = "the acting was great and the plot was not boring . i would really recommend this film to you"


@pytest.fixture(scope="module")
def tiny(vocab_tokenizer):
    torch.manual_seed(0)
    c = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    return BertForPreTraining(c).eval(), vocab_tokenizer


# ---- score a masking draw -------------------------------------------------------------------------
def test_losses_are_the_models_cross_entropy_at_every_selected_position(tiny):
    model, tok = tiny
    enc = tok.encode(TEXT)
    draw = masking_lab.preview(tok, enc.ids, rate=0.5, seed=3)
    res = draw_score.score_draw(model, draw["input_ids"], draw["labels"], draw["rule"], enc.token_type_ids)
    with torch.no_grad():
        logits = model(torch.tensor([draw["input_ids"]]), torch.tensor([enc.token_type_ids])).mlm_logits[0].double()
    labels = torch.tensor(draw["labels"])
    selected = [i for i, r in enumerate(draw["rule"]) if r != NOT_SELECTED]
    rows = res["positions"]
    assert [r["position"] for r in rows] == selected and len(selected) >= 5
    names = {MASKED: "[MASK]", RANDOM: "random", KEPT: "kept"}
    for r in rows:
        i, y = r["position"], int(labels[r["position"]])
        by_hand = float(logits[i].logsumexp(-1) - logits[i, y])  # -log softmax(logits)[y]
        assert r["loss"] == pytest.approx(by_hand, rel=1e-6, abs=1e-6)
        assert r["rule"] == names[draw["rule"][i]] and r["label_id"] == enc.ids[i]
        assert r["prob"] == pytest.approx(torch.softmax(logits[i], -1)[y].item(), rel=1e-6)
        top = torch.softmax(logits[i], -1).topk(5)
        assert [j for j, _ in r["top"]] == top.indices.tolist()
        assert r["rank"] == 1 + int((logits[i] > logits[i, y]).sum())
    # the mean is pre-training's MLM loss for this draw (cross_entropy skips the -100 labels)
    assert res["summary"]["mean_loss"] == pytest.approx(F.cross_entropy(logits, labels).item(), rel=1e-6)
    assert sum(v["count"] for v in res["summary"]["by_rule"].values()) == len(selected)


def test_shares_move_the_rule_counts_as_promised(vocab_tokenizer):
    ids = vocab_tokenizer.encode(TEXT).ids
    for m, r in ((0.8, 0.1), (0.5, 0.3), (0.0, 1.0), (0.2, 0.0)):
        s = masking_lab.sample_stats(vocab_tokenizer, ids, rate=0.5, n_samples=2000, seed=1, mask_frac=m,
                                     random_frac=r)
        assert s["selected_tokens"] > 10_000
        for name, want in (("[MASK]", m), ("random", r), ("kept", 1 - m - r)):
            assert s["split"][name] == pytest.approx(want, abs=0.025), (m, r, name)
            assert s["expected_split"][name] == pytest.approx(want)


def test_the_same_seed_selects_the_same_positions_whatever_the_shares(vocab_tokenizer):
    ids = vocab_tokenizer.encode(TEXT).ids
    default = masking_lab.preview(vocab_tokenizer, ids, 0.3, seed=5)
    assert default == masking_lab.preview(vocab_tokenizer, ids, 0.3, seed=5, mask_frac=0.8, random_frac=0.1)
    for m, r in ((1.0, 0.0), (0.0, 0.0), (0.3, 0.6)):
        other = masking_lab.preview(vocab_tokenizer, ids, 0.3, seed=5, mask_frac=m, random_frac=r)
        assert [x != -100 for x in other["labels"]] == [x != -100 for x in default["labels"]]


def test_all_mask_gives_only_masked_positions(tiny):
    model, tok = tiny
    enc = tok.encode(TEXT)
    for seed in range(5):
        draw = masking_lab.preview(tok, enc.ids, rate=0.6, seed=seed, mask_frac=1.0, random_frac=0.0)
        assert set(draw["rule"]) == {NOT_SELECTED, MASKED}
        assert all(seen == tok.mask_token_id for seen, r in zip(draw["input_ids"], draw["rule"]) if r == MASKED)
        res = draw_score.score_draw(model, draw["input_ids"], draw["labels"], draw["rule"])
        assert {r["rule"] for r in res["positions"]} == {"[MASK]"}
        assert res["summary"]["by_rule"]["random"]["count"] == res["summary"]["by_rule"]["kept"]["count"] == 0


def test_draw_score_refuses_bad_input(tiny):
    model, _ = tiny
    logits = torch.zeros(3, 10)
    with pytest.raises(ValueError, match="top_k"):
        draw_score.score_positions(logits, [-100, 4, -100], [0, 1, 0], top_k=0)
    with pytest.raises(ValueError, match="positions"):
        draw_score.score_positions(logits, [-100, 4], [0, 1], top_k=5)
    with pytest.raises(ValueError, match="rule 0"):
        draw_score.score_positions(logits, [-100, 4, -100], [0, 0, 0])


# ---- head finder ------------------------------------------------------------------------------------
def synthetic(T: int, L: int = 2, A: int = 3) -> torch.Tensor:
    """Every head uniform over all T pieces."""
    return torch.full((L, A, T, T), 1.0 / T)


def test_word_attention_averages_from_and_sums_to():
    att = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25],
                        [0.0, 0.5, 0.5, 0.0]])
    groups = [[1, 2], [3]]  # word 0 = pieces 1 and 2, word 1 = piece 3; piece 0 a special
    w = hf.word_attention(att, groups)
    assert w[0, 0].item() == pytest.approx(((0.3 + 0.2) + (0.25 + 0.25)) / 2)
    assert w[0, 1].item() == pytest.approx((0.1 + 0.25) / 2)
    assert w[1, 0].item() == pytest.approx(1.0) and w[1, 1].item() == pytest.approx(0.0)


def test_align_follows_the_tokenizers_offsets(vocab_tokenizer):
    words = "the acting was zqx boring".split()  # 'zqx' is spelt out in single letters
    enc = vocab_tokenizer.encode(" ".join(words))
    groups = hf.align(words, enc.offsets, enc.sequence_ids)
    assert [len(g) for g in groups][:3] == [1, 1, 1] and len(groups[3]) == 3
    want = [[p for p, w in enumerate(enc.word_ids) if w == k and enc.sequence_ids[p] == 0] for k in range(len(words))]
    assert groups == want
    assert 0 not in sum(groups, []) and len(enc) - 1 not in sum(groups, [])  # [CLS], [SEP] in no word


def test_align_byte_level_pieces():
    """RoBERTa-style pieces: 'Ġ' marks a space, and a lone 'Ġ' (an empty span) joins the word after it."""
    words = ["the", "actors", "unforgettable"]  # 'the actors unforgettable'
    offsets = [(0, 0), (0, 3), (4, 7), (7, 10), (11, 11), (11, 15), (15, 24), (0, 0)]
    seq = [None, 0, 0, 0, 0, 0, 0, None]
    assert hf.align(words, offsets, seq) == [[1], [2, 3], [4, 5, 6]]


def test_a_previous_token_head_ranks_first_for_neighbours():
    n, T = 6, 8  # [CLS] w0..w5 [SEP]: word k is piece k + 1
    groups = [[k + 1] for k in range(n)]
    att = synthetic(T)
    prev = torch.zeros(T, T)
    for i in range(T):
        prev[i, max(i - 1, 0)] = 1.0
    att[1, 2] = prev  # layer 2, head 3 attends exactly to the previous piece
    pairs = hf.sentence_pairs(n, [], [])
    ranks = hf.rankings(hf.head_scores([(att, groups, pairs)]), top=3)
    best = ranks["neighbours"]["top"][0]
    assert (best["layer"], best["head"], best["direction"]) == (2, 3, "previous word")
    assert best["score"] == pytest.approx(1.0) and best["top1"] == pytest.approx(1.0)
    assert ranks["neighbours"]["top"][1]["score"] == pytest.approx(1 / T)
    assert best["chance"] == pytest.approx(1 / T)


def test_subject_verb_and_long_range_heads_rank_first():
    n, T = 10, 12
    groups = [[k + 1] for k in range(n)]
    sv, lr = [[1, 5], [7, 9]], [[8, 2]]  # (subject, verb); a long-range link from word 8 back to word 2
    att = synthetic(T)
    agree = torch.full((T, T), 1.0 / T)
    for s, v in sv:
        agree[v + 1] = 0.0
        agree[v + 1, s + 1] = 1.0  # each verb looks only at its subject
    att[0, 1] = agree
    far = torch.full((T, T), 1.0 / T)
    far[9] = 0.0
    far[9, 3] = 1.0  # word 8 (piece 9) looks only at word 2 (piece 3)
    att[1, 0] = far
    scores = hf.head_scores([(att, groups, hf.sentence_pairs(n, sv, lr))])
    ranks = hf.rankings(scores)
    top = ranks["subject–verb"]["top"][0]
    assert (top["layer"], top["head"], top["direction"], top["score"]) == (1, 2, "verb → subject", 1.0)
    assert scores["verb → subject"]["n"] == 2
    top = ranks["long-range"]["top"][0]
    assert (top["layer"], top["head"], top["direction"]) == (2, 1, "later → earlier")
    assert top["score"] == pytest.approx(1.0)


def test_adjacent_subject_verb_pairs_are_left_to_the_neighbour_ranking():
    pairs = hf.sentence_pairs(5, [[1, 2], [0, 3]], [])
    assert pairs["verb → subject"] == [(3, 0)] and pairs["subject → verb"] == [(0, 3)]
    with pytest.raises(ValueError, match="two different words"):
        hf.sentence_pairs(5, [[1, 7]], [])


def test_pair_grid_reads_one_cell_of_every_head():
    att = torch.rand(3, 4, 6, 6)
    g = hf.pair_grid(att, 4, 1)
    assert g.shape == (3, 4) and torch.equal(g, att[:, :, 4, 1])
    with pytest.raises(ValueError, match="tokens 0 to 5"):
        hf.pair_grid(att, 6, 1)


def test_shipped_sentence_set(vocab_tokenizer):
    rows = [json.loads(line) for line in head_set.SHIPPED.read_text().splitlines()]
    loaded = head_set.load()
    assert 30 <= len(loaded) == len(rows) <= 60
    for raw, s in zip(rows, loaded):
        assert raw["text"].split() == s["words"]
        assert all(abs(a - b) >= hf.MIN_LONG for a, b in s["long_range"])
    sv = [p for s in loaded for p in hf.sentence_pairs(len(s["words"]), s["subject_verb"], [])["verb → subject"]]
    assert len(sv) >= 25 and sum(len(s["long_range"]) for s in loaded) >= 25
    # every word of every sentence gets pieces from the shipped model's tokenizer
    from bertlab.checkpoint import DEFAULT_MODEL_DIR
    from bertlab.tokenizer import WordPieceTokenizer
    tok = WordPieceTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    for s in loaded:
        enc = tok.encode(" ".join(s["words"]))
        assert all(hf.align(s["words"], enc.offsets, enc.sequence_ids)), s["words"]


def test_head_set_refuses_a_bad_file(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"words": ["a", "b", "c"], "subject_verb": [[0, 5]]}\n')
    with pytest.raises(ValueError, match="line 1: 'subject_verb' pair"):
        head_set.load(p)
    p.write_text('{"words": ["a", "b", "c", "d", "e"], "long_range": [[0, 2]]}\n')
    with pytest.raises(ValueError, match="fewer than 4 words"):
        head_set.load(p)
    p.write_text("not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        head_set.load(p)


# ---- the variants table -----------------------------------------------------------------------------
def test_variants_table_is_the_size_model():
    from bertlab.app.ui.labs import architecture_variants as av
    rows = av.variant_rows(128)
    assert [(r["family"], r["preset"]) for r in rows] == [(f, p) for f in MODEL_TYPES for p in preset_names(f)]
    for r in rows:
        c = preset(r["preset"], model_type=r["family"])
        enc = sizing.architecture_of(c, heads=False) if not r["preset"].endswith("-generator") else "ElectraModel"
        assert r["architecture"] == enc and r["seq_len"] == 128
        assert r["parameters"] == sizing.param_counts(c, heads=False)["total"]
        assert r["fp32_weights"] == 4 * r["parameters"]
        assert r["fp32_inference"] == sizing.memory(c, 1, 128, "fp32", heads=False)["total"]
        assert r["fp32_training"] == sizing.memory(c, 1, 128, "fp32", training=True, heads=False)["total"]
        assert r["flops"] == sizing.flops(c, 128, heads=False)["total"]
    by = {(r["family"], r["preset"]): r for r in rows}
    # the encoders' parameter counts Hugging Face reports for the released checkpoints
    assert by["bert", "base"]["parameters"] == 109_482_240
    assert by["distilbert", "base"]["parameters"] == 66_362_880
    assert by["roberta", "base"]["parameters"] == 124_645_632
    # ALBERT saves parameters, not compute
    assert by["albert", "base"]["parameters"] < by["bert", "base"]["parameters"] / 8
    assert by["albert", "base"]["flops"] == pytest.approx(by["bert", "base"]["flops"], rel=0.01)
    heads = {(r["family"], r["preset"]): r for r in av.variant_rows(128, heads=True)}
    g = preset("small-generator", model_type="electra")
    assert heads["electra", "small-generator"]["parameters"] == \
        sizing.param_counts(g, architecture="ElectraForMaskedLM")["total"]
    table = av.table(rows)
    assert list(table.columns) == av.HEADERS and len(table) == len(rows)
    assert table.iloc[4]["parameters"] == sizing.humanize(by["bert", "base"]["parameters"])
