"""Positions (issue 32, item 7): the sinusoidal table against transformers' own (DistilBERT's), the shuffle test
on every family member (attention without positions is permutation-equivariant), pre-training with a fixed
sinusoidal table (it stays fixed, resumes and exports as a plain checkpoint), and the race's recipe."""
import pytest
import torch

from bertlab import BertConfig, family, load_pretrained
from bertlab.analysis import positions as P
from bertlab.model import fix_sinusoidal_positions, position_tables, sinusoidal_table
from bertlab.train.specs import RECIPES, PretrainSpec, RaceSpec

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=40)
EXTRA = {"albert": dict(embedding_size=16), "electra": dict(embedding_size=16), "distilbert": {}, "bert": {}}


@pytest.mark.parametrize("n,dim", [(40, 48), (7, 5), (512, 768)])
def test_the_sinusoidal_table_is_transformers_own(n, dim):
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings
    theirs = _create_sinusoidal_embeddings(n, dim, torch.empty(n, dim))
    assert torch.equal(sinusoidal_table(n, dim), theirs)


@pytest.fixture(scope="module")
def bpe(small_corpus):
    from bertlab.tokenizer import BPETokenizer
    return BPETokenizer.train([str(small_corpus)], vocab_size=400)


def member(kind, tok):
    extra = EXTRA[kind] if kind in EXTRA else dict(pad_token_id=tok.pad_token_id, type_vocab_size=1,
                                                   max_position_embeddings=42)
    torch.manual_seed(0)
    model = family.build(BertConfig(vocab_size=tok.vocab_size, model_type=kind, **(SMALL | extra))).eval()
    with torch.no_grad():  # a random table is small next to the words: make it count
        for t in position_tables(model):
            t.weight.normal_(0, 1.0)
    return model


@pytest.mark.parametrize("kind", ["bert", "albert", "electra", "distilbert", "roberta"])
def test_without_positions_a_shuffle_only_moves_the_vectors(kind, vocab_tokenizer, bpe):
    tok = bpe if kind == "roberta" else vocab_tokenizer
    model = member(kind, tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res = P.shuffle_test(model, tok, "the man bit the dog .", seed=0)
    assert res["max_diff_without"] <= 1e-5 and res["cls_without"] == pytest.approx(1.0, abs=1e-5)
    assert res["max_diff_with"] > 1e-2  # (a random model mixes nearly uniformly: its [CLS] hardly moves)
    assert sorted(res["shuffled"]) == sorted(res["tokens"]) and res["shuffled"] != res["tokens"]
    assert res["tokens"][0] == res["shuffled"][0] and res["tokens"][-1] == res["shuffled"][-1]  # specials stay
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the tables come back


def test_the_shuffle_moves_every_row_where_it_says(vocab_tokenizer):
    model = member("bert", vocab_tokenizer)
    res = P.shuffle_test(model, vocab_tokenizer, "a good film and a bad plot .", seed=3)
    for r in res["rows"]:
        assert res["shuffled"][r["moved_to"]] == r["token"]
    assert res["shuffled"] != res["tokens"]
    for i in range(2, 9):  # never the identity, whatever the seed
        assert P.shuffled_order(i, 0) != list(range(i)) and sorted(P.shuffled_order(i, 0)) == list(range(i))


@pytest.mark.parametrize("text,match", [("", "write a sentence"), ("the the the", "two or more different words"),
                                        ("film " * 300, "at most")])
def test_shuffle_mistakes_are_said(text, match, vocab_tokenizer):
    with pytest.raises(ValueError, match=match):
        P.shuffle_test(member("bert", vocab_tokenizer), vocab_tokenizer, text)


def test_tables_know_a_sinusoidal_model(vocab_tokenizer):
    model = member("bert", vocab_tokenizer)
    t = P.tables(model)
    assert not t["fixed"] and t["sinusoidal"].shape == t["learned"].shape == (40, 32)
    assert P.tables(fix_sinusoidal_positions(model))["fixed"]
    assert P.tables(fix_sinusoidal_positions(model, scale=1.0))["fixed"]  # transformers' own size too
    sim = P.similarity(t["sinusoidal"])
    d = P.by_distance(sim)
    assert d[0] == pytest.approx(1.0, abs=1e-5) and d[1] > d[10]  # near positions are alike, far ones less


def test_pretraining_with_sinusoidal_positions_keeps_them_fixed(tmp_path, small_corpus):
    from bertlab.train.pretrain import pretrain
    from test_pretrain import spec
    run = tmp_path / "run"
    st = pretrain(run, spec(small_corpus, steps=12, positions="sinusoidal", objective="mlm", stop_at=6),
                  log=lambda *_: None)
    st = pretrain(run, spec(small_corpus, steps=12, positions="sinusoidal", objective="mlm"), resume=True,
                  log=lambda *_: None)
    assert st["step"] == 12
    model, _ = load_pretrained(run)
    table = model.bert.embeddings.position_embeddings.weight
    scale = model.config.initializer_range * 2 ** 0.5  # the sines at the size of a fresh word vector
    assert torch.equal(table, scale * sinusoidal_table(*table.shape))  # 12 steps of AdamW left it alone
    assert P.tables(model)["fixed"]
    word_rms = model.bert.embeddings.word_embeddings.weight.std().item()
    assert table.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=0.01) and word_rms < 1  # same size
    import transformers
    hf = transformers.BertForPreTraining.from_pretrained(run / "model")
    assert torch.equal(hf.bert.embeddings.position_embeddings.weight, table)


def test_the_option_is_refused_where_it_means_nothing():
    with pytest.raises(ValueError, match="continued model keeps"):
        PretrainSpec(positions="sinusoidal", init_from="default")
    with pytest.raises(ValueError, match="positions"):
        PretrainSpec(positions="rotary")
    assert RECIPES["sinusoidal"][1]["positions"] == "sinusoidal"
    RaceSpec(recipes=("mlm", "sinusoidal"))
