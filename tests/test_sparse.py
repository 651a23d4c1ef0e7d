"""Sparse attention (issue 32, item 6): the patterns against their definitions (a closed-form band count,
global rows and columns, r random keys a row), the FLOPs against sizing.flops's attention terms, and the
share of a head's attention a pattern keeps."""
import pytest
import torch

from bertlab.analysis import sparse as S
from bertlab.analysis.sizing import flops
from bertlab.config import preset


@pytest.mark.parametrize("T,w", [(1, 0), (5, 0), (13, 2), (40, 7), (512, 256), (600, 1000)])
def test_the_band_has_the_closed_form_count(T, w):
    keep = S.pattern(T, "local", window=w)
    assert int(keep.sum()) == S.band_pairs(T, w)
    assert torch.equal(keep, keep.T) and bool(keep.diagonal().all())  # each token sees itself


def test_global_tokens_see_and_are_seen_by_all():
    keep = S.pattern(20, "longformer", window=1, n_global=2)
    assert keep[:2].all() and keep[:, :2].all()
    assert int(keep.sum()) == S.longformer_pairs(20, 1, 2)
    for T, w, g in ((7, 0, 1), (50, 4, 3), (9, 20, 9)):
        assert int(S.pattern(T, "longformer", window=w, n_global=g).sum()) == S.longformer_pairs(T, w, g)


def test_bigbird_adds_r_random_keys_a_row_outside_the_rest():
    T, r = 30, 3
    base = S.pattern(T, "longformer", window=2, n_global=1)
    keep = S.pattern(T, "bigbird", window=2, n_global=1, n_random=r, seed=7)
    extra = keep & ~base
    assert (base <= keep).all()
    free = (~base).sum(-1)
    assert torch.equal(extra.sum(-1), torch.minimum(free, torch.tensor(r)))  # r each, or all that are left
    assert not torch.equal(keep, S.pattern(T, "bigbird", window=2, n_global=1, n_random=r, seed=8))  # seeded
    assert torch.equal(keep, S.pattern(T, "bigbird", window=2, n_global=1, n_random=r, seed=7))


def test_flops_replace_only_the_attention_terms():
    c = preset("base")
    full = flops(c, 512, heads=False)
    r = S.flops_at(c, 512, "full")
    assert r["total_flops"] == full["total"] and r["saved"] == 0
    w = S.flops_at(c, 512, "local", window=64)
    pairs = S.band_pairs(512, 64)
    L, H = c.num_hidden_layers, c.hidden_size
    assert w["attention_flops"] == L * 2 * 2 * pairs * H  # scores and values: 2·H FLOPs a pair each
    assert w["total_flops"] == full["total"] - full["attention_scores"] - full["attention_values"] + w["attention_flops"]


def test_long_inputs_are_where_sparsity_pays():
    rows = {(r["tokens"], r["pattern"]): r for r in S.flops_table(preset("base"))}
    assert rows[(512, "longformer")]["saved"] < 0.05  # attention is ~10 % of BERT-base's work at 512
    assert rows[(4096, "longformer")]["saved"] > 0.35  # and about half at 4,096
    assert rows[(4096, "longformer")]["pairs"] == S.longformer_pairs(4096, 256, 1)
    assert rows[(4096, "bigbird")]["pairs"] == S.longformer_pairs(4096, 96, 128) + 192 * (4096 - 128)  # global rows
    # see everything already: 192 random keys for each of the other rows


def test_coverage_is_the_attention_mass_inside():
    torch.manual_seed(0)
    att = torch.rand(2, 3, 6, 6).softmax(-1)  # (L, A, T, T)
    assert torch.allclose(S.coverage(att, S.pattern(6, "full")), torch.ones(2, 3))
    diag = torch.eye(6, dtype=torch.bool)
    assert torch.allclose(S.coverage(att, diag), att.diagonal(dim1=-2, dim2=-1).mean(-1))


def test_mistakes_are_said():
    with pytest.raises(ValueError, match="pattern must be one of"):
        S.pattern(5, "star")
    with pytest.raises(ValueError, match="negative"):
        S.pattern(5, "local", window=-1)


def test_the_sparse_view_on_the_shipped_model():
    """The sub-tab's numbers are coverage() and flops_table() of the same run; echoed names are escaped."""
    from bertlab.analysis import attention_views as av
    from bertlab.app.ui.shared import models
    from bertlab.app.ui.shared.common import load_model
    from bertlab.app.ui.text import attention_sparse as A
    text = "the cat sat on the mat because it was tired ."
    form = dict(text=text, pair="", layer=2, head=1, kind="longformer", window=2, n_global=1, n_random=0, seed=0,
                choice=models.DEFAULT)
    fig, said, table, raw = A.analyse(**form)
    model, tok = load_model(models.DEFAULT)
    run = av.run_attention(model, tok, text, "")
    keep = S.pattern(len(run.tokens), "longformer", window=2, n_global=1)
    cover = S.coverage(run.attentions, keep)
    assert raw["pairs"] == int(keep.sum()) and torch.allclose(torch.tensor(raw["coverage"]), cover, atol=1e-6)
    assert f"**{float(cover[1, 0]):.0%}** of this head" in said and "Longformer" in said
    assert len(table) == 8 and table[5][2] == f"{S.flops_table(preset('base'))[5]['saved']:.1%}"
    assert len(fig.data) == 3 and [list(r) for r in fig.data[0].z] == keep.int().tolist()
    full = A.analyse(**(form | dict(kind="full")))[3]
    assert torch.allclose(torch.tensor(full["coverage"]), torch.ones_like(cover), atol=1e-5)
