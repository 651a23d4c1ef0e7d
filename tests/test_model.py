"""Same weights in, same numbers out: our BERT against transformers' (eager attention), fp32."""
import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, fast, load_pretrained, save_pretrained

TOL = 1e-5
CONFIGS = {  # odd sizes on purpose: nothing may rely on powers of two
    "odd": dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=3, intermediate_size=70,
                max_position_embeddings=40, type_vocab_size=3),
    "tanh-gelu": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                      max_position_embeddings=32, hidden_act="gelu_new", layer_norm_eps=1e-7),
    "relu-1head": dict(hidden_size=20, num_hidden_layers=1, num_attention_heads=1, intermediate_size=33,
                       max_position_embeddings=24, hidden_act="relu"),
}


def hf_model(vocab_size, **kw):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=vocab_size, attn_implementation="eager", **kw)
    m = transformers.BertForPreTraining(cfg).eval()
    with torch.no_grad():  # HF zero-initialises biases and LayerNorms: make them matter
        for n, p in m.named_parameters():
            if "LayerNorm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return m


def batch(vocab_size, type_vocab, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab_size, (3, T), generator=g)
    tt = torch.randint(0, type_vocab, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = 0
    return ids, tt, am


def assert_same(ours, theirs):
    with torch.no_grad():
        assert (ours.mlm_logits - theirs.prediction_logits).abs().max() <= TOL
        assert (ours.nsp_logits - theirs.seq_relationship_logits).abs().max() <= TOL
        assert len(ours.hidden_states) == len(theirs.hidden_states)
        for a, b in zip(ours.hidden_states, theirs.hidden_states):
            assert (a - b).abs().max() <= TOL
        assert len(ours.attentions) == len(theirs.attentions) > 0
        for a, b in zip(ours.attentions, theirs.attentions):
            assert a.shape == b.shape and (a - b).abs().max() <= TOL


def run_both(ours, theirs, vocab_size, type_vocab):
    ids, tt, am = batch(vocab_size, type_vocab, T=min(17, ours.config.max_position_embeddings))
    with torch.no_grad():
        a = ours(ids, tt, am, output_attentions=True, output_hidden_states=True)
        b = theirs(input_ids=ids, token_type_ids=tt, attention_mask=am,
                   output_attentions=True, output_hidden_states=True)
    return a, b


@pytest.mark.parametrize("name", CONFIGS)
def test_loads_transformers_checkpoint_and_matches(name, tmp_path, vocab_tokenizer):
    V = vocab_tokenizer.vocab_size + 7
    hf = hf_model(V, **CONFIGS[name])
    hf.save_pretrained(tmp_path)
    vocab_tokenizer.save_pretrained(tmp_path)
    ours, tok = load_pretrained(tmp_path)
    assert tok.vocab_size == vocab_tokenizer.vocab_size and not ours.training
    assert_same(*run_both(ours, hf, V, hf.config.type_vocab_size))


@pytest.mark.parametrize("name", CONFIGS)
def test_transformers_loads_our_checkpoint_and_matches(name, tmp_path, vocab_tokenizer):
    import transformers
    torch.manual_seed(3)
    ours = BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **CONFIGS[name])).eval()
    save_pretrained(ours, vocab_tokenizer, tmp_path / "m")
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    assert_same(*run_both(ours, hf, ours.config.vocab_size, ours.config.type_vocab_size))


def test_sdpa_path_equals_explicit_softmax():
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval()
    ids, tt, am = batch(60, 3)
    with torch.no_grad():
        for mask in (am, None):
            fast = m(ids, tt, mask, output_hidden_states=True)
            slow = m(ids, tt, mask, output_attentions=True, output_hidden_states=True)
            assert fast.attentions is None
            for a, b in zip(fast.hidden_states, slow.hidden_states):
                assert (a - b).abs().max() <= TOL
            assert (fast.mlm_logits - slow.mlm_logits).abs().max() <= TOL


def test_sparse_mlm_gives_the_same_loss_and_gradients():
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=60, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                      **CONFIGS["odd"]))
    ids, tt, am = batch(60, 3)
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5, 9]] = ids[0, [2, 5, 9]]
    labels[1, 3] = 7
    nsp = torch.tensor([0, 1, 0])
    grads = []
    for sparse in (False, True):
        m.zero_grad()
        out = m(ids, tt, am, labels=labels, next_sentence_label=nsp, sparse_mlm=sparse)
        out.loss.backward()
        grads.append([p.grad.clone() for p in m.parameters()])
        if sparse:
            assert out.mlm_logits.shape == (4, 60)
            assert torch.allclose(out.mlm_loss, dense.mlm_loss, atol=1e-6)
            assert torch.allclose(out.loss, dense.loss, atol=1e-6)
        else:
            dense = out
            assert out.mlm_logits.shape == (3, 17, 60)
    for a, b in zip(*grads):
        assert (a - b).abs().max() <= 1e-6


def test_loss_matches_transformers():
    hf = hf_model(60, **CONFIGS["odd"])
    ours = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval()
    ours.load_state_dict(hf.state_dict(), strict=False)
    ids, tt, am = batch(60, 3)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3, ids, -100)
    nsp = torch.tensor([1, 0, 1])
    with torch.no_grad():
        a = ours(ids, tt, am, labels=labels, next_sentence_label=nsp)
        b = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=labels, next_sentence_label=nsp)
    assert abs(a.loss.item() - b.loss.item()) <= TOL


def test_causal_mode_ignores_the_right_context():
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval()
    ids, tt, _ = batch(60, 3)
    changed = ids.clone()
    changed[:, 9:] = 5
    with torch.no_grad():
        a = m(ids, tt, causal=True).last_hidden_state
        b = m(changed, tt, causal=True).last_hidden_state
        c = m(changed, tt).last_hidden_state
        att = m(ids, tt, causal=True, output_attentions=True).attentions[0]
    assert (a[:, :9] - b[:, :9]).abs().max() <= TOL
    assert (a[:, :9] - c[:, :9]).abs().max() > 1e-3  # bidirectional attention sees the change
    assert att.triu(1).abs().max() == 0


def test_too_long_input_is_a_clear_error():
    m = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["relu-1head"]))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        m(torch.zeros(1, 25, dtype=torch.long))


def test_bf16_autocast_runs_close_to_fp32():
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval()
    ids, tt, am = batch(60, 3)
    with torch.no_grad():
        ref = m(ids, tt, am).mlm_logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = m(ids, tt, am).mlm_logits
    assert torch.isfinite(low).all() and (low.float() - ref).abs().max() < 0.1


def test_decoder_is_tied_to_word_embeddings():
    m = BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"]))
    assert m.cls.predictions.decoder.weight is m.bert.embeddings.word_embeddings.weight
    assert "cls.predictions.decoder.weight" in m.state_dict()


def test_fast_path_follows_weight_updates():
    """bertlab.fast packs [Wq; Wk; Wv] and the other weights once; an optimizer step or a reload must repack."""
    torch.manual_seed(0)
    m = fast.optimize(BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval())
    ids, tt, am = batch(60, 3)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    for _ in range(2):
        with torch.no_grad():
            cached = m(ids, tt, am).mlm_logits
        graph = m(ids, tt, am)  # grad enabled: the plain model's forward, no cache
        assert (cached - graph.mlm_logits).abs().max() <= TOL
        graph.mlm_logits.square().mean().backward()
        opt.step()
        opt.zero_grad()
    m.load_state_dict(BertForPreTraining(m.config).state_dict())
    with torch.no_grad():
        assert (m(ids, tt, am).mlm_logits - m(ids, tt, am, output_attentions=True).mlm_logits).abs().max() <= TOL
    assert (m(ids, tt, am).mlm_logits - cached).abs().max() > 1e-3


def test_fast_path_follows_dtype_round_trips_and_reloads():
    """Packed weights must not outlive the tensors they came from: .half().float() and a reload give new ones."""
    torch.manual_seed(0)
    m = fast.optimize(BertForPreTraining(BertConfig(vocab_size=60, **CONFIGS["odd"])).eval())
    ids, tt, am = batch(60, 3)
    with torch.no_grad():
        m(ids, tt, am)  # fill the caches
        m.half().float()  # weights rounded through fp16: new tensors
        fast_out = m(ids, tt, am).mlm_logits
    slow = m(ids, tt, am).mlm_logits  # grad enabled: plain F.linear
    assert (fast_out - slow).abs().max() <= TOL
    other = BertForPreTraining(m.config).state_dict()
    with torch.no_grad():
        m.load_state_dict(other)
        fast_out = m(ids, tt, am).mlm_logits
        m.load_state_dict({k: v.clone() for k, v in other.items()}, assign=True)
        assigned = m(ids, tt, am).mlm_logits
    m.tie_weights()
    slow = m(ids, tt, am).mlm_logits
    assert (fast_out - slow).abs().max() <= TOL and (assigned - slow).abs().max() <= TOL


def hf_megatron(vocab_size, **kw):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.MegatronBertConfig(vocab_size=vocab_size, attn_implementation="eager", **kw)
    m = transformers.MegatronBertForPreTraining(cfg).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if ".ln." in n or "LayerNorm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return m


@pytest.mark.parametrize("name", ["odd", "tanh-gelu"])
def test_pre_ln_variant_is_transformers_megatron_bert(name, tmp_path, vocab_tokenizer):
    """Pre-LN is opt-in and not BERT's layout: it round-trips through MegatronBert, number for number."""
    import transformers
    V = vocab_tokenizer.vocab_size
    hf = hf_megatron(V, **CONFIGS[name])
    hf.save_pretrained(tmp_path / "hf")
    vocab_tokenizer.save_pretrained(tmp_path / "hf")
    ours, _ = load_pretrained(tmp_path / "hf")
    assert ours.config.pre_ln and isinstance(ours.bert.encoder.ln, torch.nn.LayerNorm)
    assert_same(*run_both(ours, hf, V, hf.config.type_vocab_size))

    torch.manual_seed(3)
    ours = BertForPreTraining(BertConfig(vocab_size=V, pre_ln=True, **CONFIGS[name])).eval()
    save_pretrained(ours, vocab_tokenizer, tmp_path / "m")
    back = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    assert type(back).__name__ == "MegatronBertForPreTraining"
    assert_same(*run_both(ours, back, V, ours.config.type_vocab_size))
    post = BertForPreTraining(BertConfig(vocab_size=V, **CONFIGS[name]))  # same parameter count, other places
    assert isinstance(post.bert.encoder.ln, torch.nn.Identity) and "bert.encoder.ln.weight" not in post.state_dict()
    assert sum(p.numel() for p in post.parameters()) == sum(p.numel() for p in ours.parameters())
