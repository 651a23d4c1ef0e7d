"""The Fine-tune tab's methods, comparison and try-it box as functions: each method shows its own
fields and parameter count; the form becomes a spec (or a comparison) with clear refusals; a tiny
comparison runs as one background job of its visitor, then shows its table, chart and curves, and
the try-it box answers with any of its runs."""
import json
import random
import re
import time

import gradio as gr
import pytest
import torch
from test_classify_cli import write_tasks

from bertlab import BertConfig, BertForPreTraining, save_pretrained
from bertlab.app.identity import new_id
from bertlab.app.ui.training import (
    finetune_compare,
    finetune_form,
    finetune_tab,
    finetune_try,
)
from bertlab.train.finetune import finetune
from bertlab.train.specs import FinetuneSpec

LABELS = finetune_form.METHOD_LABELS

V1, V2 = new_id("."), new_id(".")  # browser ids, as the server mints them


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    return tmp_path / "runs"


def form(**kw):
    """The Fine-tune form by field name, as /finetune_start takes it."""
    f = dict(model=None, task="sentiment", upload=None, text_column="text", label_column="label",
             method="lora", epochs=1, lr=0, lora_rank=4, lora_alpha=8, layer_decay=1.0, gradual_unfreeze=False,
             max_examples=50, max_len=32, batch_size=8, lora_dropout=0.0, lora_targets=["query", "value"],
             virtual_tokens=20, adapter_size=64, problem="auto", pooling="auto", pair_column="")
    return {**f, **kw}


def test_each_method_shows_its_own_fields_and_a_plain_note():
    seen = {}
    for m, label in LABELS.items():
        note, lora, tokens, adapter, unfreeze = finetune_form.method_fields(label)
        seen[m] = (lora["visible"], tokens["visible"], adapter["visible"], unfreeze["visible"])
        assert note.startswith(f"**{label}.**") and len(note) > 60
    assert seen["lora"] == (True, False, False, False) and seen["full"] == (False, False, False, True)
    assert seen["prefix"] == seen["prompt"] == (False, True, False, False)
    assert seen["adapter"] == (False, False, True, False)
    assert seen["frozen"] == seen["bitfit"] == seen["ia3"] == (False, False, False, False)


def _trains(md: str) -> tuple[int, int]:
    return tuple(int(x.replace(",", "")) for x in re.search(r"trains \*\*([\d,]+)\*\* of ([\d,]+)", md).groups())


def test_parameter_counts_of_the_eight_methods(runs_root):
    counts, totals = {}, {}
    for m, label in LABELS.items():
        md = finetune_form.params_md(model=None, task="sentiment", method=label, lora_rank=8, lora_alpha=16, lr=0)
        counts[m], totals[m] = _trains(md)
        assert f"{FinetuneSpec.DEFAULT_LR[m]:g}" in md
    base = totals["full"]
    assert counts["full"] == base and counts["frozen"] == 514  # hidden 256: a 256 x 2 head and 2 biases
    assert all(counts["frozen"] < counts[m] < 0.05 * totals[m] for m in ("bitfit", "lora", "ia3", "prefix", "adapter"))
    assert counts["frozen"] < counts["prompt"] < counts["prefix"]  # input-only virtual tokens vs every layer's
    assert all(totals[m] - base == counts[m] - counts["frozen"] for m in ("lora", "ia3", "prefix", "prompt"))
    narrow = finetune_form.params_md(model=None, task="sentiment", method="lora", lora_rank=8, lora_alpha=16,
                                     lora_targets=["query", "value"])  # the LoRA paper's; the default adapts six kinds
    assert counts["frozen"] < _trains(narrow)[0] < counts["lora"]


def test_the_form_reads_every_new_field(runs_root):
    a = finetune_form.form_spec(**form(lora_targets=["query", "attention output", "feed-forward"], lora_dropout=0.1))
    assert a.lora_targets == ("query", "attention_output", "ffn") and a.lora_dropout == 0.1
    b = finetune_form.form_spec(**form(method="Prefix tuning", virtual_tokens=8))
    assert b.method == "prefix" and b.virtual_tokens == 8 and b.lr == b.DEFAULT_LR["prefix"]
    c = finetune_form.form_spec(**form(method="Adapters (Houlsby)", adapter_size=16, pooling="mean of the tokens"))
    assert c.method == "adapter" and c.adapter_size == 16 and c.pooling == "mean"
    with pytest.raises(ValueError, match="lora_targets"):
        finetune_form.form_spec(**form(lora_targets=[]))
    d = finetune_form.form_spec(**form(method="IA³", gradual_unfreeze=True))  # a hidden full-only box does not count
    assert d.method == "ia3" and not d.gradual_unfreeze


def test_a_comparison_spec_from_the_form(runs_root):
    spec = finetune_compare.compare_spec(form(), [LABELS["frozen"], "lora", LABELS["full"]], 2)
    assert spec.methods == ("full", "frozen", "lora") and spec.seeds == 2 and spec.lr is None  # the usual order
    assert spec.run_spec("frozen", 1).lr == spec.DEFAULT_LR["frozen"]
    assert finetune_compare.compare_spec(form(lr=1e-3), ["full", "lora"], 1).run_spec("lora", 0).lr == 1e-3
    assert finetune_compare.compare_spec(form(gradual_unfreeze=True), ["full", "lora"], 1).run_spec("full", 0).gradual_unfreeze
    for picked, seeds, words in (([LABELS["lora"]], 1, "at least two"), (["lora", "dora"], 1, "unknown method"),
                                 (["lora", "full"], 4, "seeds must be one of"), (["lora", "full"], True, "seeds")):
        with pytest.raises(ValueError, match=words):
            finetune_compare.compare_spec(form(), picked, seeds)
    note = finetune_compare.estimate_note(list(LABELS.values()), 3, 2)
    assert "24 runs" in note and "ETA" in note


def _wait(name, timeout=240):
    from bertlab.app.ui.training import jobs_ui
    t0 = time.time()
    while time.time() - t0 < timeout:
        st = jobs_ui.status(name)
        if st and st["state"] in ("finished", "failed", "stopped"):
            return st
        time.sleep(0.5)
    raise AssertionError(f"{name} did not end: {jobs_ui.status(name)}")


@pytest.mark.slow
def test_a_tiny_comparison_is_one_job_then_a_table_a_chart_and_try_it(runs_root, tmp_path, vocab_tokenizer):
    from bertlab.app.ui.training import jobs_ui
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    model = save_pretrained(BertForPreTraining(cfg), vocab_tokenizer, tmp_path / "tiny")
    rng, rows = random.Random(0), ["text,label"]
    for i in range(40):
        w = rng.choice(["great", "fun"] if i % 2 else ["bad", "boring"])
        rows.append(f"the film was {w} .,{'pos' if i % 2 else 'neg'}")
    (tmp_path / "mine.csv").write_text("\n".join(rows) + "\n")
    csv = next(k for k, v in finetune_form.TASKS.items() if v == "upload-csv")
    f = form(model=str(model), task=csv, upload=str(tmp_path / "mine.csv"), max_examples=0, max_len=16)
    name = finetune_compare.start(V1, "cmp", f, [LABELS["frozen"], LABELS["lora"]], 1)
    assert name == "cmp" and len(jobs_ui.manager().owned(V1)) == 1  # one job, not one per method
    with pytest.raises(PermissionError):
        jobs_ui.manager().stop("cmp", V2)
    with pytest.raises(ValueError, match="exists"):
        finetune_compare.start(V1, "cmp", f, [LABELS["frozen"], LABELS["lora"]], 1)  # still training
    st = _wait("cmp")
    assert st["state"] == "finished", st
    status, curves, conf, table, log, timer, chart = finetune_tab.view("cmp", [], V1)
    assert "finished in" in status and "cmp" in status
    points = json.loads(chart.value["plot"])["data"]
    assert chart.visible and [t["name"] for t in points] == ["frozen", "lora"]
    assert {t.name for t in curves.data if t.showlegend} == {"frozen", "lora"}
    colours = {t["name"]: t["marker"]["color"] for t in points}
    assert all(t.line.color == colours[t.name] for t in curves.data)  # one colour per method in both charts
    cells = table.value["data"]
    assert [r[0].split(":")[0] for r in cells] == ["frozen", "lora"] and all("%" in r[2] for r in cells)
    assert not timer.active and "Confusion matrix" in conf.layout.title.text
    pair, question, sub = finetune_try.inputs_for("cmp")
    assert sub["visible"] and [v for _, v in sub["choices"]] == ["frozen-seed0", "lora-seed0"]
    scores = {r[0].split(":")[0]: float(r[2].split("%")[0]) for r in cells}
    assert sub["value"] == f"{max(scores, key=scores.get)}-seed0"  # the try-it box starts with the best run
    assert not pair["visible"] and not question["visible"]
    label, tags = finetune_tab.try_it("cmp", "the film was great .", None, None, "lora-seed0")
    assert set(label.value["confidences"][i]["label"] for i in range(2)) == {"neg", "pos"}
    assert not tags.visible
    with pytest.raises(gr.Error, match="empty"):
        finetune_tab.try_it("cmp", "  ", None, None, "lora-seed0")
    # the same name again goes on (nothing left to train), another visitor may not
    with pytest.raises(PermissionError):
        finetune_compare.start(V2, "cmp", f, [LABELS["frozen"], LABELS["lora"]], 1)


def test_try_it_asks_for_a_second_text_or_a_question_where_the_task_has_one(runs_root, tmp_path, vocab_tokenizer):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    base = save_pretrained(BertForPreTraining(cfg), vocab_tokenizer, tmp_path / "base")
    write_tasks(tmp_path)
    for name, kw in (("pairs", dict(task="pair.csv", pair_column="second", max_len=24)),
                     ("answers", dict(task="squad.json", max_len=48))):
        res = finetune(runs_root / name, FinetuneSpec(model=str(base), epochs=1, batch_size=8,
                                                      **{**kw, "task": str(tmp_path / kw["task"])}), log=lambda m: None)
        assert res["state"] == "finished"
    pair, question, sub = finetune_try.inputs_for("pairs")
    assert pair["visible"] and not question["visible"] and not sub["visible"]
    label, _ = finetune_tab.try_it("pairs", "the film was great .", "it was fun .")
    assert {c["label"] for c in label.value["confidences"]} == {"same", "other"}
    pair, question, _ = finetune_try.inputs_for("answers")
    assert question["visible"] and not pair["visible"]
    passage = "the acting was terrible . i would watch it again ."
    _, marked = finetune_tab.try_it("answers", passage, None, "how was the acting ?")
    spans = marked.value  # the passage, the answer marked in it
    assert marked.visible and "".join(s["token"] for s in spans) == passage
    assert [s["class_or_confidence"] for s in spans if s["class_or_confidence"]][0].startswith("answer ")
    with pytest.raises(gr.Error, match="give a question"):
        finetune_tab.try_it("answers", passage, None, "  ")
