"""What BERT knows (issue 44, item 9): the shipped factual cloze prompts, precision@k against a model built to
know some answers and against fill_mask, out-of-vocabulary answers, the view's statements and the CLI."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining
from bertlab.analysis import facts as F
from bertlab.analysis.predict import fill_mask

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
             max_position_embeddings=24)


def test_the_shipped_prompts_each_have_one_mask_and_a_one_word_answer():
    lines = F.FACTS_FILE.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    assert "bertlab" in head["about"] and re.search(r"20\d\d-\d\d-\d\d", head["about"])  # who wrote it, and when
    rows = [json.loads(line) for line in lines[1:]]
    assert 35 <= len(rows) <= 45 and 5 <= len(head["relations"]) <= 8
    for r in rows:
        assert r["cloze"].count("[MASK]") == 1 and len(F.MASK_RE.findall(r["cloze"])) == 1, r
        assert re.fullmatch(r"[a-z]+", r["answer"]) and r["relation"] in head["relations"], r
    assert len({r["cloze"] for r in rows}) == len(rows)
    per = {rel: sum(r["relation"] == rel for r in rows) for rel in head["relations"]}
    assert min(per.values()) >= 3, per
    assert F.load() == (head["relations"], rows)


def test_a_bad_facts_file_is_refused(tmp_path):
    head = json.dumps({"about": "test", "relations": {"x": "a test"}})
    for line, said in [({"relation": "x", "cloze": "[MASK] and [MASK] .", "answer": "a"}, "exactly one"),
                       ({"relation": "x", "cloze": "the [MASK] .", "answer": "two words"}, "one word"),
                       ({"relation": "y", "cloze": "the [MASK] .", "answer": "a"}, "not described")]:
        (tmp_path / "f.jsonl").write_text(head + "\n" + json.dumps(line) + "\n")
        with pytest.raises(ValueError, match=said):
            F.load(tmp_path / "f.jsonl")
    with pytest.raises(ValueError, match="no relation 'nope'.*capital"):
        F.check_relation("nope", F.load()[0])


@pytest.fixture(scope="module")
def tiny(vocab_tokenizer):
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)).eval()


def write(path, facts):
    rel = sorted({r for r, _, _ in facts})
    path.write_text("\n".join([json.dumps({"about": "test", "relations": {r: f"about {r}" for r in rel}})] +
                              [json.dumps({"relation": r, "cloze": p, "answer": a}) for r, p, a in facts]) + "\n")
    return path


def test_precision_at_k_by_hand_on_a_model_made_to_know_some_answers(tmp_path, tiny, vocab_tokenizer):
    """The masked-LM head's bias makes 'good' every gap's first guess and 'bad' its second; 'boring' is pushed
    to the bottom, and 'zebra' is no piece of this vocabulary (the tokenizer spells it from letters)."""
    tok = vocab_tokenizer
    model = BertForPreTraining(tiny.config).eval()
    model.load_state_dict(tiny.state_dict())
    with torch.no_grad():
        bias = model.cls.predictions.bias
        for word, b in (("good", 100.0), ("bad", 50.0), ("boring", -100.0)):
            bias[tok.token_to_id(word)] = b
    path = write(tmp_path / "f.jsonl", [("x", "the film was [MASK] .", "good"), ("x", "the plot was [MASK] .", "bad"),
                                        ("x", "the acting was [MASK] .", "boring"),
                                        ("y", "i love this [MASK] .", "zebra"), ("y", "it was [MASK] !", "good")])
    assert F.gold_id(tok, "the film was [MASK] .", "good") == tok.token_to_id("good")
    assert F.gold_id(tok, "i love this [MASK] .", "zebra") is None
    res = F.score(model, tok, path=path)
    by = {r["relation"]: r for r in res["relations"]}
    assert (by["x"]["p_at_1"], by["x"]["p_at_10"], by["x"]["out_of_vocab"]) == (1 / 3, 2 / 3, 0)
    assert (by["y"]["p_at_1"], by["y"]["p_at_10"], by["y"]["out_of_vocab"]) == (1 / 2, 1 / 2, 1)
    assert (res["overall"]["p_at_1"], res["overall"]["p_at_10"], res["overall"]["out_of_vocab"]) == (2 / 5, 3 / 5, 1)
    ranks = [r["rank"] for r in res["rows"]]
    assert ranks[:2] == [1, 2] and ranks[2] > 10 and ranks[3] is None and ranks[4] == 1
    assert res["rows"][3]["prob"] == 0.0 and not res["rows"][3]["in_vocab"]
    only_y = F.score(model, tok, "y", path=path)  # one relation: its own rows and numbers
    assert [r["relation"] for r in only_y["relations"]] == ["y"] and len(only_y["rows"]) == 2
    assert only_y["overall"] == {k: by["y"][k] for k in ("prompts", "p_at_1", "p_at_10", "out_of_vocab")}


def test_every_row_agrees_with_fill_mask(tmp_path, tiny, vocab_tokenizer):
    """On a random model: answers chosen from fill_mask's own list at known places (1st, within the first
    ten, further down) come back with those ranks and fill_mask's scores, each prompt's guesses are
    fill_mask's, and precision@k is the share placed within the first k."""
    tok, facts, placed = vocab_tokenizer, [], []
    for rel, prompt in (("x", "the film was [MASK] ."), ("x", "the plot was [MASK] ."), ("y", "i would [MASK] it .")):
        ranked = fill_mask(tiny, tok, prompt, top_k=100)[0]
        words = [(i, c) for i, c in enumerate(ranked, 1) if c["token_str"].isalpha()]
        for i, c in (words[0], words[4], words[20]):
            facts.append((rel, prompt, c["token_str"]))
            placed.append((i, c["score"], [c["token_str"] for c in ranked[:F.SHOWN]]))
    res = F.score(tiny, tok, path=write(tmp_path / "f.jsonl", facts))
    for r, (i, p, top) in zip(res["rows"], placed):
        assert (r["rank"], r["guesses"]) == (i, top) and r["prob"] == pytest.approx(p, abs=1e-6), r
    ranks = [i for i, _, _ in placed]
    assert min(ranks) == 1 and max(ranks) > 10
    for k in F.KS:
        assert res["overall"][f"p_at_{k}"] == pytest.approx(sum(i <= k for i in ranks) / len(ranks))
        x = [i for (rel, _, _), i in zip(facts, ranks) if rel == "x"]
        assert res["relations"][0][f"p_at_{k}"] == pytest.approx(sum(i <= k for i in x) / len(x))


@pytest.fixture(scope="module")
def shipped():
    import bertlab
    model, tok = bertlab.load_pretrained()
    return model, tok, F.score(model, tok)


def test_the_view_states_the_shipped_models_own_numbers(shipped):
    from bertlab.app.ui.shared import links
    from bertlab.app.ui.text import facts_view
    _, tok, res = shipped
    view, raw = facts_view.facts_view("all", None)  # the app's copy of the model (fast.optimize): float noise
    assert raw["relations"] == res["relations"] and raw["overall"] == res["overall"]
    for a, b in zip(raw["rows"], res["rows"]):
        assert (a["rank"], a["guesses"]) == (b["rank"], b["guesses"])
        assert a["prob"] == pytest.approx(b["prob"], rel=1e-3)
    text = re.sub(r"<[^>]+>", "", view)
    hit1 = sum(r["rank"] == 1 for r in res["rows"])
    hit10 = sum(r["rank"] is not None and r["rank"] <= 10 for r in res["rows"])
    o = res["overall"]
    share = facts_view._share
    assert f"{hit1} of {o['prompts']} facts answered with the first guess (P@1 {share(o['p_at_1'])})" in text
    assert f"{hit10} with the answer among the first ten (P@10 {share(o['p_at_10'])})" in text
    n = o["prompts"]
    assert f"{o['out_of_vocab']} of the {n} answers are not one piece of its {tok.vocab_size:,}-piece" in text
    assert o["out_of_vocab"] == sum(tok.token_to_id(r["answer"]) is None for r in res["rows"])  # WordPiece: whole words
    assert "read only movie reviews" in text
    assert view.count("not in vocabulary</span>") == o["out_of_vocab"]
    assert view.count("<mark") == sum(r["rank"] is not None and r["rank"] <= F.SHOWN for r in res["rows"]) > 0
    assert links.url("fill-mask", relation="genre") == "?tab=fill-mask&relation=genre"
    _, genre = facts_view.on_its_own("genre", None)  # the tab's own run, no one asking
    assert genre["overall"] == F.score(*shipped[:2], "genre")["overall"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "bertlab", "facts", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})


def share(p):
    return f"{p:.1%}".replace(".0%", "%")


def test_cli_prints_the_table_and_a_bad_relation_is_one_line(shipped):
    res = F.score(*shipped[:2], "genre")
    p = run_cli("--relation", "genre")
    assert p.returncode == 0, p.stderr
    g = res["relations"][0]
    assert re.search(rf"^genre\s+{g['prompts']}\s+{share(g['p_at_1'])}\s+{share(g['p_at_10'])}\s+{g['out_of_vocab']}$",
                     p.stdout, re.M), p.stdout
    for r in res["rows"]:
        rank = "-" if r["rank"] is None else f"{r['rank']:,}"
        assert re.search(rf"^{re.escape(r['cloze'])}\s+{r['answer']}\s+{rank}\s", p.stdout, re.M), r
    p = run_cli("--relation", "capitals")  # said before any model loads
    assert p.returncode == 2 and p.stdout == "", p.stdout
    assert p.stderr.strip().splitlines() == ["error: no relation 'capitals': pick one of "
                                             f"{', '.join(F.load()[0])} (or all)"], p.stderr


def test_an_answer_is_one_piece_as_each_tokenizer_reads_it(small_corpus, vocab_tokenizer):
    """WordPiece's whole word, byte-level BPE's word with its leading space (RoBERTa's '▁good'); a word
    spelt from several pieces is not one."""
    from bertlab.tokenizer import BPETokenizer
    bpe = BPETokenizer.train([str(small_corpus)], vocab_size=400)
    for tok, piece in ((vocab_tokenizer, "good"), (bpe, "▁good")):
        g = F.gold_id(tok, "the film was [MASK] .", "good")
        assert g is not None and tok.piece_text(g) == piece
        assert F.gold_id(tok, "the film was [MASK] .", "zebra") is None
