"""Lesson 11's sarcasm task (issue 32, item 15): the data file written for bertlab is well formed and
balanced, says where it comes from, and is split so nothing held out is trained on; the Fine-tune form
offers it with its own held-out share and says what the split holds; the lesson's question is checked
against the split computed another way, and its links fill the Fine-tune tab."""
import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from bertlab.app.lessons import LESSONS
from bertlab.app.lessons import checks as C
from bertlab.app.lessons import course_c
from bertlab.app.ui.shared import models
from bertlab.app.ui.training import finetune_form as F
from bertlab.data.corpus import split_heldout
from bertlab.data.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "sarcasm.csv"


@pytest.fixture(scope="module")
def rows():
    with open(DATA, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["text", "label"]
        return list(reader)


def test_the_data_is_balanced_short_and_without_repeats(rows):
    assert 280 <= len(rows) <= 320
    assert Counter(r["label"] for r in rows) == {"sarcastic": len(rows) // 2, "sincere": len(rows) // 2}
    texts = [r["text"] for r in rows]
    assert len(set(texts)) == len(texts)  # no text twice, so none can sit on both sides of the split
    assert len({re.sub(r"[^a-z ]", "", t) for t in texts}) == len(texts)  # nor the same up to punctuation
    for t in texts:
        assert t == t.strip() and t == t.lower() and 3 <= len(t.split()) <= 30, t  # the vocabulary is lower case


def test_matched_pairs_share_their_words_across_the_classes(rows):
    """The first rows are pairs, sarcastic then sincere, built on the same words: a bag of words is not enough."""
    pairs = [(rows[i], rows[i + 1]) for i in range(0, len(rows) - 1, 2)
             if rows[i]["label"] == "sarcastic" and rows[i + 1]["label"] == "sincere"]
    assert len(pairs) >= 60
    words = lambda r: set(re.findall(r"[a-z']+", r["text"]))  # noqa: E731
    shared = [len(words(a) & words(b)) for a, b in pairs]
    assert sum(n >= 3 for n in shared) >= 0.9 * len(pairs)
    # the praise words a sarcastic sentence leans on appear in sincere sentences too
    for w in ("great", "love", "wow", "perfect", "brilliant", "wonderful", "thanks", "sure"):
        by = Counter(r["label"] for r in rows if w in words(r))
        assert by["sarcastic"] and by["sincere"], (w, by)


def test_the_provenance_is_written_down():
    readme = (ROOT / "examples" / "README.md").read_text()
    part = readme.split("## `sarcasm.csv`", 1)[1].split("\n## ", 1)[0]
    for said in ("Written sentence by sentence", "2026-11-28", "licence", "300", "150", "Limits", "one writer",
                 "No sentence was copied"):
        assert said in part, said
    assert "written sentence by sentence for bertlab" in course_c.SARCASM.explain.split("\n\n")[0]


def test_the_form_offers_it_with_its_own_held_out_share(tmp_path):
    assert F.TASKS["Example: sarcasm (written for bertlab)"] == "example-sarcasm" == C.SARCASM_TASK
    spec = F.form_spec(task="example-sarcasm", method="lora")
    assert Path(spec.task) == DATA and spec.val_frac == 0.2 and spec.method == "lora"
    assert F.form_spec(task="example-sarcasm", val_frac=0.3).val_frac == 0.3  # a share the student set stays
    assert F.form_spec(task="example-pairs").val_frac == 0.1  # the other examples keep the default


def test_the_split_the_form_describes_is_the_runs_and_keeps_held_out_texts_out(rows):
    _, tok = models.get(models.DEFAULT)
    d = F.example_split("example-sarcasm", tok=tok)
    data = load_task(str(DATA), tok, 32, val_frac=0.2, seed=0)  # what finetune() reads
    assert list(d["held_texts"]) == data.val_texts and d["held"] == len(data.val) == 60
    trained = {r["text"] for r in rows} - set(data.val_texts)
    assert len(trained) == len(data.train) == course_c.TRAIN == 240 and not trained & set(data.val_texts)
    # another way: the held-out texts by corpus.split_heldout on the file's rows
    _, held = split_heldout(rows, 0.2, 0, [r["text"] for r in rows])
    counts = Counter(r["label"] for r in held)
    assert d["held_counts"] == dict(counts) and d["majority"] == max(counts.values()) / len(held)
    line = F.params_md(task="example-sarcasm", method="frozen", pooling="mean")
    assert f"A run holds out **{len(held)}** of them (validation share 0.2, seed 0)" in line
    assert f"**{100 * max(counts.values()) / len(held):.1f} %** on them" in line
    assert "The data" not in F.params_md(task="sentiment") and "The data" not in F.params_md(task="example-regression")


def test_lesson_11s_question_is_checked_against_the_split(rows):
    _, held = split_heldout(rows, 0.2, 0, [r["text"] for r in rows])
    top = max(Counter(r["label"] for r in held).values())
    truth = 100 * top / len(held)
    ok = lambda a: C.CHECKS["sarcasm"](a, models.DEFAULT).correct  # noqa: E731
    assert ok(f"{truth:.1f} %") and ok(f"{truth:.0f}") and ok(f"{truth / 100:.3f}") and ok(f"{top} of {len(held)}")
    assert ok("50 %") is (abs(truth - 50) < 0.5)
    assert not ok(f"{truth + 2:.1f} %") and not ok(f"{len(held) - top} of {len(held)}") and not ok("no idea")
    assert not ok("0.5") or abs(truth - 50) < 0.5  # one digit of a share is too rough to tell
    v = C.CHECKS["sarcasm"]("1", models.DEFAULT)
    assert f"{truth:.1f} %" in v.evidence and f"{top} of {len(held)}" in v.evidence and v.answer == f"{truth:.1f} %"


def test_lesson_11_links_the_fine_tune_tab_on_the_sarcasm_task():
    lesson = LESSONS[-1]
    assert lesson is course_c.SARCASM and lesson.number == 11 and lesson.check == "sarcasm"
    assert lesson.script() == ROOT / "examples" / "lesson11_sarcasm.py"
    assert {t.tab for t in lesson.try_its} == {"finetune"}
    assert all(t.params["task"] == "example-sarcasm" for t in lesson.try_its)
    assert {t.params["method"] for t in lesson.try_its} == {"frozen", "lora", "full"}
    assert f"{course_c.N} one-sentence" in lesson.explain and course_c.N == 300
