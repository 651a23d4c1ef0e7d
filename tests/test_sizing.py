"""Sizing arithmetic checked against real models: ours, Hugging Face's (every family member, on the meta
device), autograd's saved tensors and torch's FLOP counter."""
import importlib.util

import pytest
import torch

from bertlab.analysis.sizing import (
    ARCHITECTURES,
    ENCODER,
    KNOWN_MODELS,
    activation_bytes,
    as_bert,
    electra_generator,
    electra_pair,
    embedding_params,
    flops,
    humanize,
    known_config,
    known_gap,
    known_model_params,
    layer_params,
    layers_run,
    layers_stored,
    memory,
    param_counts,
    training_phases,
)
from bertlab.config import PRESETS, BertConfig, preset, preset_names
from bertlab.model import BertForPreTraining, BertModel
from bertlab.variants.deberta import DebertaV2Config

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
    """Within 5 % of the paper, or the gap is known and said (and still a gap: the note is not stale)."""
    n, published = known_model_params(name), KNOWN_MODELS[name]["published"]
    near = abs(n - published) / published < 0.05
    assert near == (known_gap(name) is None), (name, n, published)


def test_albert_xxlarges_gap_is_said_with_the_counts():
    note = known_gap("ALBERT-xxlarge")
    assert known_model_params("ALBERT-xxlarge") == 222_595_584  # transformers' AlbertModel, as the tests below
    assert "235 M" in note and "222.6M" in note and "12.4M" in note and "16.8M" in note, note


def test_known_model_helpers_exact():
    # Hugging Face's DistilBertModel / AlbertModel / RobertaModel / ElectraModel report these counts
    assert known_model_params("DistilBERT") == 66_362_880
    assert known_model_params("ALBERT-base") == 11_683_584
    assert known_model_params("ALBERT-large") == 17_683_968
    assert known_model_params("ELECTRA-small") == 13_483_008
    assert known_model_params("RoBERTa-base") == 124_645_632
    with pytest.raises(ValueError, match="unknown model"):
        known_model_params("GPT-2")


def test_memory_relations():
    c = preset("mini")
    inf, train = memory(c, 8, 128), memory(c, 8, 128, training=True)
    assert train["total"] > inf["total"]
    assert train["optimizer"] == 2 * train["weights"] == 8 * param_counts(c)["total"]
    assert memory(c, 8, 128, training=True, optimizer="sgd")["optimizer"] == train["weights"]
    for phase in training_phases(c, 1, 128):  # each moment is affine in the batch; the peak is their largest
        t = [training_phases(c, b, 128)[phase]["total"] for b in (1, 2, 4)]
        assert t[2] - t[1] == 2 * (t[1] - t[0]) >= 0
    t = [memory(c, b, 128, training=True)["total"] for b in (1, 2, 4, 8)]
    assert t == sorted(t) and t[0] == max(p["total"] for p in training_phases(c, 1, 128).values())
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


# ---- the BERT family ----------------------------------------------------------------------------
FAMILY = {  # odd shapes: E != H, ALBERT's groups and inner layers, RoBERTa's offset positions
    "bert": BertConfig(**{**ODD, "num_hidden_layers": 4}),
    "albert": BertConfig(**{**ODD, "num_hidden_layers": 4}, model_type="albert", embedding_size=40,
                         num_hidden_groups=2, inner_group_num=2),
    "electra": BertConfig(**ODD, model_type="electra", embedding_size=40),
    "distilbert": BertConfig(**{**ODD, "type_vocab_size": 2}, model_type="distilbert"),
    "roberta": BertConfig(**{**ODD, "type_vocab_size": 1}, model_type="roberta", pad_token_id=1),
    "deberta-v2": DebertaV2Config(**{**ODD, "type_vocab_size": 0}, relative_attention=True, position_buckets=8,
                                  pos_att_type=("c2p", "p2c"), share_att_key=False, norm_rel_ebd="layer_norm",
                                  position_biased_input=False, embedding_size=40, conv_kernel_size=3),
}
ARCHS = [(kind, arch) for arch, (kind, _) in ARCHITECTURES.items()]
PUBLISHED = {"ALBERT-large": (17.65e6, 18e6, "17.7M"), "ELECTRA-small": (13.45e6, 14e6, "13.5M"),
             "DistilBERT": (66e6, 66.5e6, "66.4M"), "RoBERTa-base": (124.5e6, 125.5e6, "124.6M"),
             "ALBERT-xxlarge": (222.5e6, 222.7e6, "222.6M")}


def hf_model(c: BertConfig, arch: str, **kw):
    """transformers' `arch` for our config, through the config.json we would write for it."""
    transformers = pytest.importorskip("transformers")  # an oracle only
    d = c.to_hf_dict(arch)
    d.pop("architectures")
    hf = transformers.AutoConfig.for_model(d.pop("model_type"), **d, **kw)
    return getattr(transformers, arch)(hf)


def hf_part(name: str) -> str:
    """Which param_counts key a transformers parameter of any family member belongs to."""
    if any(k in name for k in ("embedding_hidden_mapping_in", "embeddings_project", "embed_proj")):
        return "projection"
    if "encoder.conv." in name:  # DeBERTa's convolution over the embeddings
        return "embeddings"
    if "rel_embeddings" in name or "encoder.LayerNorm" in name:  # DeBERTa's relative table and its norm
        return "attention"
    if ".embeddings." in name or name.startswith("embeddings."):
        return "embeddings"
    if "pooler." in name:
        return "pooler"
    if any(k in name for k in ("sop_classifier", "seq_relationship")):
        return "nsp_head"
    if "discriminator_predictions" in name:
        return "rtd_head"
    if any(k in name for k in (".attention.", "sa_layer_norm")) or name.startswith("attention."):
        return "attention"
    if any(k in name for k in ("layer.", "albert_layers.")):
        return "feed_forward"
    return "mlm_head"  # predictions., cls., lm_head., vocab_*, generator_*


@pytest.mark.parametrize("kind, arch", ARCHS)
def test_family_counts_match_transformers_by_part(kind, arch):
    c = FAMILY[kind]
    counts = param_counts(c, architecture=arch)
    with torch.device("meta"):
        m = hf_model(c, arch)
    by_part = dict.fromkeys(counts, 0)
    for n, p in m.named_parameters():  # tied tables are yielded once
        by_part[hf_part(n)] += p.numel()
    assert {k: v for k, v in by_part.items() if k not in ("encoder_total", "total")} == \
        {k: v for k, v in counts.items() if k not in ("encoder_total", "total")}
    assert numel(m.parameters()) == counts["total"]
    with torch.device("meta"):
        assert numel(hf_model(c, ENCODER[kind]).parameters()) == counts["encoder_total"]


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_sizes_match_transformers(name):
    """The size table's figures for the family, checked against the real classes at full size."""
    lo, hi, shown = PUBLISHED[name]
    c, n = known_config(name), known_model_params(name)
    assert lo <= n <= hi and humanize(n) == shown
    with torch.device("meta"):  # shapes only: no memory for 125 M weights
        assert numel(hf_model(c, ENCODER[c.model_type]).parameters()) == n
        for arch in (a for a, (kind, _) in ARCHITECTURES.items() if kind == c.model_type):
            assert numel(hf_model(c, arch).parameters()) == param_counts(c, architecture=arch)["total"], arch
    bert = param_counts(as_bert(c), heads=False)["encoder_total"]
    assert {"ALBERT-large": bert > 18 * n, "ELECTRA-small": round(bert / 1e5) == 175,  # the 17.5 M
            "DistilBERT": bert > n, "RoBERTa-base": bert == n, "ALBERT-xxlarge": bert > 10 * n}[name]


@pytest.mark.parametrize("kind", FAMILY)
def test_the_cheap_bound_never_counts_fewer_than_the_model_has(kind):
    """load_model skips the exact (meta-device) count when params_at_most is under the server's limit:
    the bound must hold for every member, at odd shapes and at every preset (bare config and heads)."""
    from bertlab import config as cfg
    from bertlab.checkpoint import count_params, params_at_most
    for c in [FAMILY[kind]] + [cfg.preset(p, kind) for p in cfg.preset_names(kind)]:
        n = count_params(c)
        assert n <= params_at_most(c) <= 2 * n + 10_000, (c, n)


@pytest.mark.parametrize("kind", FAMILY)
def test_family_counts_match_our_models(kind):
    """bertlab's own class for each member (family.CLASSES), when its module has been written."""
    from bertlab import family
    from bertlab.checkpoint import count_params
    c = FAMILY[kind]
    module = family.CLASSES[kind].split(":")[0]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not written yet")
    assert count_params(c) == param_counts(c)["total"]
    if kind == "electra":
        with torch.device("meta"):
            gen = family.build(c, ["ElectraForMaskedLM"])
        assert numel(gen.parameters()) == param_counts(c, architecture="ElectraForMaskedLM")["total"]


@pytest.mark.parametrize("kind, arch", ARCHS)
def test_flops_equal_torch_flop_counter(kind, arch):
    """Every matmul of a forward pass, counted by torch (2 per multiply-add): ALBERT's shared layers
    are counted at every one of their L × inner_group_num runs."""
    from torch.utils.flop_counter import FlopCounterMode
    c, T = FAMILY[kind], 37
    torch.manual_seed(0)
    model = hf_model(c, arch, attn_implementation="eager").eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randint(5, c.vocab_size, (1, T)))
    assert counter.get_total_flops() == flops(c, T, architecture=arch)["total"]


@pytest.mark.parametrize("kind, arch", [("albert", "AlbertForPreTraining"), ("electra", "ElectraForPreTraining"),
                                        ("electra", "ElectraForMaskedLM"), ("distilbert", "DistilBertForMaskedLM"),
                                        ("roberta", "RobertaForMaskedLM")])
def test_family_activations_vs_autograd(kind, arch):
    """What transformers' models save for backward (exact GELU: its Python gelu_new keeps more)."""
    torch.manual_seed(0)
    c, B, T = preset("tiny", model_type=kind, vocab_size=2000, hidden_act="gelu"), 4, 64
    if kind == "albert":  # v2 has no dropout: switch it on to count its masks
        c = c.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    ids, labels = torch.randint(5, c.vocab_size, (B, T)), torch.randint(5, c.vocab_size, (B, T))
    kw = {"AlbertForPreTraining": dict(labels=labels, sentence_order_label=torch.zeros(B).long()),
          "ElectraForPreTraining": dict(labels=torch.randint(0, 2, (B, T)))}.get(arch, dict(labels=labels))
    model = hf_model(c, arch, attn_implementation="eager").train()
    measured = saved_bytes(lambda run: run(model, ids, **kw))
    assert abs(activation_bytes(c, B, T, mask_bytes=4, architecture=arch)["total"] / measured - 1) < 0.02


def test_albert_saves_parameters_not_compute():
    c = preset("large", model_type="albert")
    bert = as_bert(c)
    p, pb = param_counts(c), param_counts(bert)
    assert layers_stored(c) == 1 and layers_run(c) == 24
    assert pb["attention"] == 24 * p["attention"] and pb["feed_forward"] == 24 * p["feed_forward"]
    f, fb = flops(c, 128), flops(bert, 128)
    for k in ("qkv", "attention_scores", "attention_values", "attention_output", "feed_forward"):
        assert f[k] == fb[k]  # the same 24 layers run
    assert f["projection"] > 0 and f["mlm_head"] < fb["mlm_head"]  # E = 128 saves a little at the ends
    a, ab = activation_bytes(c, 8, 128), activation_bytes(bert, 8, 128)
    assert a["layers"] > 0.9 * ab["layers"]  # activations too (ALBERT v2 only drops its dropout)
    m, mb = memory(c, 8, 128, training=True), memory(bert, 8, 128, training=True)
    assert m["optimizer"] * 18 < mb["optimizer"] and m["activations"] > 0.9 * mb["activations"]
    g = c.replace(num_hidden_groups=2, inner_group_num=3)  # 6 stored, 24 × 3 run
    assert param_counts(g)["attention"] == 6 * p["attention"] and flops(g)["qkv"] == 3 * f["qkv"]


def test_electra_generator_and_pair():
    small = preset("small", model_type="electra")
    assert (small.hidden_size, small.embedding_dim, small.num_attention_heads, small.intermediate_size) == \
        (256, 128, 4, 1024)
    released = {"small": (256, 4, 1024), "base": (256, 4, 1024), "large": (256, 4, 1024)}
    for name, shape in released.items():  # google/electra-*-generator: small as wide as its discriminator
        g = electra_generator(preset(name, model_type="electra"))
        assert (g.hidden_size, g.num_attention_heads, g.intermediate_size) == shape
        assert g.embedding_dim == preset(name, model_type="electra").embedding_dim  # shared embeddings
    paper = electra_generator(small, 0.25)  # the paper's 1/4
    assert (paper.hidden_size, paper.num_attention_heads, paper.intermediate_size) == (64, 1, 256)
    odd = FAMILY["electra"]
    pair = electra_pair(odd, electra_generator(odd, 1 / 3))
    with torch.device("meta"):
        disc = hf_model(odd, "ElectraForPreTraining")
        gen = hf_model(electra_generator(odd, 1 / 3), "ElectraForMaskedLM")
    shared = numel(gen.electra.embeddings.parameters())
    assert pair["shared_params"] == shared
    assert pair["pair_params"] == numel(disc.parameters()) + numel(gen.parameters()) - shared
    base = electra_pair(preset("base", model_type="electra"))
    assert 0.1 < base["generator_train_flops"] / base["discriminator_train_flops"] < 0.2
    assert electra_pair(small, paper)["pair_train_flops"] < electra_pair(small)["pair_train_flops"]
    with pytest.raises(ValueError, match="only ELECTRA"):
        electra_generator(preset("base"))
    with pytest.raises(ValueError, match="cannot split into 4 heads"):
        electra_generator(preset("base", model_type="electra"), 0.3)  # 230 hidden
    with pytest.raises(ValueError, match="fraction"):
        electra_generator(small, 0)
    with pytest.raises(ValueError, match="AlbertModel is not a bert class"):
        param_counts(preset("base"), architecture="AlbertModel")


def test_family_presets():
    assert preset_names("bert") == list(PRESETS)
    for kind in ("albert", "electra", "distilbert", "roberta"):
        assert {"tiny", "mini", "base"} <= set(preset_names(kind))
        tiny = preset("tiny", model_type=kind)
        assert tiny.model_type == kind and param_counts(tiny)["total"] < 10_000_000  # trains on a CPU
    large = preset("large", model_type="albert", vocab_size=8000)  # overrides win
    assert (large.num_hidden_layers, large.hidden_size, large.embedding_dim, large.vocab_size) == (24, 1024, 128, 8000)
    roberta = preset("base", model_type="roberta")
    assert (roberta.vocab_size, roberta.max_position_embeddings, roberta.type_vocab_size, roberta.pad_token_id) == \
        (50265, 514, 1, 1)
    assert preset("base", model_type="distilbert").num_hidden_layers == 6
    with pytest.raises(ValueError, match="unknown albert preset 'small'"):
        preset("small", model_type="albert")
    with pytest.raises(ValueError, match="model_type"):
        preset("base", model_type="gpt")


# ---- mixture of experts (issue 32, item 6) ------------------------------------------------------------
from bertlab.analysis import sizing  # noqa: E402
def test_an_expert_layer_counts_as_switch_transformers_sparse_mlp():
    import transformers
    from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersSparseMLP
    for H, I, E in ((64, 96, 8), (48, 200, 3)):
        cfg = transformers.SwitchTransformersConfig(d_model=H, d_ff=I, num_experts=E)
        theirs = sum(p.numel() for p in SwitchTransformersSparseMLP(cfg).parameters())
        assert sizing.expert_params(H, I, E, bias=False) == theirs


def test_experts_grow_parameters_and_top_k_grows_compute():
    from bertlab.config import preset
    c = preset("base")
    dense = sizing.moe(c, 1)
    assert dense["params"] == dense["active_params"] == sizing.param_counts(c, heads=False)["encoder_total"]
    assert dense["flops_per_token"] == dense["dense_flops_per_token"] == sizing.flops(c, 128, heads=False)["total"] / 128
    H, I, L = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    ffn = 2 * H * I + I + H
    s = sizing.moe(c, 64, top_k=1, every=2)  # Switch: every other layer, one expert a token
    assert s["moe_layers"] == L // 2
    assert s["params"] == dense["params"] + (L // 2) * (63 * ffn + 64 * H)
    assert s["active_params"] == dense["params"] + (L // 2) * 64 * H  # only the routers are extra
    assert s["flops_per_token"] == dense["flops_per_token"] + (L // 2) * 2 * H * 64
    g = sizing.moe(c, 8, top_k=2)  # GShard: two experts a token
    assert g["flops_per_token"] == dense["flops_per_token"] + L * (4 * H * I + 2 * H * 8)
    with pytest.raises(ValueError, match="cannot exceed"):
        sizing.moe(c, 2, top_k=3)
    with pytest.raises(ValueError, match="experts must be"):
        sizing.moe(c, 0)


def test_the_mixture_section_sizes_the_forms_model():
    from bertlab.app.ui.labs import architecture_moe, architecture_tab
    from bertlab.config import preset
    c = architecture_tab.make_config("bert", **dict(zip(architecture_tab.SHAPE, architecture_tab.fill_preset("base"))))
    said, fig, data = architecture_moe.size(c, 64, 1, 2)
    r = sizing.moe(preset("base"), 64, 1, 2)
    assert data["picked"] == r and f"{r['params'] / r['dense_params']:.2f}×" in said
    assert [t.name for t in fig.data] == ["parameters stored", "parameters a token uses", "compute a token costs"]
    assert fig.data[0].y[-1] == pytest.approx(sizing.moe(c, 128, 1, 2)["params"] / r["dense_params"])
    assert max(fig.data[2].y) < 1.01  # top-1: a token's compute stays the dense model's
    import gradio as gr
    with pytest.raises(gr.Error, match="cannot exceed"):
        architecture_moe.size(c, 2, 3, 1)


# ---- DeBERTa (issue 32, item 5): counted on its released configs, checked against transformers' classes ----
def deberta_classes(transformers, v3: bool, k: int | None = None, **shape):
    """transformers' DeBERTa as microsoft/deberta-base (v1) or microsoft/deberta-v3-base (v3) configure it;
    `k`: v1's relative distances (default: its 512 positions), v3's buckets (default 256)."""
    common = dict(relative_attention=True, position_biased_input=False, type_vocab_size=0, max_position_embeddings=512,
                  **shape)
    if v3:
        return transformers.DebertaV2Model(transformers.DebertaV2Config(
            pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_buckets=k or 256, share_att_key=True,
            norm_rel_ebd="layer_norm", **common))
    return transformers.DebertaModel(transformers.DebertaConfig(pos_att_type=["c2p", "p2c"],
                                                                max_relative_positions=k or -1, **common))


@pytest.mark.parametrize("name", ["DeBERTa-base", "DeBERTa-v3-base"])
def test_deberta_counts_match_transformers(name):
    from bertlab.analysis.sizing import DEBERTA, deberta
    transformers = pytest.importorskip("transformers")
    d = deberta(name)
    with torch.device("meta"):
        hf = deberta_classes(transformers, name.endswith("v3-base"), vocab_size=DEBERTA[name]["vocab_size"],
                             hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    assert numel(hf.parameters()) == d["total"] == d["embeddings"] + d["layers"]
    assert numel(hf.embeddings.parameters()) == d["embeddings"]
    assert numel(p for n, p in hf.named_parameters() if "pos_proj" in n or "pos_q_proj" in n) == d["projections"]
    if d["published"]:  # the v3 paper's 86 M in the layers and 98 M in the word table, to their rounding
        assert all(abs(x - p) / p < 0.01 for x, p in zip((d["layers"], d["embeddings"]), d["published"]))


def test_the_trainable_deberta_counts_as_the_released_one():
    """The deberta-v2 record's base preset, sized by the general formulas plus its model file's own terms,
    is the DeBERTa-v3-base the Architecture tab describes: the same parameters, and the same forward FLOPs
    but BERT-base's pooler (DeBERTa's encoder has none)."""
    from bertlab.analysis.sizing import deberta
    c, d = preset("base", model_type="deberta-v2"), deberta("DeBERTa-v3-base", 128)
    assert param_counts(c, heads=False)["encoder_total"] == d["total"]
    assert flops(c, 128, heads=False)["total"] == d["bert_flops"] + d["extra_flops"] - 2 * 768 * 768


@pytest.mark.parametrize("v3, k, tokens", [(False, 512, 24), (False, 16, 24), (True, 32, 24)])
def test_disentangled_flops_are_what_torch_counts(v3, k, tokens):
    """DeBERTa's forward less an eager BERT of its shape, both through torch's FLOP counter, is the formula's."""
    from torch.utils.flop_counter import FlopCounterMode

    from bertlab.analysis.sizing import disentangled_flops
    transformers = pytest.importorskip("transformers")
    shape = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    deb = deberta_classes(transformers, v3, k=k, **shape).eval()
    bert = transformers.BertModel(transformers.BertConfig(**shape, attn_implementation="eager"),
                                  add_pooling_layer=False).eval()
    ids = torch.randint(5, 300, (1, tokens))

    def counted(model):
        with FlopCounterMode(display=False) as fc:  # (v1's masked softmax wants autograd on)
            model(input_ids=ids)
        return fc.get_total_flops()
    span = k if v3 else min(tokens, k)
    assert counted(deb) - counted(bert) == disentangled_flops(2, 32, tokens, span) > 0
