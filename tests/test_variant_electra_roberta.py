"""ELECTRA (discriminator and generator) and RoBERTa against transformers (eager attention, fp32), in
both directions: their folders into ours, ours into their classes; bare encoders; the few things
that are not BERT's (RoBERTa's position ids, the discriminator's loss, shared generator embeddings)."""
import warnings

import pytest
import torch

from bertlab import family, save_pretrained
from bertlab.checkpoint import load_model
from bertlab.config import BertConfig
from bertlab.variants.electra import ElectraForMaskedLM, ElectraForPreTraining, share_embeddings
from bertlab.variants.roberta import RobertaForMaskedLM, RobertaModel, position_ids

TOL = 1e-5
V = 61
ELECTRA = {  # odd sizes; E != H (embeddings_project) and E == H (none)
    "factorised": dict(hidden_size=42, embedding_size=18, num_hidden_layers=3, num_attention_heads=3,
                       intermediate_size=50, max_position_embeddings=40, type_vocab_size=3, hidden_act="gelu_new"),
    "square": dict(hidden_size=30, embedding_size=30, num_hidden_layers=2, num_attention_heads=5,
                   intermediate_size=37, max_position_embeddings=24, type_vocab_size=2, hidden_act="relu",
                   layer_norm_eps=1e-7),
}
ROBERTA = dict(hidden_size=36, num_hidden_layers=2, num_attention_heads=3, intermediate_size=55,
               max_position_embeddings=19, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2)
# 19 = 17 tokens + pad_token_id + 1: the longest row of the batch uses the last position


def perturbed(m):
    """transformers zero-initialises biases and LayerNorms: make them matter."""
    torch.manual_seed(5)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "LayerNorm" in n or "layer_norm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def batch(type_vocab, pad=0, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, (3, T), generator=g)
    tt = torch.randint(0, type_vocab, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = pad
    return ids, tt, am


def run(ours, theirs, type_vocab, pad=0, **kw):
    ids, tt, am = batch(type_vocab, pad)
    with torch.no_grad():
        a = ours(ids, tt, am, output_attentions=True, output_hidden_states=True, **kw)
        b = theirs(input_ids=ids, token_type_ids=tt, attention_mask=am, output_attentions=True,
                   output_hidden_states=True, **kw)
    return a, b


def worst(pairs):
    """Largest |a - b| over (ours, theirs) tensor pairs; shapes must agree."""
    d = 0.0
    for a, b in pairs:
        assert a.shape == b.shape, (a.shape, b.shape)
        d = max(d, (a - b).abs().max().item())
    return d


def encoder_pairs(a, b):
    assert len(a.hidden_states) == len(b.hidden_states) and len(a.attentions) == len(b.attentions) > 0
    last = getattr(b, "last_hidden_state", None)  # a full model of theirs returns hidden states only
    return [(a.last_hidden_state, b.hidden_states[-1] if last is None else last),
            *zip(a.hidden_states, b.hidden_states), *zip(a.attentions, b.attentions)]


def hf_electra(cls_name, name, **kw):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=V, attn_implementation="eager", **ELECTRA[name], **kw)
    return perturbed(getattr(transformers, cls_name)(cfg))


def ours_electra(cls, name):
    torch.manual_seed(3)
    return perturbed(cls(BertConfig(vocab_size=V, model_type="electra", **ELECTRA[name])))


def rtd_labels(ids):
    return torch.randint(0, 2, ids.shape, generator=torch.Generator().manual_seed(4))


# ---- ELECTRA -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ELECTRA)
def test_electra_discriminator_folder_from_transformers_matches(name, tmp_path):
    hf = hf_electra("ElectraForPreTraining", name)
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert type(ours) is ElectraForPreTraining and not ours.training
    labels = rtd_labels(batch(1)[0])
    a, b = run(ours, hf, ELECTRA[name]["type_vocab_size"], labels=labels)
    assert a.mlm_logits is None and a.nsp_logits is None and a.pooler_output is None
    assert a.hidden_states[0].shape[-1] == ours.config.hidden_size  # after embeddings_project
    assert worst([(a.rtd_logits, b.logits), *encoder_pairs(a, b)]) <= TOL
    assert abs(a.loss.item() - b.loss.item()) <= TOL  # BCE over the attended positions only


@pytest.mark.parametrize("name", ELECTRA)
def test_electra_generator_folder_from_transformers_matches(name, tmp_path):
    hf = hf_electra("ElectraForMaskedLM", name)
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert type(ours) is ElectraForMaskedLM
    ids = batch(1)[0]
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3, ids, -100)
    a, b = run(ours, hf, ELECTRA[name]["type_vocab_size"], labels=labels)
    assert a.rtd_logits is None and a.nsp_logits is None and a.mlm_logits.shape == (3, 17, V)
    assert worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b)]) <= TOL
    assert abs(a.mlm_loss.item() - b.loss.item()) <= TOL and a.loss is a.mlm_loss


@pytest.mark.parametrize("name", ELECTRA)
def test_transformers_loads_our_electra(name, tmp_path):
    import transformers
    disc, gen = ours_electra(ElectraForPreTraining, name), ours_electra(ElectraForMaskedLM, name)
    save_pretrained(disc, None, tmp_path / "d")
    save_pretrained(gen, None, tmp_path / "g")
    t = ELECTRA[name]["type_vocab_size"]
    kw = dict(attn_implementation="eager")
    hf = transformers.ElectraForPreTraining.from_pretrained(tmp_path / "d", **kw).eval()
    a, b = run(disc, hf, t)
    assert worst([(a.rtd_logits, b.logits), *encoder_pairs(a, b)]) <= TOL
    bare = transformers.ElectraModel.from_pretrained(tmp_path / "d", **kw).eval()
    assert worst(encoder_pairs(*run(disc, bare, t))) <= TOL
    for cls in (transformers.ElectraForMaskedLM, transformers.AutoModelForMaskedLM):
        hf = cls.from_pretrained(tmp_path / "g", **kw).eval()
        assert type(hf).__name__ == "ElectraForMaskedLM"
        a, b = run(gen, hf, t)
        assert worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b)]) <= TOL


@pytest.mark.parametrize("name", ELECTRA)
def test_bare_electra_model_folder_loads_as_a_discriminator(name, tmp_path):
    hf = hf_electra("ElectraModel", name)
    hf.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="replaced-token head"):
        ours = load_model(tmp_path)
    assert type(ours) is ElectraForPreTraining
    a, b = run(ours, hf, ELECTRA[name]["type_vocab_size"])
    assert worst(encoder_pairs(a, b)) <= TOL and a.rtd_logits.shape == (3, 17)


def test_discriminator_surface_and_loss_ignores_padding():
    m = ours_electra(ElectraForPreTraining, "factorised")
    assert m.token_logits is None and not family.has_mlm_head(m) and m.tied_keys == ()
    assert family.model_class(m.config, ["ElectraForPreTraining"]) is ElectraForPreTraining
    assert family.model_class(m.config, ["ElectraForMaskedLM"]) is ElectraForMaskedLM
    ln, q, k, v = family.attention_projections(m, 2)
    assert q is m.electra.encoder.layer[1].attention.self.query and isinstance(ln, torch.nn.Identity)
    ids, tt, am = batch(3)
    labels = rtd_labels(ids)
    flipped = torch.where(am.bool(), labels, 1 - labels)  # only padded positions change
    with torch.no_grad():
        a = m(ids, tt, am, labels=labels).loss
        b = m(ids, tt, am, labels=flipped).loss
        c = m(ids, tt, labels=flipped).loss  # no mask: every position counts
    assert a == b and abs(c - a) > 1e-4
    with pytest.raises(ValueError, match="next-sentence"):
        m(ids, next_sentence_label=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        m(torch.zeros(1, 41, dtype=torch.long))


def test_share_embeddings_ties_generator_to_discriminator():
    kw = dict(vocab_size=V, model_type="electra", embedding_size=18, max_position_embeddings=40,
              type_vocab_size=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    disc = ElectraForPreTraining(BertConfig(hidden_size=42, num_hidden_layers=2, num_attention_heads=3,
                                            intermediate_size=50, **kw))
    gen = ElectraForMaskedLM(BertConfig(hidden_size=12, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=20, **kw))
    share_embeddings(gen, disc)
    assert gen.electra.embeddings is disc.electra.embeddings
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    ids, tt, am = batch(3)
    labels = torch.where(am.bool(), ids, -100)
    gen(ids, tt, am, labels=labels).loss.backward()  # the generator's loss trains the shared tables
    grad = disc.electra.embeddings.word_embeddings.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    assert disc.electra.embeddings.position_embeddings.weight.grad.abs().sum() > 0
    other = ElectraForMaskedLM(BertConfig(hidden_size=12, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=20, **(kw | dict(embedding_size=12))))
    with pytest.raises(ValueError, match="word_embeddings.weight"):
        share_embeddings(other, disc)


def test_generator_sparse_mlm_same_loss():
    m = ours_electra(ElectraForMaskedLM, "factorised")
    ids, tt, am = batch(3)
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5, 9]] = ids[0, [2, 5, 9]]
    with torch.no_grad():
        dense = m(ids, tt, am, labels=labels)
        sparse = m(ids, tt, am, labels=labels, sparse_mlm=True)
    assert sparse.mlm_logits.shape == (3, V) and abs(sparse.loss - dense.loss) <= 1e-6


# ---- RoBERTa -----------------------------------------------------------------------------------

def hf_roberta(cls_name, **kw):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.RobertaConfig(vocab_size=V, attn_implementation="eager", **ROBERTA, **kw)
    return perturbed(getattr(transformers, cls_name)(cfg))


def test_roberta_position_ids_as_transformers():
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings
    ids = torch.tensor([[0, 5, 6, 2], [0, 5, 2, 1], [0, 1, 7, 1]])
    assert position_ids(ids, 1).tolist() == [[2, 3, 4, 5], [2, 3, 4, 1], [2, 1, 3, 1]]
    ids, _, _ = batch(1, pad=1)
    assert torch.equal(position_ids(ids, 1), RobertaEmbeddings.create_position_ids_from_input_ids(ids, 1))


def test_roberta_folder_from_transformers_matches(tmp_path):
    hf = hf_roberta("RobertaForMaskedLM")
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert type(ours) is RobertaForMaskedLM and ours.config.position_offset == 2
    ids = batch(1, pad=1)[0]
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3, ids, -100)
    a, b = run(ours, hf, 1, pad=1, labels=labels)
    assert a.nsp_logits is None and a.pooler_output is None and a.rtd_logits is None
    assert worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b)]) <= TOL
    assert abs(a.mlm_loss.item() - b.loss.item()) <= TOL
    with torch.no_grad():  # token_type_ids left out: zeros, as transformers
        assert worst([(ours(ids).mlm_logits, hf(input_ids=ids).logits)]) <= TOL
    assert ours.lm_head.decoder.weight is ours.roberta.embeddings.word_embeddings.weight
    with pytest.raises(ValueError, match="max_position_embeddings"):
        ours(torch.full((1, 18), 5))  # 18 tokens need rows up to 19


def test_transformers_loads_our_roberta(tmp_path):
    import transformers
    torch.manual_seed(3)
    ours = perturbed(RobertaForMaskedLM(BertConfig(vocab_size=V, model_type="roberta", **ROBERTA)))
    save_pretrained(ours, None, tmp_path / "m")
    kw = dict(attn_implementation="eager")
    for cls in (transformers.RobertaForMaskedLM, transformers.AutoModelForMaskedLM):
        hf = cls.from_pretrained(tmp_path / "m", **kw).eval()
        assert type(hf).__name__ == "RobertaForMaskedLM"
        a, b = run(ours, hf, 1, pad=1)
        assert worst([(a.mlm_logits, b.logits), *encoder_pairs(a, b)]) <= TOL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its pooler is not in our file: transformers initialises it
        bare = transformers.RobertaModel.from_pretrained(tmp_path / "m", **kw).eval()
    assert worst(encoder_pairs(*run(ours, bare, 1, pad=1))) <= TOL


def test_bare_roberta_model_folder_and_pooler(tmp_path):
    hf = hf_roberta("RobertaModel")
    hf.save_pretrained(tmp_path)
    with pytest.warns(UserWarning) as caught:
        ours = load_model(tmp_path)
    said = " ".join(str(w.message) for w in caught)
    assert "masked-LM head" in said and "roberta.pooler" in said  # no place for the pooler here
    assert type(ours) is RobertaForMaskedLM
    assert worst(encoder_pairs(*run(ours, hf, 1, pad=1))) <= TOL
    enc = RobertaModel(ours.config).eval()  # the bare encoder, with BertModel's pooler
    enc.load_state_dict(hf.state_dict(), strict=False)
    a, b = run(enc, hf, 1, pad=1)
    assert worst([(a.pooler_output, b.pooler_output), *encoder_pairs(a, b)]) <= TOL


def test_roberta_sparse_mlm_and_causal():
    torch.manual_seed(0)
    m = RobertaForMaskedLM(BertConfig(vocab_size=V, model_type="roberta", **ROBERTA)).eval()
    ids, tt, am = batch(1, pad=1)
    labels = torch.where(am.bool(), ids, -100)
    with torch.no_grad():
        dense = m(ids, tt, am, labels=labels)
        sparse = m(ids, tt, am, labels=labels, sparse_mlm=True)
        att = m(ids, tt, am, causal=True, output_attentions=True).attentions[0]
    assert sparse.mlm_logits.shape == (int(am.sum()), V) and abs(sparse.loss - dense.loss) <= 1e-6
    assert att.triu(1).abs().max() == 0
    with pytest.raises(ValueError, match="next-sentence"):
        m(ids, next_sentence_label=torch.zeros(3, dtype=torch.long))
