"""bench/bench_gpu.py on a CPU: its --quick run end to end (a subprocess, tiny sizes) and its reader
of a pretrain run's metrics.jsonl. Nothing here needs a GPU."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "bench_gpu.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _fake_run(folder: Path, rates, spec=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"step": 10 * (i + 1), "loss": 5.0, "tokens_per_s": v, "split": "train"} for i, v in enumerate(rates)]
    rows.insert(2, {"step": 20, "split": "eval", "mlm_loss": 4.2})  # evaluations have no tokens_per_s
    text = "\n".join(json.dumps(r) for r in rows) + '\n{"step": 99, "tokens_'  # a half-written last line
    (folder / "metrics.jsonl").write_text(text)
    (folder / "spec.json").write_text(json.dumps(spec or {"kind": "pretrain", "preset": "tiny", "batch_size": 2,
                                                          "max_len": 16, "bf16": False, "vocab_size": 1000}))
    return folder


def test_cli_reader_takes_the_median_after_the_first_rows(tmp_path):
    m = _module()
    run = _fake_run(tmp_path / "r", [10, 50, 1000, 1100, 1200, 900, 5000])
    s = m.cli_steady(run)  # skips 10, 50, 1000
    assert s["rows"] == 7 and s["used"] == 4 and s["median_tokens_per_s"] == 1150 and s["first_step"] == 40
    assert m.cli_steady(run, skip=0)["median_tokens_per_s"] == 1000
    assert m.cli_steady(_fake_run(tmp_path / "short", [10, 20]))["median_tokens_per_s"] == 20  # the last row
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text('{"split": "eval"}\n')
    with pytest.raises(ValueError, match="no train rows"):
        m.cli_steady(tmp_path / "empty")
    shape = m.cli_shape(run)
    assert (shape["preset"], shape["batch"], shape["seq_len"], shape["config"].vocab_size) == ("tiny", 2, 16, 1000)
    assert shape["config"].hidden_dropout_prob == 0.0


@pytest.mark.slow
def test_quick_run_writes_the_json_and_the_tables(tmp_path):
    run = _fake_run(tmp_path / "run", [100, 100, 100, 200, 300, 200])
    out = tmp_path / "gpu.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out), "--cli-run", f"tiny={run}",
                           "--cli-run", f"gone={tmp_path / 'nowhere'}"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(out.read_text())
    assert {"device", "torch", "transformers", "gemm", "forward", "train", "cli", "errors"} <= set(r)
    assert r["device_type"] == "cpu" and r["quick"] and r["errors"] == []
    assert r["gemm"]["tflops"] > 0
    assert [(f["batch"], f["seq_len"]) for f in r["forward"]] == [(2, 16), (1, 32)]
    for f in r["forward"]:
        assert f["ours_ms"] > 0 and f["transformers_ms"] > 0 and f["ratio"] > 0 and 0 < f["ours_mfu"]
    (t,) = r["train"]
    assert t["batch"] == 8 and t["ours_tokens_per_s"] > 0 and t["transformers_tokens_per_s"] > 0
    ok, gone = r["cli"]
    assert ok["median_tokens_per_s"] == 200 and ok["bare_tokens_per_s"] > 0 and ok["ratio"] > 0
    assert "error" in gone
    assert "### Forward" in done.stdout and "| tiny | 2 × 16 |" in done.stdout and "goal: ≥ 0.8" in done.stdout


def test_bad_sections_are_refused():
    m = _module()
    with pytest.raises(SystemExit):
        m.main(["--quick", "--sections", "gemm,nonsense"])


def test_the_gpu_oracle_check_runs_on_a_cpu_and_finds_every_member_and_method_equal(tmp_path):
    """bench/gpu_oracles.py is the GPU's copy of the oracle tests: on a CPU it must pass the same way, and
    it must cover every member's classes and every peft-format method (a check that skipped one would pass)."""
    from bertlab import family
    from bertlab.heads import KINDS
    out = tmp_path / "oracles.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_oracles.py"), "--device", "cpu", "--json", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert set(res["models"]) == set(family.MEMBERS) and res["failed"] == []
    for member, archs in res["models"].items():
        assert len(archs) == len(KINDS) + 1 + (member == "electra"), archs  # heads, pre-training (+ generator)
        assert all(d["fp32"] <= 1e-5 and d["fp32_sdpa"] <= 1e-5 for d in archs.values())
    virtual = [n for n, m in family.MEMBERS.items() if not m.no_virtual]  # prompt tuning; prefix on three
    assert len(res["methods"]) == 2 * len(family.MEMBERS) + len(virtual) + 3
    assert all(d["fp32"] <= 1e-5 for d in res["methods"].values())
