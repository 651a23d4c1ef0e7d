"""ALBERT against transformers (eager attention, fp32), in both directions: their AlbertForPreTraining,
AlbertForMaskedLM and bare AlbertModel folders into ours; ours into their three classes. Odd sizes,
E != H, shared groups with several inner layers, padding inside the batch, three segment types.
Then what is ALBERT's own: parameters that do not grow with depth, the shared layer behind each
attention map, sparse masked-LM."""
import pytest
import torch

from bertlab import family, save_pretrained
from bertlab.checkpoint import count_params, load_model
from bertlab.config import BertConfig
from bertlab.variants.albert import AlbertForPreTraining, AlbertModel

TOL = 1e-5
V = 59
CONFIGS = {
    # 4 steps over 2 groups of 2 inner layers: 8 attention maps, E (13) != H (33)
    "shared": dict(hidden_size=33, embedding_size=13, num_hidden_layers=4, num_hidden_groups=2,
                   inner_group_num=2, num_attention_heads=3, intermediate_size=47,
                   max_position_embeddings=40, type_vocab_size=3, hidden_act="gelu_new"),
    # ALBERT's released layout: one group shared by all 3 steps; E == H still has the mapping
    "one-group": dict(hidden_size=30, embedding_size=30, num_hidden_layers=3, num_attention_heads=5,
                      intermediate_size=37, max_position_embeddings=24, type_vocab_size=2,
                      hidden_act="relu", layer_norm_eps=1e-7),
}


def perturbed(m):
    """transformers zero-initialises biases and LayerNorms: make them matter."""
    torch.manual_seed(5)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "LayerNorm" in n or "layer_norm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def hf_albert(cls_name, name):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.AlbertConfig(vocab_size=V, attn_implementation="eager", **CONFIGS[name])
    return perturbed(getattr(transformers, cls_name)(cfg))


def ours(name, **kw):
    torch.manual_seed(3)
    return perturbed(AlbertForPreTraining(BertConfig(vocab_size=V, model_type="albert", **CONFIGS[name], **kw)))


def batch(type_vocab, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, V, (3, T), generator=g)
    tt = torch.randint(0, type_vocab, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = 0
    return ids, tt, am


def run(a_model, b_model, name, **kw):
    ids, tt, am = batch(CONFIGS[name]["type_vocab_size"])
    with torch.no_grad():
        a = a_model(ids, tt, am, output_attentions=True, output_hidden_states=True, **kw)
        b = b_model(input_ids=ids, token_type_ids=tt, attention_mask=am, output_attentions=True,
                    output_hidden_states=True)
    return a, b


def worst(pairs):
    """Largest |a - b| over (ours, theirs) tensor pairs; shapes must agree."""
    d = 0.0
    for a, b in pairs:
        assert a.shape == b.shape, (a.shape, b.shape)
        d = max(d, (a - b).abs().max().item())
    return d


def encoder_pairs(a, b, c):
    """Our L+1 hidden states against theirs (transformers 5 records one per inner layer: every
    inner_group_num-th of theirs is ours), and all L * inner_group_num attention maps."""
    L, inner = c["num_hidden_layers"], c.get("inner_group_num", 1)
    theirs = b.hidden_states if len(b.hidden_states) == L + 1 else b.hidden_states[::inner]
    assert len(a.hidden_states) == len(theirs) == L + 1
    assert len(a.attentions) == len(b.attentions) == L * inner
    last = getattr(b, "last_hidden_state", None)  # a full model of theirs returns hidden states only
    return [(a.last_hidden_state, b.hidden_states[-1] if last is None else last),
            *zip(a.hidden_states, theirs), *zip(a.attentions, b.attentions)]


@pytest.mark.parametrize("name", CONFIGS)
def test_albert_for_pretraining_folder_from_transformers_matches(name, tmp_path):
    hf = hf_albert("AlbertForPreTraining", name)
    hf.save_pretrained(tmp_path)
    m = load_model(tmp_path)
    assert type(m) is AlbertForPreTraining and not m.training
    ids, _, am = batch(1)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3, ids, -100)
    sop = torch.tensor([1, 0, 1])
    a, b = run(m, hf, name, labels=labels, next_sentence_label=sop)
    assert a.hidden_states[0].shape[-1] == m.config.hidden_size  # after embedding_hidden_mapping_in
    d = worst([(a.mlm_logits, b.prediction_logits), (a.nsp_logits, b.sop_logits), *encoder_pairs(a, b, CONFIGS[name])])
    print(f"{name}: AlbertForPreTraining folder -> ours, max |diff| {d:.2e}")
    assert d <= TOL
    with torch.no_grad():
        b = hf(input_ids=ids, token_type_ids=batch(CONFIGS[name]["type_vocab_size"])[1], attention_mask=am,
               labels=labels, sentence_order_label=sop)
    assert abs(a.loss.item() - b.loss.item()) <= TOL and a.loss == a.mlm_loss + a.nsp_loss
    tt = batch(CONFIGS[name]["type_vocab_size"])[1]
    with torch.no_grad():  # the fused-kernel path (no attention maps asked) computes the same
        fused = m(ids, tt, am)
    assert worst([(fused.mlm_logits, a.mlm_logits), (fused.nsp_logits, a.nsp_logits)]) <= TOL


@pytest.mark.parametrize("name", CONFIGS)
def test_albert_masked_lm_and_bare_folders_from_transformers_match(name, tmp_path):
    hf = hf_albert("AlbertForMaskedLM", name)
    hf.save_pretrained(tmp_path / "mlm")
    with pytest.warns(UserWarning, match="pooler, sentence-order head"):
        m = load_model(tmp_path / "mlm")
    a, b = run(m, hf, name)
    d = worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b, CONFIGS[name])])
    bare = hf_albert("AlbertModel", name)
    bare.save_pretrained(tmp_path / "bare")
    with pytest.warns(UserWarning, match="masked-LM head, sentence-order head"):
        m = load_model(tmp_path / "bare")
    assert type(m) is AlbertForPreTraining
    a, b = run(m, bare, name)
    d = max(d, worst([(a.pooler_output, b.pooler_output), *encoder_pairs(a, b, CONFIGS[name])]))
    enc = m.albert(*batch(CONFIGS[name]["type_vocab_size"]), output_attentions=True, output_hidden_states=True)
    d = max(d, worst(encoder_pairs(enc, b, CONFIGS[name])))  # the bare encoder of ours, called alone
    print(f"{name}: AlbertForMaskedLM / AlbertModel folders -> ours, max |diff| {d:.2e}")
    assert d <= TOL and a.mlm_logits.shape == (3, 17, V)


@pytest.mark.parametrize("name", CONFIGS)
def test_transformers_loads_our_albert(name, tmp_path):
    import transformers
    m = ours(name)
    save_pretrained(m, None, tmp_path)
    kw = dict(attn_implementation="eager")
    hf = transformers.AlbertForPreTraining.from_pretrained(tmp_path, **kw).eval()
    a, b = run(m, hf, name)
    d = worst([(a.mlm_logits, b.prediction_logits), (a.nsp_logits, b.sop_logits), *encoder_pairs(a, b, CONFIGS[name])])
    for cls in (transformers.AlbertForMaskedLM, transformers.AutoModelForMaskedLM):
        hf = cls.from_pretrained(tmp_path, **kw).eval()
        assert type(hf).__name__ == "AlbertForMaskedLM"
        a, b = run(m, hf, name)
        d = max(d, worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b, CONFIGS[name])]))
    hf = transformers.AlbertModel.from_pretrained(tmp_path, **kw).eval()
    a, b = run(m, hf, name)
    d = max(d, worst([(a.pooler_output, b.pooler_output), *encoder_pairs(a, b, CONFIGS[name])]))
    print(f"{name}: ours -> transformers (PreTraining, MaskedLM, Model), max |diff| {d:.2e}")
    assert d <= TOL
    again = load_model(tmp_path)  # and back into ours, every key
    assert all(torch.equal(x, y) for x, y in zip(again.state_dict().values(), m.state_dict().values()))


def test_surface_and_tied_decoder(tmp_path):
    m = ours("shared")
    assert family.model_class(m.config) is AlbertForPreTraining and family.has_mlm_head(m)
    assert family.encoder_of(m) is m.albert and isinstance(m.albert, AlbertModel)
    assert m.predictions.decoder.weight is m.albert.embeddings.word_embeddings.weight
    assert m.albert.embeddings.word_embeddings.weight.shape == (V, 13)  # E wide
    save_pretrained(m, None, tmp_path)
    from safetensors.torch import load_file
    keys = load_file(tmp_path / "model.safetensors").keys()
    assert "predictions.bias" in keys and not keys & set(m.tied_keys)  # aliases are not written
    h = torch.randn(2, 33)
    assert torch.allclose(m.token_logits(h), m.predictions(h)) and m.token_logits(h).shape == (2, V)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        m(torch.zeros(1, 41, dtype=torch.long))


def test_parameters_do_not_grow_with_depth_when_one_group_is_shared():
    def n(**kw):
        return count_params(BertConfig(vocab_size=V, model_type="albert", hidden_size=32, embedding_size=8,
                                       num_attention_heads=4, intermediate_size=40, **kw))
    assert n(num_hidden_layers=2) == n(num_hidden_layers=12) == n(num_hidden_layers=24)
    one = n(num_hidden_layers=12)
    layer = 4 * (32 * 32 + 32) + 2 * 2 * 32 + (32 * 40 + 40) + (40 * 32 + 32)  # q k v dense, 2 LNs, ffn
    assert n(num_hidden_layers=12, num_hidden_groups=3) == one + 2 * layer  # each group is one more layer
    assert n(num_hidden_layers=12, inner_group_num=2) == one + layer
    m = AlbertForPreTraining(BertConfig(vocab_size=V, model_type="albert", hidden_size=32, embedding_size=8,
                                        num_attention_heads=4, intermediate_size=40, num_hidden_layers=6))
    assert sum(p.numel() for p in m.parameters()) == one


def test_attention_projections_are_the_shared_layer_behind_each_map():
    m = ours("shared")  # L = 4 steps, G = 2 groups (steps 0-1 -> group 0, 2-3 -> group 1), 2 inner layers
    groups = m.albert.encoder.albert_layer_groups
    for layer in range(1, 9):  # maps: step 0 inner 0, step 0 inner 1, step 1 inner 0, ...
        step, inner = divmod(layer - 1, 2)
        ln, q, k, v = family.attention_projections(m, layer)
        att = groups[step // 2].albert_layers[inner].attention
        assert isinstance(ln, torch.nn.Identity) and (q, k, v) == (att.query, att.key, att.value)
    assert family.attention_projections(m, 1)[1] is family.attention_projections(m, 3)[1]  # shared
    for bad in (0, 9):
        with pytest.raises(ValueError, match="8 attention maps"):
            family.attention_projections(m, bad)
    m = ours("one-group")  # inner_group_num 1: hidden_states[layer - 1] is what map `layer` reads
    ids, tt, am = batch(2)
    with torch.no_grad():
        out = m(ids, tt, am, output_attentions=True, output_hidden_states=True)
        for layer in (1, 3):
            _, q, k, _ = family.attention_projections(m, layer)
            x = out.hidden_states[layer - 1][0]  # (T, H), sequence 0 has no padding
            d = m.config.head_dim
            scores = q(x)[:, :d] @ k(x)[:, :d].T / d ** 0.5  # head 1
            assert (scores.softmax(-1) - out.attentions[layer - 1][0, 0]).abs().max() <= TOL


def test_sparse_mlm_gives_the_same_loss_and_gradients():
    m = ours("shared").train()
    m.apply(lambda x: setattr(x, "p", 0.0) if isinstance(x, torch.nn.Dropout) else None)
    ids, tt, am = batch(3)
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5, 9]] = ids[0, [2, 5, 9]]
    labels[1, 3] = 7
    sop = torch.tensor([0, 1, 0])
    outs, grads = [], []
    for sparse in (False, True):
        m.zero_grad()
        out = m(ids, tt, am, labels=labels, next_sentence_label=sop, sparse_mlm=sparse)
        out.loss.backward()
        outs.append(out)
        grads.append([p.grad.clone() for p in m.parameters()])
    dense, sparse = outs
    assert dense.mlm_logits.shape == (3, 17, V) and sparse.mlm_logits.shape == (4, V)
    assert torch.allclose(sparse.mlm_loss, dense.mlm_loss, atol=1e-6)
    assert torch.allclose(sparse.loss, dense.loss, atol=1e-6)
    assert all((a - b).abs().max() <= 1e-6 for a, b in zip(*grads))


def test_causal_mode_ignores_the_right_context():
    m = ours("one-group")
    ids, tt, _ = batch(2)
    changed = ids.clone()
    changed[:, 10:] = 7
    with torch.no_grad():
        a = m(ids, tt, causal=True).last_hidden_state
        b = m(changed, tt, causal=True).last_hidden_state
    assert (a[:, :10] - b[:, :10]).abs().max() <= 1e-6 and (a[:, 10:] - b[:, 10:]).abs().max() > 1e-3
