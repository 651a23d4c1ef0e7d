"""Specs are the only schema: flags, checks, spec.json, `run DIR`, trainer rows, and old run folders."""
import argparse
import json
from dataclasses import fields

import pytest
import torch

from bertlab import load_pretrained
from bertlab.app.cli import main
from bertlab.train import read_metrics, runs
from bertlab.train.pretrain import pretrain
from bertlab.train.specs import (
    KINDS,
    FinetuneSpec,
    PretrainSpec,
    ProbeSpec,
    TrainArgs,
    spec_from_dict,
)

TINY = dict(preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=2, layers=1, hidden=32, heads=2,
            intermediate=64, max_position=32, dropout=0.1, lr=2e-3, warmup=0.1, log_every=5, eval_every=10,
            save_every=10)


def parse(cls, *argv):
    p = argparse.ArgumentParser()
    cls.add_arguments(p)
    return cls(**cls.given(p.parse_args(argv)))


@pytest.mark.parametrize("cls", list(KINDS.values()))
def test_every_field_is_a_flag_and_round_trips(cls):
    p = argparse.ArgumentParser()
    cls.add_arguments(p)
    flags = {a.dest for a in p._actions}
    assert {f.name for f in fields(cls)} <= flags
    assert parse(cls) == cls()  # no flag given: the dataclass defaults, the only defaults
    s = cls()
    assert spec_from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_flags_types_and_range_checks():
    s = parse(PretrainSpec, "--steps", "7", "--lr", "0.01", "--bf16", "--betas", "0.9", "0.99", "--max-docs", "5")
    assert (s.steps, s.lr, s.bf16, s.betas, s.max_docs) == (7, 0.01, True, (0.9, 0.99), 5)
    assert parse(FinetuneSpec, "--lora-targets", "query", "key").lora_targets == ("query", "key")
    assert parse(ProbeSpec, "--pooling", "mean").feature == "mean"  # the older flag name still works
    for kw, words in [(dict(steps=0), "steps must be from 1 to 10,000,000"), (dict(steps=2.5), "whole number"),
                      (dict(lr=-1), "lr must be a positive number"), (dict(objective="x"), "objective must be one of"),
                      (dict(bf16="yes"), "bf16 must be true or false"), (dict(hidden=30, heads=4), "divisible"),
                      (dict(mask_rate=1.0), "mask_rate"), (dict(betas=(0.9,)), "betas")]:
        with pytest.raises(ValueError, match=words):
            PretrainSpec(**kw)
    assert PretrainSpec(steps=3.0).steps == 3  # a web form's 3.0 is a whole number
    with pytest.raises(ValueError, match="gradual unfreezing"):
        FinetuneSpec(method="lora", gradual_unfreeze=True)
    assert FinetuneSpec(method="frozen").lr == FinetuneSpec.DEFAULT_LR["frozen"]
    assert TrainArgs().to_dict().keys() == {f.name for f in fields(TrainArgs)}  # train_args.json: no kind


def test_early_evaluations_are_one_field():
    assert PretrainSpec().eval_early == 100 and PretrainSpec().train_args().eval_early == 100  # pre-training: early
    assert TrainArgs().eval_early == 0 and FinetuneSpec().train_args(10).eval_early == 0  # others: as they were
    assert parse(PretrainSpec, "--eval-early", "0").eval_early == 0
    with pytest.raises(ValueError, match="eval_early must be at least 0"):
        PretrainSpec(eval_early=-1)
    assert PretrainSpec().resumed({"eval_early": 0}) == (PretrainSpec(eval_early=0), [])


def test_a_resume_may_change_only_what_it_can():
    saved = PretrainSpec(steps=100, lr=1e-3)
    spec, ignored = saved.resumed({"steps": 300, "lr": 5e-3, "threads": 1})
    assert (spec.steps, spec.lr, spec.threads, ignored) == (300, 1e-3, 1, ["lr"])


def legacy(run_dir, spec):
    """Rewrite a run folder as bertlab wrote it before spec.json: pretrain.json with a config dict."""
    config = {k: v for k, v in spec.config_overrides().items() if k != "pre_ln"}
    old = {k: getattr(spec, k) for k in ("preset", "corpus", "text_column", "max_docs", "vocab_size", "max_len",
                                         "objective", "mask_rate", "whole_word", "heldout", "batch_size",
                                         "eval_batches", "init_from")}
    (run_dir / "pretrain.json").write_text(json.dumps({**old, "config": config}))
    (run_dir / runs.SPEC).unlink()


def test_run_dir_executes_spec_json_and_an_old_folder_resumes(tmp_path, small_corpus):
    spec = PretrainSpec(corpus=str(small_corpus), steps=20, **TINY)
    rows = []
    pretrain(tmp_path / "full", spec, log=lambda *_: None, callbacks=[rows.append])
    # the trainer's outward channel: structured rows, not log text
    train = [r for r in rows if r["event"] == "train"]
    assert [r["step"] for r in train] == [5, 10, 15, 20] and all(r["total_steps"] == 20 for r in train)
    assert train[-1]["eta_s"] == 0 and "loss" in train[0] and "lr" in train[0]
    evals = [r for r in rows if r["event"] == "eval"]
    assert [r["step"] for r in evals] == [10, 20] and all("mlm_acc" in r for r in evals)
    assert rows[-1]["event"] == "status" and rows[-1]["state"] == "finished"

    part = tmp_path / "part"  # stopped half way, written in the old format, resumed by `run DIR`
    st = pretrain(part, spec.replace(stop_at=10), log=lambda *_: None)
    assert st["state"] == "stopped" and st["step"] == 10
    legacy(part, spec)
    old = runs.Run(part)
    assert old.kind == "pretrain" and old.spec().replace(stop_at=None) == spec
    assert [r["step"] for r in read_metrics(part)[0] if r["split"] == "eval"] == [10]  # its curves still show
    assert main(["run", str(part)]) == 0
    assert runs.read_status(part)["state"] == "finished"
    assert json.loads((part / runs.SPEC).read_text())["kind"] == "pretrain"  # now in the new format
    a, _ = load_pretrained(tmp_path / "full")
    b, _ = load_pretrained(part)
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), k


def test_old_finetune_folder_and_bad_run_folders(tmp_path, capsys):
    d = tmp_path / "ft"
    d.mkdir()
    (d / "finetune.json").write_text(json.dumps({"model": "default", "task": "sentiment", "method": "lora",
                                                 "epochs": 1, "kind": "sequence", "labels": ["neg", "pos"],
                                                 "trainable_params": 10, "total_params": 100}))
    run = runs.Run(d)
    assert run.kind == "finetune" and run.spec().method == "lora" and run.facts()["labels"] == ["neg", "pos"]
    assert main(["run", str(tmp_path / "nothing")]) == 2
    assert "no spec.json" in capsys.readouterr().err
    (d / runs.SPEC).write_text(json.dumps({"kind": "pretrain", "corpus": str(tmp_path / "missing.txt")}))
    assert main(["run", str(d)]) == 2
    st = runs.read_status(d)  # what the web page shows: the reason, from status.json
    assert st["state"] == "failed" and "no such file or folder" in st["message"]


def test_a_job_kind_is_one_record_that_the_command_line_reads():
    """Every spec class that names a kind has its record in train/kinds.py, and every record with a command
    is a subcommand taking each field of its spec (issue 43: the CLI kept a third table of kinds)."""
    import argparse

    from bertlab.app.cli import build_parser
    from bertlab.train.kinds import KINDS, RUN_KINDS
    from bertlab.train.specs import KINDS as SPECS
    assert set(SPECS) == set(KINDS) and all(KINDS[k].spec is c for k, c in SPECS.items())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = {k for k, rec in KINDS.items() if rec.command}
    assert commands <= set(sub.choices) and {"pretrain", "finetune", "probe", "race", "distill", "scaling"} <= commands
    for k in commands:
        flags = {d for a in sub.choices[k]._actions for d in [a.dest]}
        assert {f.name for f in fields(KINDS[k].spec)} <= flags, k
        assert ("out" in flags) == (k in RUN_KINDS) and ("json" in flags) == KINDS[k].json, k
        assert sub.choices[k].description is None and KINDS[k].help
