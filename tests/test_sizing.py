"""Sizing arithmetic checked against real models: ours, Hugging Face's, and autograd's saved tensors."""
import pytest
import torch

from bertlab.analysis.sizing import (
    KNOWN_MODELS,
    activation_bytes,
    embedding_params,
    flops,
    humanize,
    known_model_params,
    layer_params,
    memory,
    param_counts,
)
from bertlab.config import BertConfig, preset
from bertlab.model import BertForPreTraining, BertModel

ODD = dict(vocab_size=1003, hidden_size=96, num_attention_heads=3, intermediate_size=200,
           num_hidden_layers=3, max_position_embeddings=77, type_vocab_size=3)
CONFIGS = {"tiny": preset("tiny"), "mini": preset("mini"), "odd": BertConfig(**ODD),
           "relu_1layer": BertConfig(**{**ODD, "num_hidden_layers": 1, "hidden_act": "relu"})}
HF_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "max_position_embeddings", "type_vocab_size")


def numel(params) -> int:
    return sum(p.numel() for p in params)


def component(name: str) -> str:
    """Which param_counts key a BertForPreTraining parameter belongs to."""
    if name.startswith("bert.embeddings."):
        return "embeddings"
    if name.startswith("bert.encoder.layer."):
        return "attention" if ".attention." in name else "feed_forward"
    if name.startswith("bert.pooler."):
        return "pooler"
    return "mlm_head" if name.startswith("cls.predictions.") else "nsp_head"


def test_bert_base_and_large_exact():
    base, large = param_counts(preset("base")), param_counts(preset("large"))
    assert base["encoder_total"] == 109_482_240
    assert large["encoder_total"] == 335_141_888
    # heads: transform H*H+H, LN 2H, decoder bias V (decoder weight tied), NSP 2H+2
    assert base["total"] == 109_482_240 + 768 * 768 + 768 + 2 * 768 + 30522 + 2 * 768 + 2
    assert param_counts(preset("base"), heads=False)["total"] == 109_482_240
    with torch.device("meta"):  # shapes only: BERT-large without allocating 1.3 GB
        for name in ("base", "large"):
            m = BertForPreTraining(preset(name))
            assert numel(m.parameters()) == param_counts(preset(name))["total"]
            assert numel(m.bert.parameters()) == param_counts(preset(name))["encoder_total"]


@pytest.mark.parametrize("name", CONFIGS)
def test_param_counts_match_our_model(name):
    c = CONFIGS[name]
    counts, model = param_counts(c), BertForPreTraining(c)
    assert numel(model.parameters()) == counts["total"]  # parameters() yields the tied table once
    assert numel(BertModel(c).parameters()) == counts["encoder_total"]
    by_part = dict.fromkeys(("embeddings", "attention", "feed_forward", "pooler", "mlm_head", "nsp_head"), 0)
    for n, p in model.named_parameters():
        by_part[component(n)] += p.numel()
    assert by_part == {k: counts[k] for k in by_part}
    layer = model.bert.encoder.layer[0]
    assert layer_params(c) == {"attention": numel(layer.attention.parameters()),
                               "feed_forward": numel(layer.parameters()) - numel(layer.attention.parameters()),
                               "total": numel(layer.parameters())}
    emb = model.bert.embeddings
    assert embedding_params(c) == {"word": emb.word_embeddings.weight.numel(),
                                   "position": emb.position_embeddings.weight.numel(),
                                   "token_type": emb.token_type_embeddings.weight.numel(),
                                   "LayerNorm": numel(emb.LayerNorm.parameters())}


@pytest.mark.parametrize("name", CONFIGS)
def test_param_counts_match_transformers(name):
    transformers = pytest.importorskip("transformers")  # an oracle only
    c = CONFIGS[name]
    hf = transformers.BertConfig(**{k: getattr(c, k) for k in HF_FIELDS}, hidden_act=c.hidden_act)
    assert transformers.BertForPreTraining(hf).num_parameters() == param_counts(c)["total"]
    assert transformers.BertModel(hf).num_parameters() == param_counts(c)["encoder_total"]


@pytest.mark.parametrize("name", KNOWN_MODELS)
def test_known_models_near_published(name):
    n, published = known_model_params(name), KNOWN_MODELS[name]["published"]
    assert abs(n - published) / published < 0.05, (name, n, published)


def test_known_model_helpers_exact():
    # Hugging Face's DistilBertModel / AlbertModel / RobertaModel report these counts
    assert known_model_params("DistilBERT") == 66_362_880
    assert known_model_params("ALBERT-base") == 11_683_584
    assert known_model_params("RoBERTa-base") == 124_645_632
    with pytest.raises(ValueError, match="unknown model"):
        known_model_params("GPT-2")


def test_memory_relations():
    c = preset("mini")
    inf, train = memory(c, 8, 128), memory(c, 8, 128, training=True)
    assert train["total"] > inf["total"]
    assert train["optimizer"] == 2 * train["weights"] == 8 * param_counts(c)["total"]
    assert memory(c, 8, 128, training=True, optimizer="sgd")["optimizer"] == train["weights"]
    t = [memory(c, b, 128, training=True)["total"] for b in (1, 2, 4)]
    assert t[2] - t[1] == 2 * (t[1] - t[0]) > 0  # linear (affine) in batch size
    assert memory(c, dtype="bf16")["weights"] * 2 == memory(c, dtype="fp32")["weights"]
    bf = memory(c, 8, 128, dtype="bf16", training=True)
    assert bf["weights"] == train["weights"] and bf["weight_copies"] == train["weights"] // 2  # fp32 master
    assert bf["activations"] < train["activations"]
    assert memory(c, 8, 128, training=True, sparse_mlm=True)["total"] < train["total"]
    assert sum(v for k, v in train.items() if k not in ("total", "activations_per_layer")) == train["total"]
    with pytest.raises(ValueError, match="dtype"):
        memory(c, dtype="int8")
    with pytest.raises(ValueError, match="optimizer"):
        memory(c, training=True, optimizer="lion")


def test_flops_relations():
    c = preset("base")
    f, f2 = flops(c, 128), flops(c, 256)
    assert f["mlm_head_sparse"] < f["mlm_head"] and f["total_sparse"] < f["total"]
    assert f2["attention_scores"] == 4 * f["attention_scores"]  # quadratic in T
    assert f2["attention_values"] == 4 * f["attention_values"]
    assert f2["qkv"] == 2 * f["qkv"] and f2["feed_forward"] == 2 * f["feed_forward"]  # linear in T
    assert f["qkv"] == 12 * 2 * 128 * 768 * 3 * 768
    assert flops(c, 128, training=True)["total"] == 3 * f["total"]
    parts = ("embeddings", "qkv", "attention_scores", "attention_values", "attention_output",
             "feed_forward", "pooler", "mlm_head", "nsp_head")
    assert sum(f[k] for k in parts) == f["total"]


def test_humanize():
    assert humanize(109_482_240) == "109.5M"
    assert humanize(1.2e9, "B") == "1.2 GB"
    assert humanize(335_141_888) == "335.1M"
    assert humanize(512) == "512" and humanize(0, "B") == "0 B"
    assert humanize(999_999) == "1.0M"
    assert humanize(2.8e10, "FLOP") == "28.0 GFLOP"


def saved_bytes(fn) -> int:
    """Bytes of the distinct non-parameter storages autograd saves for backward while fn() runs
    (one forward in train mode; views of one storage count once)."""
    seen: dict[int, int] = {}
    params = set()

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    def run(model, *args, **kw):
        params.update(p.untyped_storage().data_ptr() for p in model.parameters())
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            return model(*args, **kw)

    fn(run)
    return sum(seen.values())


def test_activation_estimate_vs_autograd(capsys):
    torch.manual_seed(0)
    c, B, T = preset("mini"), 8, 128
    ids, labels = torch.randint(5, c.vocab_size, (B, T)), torch.randint(5, c.vocab_size, (B, T))

    def pretrain(run):
        run(BertForPreTraining(c).train(), ids, labels=labels, next_sentence_label=torch.zeros(B).long())

    def encoder(run):
        run(BertModel(c).train(), ids)  # its outputs are what a loss would read: not saved yet

    full, enc = saved_bytes(pretrain), saved_bytes(encoder)
    est_full = memory(c, B, T, training=True)["activations"]
    est_enc = activation_bytes(c, B, T, heads=False)["total"]
    with capsys.disabled():
        print(f"\nmini 8x128 saved for backward: BertForPreTraining measured {full / 1e6:.1f} MB, "
              f"estimated {est_full / 1e6:.1f} MB; BertModel measured {enc / 1e6:.1f} MB, "
              f"estimated {est_enc / 1e6:.1f} MB")
    assert 1 / 1.5 < est_full / full < 1.5
    assert 1 / 1.5 < est_enc / enc < 1.5
    # PyTorch's CPU dropout keeps float masks; counted that way the formula is all but exact
    assert abs(activation_bytes(c, B, T, mask_bytes=4)["total"] / full - 1) < 0.02
    assert abs(activation_bytes(c, B, T, heads=False, mask_bytes=4)["total"] / enc - 1) < 0.02
