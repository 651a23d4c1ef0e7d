"""Comparing fine-tuning methods (train/compare.py): two methods x two seeds of a tiny model on a tiny
CSV, end to end in spawned children; the table's fields; a stopped comparison goes on and reuses
its finished runs; the command line prints the ETA first and the table last."""
import json
import random
import subprocess
import sys
import threading

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, save_pretrained
from bertlab.train import runs
from bertlab.train.compare import CompareSpec, compare, compare_spec, current_results, spec_of
from bertlab.train.compare_report import table_cells, table_md
from bertlab.train.specs import FinetuneSpec

GOOD, BAD = "great good fun love".split(), "bad terrible boring hate".split()


def write_csv(path, n=48, seed=0):
    rng = random.Random(seed)
    rows = ["text,label"]
    for i in range(n):
        good = i % 2 == 0
        w = rng.sample(GOOD if good else BAD, 2)
        rows.append(f"the film was {w[0]} and the plot was {w[1]} .,{'pos' if good else 'neg'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, vocab_tokenizer):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("cmp")
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    model = save_pretrained(BertForPreTraining(cfg), vocab_tokenizer, d / "model")
    return FinetuneSpec(model=str(model), task=str(write_csv(d / "tiny.csv")), epochs=1, batch_size=8, max_len=16,
                        threads=1)


def test_a_comparison_is_a_kind_of_its_own_and_older_folders_read_as_one(tiny, tmp_path):
    from bertlab.train.kinds import KINDS, listed_in
    from bertlab.train.runs import Run
    spec = compare_spec(tiny, ["frozen", "lora"], 1)
    assert spec.to_dict()["kind"] == "compare" and KINDS["compare"].spec is CompareSpec
    assert listed_in("finetune") == {"finetune", "compare"} and listed_in("pretrain") == {"pretrain"}
    old = tmp_path / "old"  # written before: kind "finetune" with the comparison's keys
    old.mkdir()
    (old / "spec.json").write_text(json.dumps({**spec.to_dict(), "kind": "finetune"}), encoding="utf-8")
    assert Run(old).kind == "compare" and Run(old).spec() == spec and spec_of(old) == spec
    plain = tmp_path / "plain"
    Run(plain).write_spec(tiny)
    assert Run(plain).kind == "finetune" and spec_of(plain) is None


def test_the_spec_keeps_each_methods_default_learning_rate(tiny):
    spec = compare_spec(tiny, ["frozen", "lora"], 2)
    assert spec.lr is None and spec.KIND == "compare" and spec.runs() == [("frozen", 0), ("frozen", 1), ("lora", 0),
                                                                            ("lora", 1)]
    assert spec.run_spec("lora", 1).lr == FinetuneSpec.DEFAULT_LR["lora"] and spec.run_spec("lora", 1).seed == 1
    assert compare_spec(tiny.replace(lr=1e-3), ["frozen", "lora"], 1).run_spec("frozen", 0).lr == 1e-3
    assert CompareSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec  # spec.json round trip
    with pytest.raises(ValueError, match="distinct names"):
        compare_spec(tiny, ["lora", "lora"], 1)
    with pytest.raises(ValueError, match="methods must be"):
        compare_spec(tiny, ["full", "dora"], 1)
    with pytest.raises(ValueError, match="seeds"):
        compare_spec(tiny, ["full", "lora"], 0)
    unfreeze = compare_spec(tiny.replace(gradual_unfreeze=True), ["full", "lora"], 1)
    assert unfreeze.run_spec("full", 0).gradual_unfreeze and not unfreeze.run_spec("lora", 0).gradual_unfreeze


@pytest.mark.slow
def test_two_methods_two_seeds_stop_resume_and_reuse(tiny, tmp_path):
    out, methods = tmp_path / "cmp", ["lora", "full"]
    stop, events = threading.Event(), []

    def stop_after_first_run(row):
        events.append(row)
        if row["event"] == "run":
            stop.set()
    res = compare(out, methods, 2, tiny, log=lambda m: None, stop_event=stop, callbacks=[stop_after_first_run],
                  trial_steps=2)
    assert res["state"] == "stopped" and runs.read_status(out)["state"] == "stopped"
    said = [e["message"] for e in events if e["event"] == "status"]
    eta = next(i for i, m in enumerate(said) if "in all" in m)
    assert "timing 2 methods" in said[0] and eta < next(i for i, m in enumerate(said) if m.startswith("[1/4]"))
    assert "runs to train" in said[eta]  # the whole comparison's ETA, said before its first run
    assert [e["method"] for e in events if e["event"] == "run"] == ["lora"]
    trials = json.loads((out / "trials.json").read_text())
    assert all(trials[m]["step_s"] > 0 and trials[m]["total_steps"] > 0 for m in methods)
    assert spec_of(out).methods == tuple(methods) and current_results(out)["rows"][0]["finished"] == 1

    events.clear()
    res = compare(out, methods, 2, tiny, log=lambda m: None, callbacks=[events.append], trial_steps=2)
    assert res["state"] == "finished"
    assert [(e["method"], e["seed"]) for e in events if e["event"] == "run"] == \
        [("lora", 1), ("full", 0), ("full", 1)]  # lora seed 0 was reused
    assert all(e["eta_s"] is not None and e["eta_s"] >= 0 for e in events if e["event"] == "progress")
    rows = {r["method"]: r for r in res["rows"]}
    assert list(rows) == methods and all(r["state"] == "finished" and r["finished"] == 2 for r in rows.values())
    lora, full = rows["lora"], rows["full"]
    assert lora["trainable_params"] < full["trainable_params"] == full["total_params"]
    assert full["trainable_share"] == 1.0 and 0 < lora["trainable_share"] < 0.5
    for r in rows.values():
        assert r["metrics"] == ["accuracy", "macro_f1"] and len(r["accuracy"]) == 2
        assert 0 <= r["accuracy_mean"] <= 1 and r["accuracy_spread"] is not None and r["seeds"] == [0, 1]
        assert r["seconds"] > 0 and r["peak_mb"] > 0 and r["saved_bytes"] > 0
        for s in (0, 1):
            run = out / f"{r['method']}-seed{s}"
            assert runs.read_status(run)["state"] == "finished" and not (run / runs.CHECKPOINTS).exists()
    assert lora["saved_bytes"] < full["saved_bytes"]  # LoRA keeps an adapter, full a whole model
    headers, cells = table_cells(res)
    assert headers == ["method", "trainable parameters", "accuracy (2 seeds)", "macro-F1 (2 seeds)", "time",
                       "peak memory", "saved"]
    assert [c[0].split(":")[0] for c in cells] == methods and "(100.00%)" in cells[1][1] and " ± " in cells[0][2]
    md = (out / "table.md").read_text()
    assert md == table_md(json.loads((out / "results.json").read_text())) and md.count("\n| ") == 2
    assert "mean ± standard deviation" in md and "Peak memory" in md
    assert runs.read_status(out)["state"] == "finished" and not (out / "trials").exists()

    events.clear()  # the same comparison again: every run is reused, nothing is trained
    again = compare(out, methods, 2, tiny, log=lambda m: None, callbacks=[events.append], trial_steps=2)
    assert not [e for e in events if e["event"] in ("run", "progress")]
    assert [r["accuracy"] for r in again["rows"]] == [r["accuracy"] for r in res["rows"]]


def test_a_frozen_run_says_what_it_must_keep():
    """Issue 42, item 10: the table said the frozen encoder "saved 21.7 MB", as full fine-tuning did, while
    LoRA saved 1.1 MB; a frozen run must keep only its head beside the base model."""
    def row(method, trainable, saved, **kw):
        return {"method": method, "state": "finished", "failed": False, "metrics": ["accuracy"], "accuracy_mean": 0.8,
                "accuracy_spread": 0, "trainable_params": trainable, "total_params": 5_400_000,
                "trainable_share": trainable / 5_400_000, "seconds": 60, "peak_mb": 100, "saved_bytes": saved, **kw}
    res = {"rows": [row("full", 5_400_000, 21_700_000), row("frozen", 1_538, 21_700_000),
                    row("lora", 250_000, 1_100_000), row("adapters", 300_000, 22_900_000, adapter_bytes=1_200_000)],
           "seeds": 1}
    _, cells = table_cells(res, blurbs=False)
    saved = {r[0]: r[-1] for r in cells}
    assert saved["full"] == "21.7 MB" and saved["lora"] == "1.1 MB"
    assert saved["frozen"] == "21.7 MB (trained: 6 kB; the rest is the unchanged base model)"
    assert saved["adapters"] == "22.9 MB (adapters 1.2 MB)"


def test_a_run_folder_is_not_a_comparison(tiny, tmp_path):
    runs.Run(tmp_path / "ft").write_spec(tiny)
    with pytest.raises(ValueError, match="not a comparison"):
        compare(tmp_path / "ft", ["frozen", "lora"], 1, tiny, log=lambda m: None)


@pytest.mark.slow
def test_command_line_prints_the_eta_first_and_the_table_last(tiny, tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "bertlab", "finetune", "--compare", "frozen,bitfit", "--model", tiny.model,
           "--task", tiny.task, "--epochs", "1", "--batch-size", "8", "--max-len", "16", "--threads", "1",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    err = r.stderr.splitlines()
    timing = next(i for i, line in enumerate(err) if "timing 2 methods" in line)
    first_eta = next(i for i, line in enumerate(err) if "in all" in line)
    assert timing < first_eta < next(i for i, line in enumerate(err) if "[1/2]" in line), err
    assert r.stdout.strip().startswith("| method | trainable parameters | accuracy | macro-F1 |")
    assert "frozen: the head only" in r.stdout and "bitfit: biases only" in r.stdout
    assert "Traceback" not in r.stderr
    bad = subprocess.run(cmd[:5] + ["frozen,nope"] + cmd[6:], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: methods must be") and "Traceback" not in bad.stderr
