"""BERTLAB_DEVICE: one setting says where the views' models and the web's training jobs run (the GPU
where there is one); a bad value is one clear line at start-up; the model card says the device.
CPU only: a GPU is only ever pretended (torch.cuda.is_available patched), never used."""
import pytest
import torch

from bertlab.app import jobs
from bertlab.app.identity import new_id
from bertlab.app.limits import app_device, device_label
from bertlab.app.ui.shared import models
from bertlab.app.ui.training import jobs_ui, pretrain_tab
from bertlab.train import runs
from bertlab.train.specs import (
    DistillSpec,
    FinetuneSpec,
    PretrainSpec,
    RaceSpec,
    ScalingSpec,
)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def one_gpu(monkeypatch):
    """PyTorch says it sees one GPU; nothing is ever moved there."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.mark.parametrize("value", [None, "", "auto", " AUTO ", "cpu", "CPU"])
def test_auto_and_cpu_are_the_cpu_without_a_gpu(no_gpu, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("BERTLAB_DEVICE", raising=False)
    else:
        monkeypatch.setenv("BERTLAB_DEVICE", value)
    assert app_device() == "cpu"


@pytest.mark.parametrize("value", ["cuda", "cuda:0", "cuda:3"])
def test_a_gpu_asked_for_where_there_is_none_is_one_clear_message(no_gpu, monkeypatch, value):
    monkeypatch.setenv("BERTLAB_DEVICE", value)
    with pytest.raises(ValueError, match=f"BERTLAB_DEVICE={value}, but PyTorch sees no CUDA GPU here.*auto or cpu"):
        app_device()


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "cuda:-1", "mps0", "cuda 0", "1"])
def test_garbage_is_one_clear_message(monkeypatch, value):
    monkeypatch.setenv("BERTLAB_DEVICE", value)
    with pytest.raises(ValueError, match=r"BERTLAB_DEVICE=.*say auto, cpu, cuda or cuda:N"):
        app_device()


def test_auto_picks_the_gpu_where_pytorch_sees_one(one_gpu, monkeypatch):
    monkeypatch.delenv("BERTLAB_DEVICE", raising=False)
    assert app_device() == "cuda"
    for value, device in [("auto", "cuda"), ("cuda", "cuda"), ("cuda:0", "cuda:0"), ("cpu", "cpu")]:
        monkeypatch.setenv("BERTLAB_DEVICE", value)
        assert app_device() == device
    monkeypatch.setenv("BERTLAB_DEVICE", "cuda:1")
    with pytest.raises(ValueError, match=r"BERTLAB_DEVICE=cuda:1, but this server has 1 GPU \(cuda:0\)"):
        app_device()


def test_a_bad_setting_stops_the_app_with_one_line(no_gpu, monkeypatch):
    import app
    monkeypatch.setenv("BERTLAB_DEVICE", "gpu")
    with pytest.raises(SystemExit) as e:
        app.check_settings()
    assert str(e.value).startswith("bertlab: BERTLAB_DEVICE='gpu'") and "\n" not in str(e.value)
    monkeypatch.setenv("BERTLAB_DEVICE", "cpu")
    assert app.check_settings() == "cpu"


def test_the_model_card_names_the_device(no_gpu, monkeypatch):
    monkeypatch.delenv("BERTLAB_DEVICE", raising=False)
    model, _ = models.get(models.DEFAULT)
    assert next(model.parameters()).device.type == "cpu"
    threads = torch.get_num_threads()
    assert device_label("cpu") == f"CPU ({threads} thread{'s' * (threads != 1)})"
    card = models.describe(models.DEFAULT)
    assert card.endswith(f" · runs on {device_label('cpu')}"), card


def test_the_cache_counts_packed_copies_on_the_cpu_only():
    model, tok = models.get(models.DEFAULT)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert models._bytes((model, tok, None, "cpu")) == 2 * weights  # fast.optimize's packed copies
    assert models._bytes((model, tok, None, "cuda")) == weights  # GPU memory counts against the same budget


def test_a_manager_gives_jobs_its_device_where_they_have_one(tmp_path, one_gpu, monkeypatch):
    spec = PretrainSpec(device="cpu")
    assert jobs.JobManager(tmp_path / "a").on_device(spec) is spec  # no device: each spec keeps its own
    mgr = jobs.JobManager(tmp_path / "b", device="cuda:0")
    for kind in (PretrainSpec, FinetuneSpec, DistillSpec, RaceSpec, ScalingSpec):
        s = kind()
        if hasattr(s, "device"):
            assert mgr.on_device(s).device == "cuda:0", kind
        else:
            assert mgr.on_device(s) is s, kind  # a spec with no device field is left as it is
    mgr = jobs.JobManager(tmp_path / "c", device=app_device)  # as the web's: read as each job starts
    monkeypatch.setenv("BERTLAB_DEVICE", "auto")
    assert mgr.on_device(spec).device == "cuda"
    monkeypatch.setenv("BERTLAB_DEVICE", "cpu")
    assert mgr.on_device(PretrainSpec(device="cuda")).device == "cpu"


def test_the_default_manager_is_on_the_apps_device(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "_default", None)
    monkeypatch.setenv("BERTLAB_RUNS_DIR", str(tmp_path / "runs"))
    assert jobs.default_manager().device is app_device


@pytest.fixture
def fake_trainer(tmp_path, monkeypatch):
    """The web's manager, but its "python" exits at once: the spec.json a start writes is what we read."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    mgr = jobs.JobManager(tmp_path / "runs", python=str(fake), nice=0, device=app_device)
    monkeypatch.setattr(jobs, "_default", mgr)
    return mgr


FORM = dict(preset="tiny", layers=1, hidden=32, heads=2, intermediate=64, vocab_size=300, start_from=pretrain_tab.SCRATCH,
            corpus="imdb", upload=None, text_column="text", hub_name="", max_docs=0, max_len=32, batch_size=8,
            steps=100, lr=1e-3, mask_rate=0.15, objective="nsp", bf16=False)


def test_a_job_started_from_the_web_trains_on_the_apps_device(fake_trainer, monkeypatch):
    monkeypatch.setenv("BERTLAB_DEVICE", "cpu")
    jobs_ui.launch(new_id("."), "on-cpu", pretrain_tab.form_spec(**FORM).replace(device="cuda"))
    assert runs.Run(fake_trainer.root / "on-cpu").spec().device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # pretend: the fake trainer never trains
    monkeypatch.setenv("BERTLAB_DEVICE", "auto")
    jobs_ui.launch(new_id("."), "on-gpu", pretrain_tab.form_spec(**FORM))
    assert runs.Run(fake_trainer.root / "on-gpu").spec().device == "cuda"
