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
