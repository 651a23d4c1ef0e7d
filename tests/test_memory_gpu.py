"""The memory chapter's device path (analysis.memory_measure.device_chapter, `memory --device`) and the
Scaling tab's GPU section, on a CPU: nothing here needs a GPU."""
import json

import pytest
import torch

from bertlab.analysis import memory_measure
from bertlab.app import cli, memory_cli
from bertlab.app.ui.labs import scaling_memory


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


@pytest.mark.slow
def test_device_chapter_on_the_cpu_gives_sane_numbers():
    c, _ = memory_cli.recipe_config("tiny", seq_len=16)
    r = memory_measure.device_chapter(c, ("fp32",), (2,), (16,), "cpu", reps=2)
    assert r["device_type"] == "cpu" and r["layers"] == c.num_hidden_layers
    (m,) = r["memory"]
    assert "error" not in m, m
    assert m["measured"] > 4 * sum(p.numel() for p in memory_measure.family.build(c).parameters())
    assert abs(m["ratio"] - 1) < 0.10 and m["phase"] in memory_measure.PHASES
    (fit,) = r["fit"]
    assert fit["batch"] is None and "GPU" in fit["note"]
    (s,) = r["speed"]
    assert 0 < s["latency_ms"] < 60_000 and set(s["seq_per_s"]) == {1, 2} and s["best_batch"] in (1, 2)
    assert s["best_seq_per_s"] == max(s["seq_per_s"].values())
    json.dumps(r)  # the command prints it


def test_a_failed_measurement_is_recorded_and_the_rest_goes_on(monkeypatch):
    c, _ = memory_cli.recipe_config("tiny", seq_len=16)
    monkeypatch.setattr(memory_measure, "measure_step", lambda *a, **k: 1 / 0)
    r = memory_measure.device_chapter(c, ("fp32",), (2,), (16,), "cpu", reps=1)
    assert r["memory"][0]["error"].startswith("ZeroDivisionError") and r["speed"][0]["latency_ms"] > 0
    text = memory_cli.chapter_tables(r, "BERT tiny")
    assert "failed: ZeroDivisionError" in text and "ms |" in text


def test_cuda_paths_refuse_plainly_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    c, _ = memory_cli.recipe_config("tiny", seq_len=16)
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        memory_measure.measure_step_cuda(c, 2, 16)
    assert memory_measure.largest_batch(c, 16, device="cpu")["batch"] is None
    assert cli.main(["memory", "--device", "cuda", "--quick"]) == 2  # "error: ... no CUDA GPU" on stderr


@pytest.mark.slow
def test_cpu_bf16_step_is_measured_against_the_bf16_estimate():
    c, _ = memory_cli.recipe_config("tiny", seq_len=16)
    r = memory_measure.measure_step(c, 2, 16, split=False, dtype="bf16")
    assert r["dtype"] == "bf16" and r["estimate"]["weight_copies"] > 0 and 0.8 < r["ratio"] < 1.25
    with pytest.raises(ValueError, match="dtype"):
        memory_measure.measure_step(c, 2, 16, dtype="fp8")


def test_memory_command_help(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["memory", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--device" in out and "--precision" in out and "--quick" in out


@pytest.mark.slow
def test_memory_command_quick_device_run(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert cli.main(["memory", "--device", "cpu", "--quick", "--reps", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "### BERT tiny on CPU" in text and "| fp32 | 2 × 16 | off |" in text and "estimate / measured" in text
    (r,) = json.loads(out.read_text())
    assert r["model"] == "tiny" and {"memory", "fit", "speed", "device"} <= set(r)
    # the estimate path is unchanged, several lengths now allowed
    assert cli.main(["memory", "--model", "tiny", "--batch-size", "4", "--seq-len", "32", "64", "--checkpointing",
                     "off"]) == 0
    text = capsys.readouterr().out
    assert "| tiny | 4 × 32 |" in text and "| tiny | 4 × 64 |" in text


def test_scaling_gpu_section_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    text, raw = scaling_memory.gpu_measure("base", 128)
    assert raw is None and "no GPU" in text and "| bf16 | 32 × 128 |" in text
    assert "V100" in text and "A100" in text and "312" in text  # analysis.compute's published figures
    with pytest.raises(Exception) as e:
        scaling_memory.gpu_measure("large", 128)
    assert type(e.value).__name__ == "Error"


def test_scaling_gpu_section_with_a_gpu_shows_the_measurement(monkeypatch):
    c, _ = memory_cli.recipe_config("tiny", seq_len=16)
    step = {"measured": {"peak": 3e7, "phase": "backward"}, "estimate": {"total": 3.1e7}, "ratio": 1.03, "seconds": 1}
    monkeypatch.setattr(memory_measure, "measure_step", lambda *a, **k: step)
    fake = {"model": "tiny", **memory_measure.device_chapter(c, ("fp32",), (2,), (16,), "cpu", reps=1)}
    monkeypatch.setattr(scaling_memory, "gpu_available", lambda: True)
    monkeypatch.setattr(scaling_memory, "gpu_measured", lambda size, t: (fake,))
    text, raw = scaling_memory.gpu_measure("tiny", 16)
    assert raw is fake and "### BERT tiny on CPU" in text and "sequences/s at batch" in text
    assert "| fp32 | 2 × 16 | off | 30.0 MB | 31.0 MB | 1.030 | backward |" in text


def test_gpu_chapter_flag_falls_back_to_the_cpu(monkeypatch, tmp_path, capsys):
    """`memory --gpu-chapter` (bench/gpu_all.sh's form): the GPU if there is one, else the CPU; base on a
    GPU and tiny on a CPU unless --model says otherwise."""
    calls = []

    def fake(config, precisions, batches, lengths, device, checkpointing, **kw):
        calls.append((config.hidden_size, tuple(precisions), tuple(batches), tuple(lengths), device, checkpointing))
        return {"device": "CPU", "device_type": "cpu", "memory": [], "fit": [], "speed": []}
    monkeypatch.setattr(memory_measure, "device_chapter", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "m.json"
    assert cli.main(["memory", "--gpu-chapter", "--json", str(out)]) == 0
    assert calls == [(128, ("fp32",), (8, 32), (128,), "cpu", (False,))]  # tiny, fp32, off
    assert json.loads(out.read_text())[0]["model"] == "tiny" and "### BERT tiny on CPU" in capsys.readouterr().out
    assert cli.main(["memory", "--device", "cpu", "--quick", "--precision", "fp32", "bf16", "--json"]) == 0
    assert calls[-1] == (128, ("fp32", "bf16"), (2,), (16,), "cpu", (False,))
    assert json.loads(capsys.readouterr().out)[0]["model"] == "tiny"  # --json alone: JSON only on stdout
