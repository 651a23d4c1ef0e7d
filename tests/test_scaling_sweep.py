"""The scaling sweep: the power-law fits recover a known law with intervals that cover it, refuse too
few points, the compute frontier picks the best run per FLOP budget, and a tiny real sweep trains
four sizes on identical data, writes its table, and reuses its finished runs on a second call."""
import json

import numpy as np
import pytest

from bertlab.analysis import scaling_fit
from bertlab.app import cli
from bertlab.train import scaling
from bertlab.train.specs import ScalingSpec, parse_size


def test_offset_fit_recovers_a_known_law_with_intervals_covering_it():
    rng = np.random.default_rng(0)
    a, alpha, c = 40.0, 0.35, 2.5
    x = np.logspace(4, 7, 9)
    y = (a * x ** -alpha + c) * (1 + 0.004 * rng.standard_normal(x.size))
    fit = scaling_fit.power_law_offset(x, y)
    for name, truth in (("a", a), ("alpha", alpha), ("c", c)):
        lo, hi = fit[f"{name}_ci"]
        assert lo <= truth <= hi, (name, truth, lo, hi)
        assert lo <= fit[name] <= hi
    assert abs(fit["alpha"] - alpha) < 0.05 and abs(fit["c"] - c) < 0.2
    assert fit["r2"] > 0.99 and fit["n"] == 9
    assert np.allclose(scaling_fit.predict(fit, x), y, rtol=0.02)


def test_pure_power_law_recovers_kaplans_form():
    x = np.logspace(5, 8, 5)
    y = (8.8e13 / x) ** 0.076  # Kaplan's L(N), no noise
    fit = scaling_fit.power_law(x, y)
    assert fit["alpha"] == pytest.approx(0.076, abs=1e-9) and fit["a"] == pytest.approx(8.8e13 ** 0.076, rel=1e-6)
    assert fit["r2"] == pytest.approx(1.0) and fit["c"] == 0.0
    noisy = y * (1 + 0.01 * np.random.default_rng(1).standard_normal(x.size))
    lo, hi = scaling_fit.power_law(x, noisy)["alpha_ci"]
    assert lo < 0.076 < hi and hi - lo > 0


def test_too_few_points_or_bad_values_are_one_sentence():
    with pytest.raises(ValueError, match="at least 4 points"):
        scaling_fit.power_law_offset([1e4, 1e5, 1e6], [5.0, 4.0, 3.5])
    with pytest.raises(ValueError, match="at least 4 points"):  # four points but only three distinct sizes
        scaling_fit.power_law_offset([1e4, 1e5, 1e6, 1e6], [5.0, 4.0, 3.5, 3.4])
    with pytest.raises(ValueError, match="at least 3 points"):
        scaling_fit.power_law([1e4, 1e5], [5.0, 4.0])
    with pytest.raises(ValueError, match="positive"):
        scaling_fit.power_law([1e4, 1e5, 0], [5.0, 4.0, 3.0])
    fits = scaling_fit.fit_all([1e4, 1e5, 1e6], [5.0, 4.0, 3.5])
    assert set(fits) == {"power"}  # three points: the pure power law only


def test_frontier_names_the_best_run_at_each_budget():
    # the small model is ahead early, the large one overtakes it: the frontier switches once
    small = [(1e9, 6.0), (1e10, 5.0), (1e11, 4.6)]
    large = [(1e10, 5.5), (1e11, 4.4), (1e12, 3.9)]
    fr = scaling_fit.frontier({"small": small, "large": large}, points=30)
    best = [f["best"] for f in fr]
    assert best[0] == "small" and best[-1] == "large"
    switch = next(i for i, b in enumerate(best) if b == "large")
    assert all(b == "small" for b in best[:switch]) and all(b == "large" for b in best[switch:])
    assert fr[0]["flops"] == pytest.approx(1e9) and fr[-1]["flops"] == pytest.approx(1e12)
    assert all(f["loss"] <= np.interp(np.log(f["flops"]), np.log([c for c, _ in small]), [v for _, v in small])
               for f in fr if f["flops"] <= 1e11)


def test_spec_sizes_modes_and_limits():
    assert parse_size("tiny") == (2, 128, 2) and parse_size("2x64") == (2, 64, 1) and parse_size("4x256x8") == (4, 256, 8)
    for bad in ("huge", "2x", "2x30x4", "0x64"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)
    assert ScalingSpec().mode == "size" and len(ScalingSpec().sizes) >= 4
    assert ScalingSpec(sizes=("2x64",), tokens=(1e5, 2e5, 4e5)).mode == "data"
    with pytest.raises(ValueError, match="not both"):
        ScalingSpec(sizes=("2x64", "2x128"), tokens=(1e5, 2e5))
    with pytest.raises(ValueError, match="at least 3"):
        ScalingSpec(sizes=("2x64", "2x128"))
    with pytest.raises(ValueError, match="distinct"):
        ScalingSpec(sizes=("2x64", "2x64x1", "tiny"))
    assert scaling.parse_tokens("2M") == 2e6 and scaling.parse_tokens("500k") == 5e5
    assert scaling.parse_tokens("1.5e6") == 1.5e6
    with pytest.raises(ValueError, match="not a number"):
        scaling.parse_tokens("lots")


def test_bf16_is_how_a_run_trains_not_which_run_it_is():
    """A sweep folder made before bf16 was a field (its runs fp32) is reused by today's default (bf16 on);
    the recipe still decides: another learning rate is another run."""
    spec = ScalingSpec(sizes=("1x64", "2x128", "3x192"), tokens=(1e5,))
    assert spec.bf16 and ScalingSpec.from_dict({"kind": "scaling", "sizes": ["2x64", "2x128", "4x128"]}).bf16
    name, shape, t = scaling.points(spec)[0]
    new = scaling.run_spec(spec, shape, t)
    old = scaling.run_spec(spec.replace(bf16=False), shape, t)
    assert new.bf16 and not old.bf16 and scaling._same(old.to_dict(), new.to_dict())
    assert not scaling._same(scaling.run_spec(spec.replace(lr=3e-3), shape, t).to_dict(), new.to_dict())


TINY = dict(sizes=("1x16x1", "1x32x1", "2x32x1", "2x48x1"), tokens=(8 * 16 * 3,), vocab_size=120, max_len=16,
            batch_size=8, eval_batches=1, lr=3e-3, threads=1)


def test_a_tiny_sweep_trains_reuses_and_writes_its_table(tmp_path, small_corpus, capsys):
    spec = ScalingSpec(corpus=str(small_corpus), **TINY)
    out = tmp_path / "scale"
    heard = []
    res = scaling.sweep(out, spec, log=lambda m: None, on_part=lambda p, reused: heard.append((p["name"], reused)))
    assert res["state"] == "finished" and [r for _, r in heard] == [False] * 4
    rows = res["rows"]
    assert [r["non_embedding"] for r in rows] == sorted(r["non_embedding"] for r in rows)
    assert all(r["steps"] == 3 and r["tokens"] == 3 * 8 * 16 for r in rows)
    for r in rows:  # a curve per run: held-out loss at steps 1, 3 (half way and the end), FLOPs growing with it
        assert [c["step"] for c in r["curve"]][-1] == 3 and len(r["curve"]) >= 2
        assert [c["flops"] for c in r["curve"]] == sorted(c["flops"] for c in r["curve"])
        assert r["flops"] == pytest.approx(r["curve"][-1]["flops"]) and r["loss"] == r["curve"][-1]["loss"]
    # every run trained and was scored on the very same data: the first run's prepared folder, copied
    blobs = {(out / "runs" / r["name"] / "data" / "examples.pt").read_bytes() for r in rows}
    assert len(blobs) == 1
    assert {"power", "offset"} <= set(res["fit"]) and res["frontier"]
    table = (out / "table.md").read_text()
    assert all(f"| {r['name']} |" in table for r in rows) and "Kaplan 0.076" in table
    assert json.loads((out / "results.json").read_text())["rows"][0]["name"] == rows[0]["name"]
    stamps = {r["name"]: (out / "runs" / r["name"] / "metrics.jsonl").stat().st_mtime_ns for r in rows}

    # a second call with the same settings reuses every run, and so does the command line
    heard.clear()
    again = scaling.sweep(out, spec, log=lambda m: None, on_part=lambda p, reused: heard.append(reused))
    assert heard == [True] * 4 and [r["loss"] for r in again["rows"]] == [r["loss"] for r in rows]
    assert stamps == {r["name"]: (out / "runs" / r["name"] / "metrics.jsonl").stat().st_mtime_ns for r in rows}
    argv = ["scaling", "--sizes", ",".join(TINY["sizes"]), "--tokens", "384", "--corpus", str(small_corpus),
            "--vocab-size", "120", "--max-len", "16", "--batch-size", "8", "--eval-batches", "1", "--lr", "0.003",
            "--threads", "1", "--out", str(out)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert text.index("about") < text.index("(reused)") < text.index("| run |") < text.index("Kaplan 0.076")
    assert text.count("(reused)") == 4
    # the same folder with another recipe is refused, not silently mixed
    assert cli.main(argv[:-2] + ["--lr", "0.001", "--out", str(out)]) == 2
    assert "other settings" in capsys.readouterr().err
