"""The trainer: learns, resumes bit for bit, survives SIGKILL mid-save, refuses NaN and a second trainer."""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from ddp_worker import TinyBatches, hf_save, kill_args, pretraining_loss, tiny_model
from torch.optim.lr_scheduler import LambdaLR

from bertlab import load_model
from bertlab.train import (
    RunLock,
    TrainArgs,
    Trainer,
    checkpoint_dirs,
    latest_checkpoint,
    lr_lambda,
    read_metrics,
    read_status,
    request_stop,
    stop_requested,
    write_status,
)

WORKER = Path(__file__).with_name("ddp_worker.py")
ROOT = WORKER.parent.parent


def params(m):
    return {k: v.detach().clone() for k, v in m.named_parameters()}


def assert_same(a, b):
    for k in a:
        assert torch.equal(a[k], b[k]), k


def child_env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}


def test_loss_falls_and_metrics_are_well_formed(tmp_path):
    evals = []

    def evaluate(model):
        assert not model.training and not torch.is_grad_enabled()
        evals.append(1)
        return {"eval_loss": 1.0}
    args = TrainArgs(steps=60, lr=1e-2, warmup=0.1, log_every=10, eval_every=25, save_every=20, keep_last=2)
    lines = []
    st = Trainer(tiny_model(dropout=0.0), TinyBatches(), args, tmp_path, pretraining_loss, evaluate,
                 log_fn=lines.append).fit()
    assert st["state"] == "finished" and st["step"] == 60 and read_status(tmp_path)["state"] == "finished"
    rows, n = read_metrics(tmp_path)
    train = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train] == [10, 20, 30, 40, 50, 60] and n == len(rows) == 6 + 3
    assert [r["step"] for r in rows if r["split"] == "eval"] == [25, 50, 60] and len(evals) == 3
    for r in train:
        assert {"step", "time", "lr", "loss", "mlm_loss", "nsp_loss", "grad_norm", "tokens_per_s", "split"} <= r.keys()
        assert all(math.isfinite(r[k]) for k in ("time", "lr", "loss", "grad_norm", "tokens_per_s"))
        assert abs(r["loss"] - r["mlm_loss"] - r["nsp_loss"]) < 1e-4
    assert train[-1]["loss"] < 0.7 * train[0]["loss"], [r["loss"] for r in train]
    assert [r["time"] for r in train] == sorted(r["time"] for r in train)
    assert [p.name for p in checkpoint_dirs(tmp_path)] == ["step-40", "step-60"]  # keep_last=2
    ck = latest_checkpoint(tmp_path)
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng.pt", "trainer_state.json"} <= \
        {p.name for p in ck.iterdir()}
    assert json.loads((ck / "trainer_state.json").read_text())["batches"] == {"epoch": 7, "position": 4}
    assert json.loads((tmp_path / "train_args.json").read_text())["steps"] == 60
    assert any("loss" in s for s in lines)


def test_early_evaluations_then_every_n(tmp_path):
    from bertlab.train.loop import early_evals
    assert sorted(early_evals(100, 166)) == [10, 25, 50, 100]  # the tiny recipe: then 166, 332, ...
    assert sorted(early_evals(10_000, 200)) == [10, 25, 50, 100]  # none from the first regular evaluation on
    assert early_evals(0, 200) == set() and early_evals(100, 10) == set()
    seen = []

    def evaluate(model):
        seen.append(read_status(tmp_path)["step"])  # what the probe table labels its column with
        return {"eval_loss": 1.0}
    args = TrainArgs(steps=60, log_every=7, eval_every=40, eval_early=50, save_every=60)
    Trainer(tiny_model(), TinyBatches(), args, tmp_path, pretraining_loss, evaluate).fit()
    evals = [r["step"] for r in read_metrics(tmp_path)[0] if r["split"] == "eval"]
    assert evals == [10, 25, 40, 60] and seen == evals  # 25 and 40 are no logging steps


def test_checkpoints_come_by_time_too_and_resume_exactly(tmp_path):
    """Issue 41, hole 9: checkpoints came every fifth of a run, so a run killed before its first one
    (a class server restarted) began again at step 0. With save_every_s, one comes once that many
    seconds passed (here: every step), and a run resumed from one of them ends as the uninterrupted one."""
    args = TrainArgs(steps=8, lr=5e-3, warmup=2, save_every=1000, save_every_s=1e-9, keep_last=20, log_every=4)
    ref = tiny_model(dropout=0.2)
    Trainer(ref, TinyBatches(), TrainArgs(**{**args.to_dict(), "save_every_s": 0}), tmp_path / "a",
            pretraining_loss).fit()
    assert [p.name for p in checkpoint_dirs(tmp_path / "a")] == ["step-8"]  # by steps only: the last
    Trainer(tiny_model(dropout=0.2), TinyBatches(), args, tmp_path / "b", pretraining_loss).fit()
    assert [p.name for p in checkpoint_dirs(tmp_path / "b")] == [f"step-{i}" for i in range(1, 9)]
    import shutil
    for p in checkpoint_dirs(tmp_path / "b")[3:]:  # as if killed after step 3's timed checkpoint
        shutil.rmtree(p)
    m = tiny_model(seed=99, dropout=0.2)
    st = Trainer(m, TinyBatches(), args, tmp_path / "b", pretraining_loss).fit(resume=True)
    assert st["state"] == "finished" and st["step"] == 8
    assert_same(params(ref), params(m))


def test_stop_and_resume_equals_uninterrupted_run(tmp_path):
    args = TrainArgs(steps=12, lr=5e-3, warmup=3, accum=2, save_every=4, log_every=3, eval_every=5)
    evaluate = lambda m: {"r": float(torch.rand(()))}  # noqa: E731  (random: must not disturb training)
    ref = tiny_model(dropout=0.2)
    Trainer(ref, TinyBatches(), args, tmp_path / "a", pretraining_loss, evaluate).fit()

    calls = [0]

    def loss_then_stop(model, b):
        calls[0] += 1
        if calls[0] == 14:  # 2nd micro-batch of step 7: stop after that step
            request_stop(tmp_path / "b")
        return pretraining_loss(model, b)
    st = Trainer(tiny_model(dropout=0.2), TinyBatches(), args, tmp_path / "b", loss_then_stop, evaluate).fit()
    assert st["state"] == "stopped" and st["step"] == 7 and not stop_requested(tmp_path / "b")
    assert latest_checkpoint(tmp_path / "b").name == "step-7"
    with pytest.raises(ValueError, match="already has checkpoints"):
        Trainer(tiny_model(), TinyBatches(), args, tmp_path / "b", pretraining_loss).fit()
    assert read_status(tmp_path / "b")["state"] == "stopped"

    m = tiny_model(seed=99, dropout=0.2)  # other init and a fresh batch source: all comes from disk
    st = Trainer(m, TinyBatches(), args, tmp_path / "b", pretraining_loss, evaluate).fit(resume=True)
    assert st["state"] == "finished" and st["step"] == 12
    assert_same(params(ref), params(m))
    ra, rb = read_metrics(tmp_path / "a")[0], read_metrics(tmp_path / "b")[0]
    assert [r["step"] for r in rb if r["split"] == "train"] == [3, 6, 7, 9, 12]  # + a row at the stop
    key = lambda rows: {(r["step"], r["split"]): r.get("loss", r.get("r")) for r in rows}  # noqa: E731
    a, b = key(ra), key(rb)
    assert all(a[k] == b[k] for k in a if k[0] not in (7, 9)) and len(a) == len(b) - 1
    assert rb[-1]["time"] >= rb[2]["time"]  # cumulative across the resume

    # Stored args win on resume; steps may grow (the decay is re-stretched over the new total).
    st = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=10, lr=1.0), tmp_path / "b",
                 pretraining_loss).fit(resume=True)
    assert st["state"] == "finished" and st["step"] == 12
    t = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=14, lr=1.0), tmp_path / "b", pretraining_loss)
    assert t.fit(resume=True)["step"] == 14 and t.args.lr == 5e-3 and t.args.accum == 2
    assert json.loads((tmp_path / "b" / "train_args.json").read_text())["steps"] == 14


def test_stop_at_samples_the_start_of_a_long_schedule(tmp_path):
    """--stop-at keeps the full run's learning-rate schedule, so early steps compare across runs."""
    args = TrainArgs(steps=12, lr=5e-3, warmup=3, save_every=100, log_every=1, eval_every=100)
    ref = tiny_model()
    Trainer(ref, TinyBatches(), args, tmp_path / "a", pretraining_loss).fit()
    m = tiny_model()
    st = Trainer(m, TinyBatches(), TrainArgs(**{**args.to_dict(), "stop_at": 5}), tmp_path / "b",
                 pretraining_loss).fit()
    assert st["state"] == "stopped" and st["step"] == 5 and latest_checkpoint(tmp_path / "b").name == "step-5"
    lrs = lambda run: [r["lr"] for r in read_metrics(run)[0] if r["split"] == "train"]  # noqa: E731
    assert lrs(tmp_path / "b") == lrs(tmp_path / "a")[:5]
    st = Trainer(tiny_model(seed=7), TinyBatches(), args, tmp_path / "b", pretraining_loss).fit(resume=True)
    assert st["state"] == "finished" and st["step"] == 12
    with pytest.raises(ValueError, match="stop_at"):
        TrainArgs(steps=3, stop_at=0)



@pytest.mark.slow
def test_sigkill_during_checkpoint_save_leaves_previous_one_resumable(tmp_path, one_thread):
    proc = subprocess.Popen([sys.executable, str(WORKER), "kill", str(tmp_path)], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 300  # a cap for a hang, not a speed check
        while not (tmp_path / "saving").exists():
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.time() < deadline, "the child never reached the step-8 save"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
        proc.stdout.close()
    assert (tmp_path / "checkpoints" / ".tmp-step-8").exists()  # killed mid-write
    assert latest_checkpoint(tmp_path).name == "step-4"
    st = read_status(tmp_path)
    assert st["state"] == "failed" and "killed" in st["message"]  # its pid is gone
    load_model(latest_checkpoint(tmp_path))  # an HF folder that loads

    m = tiny_model(seed=5)
    st = Trainer(m, TinyBatches(), kill_args(), tmp_path, pretraining_loss, on_save=hf_save).fit(resume=True)
    assert st["state"] == "finished" and st["step"] == 12  # the lock died with the child
    assert not any(p.name.startswith(".") for p in (tmp_path / "checkpoints").iterdir())
    assert [r["step"] for r in read_metrics(tmp_path)[0]] == [2, 4, 6, 8, 10, 12]
    ref = tiny_model()
    Trainer(ref, TinyBatches(), kill_args(), tmp_path / "ref", pretraining_loss).fit()
    assert_same(params(ref), params(m))


def test_nan_loss_fails_cleanly_and_keeps_last_checkpoint(tmp_path):
    calls = [0]

    def nan_at_step_7(model, b):
        calls[0] += 1
        loss, ms = pretraining_loss(model, b)
        return (loss * float("nan") if calls[0] == 7 else loss), ms
    args = TrainArgs(steps=20, save_every=5, log_every=2)
    m = tiny_model()
    st = Trainer(m, TinyBatches(), args, tmp_path, nan_at_step_7).fit()
    assert st["state"] == "failed" and st["step"] == 6 and "nan at step 7" in st["message"]
    assert "lower learning rate" in read_status(tmp_path)["message"]
    assert [p.name for p in checkpoint_dirs(tmp_path)] == ["step-5"]
    assert all(torch.isfinite(p).all() for p in m.parameters())
    Trainer(tiny_model(), TinyBatches(), args, tmp_path, pretraining_loss).fit(resume=True)
    assert read_status(tmp_path)["state"] == "finished"

    def boom(model, b):
        raise KeyError("no such column")
    with pytest.raises(KeyError):
        Trainer(tiny_model(), TinyBatches(), args, tmp_path / "x", boom).fit()
    assert read_status(tmp_path / "x")["state"] == "failed" and "no such column" in read_status(tmp_path / "x")["message"]


def test_no_weight_decay_on_biases_and_layernorm(tmp_path):
    t = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=1, weight_decay=0.1), tmp_path, pretraining_loss)
    by_wd = {g["weight_decay"]: g["param_names"] for g in t.optimizer.param_groups}
    assert set(by_wd) == {0.1, 0.0}
    assert "bert.embeddings.LayerNorm.weight" in by_wd[0.0] and "cls.predictions.bias" in by_wd[0.0]
    assert all(n.endswith(("bias", "LayerNorm.weight")) for n in by_wd[0.0])
    assert all(n.endswith("weight") and "LayerNorm" not in n for n in by_wd[0.1])
    assert "bert.embeddings.word_embeddings.weight" in by_wd[0.1]
    assert len(by_wd[0.0]) + len(by_wd[0.1]) == len(list(t.model.parameters()))  # tied decoder counted once


def test_schedule_warmup_then_linear_decay():
    f = lr_lambda(10, 4)
    assert [f(s) for s in range(12)] == pytest.approx([0, .25, .5, .75, 1, 5 / 6, 4 / 6, .5, 2 / 6, 1 / 6, 0, 0])
    assert TrainArgs(steps=200, warmup=0.05).warmup_steps == 10 and TrainArgs(steps=200, warmup=7).warmup_steps == 7
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    sched, seen = LambdaLR(opt, lr_lambda(10, 4)), []
    for _ in range(10):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.1 * f(s) for s in range(10)])
    with pytest.raises(ValueError, match="accum"):
        TrainArgs(steps=5, accum=0)


def test_gradients_are_clipped_and_lr_logged(tmp_path):
    args = TrainArgs(steps=6, lr=1e-3, warmup=0, clip=0.5, log_every=1)
    t = Trainer(tiny_model(), TinyBatches(), args, tmp_path, lambda m, b: (pretraining_loss(m, b)[0] * 100, {}))
    norms = []
    t.optimizer.register_step_pre_hook(lambda opt, *_: norms.append(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for g in opt.param_groups for p in g["params"]
                                              if p.grad is not None])).item()))
    t.fit()
    rows = read_metrics(tmp_path)[0]
    assert all(r["grad_norm"] > 0.5 for r in rows) and max(norms) <= 0.5 + 1e-4
    assert [r["lr"] for r in rows] == pytest.approx([1e-3 * (6 - s) / 6 for s in range(6)])


def test_run_files_are_read_tolerantly(tmp_path):
    assert read_status(tmp_path)["state"] == "unknown" and read_metrics(tmp_path) == ([], 0)
    (tmp_path / "status.json").write_text('{"state": "runn')
    assert read_status(tmp_path)["state"] == "unknown"
    write_status(tmp_path, state="running", step=3, total_steps=9)
    assert read_status(tmp_path)["step"] == 3 and read_status(tmp_path)["pid"] == os.getpid()
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n{"step": 3, "lo')
    rows, n = read_metrics(tmp_path)
    assert rows == [{"step": 1}, {"step": 2}] and n == 3
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('ss": 1.5}\n{"step": 4}\n')
    assert read_metrics(tmp_path, n) == ([{"step": 3, "loss": 1.5}, {"step": 4}], 5)
    assert not stop_requested(tmp_path)
    request_stop(tmp_path)
    assert stop_requested(tmp_path)


def test_second_trainer_on_a_run_is_refused(tmp_path):
    args = TrainArgs(steps=2)
    with RunLock(tmp_path):
        write_status(tmp_path, state="running")
        with pytest.raises(RuntimeError, match=f"already being trained by process {os.getpid()}"):
            Trainer(tiny_model(), TinyBatches(), args, tmp_path, pretraining_loss).fit()
        assert read_status(tmp_path)["state"] == "running"  # the loser does not touch the status
    bf16 = TrainArgs(steps=2, bf16=True)  # and, once free, bf16 autocast runs (train and eval)
    st = Trainer(tiny_model(), TinyBatches(), bf16, tmp_path, pretraining_loss, lambda m: {"x": 1.0}).fit()
    assert st["state"] == "finished" and read_metrics(tmp_path)[0][-1]["split"] == "eval"


@pytest.mark.slow
def test_ddp_two_processes_on_gloo(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, str(WORKER), "ddp", str(tmp_path)], env=child_env(
        RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
    try:
        outs = [p.communicate(timeout=120)[0].decode() for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    res = json.loads((tmp_path / "result.json").read_text())
    assert res["ranks_equal"] and res["resume_exact"]
    assert res["stopped"] == ["stopped", 10] and res["resumed"] == ["finished", 20]
    assert res["losses"][-1] < 0.8 * res["losses"][0], res["losses"]


def test_bf16_falls_back_to_fp32_where_the_cpu_emulates_it(tmp_path, monkeypatch):
    """Emulated bf16 (AVX2-only CPUs) is ~100x slower than fp32: the trainer says so and uses fp32."""
    from bertlab.train import loop, precision
    assert isinstance(precision.bf16_is_fast("cpu"), bool) and precision.bf16_is_fast("meta")
    monkeypatch.setattr(loop, "bf16_is_fast", lambda device_type: False)
    used = []
    real = torch.autocast

    def spy(device_type, dtype=None, enabled=True, **kw):
        used.append(enabled)
        return real(device_type, dtype, enabled=enabled, **kw)
    monkeypatch.setattr(loop.torch, "autocast", spy)
    lines = []
    t = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=3, bf16=True, log_every=1), tmp_path,
                pretraining_loss, log_fn=lines.append)
    assert t.fit()["state"] == "finished"
    assert used and not any(used) and not t.args.bf16
    assert any("no fast bfloat16" in m and "fp32" in m for m in lines), lines
    assert json.loads((tmp_path / "train_args.json").read_text())["bf16"] is False

    monkeypatch.setattr(loop, "bf16_is_fast", lambda device_type: True)
    t = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=1, bf16=True), tmp_path / "b", pretraining_loss)
    assert t.args.bf16
