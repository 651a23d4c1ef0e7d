"""bertlab.fast: a pure speed-up. Same numbers as the plain model, any context, never stale weights."""
import copy
import pickle
import threading

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, fast
from bertlab.heads import BertForSequenceClassification
from bertlab.methods import add_lora

TOL = 1e-5
TINY = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)


def pair(seed=0, **kw):
    """(plain, fast) twins with the same weights; biases and LayerNorms made to matter."""
    torch.manual_seed(seed)
    plain = BertForPreTraining(BertConfig(**{**TINY, **kw})).eval()
    with torch.no_grad():
        for n, p in plain.named_parameters():
            if "LayerNorm" in n or ".ln." in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return plain, fast.optimize(copy.deepcopy(plain))


def batch(T=13):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (3, T), generator=g)
    tt = torch.randint(0, 2, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 9:] = 0  # padding inside the batch
    am[2, 4:] = 0
    return ids.masked_fill(am == 0, 0), tt, am


def outputs(m, mask=True, **kw):
    ids, tt, am = batch()
    return m(ids, tt, am if mask else None, output_hidden_states=True, **kw)


def assert_close(a, b, tol=TOL):
    assert (a.mlm_logits - b.mlm_logits).abs().max() <= tol
    assert (a.nsp_logits - b.nsp_logits).abs().max() <= tol
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        assert (x - y).abs().max() <= tol
    if a.attentions is not None:
        for x, y in zip(a.attentions, b.attentions, strict=True):
            assert (x - y).abs().max() <= tol


@pytest.fixture(params=[True, False], ids=["onednn", "fused-qkv-only"])
def kernel(request, monkeypatch):
    """Both fast paths: oneDNN's packed GEMMs, and the fallback without them (fused QKV, F.linear)."""
    if request.param and not fast.ONEDNN:
        pytest.skip("oneDNN's packed linear is not usable here")
    monkeypatch.setattr(fast, "ONEDNN", request.param)
    return request.param


def packed(m) -> int:
    return sum(len(getattr(x, "_fast", ())) for x in m.modules())


@pytest.mark.parametrize("context", [torch.inference_mode, torch.no_grad])
@pytest.mark.parametrize("optimized", [False, True])
def test_first_call_under_inference_mode_or_no_grad(context, optimized):
    plain, twin = pair()
    m = twin if optimized else copy.deepcopy(plain)
    with context():
        out = outputs(m)  # the very first call, so any packing happens in this context
        again = outputs(m, output_attentions=True)
    with torch.no_grad():
        ref = outputs(plain, output_attentions=True)
    assert_close(out, ref)
    assert_close(again, ref)
    assert (packed(m) > 0) == optimized
    with torch.no_grad() if context is torch.inference_mode else torch.inference_mode():
        assert_close(outputs(m, output_attentions=True), ref)  # weights packed in one context, used in the other


@pytest.mark.parametrize("pre_ln", [False, True])
@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("attentions", [False, True])
def test_fast_equals_plain(pre_ln, mask, attentions, kernel):
    plain, twin = pair(pre_ln=pre_ln)
    with torch.inference_mode():
        assert_close(outputs(twin, mask, output_attentions=attentions),
                     outputs(plain, mask, output_attentions=attentions))
        ids, tt, am = batch()
        labels = torch.where(ids % 3 == 0, ids, -100)
        a = twin(ids, tt, am, labels=labels, sparse_mlm=True)
        b = plain(ids, tt, am, labels=labels, sparse_mlm=True)
        assert (a.mlm_logits - b.mlm_logits).abs().max() <= TOL and abs(a.loss - b.loss) <= TOL
        assert (twin(ids, tt, causal=True).last_hidden_state - plain(ids, tt, causal=True).last_hidden_state
                ).abs().max() <= TOL
    assert packed(twin) == 4 * TINY["num_hidden_layers"] + 2  # per layer: QKV, out, FFN in and out; the MLM head


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_fused_activations_and_classifier_heads(act, kernel):
    torch.manual_seed(0)
    plain = BertForSequenceClassification(BertConfig(**TINY, hidden_act=act), 3).eval()
    twin = fast.optimize(copy.deepcopy(plain))
    ids, tt, am = batch()
    with torch.no_grad():
        assert (twin(ids, tt, am).logits - plain(ids, tt, am).logits).abs().max() <= TOL
    assert packed(twin) > 0


def test_optimizer_step_and_load_state_dict_repack(kernel):
    plain, twin = pair()
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (plain, twin)]
    for _ in range(2):
        with torch.no_grad():
            assert_close(outputs(twin), outputs(plain))
        for m, opt in zip((plain, twin), opts):
            m.train()
            torch.manual_seed(7)  # the same dropout draws for both
            outputs(m).mlm_logits.square().mean().backward()
            opt.step()
            opt.zero_grad()
            m.eval()
    with torch.inference_mode():
        assert_close(outputs(twin), outputs(plain))
    new = BertForPreTraining(plain.config).state_dict()
    for m in (plain, twin):
        m.load_state_dict(new)
    with torch.inference_mode():
        assert_close(outputs(twin), outputs(plain))


def test_dtype_round_trip_and_replaced_parameters(kernel):
    plain, twin = pair()
    with torch.no_grad():
        outputs(twin)  # fill the caches
        for m in (plain, twin):
            m.half()
        assert_close(outputs(twin), outputs(plain), tol=0)  # fp16: the plain path, untouched
        for m in (plain, twin):
            m.float()
        assert_close(outputs(twin), outputs(plain))  # rounded through fp16: repacked, not the old fp32
        for m in (plain, twin):  # a new Parameter object; a new tensor behind an old one
            q = m.bert.encoder.layer[1].attention.self.query
            q.weight = torch.nn.Parameter(q.weight * 2)
            m.bert.encoder.layer[0].intermediate.dense.bias.data = torch.ones(64)
        assert_close(outputs(twin), outputs(plain))


def test_lora_added_and_trained(kernel):
    plain, twin = pair()
    with torch.no_grad():
        outputs(twin)  # fill the caches
    for m in (plain, twin):
        torch.manual_seed(5)
        add_lora(m, rank=2, alpha=4, targets=("query", "value", "dense"))
        m.train()
        opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.5)
        outputs(m).mlm_logits.square().mean().backward()
        opt.step()
        m.eval()
    assert twin.bert.encoder.layer[0].attention.self.query.lora_B.abs().sum() > 0
    with torch.inference_mode():
        assert_close(outputs(twin), outputs(plain))


def test_fallbacks_pack_nothing():
    plain, twin = pair()
    assert_close(outputs(twin), outputs(plain))  # autograd on
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert_close(outputs(twin), outputs(plain), tol=0)
    twin.train()
    with torch.no_grad():
        torch.manual_seed(0)
        a = outputs(twin)
        torch.manual_seed(0)
        b = outputs(plain.train())
    assert_close(a, b, tol=0)  # dropout on: the plain path, same random draws
    assert packed(twin) == 0
    with torch.inference_mode():  # weights created under inference_mode have no version counter
        made = fast.optimize(BertForPreTraining(BertConfig(**TINY)).eval())
        outputs(made)
    assert packed(made) == 0


def test_onednn_switched_off_at_run_time_is_respected(monkeypatch):
    plain, twin = pair()
    with torch.no_grad():
        ref = outputs(plain)
        assert_close(outputs(twin), ref)
        monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", None)  # any call would now fail
        assert_close(outputs(twin), ref)


def test_a_new_tensor_never_matches_a_cached_stamp():
    """A cache entry holds its sources' storages by weak reference, so a tensor made after the old one is
    freed cannot take its storage address (freed addresses do come back: a data pointer alone is not enough)."""
    _, twin = pair()
    with torch.no_grad():
        outputs(twin)
    ffn = twin.bert.encoder.layer[0].intermediate
    stamp = ffn._fast["dense"][0]
    for _ in range(200):
        ffn.dense.weight.data = torch.empty(0)  # the old storage is freed here ...
        ffn.dense.weight.data = torch.randn(64, 32)  # ... and a same-sized one made: same version counter
        assert fast._stamp([ffn.dense.weight, ffn.dense.bias]) + stamp[-1:] != stamp


def test_weights_written_behind_autograd_need_optimize_again():
    plain, twin = pair()
    with torch.no_grad():
        outputs(twin)
        for m in (plain, twin):
            m.bert.encoder.layer[0].attention.self.key.weight.data.mul_(3)  # no version bump
        fast.optimize(twin)  # documented: drops every cache
        assert_close(outputs(twin), outputs(plain))


def test_optimize_is_idempotent_and_copies_drop_caches():
    plain, twin = pair()
    assert fast.optimize(twin) is twin and fast.is_optimized(twin) and not fast.is_optimized(plain)
    assert twin.state_dict().keys() == plain.state_dict().keys()
    with torch.no_grad():
        outputs(twin)
    for other in (copy.deepcopy(twin), pickle.loads(pickle.dumps(twin))):
        assert packed(other) == 0 and fast.is_optimized(other)
        with torch.no_grad():
            assert_close(outputs(other), outputs(plain))


def test_concurrent_forwards_agree(kernel):
    plain, twin = pair()
    with torch.no_grad():
        ref = outputs(plain).mlm_logits
    errors = []

    def work():
        with torch.inference_mode():
            for _ in range(5):
                errors.append((outputs(twin).mlm_logits - ref).abs().max().item())
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 20 and max(errors) <= TOL
