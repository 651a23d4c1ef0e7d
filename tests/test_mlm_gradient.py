"""The gradient of the masked-LM loss at the logits (issue 44, item 7): the formula (p - onehot)/M at the
M labelled positions and 0 elsewhere is autograd's, on random logits against F.cross_entropy and on the
shipped model's own loss; the Masking lab's view and lesson 2 state the numbers the code computes."""
import re

import pytest
import torch
import torch.nn.functional as F

from bertlab.analysis import mlm_gradient as G
from bertlab.app.lessons import checks as C
from bertlab.app.ui.shared import links, models
from bertlab.data import masking_lab


def test_the_formula_is_cross_entropys_gradient_on_random_logits():
    """Against F.cross_entropy with ignore_index -100 (the trainer's loss), in fp64: equal within 1e-12;
    zero rows where the label is -100; each labelled row sums to 0; 1/M scaling."""
    g = torch.Generator().manual_seed(0)
    z = (3 * torch.randn(12, 50, generator=g, dtype=torch.float64)).requires_grad_()
    y = torch.randint(0, 50, (12,), generator=g)
    y[[0, 2, 3, 7, 11]] = -100  # M = 7
    (auto,) = torch.autograd.grad(F.cross_entropy(z, y, ignore_index=-100), z)
    mine = G.analytic_grad(z.detach(), y)
    assert (mine - auto).abs().max() < 1e-12
    keep = y != -100
    assert torch.equal(auto[~keep], torch.zeros_like(auto[~keep]))  # exactly 0, not small
    assert auto[keep].sum(-1).abs().max() < 1e-12
    p = z.detach().softmax(-1)
    onehot = F.one_hot(y[keep], 50).double()
    assert torch.allclose(7 * auto[keep], p[keep] - onehot, atol=1e-12)  # (p - onehot) / M, M = 7
    one = torch.full_like(y, -100)
    one[4] = y[4]  # the same position alone: M = 1, so its gradient is 7 times larger
    (alone,) = torch.autograd.grad(F.cross_entropy(z, one, ignore_index=-100), z)
    assert torch.allclose(alone[4], 7 * auto[4], atol=1e-12)
    with pytest.raises(ValueError, match="no position has a label"):
        G.analytic_grad(z.detach(), torch.full_like(y, -100))


@pytest.fixture(scope="module")
def lesson_draw():
    """The shipped model's gradient on lesson 2's draw (its text, rate and seed)."""
    model, tok = models.get(models.DEFAULT)
    enc = tok.encode(C.MASK_TEXT)
    draw = masking_lab.preview(tok, enc.ids, C.MASK_RATE, False, C.MASK_SEED)
    return model, tok, enc, draw, G.mlm_gradient(model, draw["input_ids"], draw["labels"], enc.token_type_ids)


def test_autograd_on_the_shipped_model_matches_the_formula(lesson_draw):
    model, tok, enc, draw, res = lesson_draw
    from bertlab.analysis.draw_score import score_draw
    mean = score_draw(model, draw["input_ids"], draw["labels"], draw["rule"], enc.token_type_ids)["summary"]["mean_loss"]
    assert abs(res["loss"] - mean) < 1e-5  # the trainer's loss is the lab's mean over the selected positions
    sel = [i for i, x in enumerate(draw["labels"]) if x != -100]
    assert res["selected"] == sel and res["M"] == len(sel) >= 2 and res["T"] == len(enc.ids)
    assert res["max_abs_diff"] < 1e-6  # fp32, every one of the T x V entries
    assert res["max_abs_diff"] == float((res["autograd"] - res["analytic"]).abs().max())
    assert res["unselected_max"] == 0.0 and all(res["norms"][i] == 0.0 for i in range(res["T"]) if i not in sel)
    assert all(res["norms"][i] > 0 for i in sel)
    assert max(abs(s) for s in res["row_sums"]) < 1e-5  # 0 up to fp32 rounding over 8,192 entries
    p = res["logits"][sel].double().softmax(-1)
    onehot = F.one_hot(res["labels"][sel], res["V"]).double()
    assert torch.allclose(res["M"] * res["autograd"][sel].double(), p - onehot, atol=1e-5)
    for i in sel:
        top = G.top_entries(res, i, k=6)
        assert top[0]["id"] == draw["labels"][i] and top[0]["onehot"] == 1 and top[0]["p_minus_onehot"] < 0
        assert all(e["p_minus_onehot"] > 0 and not e["onehot"] for e in top[1:])
        assert abs(top[0]["p_minus_onehot"]) >= max(e["p_minus_onehot"] for e in top[1:])
        assert all(abs(e["grad"] - e["autograd"]) < 1e-6 for e in top)
    assert not model.training and all(p.grad is None for p in model.parameters())  # the shared model untouched


def test_what_reaches_the_tied_word_table(lesson_draw):
    """The output layer's share reaches every row (every p > 0); the input's only the pieces seen; the
    output share's rows sum to 0 (each p - onehot does); the rows pushed hardest include the originals."""
    model, tok, enc, draw, res = lesson_draw
    assert res["tied"] and res["out_rows"] == res["V"] == tok.vocab_size
    assert res["in_rows"] == res["input_pieces"] == len(set(draw["input_ids"])) and res["in_outside_input"] == 0.0
    assert res["out_column_sum"] < 1e-4 * float(res["out_row_norms"].max())
    rows = G.top_rows(res, 8)
    coef = res["autograd"].sum(0)
    assert [r["id"] for r in rows] == res["out_row_norms"].topk(8).indices.tolist()
    assert all(r["coefficient"] == float(coef[r["id"]]) for r in rows)
    label = max(res["selected"], key=lambda i: res["norms"][i])  # the biggest push: its original's row is pulled in
    assert any(r["id"] == draw["labels"][label] and r["coefficient"] < 0 for r in rows)


def test_the_view_says_the_codes_numbers():
    from bertlab.app.ui.text import masking_gradient as V
    text, seed, k = V.EXAMPLES[1]
    said, fig, table, rows_said, rows, data = V.gradient(text, C.MASK_RATE, False, seed, k, None)
    model, tok = models.get(None)
    enc = tok.encode(text)
    draw = masking_lab.preview(tok, enc.ids, C.MASK_RATE, False, seed)
    res = G.mlm_gradient(model, draw["input_ids"], draw["labels"], enc.token_type_ids)
    assert f"is **{res['max_abs_diff']:.1e}** (fp32)" in said and res["max_abs_diff"] < 1e-6
    assert f"{res['M']} of {res['T']} positions selected" in said and "exactly 0" in said
    assert f"loss (their mean) = **{res['loss']:.3f}**" in said
    pos = res["selected"][k - 1]
    entries = G.top_entries(res, pos, V.TOP_K)
    assert f"position {pos}, original <code>{tok.id_to_token(draw['labels'][pos])}</code>" in said
    assert list(table["piece"]) == [tok.id_to_token(e["id"]) for e in entries]
    assert list(table["p − onehot"]) == [f"{e['p_minus_onehot']:+.4f}" for e in entries]
    bars = sorted(y for b in fig.data for y in b.y)  # one bar a position, its height the gradient's norm
    assert bars == pytest.approx(sorted(res["norms"]), abs=1e-7)
    assert f"**{res['out_rows']:,} of {res['V']:,} rows**" in rows_said and f"reaches **{res['in_rows']}**" in rows_said
    assert data["max_abs_diff"] == res["max_abs_diff"] and len(data["positions"]) == res["T"]
    # past the last selected piece: the last one, said so; a bad number is one message naming the field
    said = V.gradient(text, C.MASK_RATE, False, seed, 99, None)[0]
    assert f"this draw selects {res['M']}: the" in said and f"position {res['selected'][-1]}," in said
    import gradio as gr
    for bad in (0, "abc", None):
        with pytest.raises(gr.Error, match="selected piece to inspect"):
            V.gradient(text, C.MASK_RATE, False, seed, bad, None)
    for draw_text in ("", "😀 😀"):  # as the draw above changes, its mistakes are a note here (the lab says them)
        assert "Fix the draw above first" in V.rerun(draw_text, C.MASK_RATE, False, seed, 1, None)[0]
    with pytest.raises(gr.Error, match="selected piece to inspect"):  # this view's own box speaks up
        V.rerun(text, C.MASK_RATE, False, seed, 0, None)


def test_the_examples_say_what_the_model_does():
    """The examples' labels describe the shipped model's numbers: sure and right, far off, torn."""
    from bertlab.app.ui.text import masking_gradient as V
    seen = []  # (rule, p of the original, p of the first favourite)
    for text, seed, k in V.EXAMPLES:
        data = V.gradient(text, C.MASK_RATE, False, seed, k, None)[-1]
        at, entries = data["inspected"]["position"], data["inspected"]["entries"]
        seen.append((data["positions"][at]["rule"], entries[0]["p"], entries[1]["p"]))
    (rule, sure, _), (_, far, _), (_, torn, rival) = seen
    assert rule == "kept" and "(kept)" in V.EXAMPLE_LABELS[0], seen
    assert sure > 0.9 and far < 0.05 and 0.2 < torn and 0.2 < rival, seen


def test_lesson_2_derives_it_and_links_to_the_view():
    from bertlab.app.lessons.course_a import MASK_RATE, MASKING
    text = MASKING.explain.replace("\n", " ")
    assert r"\frac{1}{|M|}\left(p_{i,w} - [w = x_i]\right)" in text and "$-100$" in text
    assert f"only the {MASK_RATE:.0%} selected" in text and f"1 / {MASK_RATE:.2f} ≈ {1 / MASK_RATE:.1f} tokens" in text
    link = next(t for t in MASKING.try_its if t.params.get("view") == "gradient")
    assert re.search(r"view=gradient", links.url(link.tab, **link.params)) and link.params["position"] >= 1
