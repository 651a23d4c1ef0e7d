"""The trainer's GPU paths, run on the CPU: batches built ahead by a worker process (Prefetcher) and losses read
once a log row (lazy checks) change no number, resume bit for bit, and still refuse a NaN before it is
saved. On a GPU the trainer takes these paths by itself."""
import multiprocessing as mp

import pytest
import torch
from ddp_worker import TinyBatches, pretraining_loss, tiny_model

from bertlab.train import TrainArgs, Trainer, checkpoint_dirs, latest_checkpoint, read_metrics, request_stop
from bertlab.train.prefetch import Prefetcher


@pytest.fixture
def gpu_paths(monkeypatch):
    monkeypatch.setattr(Trainer, "prefetch", True)
    monkeypatch.setattr(Trainer, "lazy_checks", True)


def params(m):
    return {k: v.detach().clone() for k, v in m.named_parameters()}


def rows(folder):
    return [{k: v for k, v in r.items() if k not in ("time", "tokens_per_s", "eta_s")} for r in read_metrics(folder)[0]]


ARGS = TrainArgs(steps=12, lr=5e-3, warmup=3, accum=2, save_every=4, log_every=3, eval_every=5)


def test_prefetched_lazy_run_equals_the_plain_one_and_resumes_exactly(tmp_path, monkeypatch):
    evaluate = lambda m: {"r": float(torch.rand(()))}  # noqa: E731
    plain = tiny_model(dropout=0.2)
    Trainer(plain, TinyBatches(), ARGS, tmp_path / "plain", pretraining_loss, evaluate).fit()
    monkeypatch.setattr(Trainer, "prefetch", True)
    monkeypatch.setattr(Trainer, "lazy_checks", True)
    fast = tiny_model(dropout=0.2)
    Trainer(fast, TinyBatches(), ARGS, tmp_path / "fast", pretraining_loss, evaluate).fit()
    assert params(plain).keys() == params(fast).keys()
    assert all(torch.equal(a, b) for a, b in zip(params(plain).values(), params(fast).values()))
    assert rows(tmp_path / "plain") == rows(tmp_path / "fast")  # every logged loss, metric and norm

    calls = [0]

    def loss_then_stop(model, b):
        calls[0] += 1
        if calls[0] == 14:  # 2nd micro-batch of step 7
            request_stop(tmp_path / "b")
        return pretraining_loss(model, b)
    st = Trainer(tiny_model(dropout=0.2), TinyBatches(), ARGS, tmp_path / "b", loss_then_stop, evaluate).fit()
    assert st["state"] == "stopped" and st["step"] == 7 and latest_checkpoint(tmp_path / "b").name == "step-7"
    m = tiny_model(seed=99, dropout=0.2)
    assert Trainer(m, TinyBatches(), ARGS, tmp_path / "b", pretraining_loss, evaluate).fit(resume=True)["step"] == 12
    assert all(torch.equal(a, b) for a, b in zip(params(plain).values(), params(m).values()))
    assert not mp.active_children()  # the batch worker is gone


def test_lazy_checks_refuse_a_nan_before_anything_is_saved(tmp_path, gpu_paths):
    calls = [0]

    def nan_at_step_7(model, b):
        calls[0] += 1
        loss, ms = pretraining_loss(model, b)
        return (loss * float("nan") if calls[0] == 7 else loss), ms
    st = Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=20, save_every=5, log_every=2), tmp_path,
                 nan_at_step_7).fit()
    # read at the next log row (step 8): steps 7 and 8 are never written anywhere
    assert st["state"] == "failed" and "nan by step 8" in st["message"]
    assert [p.name for p in checkpoint_dirs(tmp_path)] == ["step-5"]
    assert max(r["step"] for r in read_metrics(tmp_path)[0]) == 6


def test_metrics_may_be_tensors_and_undefined_ones_are_left_out(tmp_path, gpu_paths):
    def loss(model, b):
        total, ms = pretraining_loss(model, b)
        return total, {**{k: torch.tensor(v) for k, v in ms.items()}, "auc": torch.tensor(float("nan"))}
    Trainer(tiny_model(), TinyBatches(), TrainArgs(steps=4, log_every=2), tmp_path, loss).fit()
    train = [r for r in read_metrics(tmp_path)[0] if r["split"] == "train"]
    assert len(train) == 2 and all("auc" not in r and isinstance(r["grad_norm"], float) for r in train)


def test_prefetcher_hands_on_the_source_error_and_stops_its_worker():
    class Broken:
        def __iter__(self):
            yield {"x": torch.zeros(1)}
            raise KeyError("no such column")

        def state_dict(self):
            return {}
    p = Prefetcher(Broken())
    it = iter(p)
    assert torch.equal(next(it)["x"], torch.zeros(1))
    with pytest.raises(KeyError, match="no such column"):
        next(it)
    p.close()
    assert not mp.active_children()


def test_ctrl_c_is_the_trainers_not_the_batch_workers():
    """Ctrl-C reaches every process of the terminal's group: the worker must go on building batches while
    the trainer finishes its step and saves (a dead worker would fail the run instead)."""
    import os
    import signal
    p = Prefetcher(TinyBatches())
    it = iter(p)
    first = next(it)
    (worker,) = mp.active_children()
    os.kill(worker.pid, signal.SIGINT)
    os.kill(worker.pid, signal.SIGTERM)
    more = [next(it) for _ in range(10)]  # past the queue's depth: built after the signals
    assert worker.is_alive() and all(b["input_ids"].shape == first["input_ids"].shape for b in more)
    p.close()
