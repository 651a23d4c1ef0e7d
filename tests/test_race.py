"""The race end to end on a tiny budget: recipes pre-trained for the same minutes (timed trial ->
steps), fine-tuned over seeds, one table; a finished race re-opens, a cut one resumes after its parts."""
import json

import pytest
import torch

from bertlab.train.race import estimate_minutes, race, recipe_spec
from bertlab.train.specs import RaceSpec


def write_task(path, n=120):
    import random
    rng = random.Random(0)
    good, bad = "great superb moving funny brilliant".split(), "awful boring dull weak clumsy".split()
    nouns = "film movie story plot acting ending".split()
    rows = ["text,label"]
    for i in range(n):
        w = rng.sample(good if i % 2 == 0 else bad, 2)
        a = rng.sample(nouns, 2)
        rows.append(f"the {a[0]} was {w[0]} and the {a[1]} was {w[1]} .,{'pos' if i % 2 == 0 else 'neg'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def tiny_race(corpus, task, **kw):
    return RaceSpec(**{**dict(recipes=("mlm", "static"), minutes=0.04, preset="tiny", corpus=str(corpus), max_docs=None,
                              batch_size=8, task=str(task), seeds=2), **kw})


def test_recipes_share_the_shape_and_differ_in_their_own_fields():
    r = RaceSpec(preset="mini")
    mlm, electra = recipe_spec(r, "mlm"), recipe_spec(r, "electra")
    unshared, static = recipe_spec(r, "albert-unshared"), recipe_spec(r, "static")
    assert (mlm.layers, mlm.hidden, electra.layers, electra.hidden, electra.embedding_size) == (4, 256, 4, 256, 256)
    assert (mlm.objective, electra.arch, electra.generator_size, static.static_masks) == ("mlm", "electra", 0.25, 1)
    assert unshared.layer_groups == 4 and recipe_spec(r, "albert").layer_groups == 1
    one_by_one, side = estimate_minutes(RaceSpec(minutes=3)), estimate_minutes(RaceSpec(minutes=3, side_by_side=True))
    assert one_by_one - side == pytest.approx(3) and side > 3  # side by side: the minutes once, not per recipe
    with pytest.raises(ValueError, match="recipes must be distinct names"):
        RaceSpec(recipes=("mlm", "gpt"))
    with pytest.raises(ValueError, match="recipes must be distinct names"):
        RaceSpec(recipes=("mlm", "mlm"))


@pytest.mark.slow
def test_a_tiny_race_runs_end_to_end_and_reopens(tmp_path, small_corpus, capsys):
    torch.set_num_threads(1)
    task = write_task(tmp_path / "task.csv")
    out = tmp_path / "race"
    said = []
    res = race(out, tiny_race(small_corpus, task), log=said.append)
    assert res["state"] == "finished" and "about" in said[0] and "min in all" in said[0]  # said before it starts
    rows = {r["recipe"]: r for r in res["rows"]}
    assert set(rows) == {"mlm", "static"}
    for r in rows.values():
        assert r["steps"] >= 12 and 0 < r["minutes"] < 0.2 and r["params"] > 0 and r["latency_ms"] > 0
        assert len(r["finetune_acc"]) == 2 and all(0 <= a <= 1 for a in r["finetune_acc"])
        assert 0 <= r["mlm_acc"] <= 1 and r["flops_per_step"] > 0
    assert rows["mlm"]["params"] == rows["static"]["params"]  # the same shape
    assert json.loads((out / "runs" / "static" / "spec.json").read_text())["static_masks"] == 1
    table = (out / "table.md").read_text()
    assert "| mlm: BERT: MLM only |" in table and "2 seeds" in table and not (out / "trials").exists()
    # re-opened from the command line: the table, nothing trained again
    from bertlab.app.cli import main
    assert main(["race", "--out", str(out), "--resume"]) == 0
    assert "| static: BERT MLM only" in capsys.readouterr().out
    # a race cut after its pre-training goes on from its parts: fine-tunes only
    (out / "results.json").unlink()
    for p in (out / "parts").glob("*-seed1.json"):
        p.unlink()
    again = race(out, tiny_race(small_corpus, task), resume=True, log=said.append)
    assert [r["steps"] for r in again["rows"]] == [r["steps"] for r in res["rows"]]
    assert [r["finetune_acc"][0] for r in again["rows"]] == [r["finetune_acc"][0] for r in res["rows"]]
    with pytest.raises(ValueError, match="already holds a race"):
        race(out, tiny_race(small_corpus, task), log=said.append)
