"""Dynamic MLM masking: rates, the 80/10/10 split, specials, whole words, determinism, errors."""
import pytest
import torch

from bertlab.data.masking import (
    KEPT,
    MASKED,
    NOT_SELECTED,
    RANDOM,
    continuation_table,
    mask_tokens,
    special_tokens_mask,
    word_ids_from_pieces,
)

V, MASK = 1000, 4
ORDINARY = torch.arange(5, V)  # what special_token_ids(tok).random is for specials 0..4


def batch(B=1200, T=256, seed=0):
    """Rows of random ordinary ids framed by [CLS] ... [SEP] and right-padded to T."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)  # (B, T)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    pos = torch.arange(T)
    ids[:, 0] = 2
    ids[torch.arange(B), lengths - 1] = 3
    ids[pos >= lengths[:, None]] = 0
    return ids, special_tokens_mask(ids, [0, 1, 2, 3, 4])


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_rates_and_80_10_10(rate):
    ids, special = batch()
    eligible = ~special
    assert eligible.sum() >= 200_000
    m = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, rate=rate, generator=gen())
    sel = m.rule != NOT_SELECTED
    n = sel.sum().item()
    assert abs(n / eligible.sum().item() - rate) < 0.005
    for r, frac in ((MASKED, 0.8), (RANDOM, 0.1), (KEPT, 0.1)):
        assert abs((m.rule == r).sum().item() / n - frac) < 0.01
    assert not (sel & special).any()  # specials and padding never selected
    assert torch.equal(m.labels != -100, sel) and torch.equal(m.labels[sel], ids[sel])
    assert (m.input_ids[m.rule == MASKED] == MASK).all()
    assert (m.input_ids[m.rule == RANDOM] >= 5).all() and (m.input_ids[m.rule == RANDOM] < V).all()
    assert torch.equal(m.input_ids[(m.rule == KEPT) | ~sel], ids[(m.rule == KEPT) | ~sel])
    assert m.rule.dtype == torch.int8 and m.labels.dtype == torch.long


def test_custom_fractions():
    ids, special = batch(300)
    args = dict(mask_token_id=MASK, random_ids=ORDINARY, generator=gen())
    m = mask_tokens(ids, special, mask_frac=1.0, random_frac=0.0, **args)
    assert set(m.rule.unique().tolist()) == {NOT_SELECTED, MASKED}
    m = mask_tokens(ids, special, mask_frac=0.0, random_frac=0.0, **args)
    assert torch.equal(m.input_ids, ids) and (m.labels != -100).any()  # all kept: labels only


def test_random_replacements_only_from_random_ids():
    ids, special = batch(400)
    table = torch.tensor([7, 500, 999])  # e.g. a vocabulary whose ordinary ids have gaps
    m = mask_tokens(ids, special, mask_token_id=MASK, random_ids=table, rate=0.5, generator=gen())
    drawn = m.input_ids[m.rule == RANDOM]
    assert len(drawn) > 3000 and set(drawn.unique().tolist()) == {7, 500, 999}
    # a contiguous table draws exactly what torch.randint(5, V) drew before the table existed,
    # so runs on trained vocabularies (specials 0..4) keep their masks bit for bit
    a = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, generator=gen(3))
    g = gen(3)
    torch.rand(ids.shape, generator=g), torch.rand(ids.shape, generator=g)  # selection and rule draws
    old = torch.randint(5, V, ids.shape, generator=g)
    assert torch.equal(a.input_ids[a.rule == RANDOM], old[a.rule == RANDOM])


def test_deterministic_with_generator():
    ids, special = batch(64)
    a = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, generator=gen(7))
    b = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, generator=gen(7))
    c = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, generator=gen(8))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert torch.equal(a.rule, b.rule)
    assert not torch.equal(a.rule, c.rule)


def test_at_least_one_per_sequence():
    ids = torch.tensor([[2, 10, 11, 3, 0, 0], [2, 12, 3, 0, 0, 0],
                        [2, 3, 0, 0, 0, 0], [2, 10, 11, 12, 13, 3]])
    special = special_tokens_mask(ids, [0, 1, 2, 3, 4])
    for seed in range(50):
        m = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, rate=1e-6, generator=gen(seed))
        assert (m.rule != NOT_SELECTED).sum(1).tolist() == [1, 1, 0, 1]  # row 2 has nothing to mask
        assert not ((m.rule != NOT_SELECTED) & special).any()


def test_single_sequence_1d():
    ids = torch.tensor([2, 10, 11, 12, 3])
    m = mask_tokens(ids, special_tokens_mask(ids, [2, 3]), mask_token_id=MASK, random_ids=ORDINARY, generator=gen())
    assert m.input_ids.shape == m.labels.shape == m.rule.shape == (5,)
    assert m.rule[0] == m.rule[-1] == NOT_SELECTED and (m.rule != NOT_SELECTED).any()


def test_whole_word_masking():
    g = gen(1)
    B, T = 400, 128
    word_len = torch.randint(1, 4, (B, T), generator=g)  # words of 1-3 pieces
    word_ids = torch.full((B, T), -1)
    for b in range(B):
        w, t = 0, 1
        while t < T - 1:
            n = min(int(word_len[b, t]), T - 1 - t)
            word_ids[b, t:t + n] = w
            w, t = w + 1, t + n
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    special = word_ids < 0
    m = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=word_ids, generator=gen(2))
    sel = m.rule != NOT_SELECTED
    n_words = n_sel_words = 0
    for b in range(0, B, 7):
        for w in word_ids[b].unique().tolist():
            if w < 0:
                continue
            r = m.rule[b][word_ids[b] == w]
            assert (r == r[0]).all()  # same selection AND one rule for every piece of a word
            n_words += 1
            n_sel_words += int(r[0] != NOT_SELECTED)
    assert abs(sel.sum().item() / (~special).sum().item() - 0.15) < 0.01  # token rate ~ word rate
    assert abs(n_sel_words / n_words - 0.15) < 0.03
    assert not (sel & special).any()
    # a word id restarting after [SEP] (HF's word_ids for pairs) is still a different word
    wid = torch.tensor([[-1, 0, 0, 1, -1, 0, 1, -1]])
    ids1 = torch.tensor([[2, 10, 11, 12, 3, 13, 14, 3]])
    for seed in range(20):
        m = mask_tokens(ids1, wid < 0, mask_token_id=MASK, random_ids=ORDINARY, word_ids=wid, rate=0.5,
                        generator=gen(seed))
        assert m.rule[0, 1] == m.rule[0, 2]
        if m.rule[0, 1] != m.rule[0, 5]:
            break
    else:
        pytest.fail("the first word of A and of B were always masked together")


def test_word_ids_from_pieces():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing", "##ed", "fun"]
    table = continuation_table(vocab)
    ids = torch.tensor([[2, 5, 6, 8, 3, 5, 7, 3, 0]])  # [CLS] play ##ing fun [SEP] play ##ed [SEP] [PAD]
    special = special_tokens_mask(ids, [0, 1, 2, 3, 4])
    assert word_ids_from_pieces(ids, table, special).tolist() == [[-1, 0, 0, 1, -1, 2, 2, -1, -1]]


def test_special_tokens_mask():
    ids = torch.tensor([[2, 7, 3, 0], [2, 1, 9, 3]])
    T, F = True, False
    assert special_tokens_mask(ids, {0, 2, 3}).tolist() == [[T, F, T, T], [T, F, F, T]]


@pytest.mark.parametrize("kw, msg", [
    (dict(rate=0.0), "rate"), (dict(rate=1.5), "rate"),
    (dict(mask_frac=0.8, random_frac=0.3), "mask_frac \\+ random_frac"),
    (dict(mask_frac=-0.1), "mask_frac"), (dict(mask_token_id=-1), "mask_token_id"),
    (dict(random_ids=torch.arange(0)), "random"), (dict(random_ids=ORDINARY.int()), "random_ids"),
])
def test_bad_arguments(kw, msg):
    ids, special = batch(2, 8)
    args = dict(mask_token_id=MASK, random_ids=ORDINARY) | kw
    with pytest.raises(ValueError, match=msg):
        mask_tokens(ids, special, **args)


def test_bad_shapes():
    ids, special = batch(2, 8)
    with pytest.raises(ValueError, match="special_mask"):
        mask_tokens(ids, special[:, :4], mask_token_id=MASK, random_ids=ORDINARY)
    with pytest.raises(ValueError, match="special_mask"):
        mask_tokens(ids, special.long(), mask_token_id=MASK, random_ids=ORDINARY)
    with pytest.raises(ValueError, match="word_ids"):
        mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=torch.zeros(2, 7).long())
    with pytest.raises(ValueError, match="integer"):
        mask_tokens(ids.float(), special, mask_token_id=MASK, random_ids=ORDINARY)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        mask_tokens(ids[None], special[None], mask_token_id=MASK, random_ids=ORDINARY)


# ---- SpanBERT's spans (issue 32, item 5) ---------------------------------------------------------
def test_span_lengths_follow_spanberts_truncated_geometric():
    """scipy's geometric(0.2) cut to 1..10 and renormalised is the oracle: mean 3.8, each length's share."""
    from scipy import stats

    from bertlab.data.masking import SPAN_MAX, SPAN_P, span_lengths
    dist = stats.geom(SPAN_P)
    pmf = [dist.pmf(k) / dist.cdf(SPAN_MAX) for k in range(1, SPAN_MAX + 1)]
    mean = sum(k * p for k, p in zip(range(1, SPAN_MAX + 1), pmf))
    assert mean == pytest.approx(3.8, abs=0.01)
    ls = span_lengths((400_000,), gen(3))
    assert ls.min() == 1 and ls.max() == SPAN_MAX
    assert ls.float().mean().item() == pytest.approx(mean, abs=0.02)
    share = torch.bincount(ls, minlength=SPAN_MAX + 1)[1:].float() / len(ls)
    assert share.tolist() == pytest.approx(pmf, abs=0.004)


def test_spans_spend_exactly_the_rates_budget_per_row():
    """issue 42, item 4: SpanBERT samples spans until 15 % of the sequence is masked. Tokens as words: exactly
    round(rate × eligible) per row, at every length and rate; words of 1-3 pieces: whole words, within one
    piece of it (two where a one-token budget can only take a three-piece word), never a whole run forced."""
    g = torch.Generator().manual_seed(5)
    B, T = 3000, 96
    ids = torch.randint(10, 100, (B, T), generator=g)
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    special = torch.arange(T)[None] >= lengths[:, None]
    special[:, 0] = True
    special[torch.arange(B), lengths - 1] = True
    n = (~special).sum(1)
    for rate in (0.15, 0.3, 0.05):
        sel = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, spans=True, rate=rate,
                          generator=gen(2)).labels != -100
        budget = (rate * n.double()).round().long().clamp(min=1) * (n > 0)
        assert torch.equal(sel.sum(1), budget), rate
        assert (sel & special).sum() == 0
    pieces = torch.randint(1, 4, (B, T), generator=g).cumsum(1)  # words of 1-3 pieces
    words = torch.searchsorted(pieces, torch.arange(T).expand(B, T).contiguous(), right=True)
    words = torch.where(special, torch.full_like(words, -1), words)
    sel = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=words, spans=True,
                      generator=gen(3)).labels != -100
    budget = (0.15 * n.double()).round().long().clamp(min=1)
    miss = sel.sum(1) - budget
    assert miss.abs().max() <= 2 and miss[budget >= 2].abs().max() <= 1
    assert abs(sel.sum().item() / n.sum().item() - 0.15) < 0.01
    for r in range(100):  # whole words only
        for w in words[r][words[r] >= 0].unique():
            assert sel[r][words[r] == w].all() or not sel[r][words[r] == w].any()


def test_spans_select_whole_runs_of_words_at_the_rate():
    ids, special = batch()
    g = torch.Generator().manual_seed(0)
    # words of 1-3 pieces: piece k of a row starts a word when the draw says so
    starts = torch.rand(ids.shape, generator=g) < 0.5
    words = (starts.long().cumsum(1) - 1).clamp(min=0)
    words = torch.where(special, torch.full_like(words, -1), words)
    m = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=words, spans=True,
                    generator=gen(1))
    sel = m.labels != -100
    eligible = ~special
    assert (sel & ~eligible).sum() == 0
    assert sel.sum().item() / eligible.sum().item() == pytest.approx(0.15, abs=0.01)
    for r in range(50):  # a word is selected whole, and one rule holds for a word
        for w in words[r][words[r] >= 0].unique():
            at = words[r] == w
            assert sel[r][at].all() or not sel[r][at].any()
    run = lambda s: (s.int().sum() / ((s[:, 1:].int() > s[:, :-1].int()).sum() + s[:, 0].int().sum())).item()  # noqa: E731
    plain = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=words, generator=gen(1))
    assert run(sel) > 2 * run(plain.labels != -100)  # runs of several words, not single words
    again = mask_tokens(ids, special, mask_token_id=MASK, random_ids=ORDINARY, word_ids=words, spans=True,
                        generator=gen(1))
    assert torch.equal(again.labels, m.labels) and torch.equal(again.input_ids, m.input_ids)
