"""The compute calculator: each formula against a value worked by hand, BERT-base's published budget,
Chinchilla's closed form against a brute-force minimum, and `python -m bertlab compute`'s exit codes."""
import json
import math

import pytest

from bertlab.analysis import compute, sizing
from bertlab.app import cli, compute_cli
from bertlab.config import preset

BERT = [(128, 0.9), (512, 0.1)]


def test_tokens_and_6nd_by_hand():
    t = compute.tokens(1_000_000, 256, BERT)
    assert t["tokens"] == 1e6 * 256 * (0.9 * 128 + 0.1 * 512) == 42_598_400_000
    assert t["mean_seq_len"] == pytest.approx(166.4)
    assert compute.flops_6nd(1e8, 1e9)["flops"] == 6e17
    assert r"6ND" in compute.flops_6nd(1e8, 1e9)["formula"]


def test_exact_count_is_the_size_model_times_the_sequences():
    c = preset("tiny")
    r = compute.flops_exact(c, 10, 4, [(64, 0.5), (128, 0.5)])
    f64, f128 = (sizing.flops(c, L, training=True)["total_sparse"] for L in (64, 128))
    assert r["flops"] == pytest.approx(10 * 4 * (0.5 * f64 + 0.5 * f128))
    dense = compute.flops_exact(c, 10, 4, [(128, 1.0)], sparse=False)["flops"]
    assert dense == 40 * sizing.flops(c, 128, training=True)["total"]


def test_kaplan_by_hand():
    assert compute.kaplan_loss_n(8.8e13)["loss"] == pytest.approx(1.0)
    assert compute.kaplan_loss_n(8.8e11)["loss"] == pytest.approx(100 ** 0.076)
    assert compute.kaplan_loss_d(5.4e10)["loss"] == pytest.approx(1000 ** 0.095)
    assert "nats" in compute.kaplan_loss_n(1e8)["formula"]
    base = preset("base")  # Kaplan's N leaves out the word, position and type tables
    assert compute.non_embedding_params(base) == 12 * sizing.layer_params(base)["total"] + 768 * 768 + 768


def test_chinchilla_rule_gives_chinchilla_itself():
    """Chinchilla's own budget (6 · 70e9 · 1.4e12 FLOPs) gives back 70B parameters and 1.4T tokens."""
    r = compute.chinchilla_rule(6 * 70e9 * 1.4e12)
    assert r["n"] == pytest.approx(70e9, rel=0.01) and r["d"] == pytest.approx(1.4e12, rel=0.01)
    assert r["d"] / r["n"] == pytest.approx(20)


@pytest.mark.parametrize("budget", [1e18, 2.38e19, 1e23])
def test_chinchilla_closed_form_is_the_minimum_on_the_budget_line(budget):
    r = compute.chinchilla_fit(budget)
    assert 6 * r["n"] * r["d"] == pytest.approx(budget)
    grid = [10 ** (k / 200) for k in range(4 * 200, 13 * 200)]  # N from 1e4 to 1e13
    best = min(grid, key=lambda n: compute.chinchilla_loss(n, budget / (6 * n)))
    assert r["n"] == pytest.approx(best, rel=0.012)
    assert r["loss"] <= compute.chinchilla_loss(best, budget / (6 * best)) + 1e-12


def test_bert_base_matches_electras_published_budget():
    """ELECTRA prints 6.4e19 train FLOPs for BERT-Base (Table 1) and 1.9e20 for BERT-Large (Table 8);
    counted their way (1M steps × 256 × 512 tokens, backward = forward) ours round to the same."""
    for name, printed in (("base", "6.4e+19"), ("large", "1.9e+20")):
        f = compute.electra_count(preset(name), 512, 256, 1_000_000)["flops"]
        assert f"{f:.1e}" == printed, (name, f)
    assert compute.EXAMPLES["bert-base"]["electra_flops"] == 6.4e19


def test_bert_base_worked_example():
    r = compute.worked_example("bert-base")
    assert r["tokens"]["tokens"] == 42_598_400_000
    C = r["flops_exact"]["flops"]
    assert 2.0e19 < C < 3.0e19 and C < r["flops_6nd"]["flops"]  # look-ups cost no matmul: 6ND overcounts
    u = r["implied_utilization"]["tpu-v2"]  # 16 chips × 45 TFLOP/s × 4 days
    assert u == pytest.approx(C / (16 * 45e12 * 4 * 86400))
    rate = compute.throughput("tpu-v2", "bf16", u, 16)
    assert compute.train_time(C, rate["flops_per_second"])["seconds"] == pytest.approx(4 * 86400)
    large = compute.worked_example("bert-large")
    assert large["flops_exact"]["flops"] > 3 * C
    with pytest.raises(ValueError, match="example must be"):
        compute.worked_example("bert-huge")


def test_time_and_cost_by_hand():
    r = compute.throughput("a100", "bf16", 0.5, 8)
    assert r["flops_per_second"] == 312e12 * 0.5 * 8
    assert compute.throughput(flops_per_second=1e12)["flops_per_second"] == 1e12
    assert compute.train_time(3.6e15, 1e12)["seconds"] == pytest.approx(3600)
    c = compute.cost(3600, 2.0, 4)
    assert c["dollars"] == pytest.approx(8.0) and "USD" in c["formula"]
    assert compute.throughput("cpu", measured_cpu=1e10, utilization=1)["flops_per_second"] == 1e10
    assert compute.human_time(90) == "1.5 minutes" and compute.human_time(4 * 86400) == "4.0 days"


@pytest.mark.parametrize("call, message", [
    (lambda: compute.throughput("tpu-v3", "fp32"), "no fp32"),
    (lambda: compute.throughput("tpu-v9"), "accelerator must be one of"),
    (lambda: compute.throughput("a100", "fp8"), "dtype must be one of"),
    (lambda: compute.throughput("a100", utilization=1.5), "at most 1"),
    (lambda: compute.throughput("a100", utilization=0), "more than 0"),
    (lambda: compute.throughput("cpu"), "measured"),
    (lambda: compute.flops_6nd(-1, 10), "more than 0"),
    (lambda: compute.flops_6nd(1e8, math.nan), "more than 0"),
    (lambda: compute.flops_6nd(1e8, "many"), "must be a number"),
    (lambda: compute.tokens(1e20, 256, BERT), "steps must be at most"),
    (lambda: compute.chinchilla_fit(1e40), "at most"),
    (lambda: compute.parse_schedule("128:0.9"), "add up to 1"),
    (lambda: compute.parse_schedule("12x"), "LENGTH"),
    (lambda: compute.parse_schedule(""), "empty"),
    (lambda: compute.parse_schedule("0"), "more than 0"),
    (lambda: compute.estimate(preset("tiny"), batch=8), "give the tokens"),
])
def test_bad_input_says_what(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_schedule_text():
    assert compute.parse_schedule("128") == [(128, 1.0)]
    assert compute.parse_schedule(" 128:0.9, 512:0.1 ") == BERT
    assert compute.parse_schedule(256) == [(256, 1.0)]


# ---- the command line ---------------------------------------------------------------------------
def _run(capsys, *argv):
    rc = cli.main(["compute", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_example_and_json(capsys):
    rc, out, err = _run(capsys, "--example", "bert-base", "--accelerator", "tpu-v3", "--count", "16",
                        "--price-per-hour", "2")
    assert rc == 0 and "ELECTRA prints 6.4e19" in out and "$" in out and "TPU v3" in out
    rc, out, _ = _run(capsys, "--example", "bert-base", "--json")
    data = json.loads(out)
    assert rc == 0 and data["tokens"]["tokens"] == 42_598_400_000
    assert f"{data['electra_count']['flops']:.1e}" == "6.4e+19" and "formula" in data["flops_6nd"]


def test_cli_model_tokens_and_measured_cpu(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(compute_cli, "measure_cpu", lambda: 2e10)
    rc, out, _ = _run(capsys, "--model", "tiny", "--tokens", "1e7", "--accelerator", "cpu", "--utilization", "0.5",
                      "--json")
    data = json.loads(out)
    assert rc == 0 and data["rate"]["flops_per_second"] == 1e10 and data["tokens"]["tokens"] == pytest.approx(1e7)
    preset("mini").to_json_file(tmp_path / "config.json")
    rc, out, _ = _run(capsys, "--model", str(tmp_path), "--steps", "100", "--batch", "8", "--budget", "1e18",
                      "--flops-per-second", "1e12")
    assert rc == 0 and "budget 1.00e18" in out and "time" in out
    rc, out, _ = _run(capsys, "--model", "roberta:base", "--steps", "10")
    assert rc == 0 and "roberta base" in out


@pytest.mark.parametrize("argv", [
    ["--steps", "-5"], ["--steps", "0"], ["--steps", "1e30"], ["--tokens", "abc"], ["--model", "nope", "--steps", "1"],
    ["--steps", "10", "--accelerator", "tpu-v9"], ["--steps", "10", "--accelerator", "a100", "--utilization", "2"],
    ["--steps", "10", "--price-per-hour", "3"], ["--steps", "10", "--seq-len", "128:0.5"],
    ["--example", "gpt-3"], [], ["--steps", "10", "--tokens", "10"], ["--steps", "10", "--budget", "-1"],
    ["--steps", "10", "--accelerator", "tpu-v2", "--dtype", "fp32"],
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, argv):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
