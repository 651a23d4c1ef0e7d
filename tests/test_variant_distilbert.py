"""DistilBERT: our from-scratch model against transformers' (eager attention, fp32), both directions."""
import json
import warnings

import pytest
import torch

from bertlab import family
from bertlab.checkpoint import load_model, save_pretrained
from bertlab.config import BertConfig
from bertlab.variants.distilbert import DistilBertForMaskedLM, DistilBertModel

TOL = 1e-5
CONFIGS = {  # transformers' names; odd sizes on purpose, a pad id that is not 0 in one
    "odd-gelu": dict(dim=45, n_layers=3, n_heads=3, hidden_dim=71, max_position_embeddings=23),
    "tanh-gelu-pad1": dict(dim=28, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=19,
                           activation="gelu_new", pad_token_id=1),
    "relu-1head": dict(dim=20, n_layers=1, n_heads=1, hidden_dim=33, max_position_embeddings=24,
                       activation="relu"),
}
OURS = dict(model_type="distilbert", hidden_size=36, num_hidden_layers=3, num_attention_heads=4,
            intermediate_size=53, max_position_embeddings=21, hidden_act="gelu")


def hf_model(cls_name, vocab_size, **kw):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.DistilBertConfig(vocab_size=vocab_size, attn_implementation="eager", **kw)
    m = getattr(transformers, cls_name)(cfg).eval()
    with torch.no_grad():  # HF zero-initialises biases and LayerNorms: make them matter
        for n, p in m.named_parameters():
            if "layer_norm" in n or "LayerNorm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return m


def batch(vocab_size, pad, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab_size, (3, T), generator=g)
    tt = torch.randint(0, 2, (3, T), generator=g)  # DistilBERT must ignore these
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = pad
    return ids, tt, am


def diffs(ours, theirs, logits=True):
    """Max abs differences: (logits, worst hidden state, worst attention map)."""
    assert len(ours.hidden_states) == len(theirs.hidden_states) == len(ours.attentions) + 1
    assert len(ours.attentions) == len(theirs.attentions) > 0
    for a, b in zip(ours.attentions, theirs.attentions):
        assert a.shape == b.shape
    d_log = (ours.mlm_logits - theirs.logits).abs().max().item() if logits else 0.0
    d_hid = max((a - b).abs().max().item() for a, b in zip(ours.hidden_states, theirs.hidden_states))
    d_att = max((a - b).abs().max().item() for a, b in zip(ours.attentions, theirs.attentions))
    d_hid = max(d_hid, (ours.last_hidden_state - theirs.last_hidden_state).abs().max().item()
                if getattr(theirs, "last_hidden_state", None) is not None else 0.0)
    return d_log, d_hid, d_att


def run_both(ours, theirs, T=17):
    c = ours.config
    ids, tt, am = batch(c.vocab_size, c.pad_token_id, T=min(T, c.max_position_embeddings))
    with torch.no_grad():
        a = ours(ids, tt, am, output_attentions=True, output_hidden_states=True)
        b = theirs(input_ids=ids, attention_mask=am, output_attentions=True, output_hidden_states=True)
    return a, b


@pytest.mark.parametrize("name", CONFIGS)
def test_loads_transformers_masked_lm_and_matches(name, tmp_path, vocab_tokenizer):
    V = vocab_tokenizer.vocab_size + 7
    hf = hf_model("DistilBertForMaskedLM", V, **CONFIGS[name])
    hf.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every weight has its place: no warning
        ours = load_model(tmp_path)
    assert type(ours) is DistilBertForMaskedLM and not ours.training
    assert ours.config.num_hidden_layers == CONFIGS[name]["n_layers"] and ours.config.hidden_size == CONFIGS[name]["dim"]
    emb = ours.distilbert.embeddings.word_embeddings
    assert emb.padding_idx == CONFIGS[name].get("pad_token_id", 0)
    assert ours.vocab_projector.weight is emb.weight  # tied after loading
    a, b = run_both(ours, hf)
    assert a.pooler_output is None and a.nsp_logits is None and a.rtd_logits is None
    assert len(a.hidden_states) == ours.config.num_hidden_layers + 1
    assert max(diffs(a, b)) <= TOL


def test_loads_transformers_bare_encoder_and_warns_about_the_head(tmp_path, vocab_tokenizer):
    V = vocab_tokenizer.vocab_size
    hf = hf_model("DistilBertModel", V, **CONFIGS["odd-gelu"])
    hf.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="masked-LM head"):
        ours = load_model(tmp_path)
    enc = family.encoder_of(ours)
    assert isinstance(enc, DistilBertModel)
    for k, v in hf.state_dict().items():  # every encoder tensor landed under the "distilbert." prefix
        assert torch.equal(ours.state_dict()["distilbert." + k], v)
    a, b = run_both(enc, hf)
    assert max(diffs(a, b, logits=False)) <= TOL


@pytest.mark.parametrize("cls_name", ["DistilBertForMaskedLM", "DistilBertModel", "AutoModelForMaskedLM"])
def test_transformers_loads_our_checkpoint_and_matches(cls_name, tmp_path, vocab_tokenizer):
    import transformers
    from safetensors.torch import load_file
    torch.manual_seed(3)
    ours = DistilBertForMaskedLM(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **OURS)).eval()
    with torch.no_grad():
        for n, p in ours.named_parameters():
            if "norm" in n.lower() or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    save_pretrained(ours, vocab_tokenizer, tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["architectures"] == ["DistilBertForMaskedLM"] and cfg["model_type"] == "distilbert"
    assert (cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["hidden_dim"]) == (36, 3, 4, 53)
    assert "hidden_size" not in cfg and "type_vocab_size" not in cfg
    assert "vocab_projector.weight" not in load_file(tmp_path / "m" / "model.safetensors")  # tied alias
    hf = getattr(transformers, cls_name).from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    if cls_name == "AutoModelForMaskedLM":
        assert type(hf).__name__ == "DistilBertForMaskedLM"
    if cls_name == "DistilBertModel":
        a, b = run_both(ours.distilbert, hf)
        assert max(diffs(a, b, logits=False)) <= TOL
    else:
        assert hf.vocab_projector.weight.data_ptr() == hf.distilbert.embeddings.word_embeddings.weight.data_ptr()
        a, b = run_both(ours, hf)
        assert max(diffs(a, b)) <= TOL


def test_config_round_trips_through_transformers(tmp_path):
    import transformers
    c = BertConfig(vocab_size=61, hidden_dropout_prob=0.05, attention_probs_dropout_prob=0.15, pad_token_id=2,
                   initializer_range=0.03, **(OURS | dict(hidden_act="gelu_new")))
    (tmp_path / "a").mkdir()
    c.to_json_file(tmp_path / "a" / "config.json", "DistilBertForMaskedLM")
    hf = transformers.DistilBertConfig.from_pretrained(tmp_path / "a")
    assert (hf.dim, hf.n_layers, hf.n_heads, hf.hidden_dim) == (36, 3, 4, 53)
    assert (hf.activation, hf.dropout, hf.attention_dropout) == ("gelu_new", 0.05, 0.15)
    assert (hf.max_position_embeddings, hf.pad_token_id, hf.vocab_size) == (21, 2, 61)
    assert hf.sinusoidal_pos_embds is False and hf.tie_word_embeddings is True
    hf.save_pretrained(tmp_path / "b")
    assert BertConfig.from_json_file(tmp_path / "b" / "config.json") == c
    d = json.loads((tmp_path / "b" / "config.json").read_text())
    with pytest.raises(ValueError, match="sinusoidal"):
        BertConfig.from_dict(d | {"sinusoidal_pos_embds": True})


def test_layer_norm_eps_is_transformers_fixed_one():
    import transformers
    # transformers' DistilBERT never reads layer_norm_eps: every LayerNorm is 1e-12 ...
    hf = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(
        vocab_size=30, dim=8, n_layers=1, n_heads=2, hidden_dim=8, layer_norm_eps=1e-5))
    lns = [m for m in hf.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(lns) == 4 and {m.eps for m in lns} == {1e-12}
    # ... so ours is too, and a config that says otherwise is refused rather than silently ignored
    ours = DistilBertForMaskedLM(BertConfig(vocab_size=30, **OURS))
    lns = [m for m in ours.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(lns) == 2 * OURS["num_hidden_layers"] + 2 and {m.eps for m in lns} == {1e-12}
    for cls in (DistilBertForMaskedLM, DistilBertModel):
        with pytest.raises(ValueError, match="eps"):
            cls(BertConfig(vocab_size=30, layer_norm_eps=1e-5, **OURS))


def test_sparse_mlm_loss_equals_dense_and_transformers():
    import transformers
    torch.manual_seed(0)
    c = BertConfig(vocab_size=60, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **OURS)
    m = DistilBertForMaskedLM(c)
    ids, tt, am = batch(60, 0)
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5, 9]] = ids[0, [2, 5, 9]]
    labels[1, 3] = 7
    outs, grads = [], []
    for sparse in (False, True):
        m.zero_grad()
        out = m(ids, tt, am, labels=labels, sparse_mlm=sparse)
        out.loss.backward()
        outs.append(out)
        grads.append([p.grad.clone() for p in m.parameters()])
    dense, sparse = outs
    assert dense.mlm_logits.shape == (3, 17, 60) and sparse.mlm_logits.shape == (4, 60)
    assert sparse.nsp_loss is None and torch.equal(sparse.loss, sparse.mlm_loss)
    assert abs(sparse.loss.item() - dense.loss.item()) <= 1e-6
    for a, b in zip(*grads):
        assert (a - b).abs().max() <= 1e-6
    hf = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig.from_dict(
        c.to_hf_dict("DistilBertForMaskedLM"), attn_implementation="eager")).eval()
    hf.load_state_dict(m.state_dict())
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=am, labels=labels).loss
    assert abs(theirs.item() - dense.loss.item()) <= TOL


def test_surface_token_types_causal_and_length():
    torch.manual_seed(0)
    m = DistilBertForMaskedLM(BertConfig(vocab_size=60, **OURS)).eval()
    assert family.model_class(m.config, ["DistilBertForMaskedLM"]) is DistilBertForMaskedLM
    assert family.has_mlm_head(m) and family.family_name(m.config) == "DistilBERT"
    ln, q, k, v = family.attention_projections(m, 2)
    att = m.distilbert.transformer.layer[1].attention
    assert isinstance(ln, torch.nn.Identity) and (q, k, v) == (att.q_lin, att.k_lin, att.v_lin)
    ids, tt, am = batch(60, 0)
    with torch.no_grad():
        full = m(ids, tt, am, output_attentions=True, output_hidden_states=True)
        no_tt = m(ids, None, am, output_attentions=True)  # the same attention path as `full`
        fast = m(ids, tt, am, output_hidden_states=True)  # fused attention kernel, same numbers
        assert torch.equal(full.mlm_logits, no_tt.mlm_logits)  # token types are ignored
        assert fast.attentions is None and (fast.mlm_logits - full.mlm_logits).abs().max() <= TOL
        assert len(full.hidden_states) == 4 and len(full.attentions) == 3
        assert full.attentions[0].shape == (3, 4, 17, 17)
        assert full.attentions[0][2, :, :, 4:].abs().max() == 0  # padding gets no attention
        assert torch.equal(m.token_logits(full.last_hidden_state), full.mlm_logits)
        changed = ids.clone()
        changed[:, 9:] = 5
        a = m(ids, causal=True, output_attentions=True)
        b = m(changed, causal=True).last_hidden_state
        assert (a.last_hidden_state[:, :9] - b[:, :9]).abs().max() <= TOL
        assert a.attentions[0].triu(1).abs().max() == 0
    with pytest.raises(ValueError, match="max_position_embeddings"):
        m(torch.zeros(1, 22, dtype=torch.long))
    with pytest.raises(ValueError, match="next-sentence"):
        m(ids, next_sentence_label=torch.tensor([0, 1, 0]))
