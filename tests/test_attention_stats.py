import math

import torch

from bertlab.analysis import attention as A


def shifted_identity(T, offset):
    """Every token attends fully to its neighbour at `offset` (rows without one attend to themselves)."""
    m = torch.zeros(T, T)
    for i in range(T):
        j = i + offset
        m[i, j if 0 <= j < T else i] = 1.0
    return m[None, None]  # (1, 1, T, T)


def test_uniform_attention_has_entropy_log_t():
    for T in (1, 7, 128):
        u = torch.full((2, 3, T, T), 1.0 / T)
        assert torch.allclose(A.entropy(u), torch.full((3,), math.log(T)), atol=1e-5)


def test_previous_and_next_token_mass_of_shifted_identity():
    T = 10
    prev, nxt = shifted_identity(T, -1), shifted_identity(T, 1)
    assert A.offset_mass(prev, -1).item() == 1.0 and A.offset_mass(prev, 1).item() == 0.0
    assert A.offset_mass(nxt, 1).item() == 1.0
    assert A.entropy(prev).item() < 1e-5
    u = torch.full((1, 1, T, T), 1.0 / T)
    assert abs(A.offset_mass(u, -1).item() - 1 / T) < 1e-6


def test_padding_rows_and_keys_do_not_count():
    T = 6
    a = shifted_identity(T, -1).repeat(2, 1, 1, 1)
    mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]])
    a[1, :, 3:] = 1.0 / T  # pad rows: garbage that must be ignored
    assert A.offset_mass(a, -1, mask).item() == 1.0


def test_head_stats_and_rollout():
    T = 5
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    to_cls = torch.zeros(1, 2, T, T)
    to_cls[..., 0] = 1.0
    rows = A.head_stats([to_cls], ids, cls_id=2, sep_id=3)
    assert len(rows) == 2 and rows[0]["cls"] == 1.0 and rows[0]["sep"] == 0.0
    maps = [torch.softmax(torch.randn(1, 2, T, T), -1) for _ in range(3)]
    r = A.rollout(maps)
    assert r.shape == (1, T, T) and torch.allclose(r.sum(-1), torch.ones(1, T), atol=1e-5)
    d = A.layer_diagnostics(maps)
    assert set(d) == {"attn_entropy", "attn_prev", "attn_next"} and len(d["attn_prev"]) == 3


def _tiny(pre_ln: bool):
    from bertlab.config import BertConfig
    from bertlab.model import BertForPreTraining
    torch.manual_seed(0)
    c = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                   intermediate_size=64, max_position_embeddings=64, pre_ln=pre_ln)
    return BertForPreTraining(c).eval()


def test_head_math_equals_the_models_attention_post_and_pre_ln():
    from bertlab.analysis import qkv
    for pre_ln in (False, True):
        model = _tiny(pre_ln)
        ids, types = [2, 7, 9, 11, 3, 5, 3], [0, 0, 0, 0, 0, 1, 1]
        for layer in (1, 3):
            m = qkv.head_math(model, ids, types, layer, 2, 3)
            assert m.weights.shape == (7,) and abs(float(m.weights.sum()) - 1) < 1e-9
            assert float((m.weights - m.model_weights).abs().max()) < 1e-6, (pre_ln, layer)


def test_head_math_is_safe_when_requests_share_the_model():
    """The app serves one model object to concurrent requests of different lengths."""
    from concurrent.futures import ThreadPoolExecutor

    from bertlab.analysis import qkv
    model = _tiny(True)
    jobs = [([2] + list(range(5, 5 + n)) + [3], n) for n in (3, 20, 7, 40) * 8]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda j: qkv.head_math(model, j[0], [0] * len(j[0]), 2, 1, 1), jobs))
    for m, (ids, _) in zip(got, jobs):
        assert m.weights.shape == (len(ids),)
        assert float((m.weights - m.model_weights).abs().max()) < 1e-6
