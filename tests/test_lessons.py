"""The lessons: each question's checker accepts what the live model answers (computed here another
way) and refuses a wrong answer; answers are read tolerantly; every "Try it" link parses with
ui/shared/links.py against the app's own components; progress is kept and a right answer stays right."""
import pytest
import torch

from bertlab.app.lessons import LESSONS, answers
from bertlab.app.lessons import checks as C
from bertlab.app.ui.lessons import lessons_tab
from bertlab.app.ui.shared import links, models


@pytest.fixture(scope="module")
def live():
    return models.get(models.DEFAULT)


def ok(check: str, answer: str) -> bool | None:
    return C.CHECKS[check](answer, models.DEFAULT).correct


def test_the_course_is_eleven_lessons_in_order_each_with_a_checker():
    assert [x.number for x in LESSONS] == list(range(1, 12))
    assert [x.check for x in LESSONS] == ["tokens", "masking", "fill", "nsp", "attention", "embeddings",
                                          "pretrain", "finetune", "probing", "variants", "sarcasm"]
    for x in LESSONS:
        assert x.check in C.CHECKS and x.try_its and "$$" in x.explain and x.question and x.expect
    scripts = [x.script() for x in LESSONS]
    if any(scripts):  # examples/ holds lesson scripts: then each lesson's pointer names its own
        assert all(s is None or s.name.startswith(f"lesson{x.number:02d}_") for x, s in zip(LESSONS, scripts))


def test_answers_are_read_tolerantly():
    assert answers.clean("  ##Say. ") == "say" and answers.clean("“Highly”!") == "highly"
    assert answers.words("It was much better than the first one .") == "it was much better than the first one"
    assert answers.numbers("11.7M") == [(11.7e6, 0.05e6)] and answers.numbers("1,503,746")[0][0] == 1503746
    assert answers.same_number("11.7M", 11_683_584) is True
    assert answers.same_number("11,683,584", 11_683_584) is True
    assert answers.same_number("11,683,585", 11_683_584) is False  # all digits given: all must agree
    assert answers.same_number("11.6M", 11_683_584) is False
    assert answers.same_number("12M", 11_683_584) is True  # two digits: enough
    assert isinstance(answers.same_number("0.01B", 11_683_584), str)  # one digit is too rough to tell: a hint
    assert answers.same_number("no idea", 5) is False
    assert answers.integers("layer 2, head 4") == [2, 4] == answers.integers("L2H4")
    assert answers.integers("S2-S1") == [2, 1]


def test_tokens_and_masking_are_checked_against_the_tokenizer(live):
    _, tok = live
    enc = tok.encode(C.TOKENS_WORD)
    pieces = [t for t, s in zip(enc.tokens, enc.special_tokens_mask) if not s]
    assert ok("tokens", str(len(pieces))) and ok("tokens", f" {len(pieces)} pieces")
    assert ok("tokens", " ".join(pieces).upper())  # the pieces themselves, any case, ## or not
    assert ok("tokens", str(len(pieces) + 1)) is False and ok("tokens", "1") is False

    from bertlab.data import masking_lab
    from bertlab.data.masking import MASKED
    ids = tok.encode(C.MASK_TEXT).ids
    draw = masking_lab.preview(tok, ids, C.MASK_RATE, False, C.MASK_SEED)
    n = sum(r == MASKED for r in draw["rule"])
    assert n > 0 and ok("masking", str(n)) and ok("masking", str(n + 1)) is False


def test_fill_mask_is_checked_against_the_left_context_guess(live):
    model, tok = live
    ids = tok.encode(C.FILL_TEXT.replace("[MASK]", tok.id_to_token(tok.mask_token_id))).ids
    at = ids.index(tok.mask_token_id)
    with torch.no_grad():  # left context only: the words after the gap cut off, and no token sees its right
        logits = model(torch.tensor([ids[:at + 1]]), causal=True).mlm_logits[0, at]
    logits[sorted(tok.special_ids)] = -float("inf")
    left = logits.argmax().item()
    from bertlab.analysis.predict import fill_mask
    both = fill_mask(model, tok, C.FILL_TEXT, top_k=1)[0][0]["token_str"]
    word = tok.id_to_token(left)
    assert word != both, "the lesson's point: the two contexts disagree on this model"
    assert ok("fill", word.upper() + ".") and ok("fill", f"'{word}'")
    assert ok("fill", both) is False


def test_next_sentence_and_attention_are_checked_against_the_model(live):
    model, tok = live
    probs = []
    for b in C.NSP_B:
        e = tok.encode(C.NSP_A, pair=b)
        with torch.no_grad():
            probs.append(model(torch.tensor([e.ids]), torch.tensor([e.token_type_ids])).nsp_logits.softmax(-1)[0, 0].item())
    best, worst = probs.index(max(probs)), probs.index(min(probs))
    assert ok("nsp", C.NSP_B[best].upper()) and ok("nsp", str(best + 1)) and ok("nsp", C.NSP_B[best].rstrip(" ."))
    assert ok("nsp", C.NSP_B[worst]) is False and ok("nsp", str(worst + 1)) is False

    ids = tok.encode(C.ATTN_TEXT).ids
    with torch.no_grad():
        att = model(torch.tensor([ids]), output_attentions=True).attentions
    prev = {(li + 1, h + 1): a[0, h].diagonal(-1).mean().item() for li, a in enumerate(att) for h in range(a.shape[1])}
    (layer, head), share = max(prev.items(), key=lambda kv: kv[1])
    assert share > 0.5  # a real previous-token head, far from uniform
    assert ok("attention", f"layer {layer} head {head}") and ok("attention", f"L{layer}H{head}")
    other = min(prev, key=prev.get)
    assert ok("attention", f"layer {other[0]} head {other[1]}") is False and ok("attention", "no idea") is False


def test_embeddings_are_checked_against_the_last_layer(live):
    model, tok = live
    vecs = []
    for s in C.EMB_SENTENCES:
        e = tok.encode(s)
        with torch.no_grad():
            h = model(torch.tensor([e.ids]), output_hidden_states=True).hidden_states[-1][0]
        vecs.append(h[e.tokens.index(C.EMB_WORD)])
    sims = {(a + 1, b + 1): torch.cosine_similarity(vecs[a], vecs[b], dim=0).item()
            for a in range(4) for b in range(a + 1, 4)}
    (a, b) = max(sims, key=sims.get)
    lo = min(sims, key=sims.get)
    assert ok("embeddings", f"S{a} and S{b}") and ok("embeddings", f"{b}-{a}")
    assert ok("embeddings", f"S{lo[0]} and S{lo[1]}") is False


def test_sizes_are_checked_against_the_built_models(live):
    from transformers import AlbertConfig, AlbertModel

    import bertlab
    c = C.pretrain_tab.model_config(C.pretrain_tab.form_spec(**C.pretrain_tab.recipe_values(C.PRETRAIN_RECIPE)))
    n = sum(p.numel() for p in bertlab.BertForPreTraining(c).parameters())  # tied weights counted once
    assert ok("pretrain", f"{n:,}") and ok("pretrain", f"{n / 1e6:.2f}M") and ok("pretrain", f"{n + 1000:,}") is False

    with torch.device("meta"):  # transformers' own ALBERT base (the oracle), as albert-base-v2 is shaped
        albert = AlbertModel(AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
                                          num_attention_heads=12, intermediate_size=3072))
    n = sum(p.numel() for p in albert.parameters())
    assert ok("variants", f"{n:,}") and ok("variants", f"{n / 1e6:.1f} million")
    assert ok("variants", "110M") is False  # BERT base's size is not ALBERT's


def test_lora_count_follows_its_formula_on_the_model_in_use(live):
    c = live[0].config
    H, inter, r = c.hidden_size, c.intermediate_size, C.LORA["lora_rank"]
    # r (d_in + d_out) for query, key, value, attention output and both feed-forward layers, r (V + E) for
    # the word table; the new head
    n = c.num_hidden_layers * r * (4 * 2 * H + 2 * (H + inter)) + r * (c.vocab_size + c.embedding_dim) + (H * 2 + 2)
    assert ok("finetune", f"{n:,}") and ok("finetune", str(n)) and ok("finetune", f"{2 * n:,}") is False


@pytest.mark.slow
def test_probing_is_checked_against_a_probe_of_the_same_settings(live, monkeypatch):
    from bertlab.train.probing import probe
    model, tok = live
    # the tab's worker process, run here: the same job on the same arguments, without a process to start
    monkeypatch.setattr(C.probe_tab.workers, "run", lambda fn, *a, timeout=None, **kw: fn(*a, **kw))
    r = probe(model, tok, C.PROBE["task"], sample=C.PROBE["sample"], probe=C.PROBE["kind"])
    sel = [x["selectivity"] for x in r["layers"]]
    best, worst = max(range(len(sel)), key=sel.__getitem__), min(range(len(sel)), key=sel.__getitem__)
    assert ok("probing", f"layer {best}") and ok("probing", str(worst)) is False
    assert ok("probing", "layer 99") is False


def test_every_try_it_link_opens_an_existing_tab_with_its_inputs():
    import app
    demo = app.build_app()
    registered = links._links(demo)
    keys = [links.KEYS[title] for title, _ in app.TABS]
    for x in LESSONS:
        for t in x.try_its:
            href = links.url(t.tab, **t.params)
            from urllib.parse import parse_qsl, urlsplit
            link = links.parse(dict(parse_qsl(urlsplit(href).query)), registered, keys)
            assert link.tab == t.tab and t.tab in keys, (x.number, href)
            assert not link.problems, (x.number, href, link.problems)
            assert set(link.values) == set(t.params), (x.number, t.tab, set(t.params) - set(link.values))
            for name, value in t.params.items():
                got = link.values[name]
                assert got == value or str(got) == str(value) or (isinstance(value, bool) and got == value) \
                    or (isinstance(got, list) and ",".join(got) == value), \
                    (x.number, name, value, got)
    for n in (1, 4, 10):  # ?lesson=N opens lesson N on the Lessons tab
        link = links.parse({"lesson": str(n)}, registered, keys)
        assert link.tab == "lessons" and link.values == {"lesson": n}


def test_progress_is_kept_and_a_right_answer_stays_right(live):
    progress = None
    feedback, progress, line, _ = lessons_tab.check("7", 1, models.DEFAULT, progress)
    assert feedback.startswith("✗") and "0 of 11" in line and "tried, not yet right: 1" in line
    n = C.tokens("", models.DEFAULT).answer
    feedback, progress, line, _ = lessons_tab.check(n, 1, models.DEFAULT, progress)
    assert feedback.startswith("✓") and "1 of 11" in line and "rewatchable" in feedback
    _, progress, line, _ = lessons_tab.check("7", 1, models.DEFAULT, progress)  # a later slip
    assert "1 of 11" in line and progress["answered"]["1"]["correct"]
    shown = lessons_tab.show(1, progress)
    assert shown[0].startswith("## Lesson 1 of 11") and 'target="_blank"' in shown[1] and "?tab=tokenize" in shown[1]
    assert shown[9]["choices"][0][0].endswith("✓") and shown[10]["interactive"] is False  # no "Previous" on lesson 1
    assert lessons_tab.step(11, +1) == 11 and lessons_tab.step(10, +1) == 11 and lessons_tab.step(3, -1) == 2 and lessons_tab.step("x", 1) == 2
    with pytest.raises(Exception, match="Type an answer"):
        lessons_tab.check("  ", 1, models.DEFAULT, progress)
    assert lessons_tab.show(99, None)[0].startswith("## Lesson 1 of 11")  # a bad number: the first lesson


def test_lesson_8s_ia3_figures_are_what_add_ia3_trains_on_bert_base():
    """IA3 scales four vectors a layer (keys, values, the attention output's input, the feed-forward's
    inner activations), as peft does for BERT: the lesson's 5,376 a layer and 64,512 on bert-base."""
    import torch

    from bertlab.app.lessons.course_b import FINETUNE
    from bertlab.config import BertConfig
    from bertlab.methods.lowrank import add_ia3
    from bertlab.model import BertModel
    with torch.device("meta"):
        model = BertModel(BertConfig())  # bert-base's shape
    add_ia3(model)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    layer = trained // model.config.num_hidden_layers
    assert (trained, layer) == (64_512, 5_376)
    assert f"{layer:,} a layer and {trained:,} in all on bert-base" in FINETUNE.explain


def test_the_taught_positions_figure_is_counted_on_the_masking_and_stated_in_race_and_lesson_10():
    """BERT's loss learns from the 15 % it picks, ELECTRA's discriminator from every token: 6.7x (issue 32,
    item 8). The count of mask_tokens' picks matches the analytic expectation: (T - 2) r, plus the one a
    row that drew nothing is given, (1 - r)^(T - 2)."""
    from bertlab.app.lessons.course_b import VARIANTS
    from bertlab.app.ui.training import race_tab
    from bertlab.data.masking import taught_per_example
    for T in (32, 128):
        expected = (T - 2) * 0.15 + 0.85 ** (T - 2)
        assert abs(taught_per_example(T, 0.15) - expected) < 0.05 * expected
    n = taught_per_example(32, 0.15)
    assert f"learns from {n:.1f} of them" in race_tab.EXPLAIN and f"**{32 / n:.1f}× as many**" in race_tab.EXPLAIN
    assert "1 / 0.15 ≈ 6.7× as many" in VARIANTS.explain.replace("\n", " ")
