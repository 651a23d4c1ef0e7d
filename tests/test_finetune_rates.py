"""The Fine-tune tab's chart of runs (issue 32, items 12 and 9): each run is placed by the rate its
spec.json recorded (BERT-base's published band and this model's default beside them) or by the labelled
examples it trained on (a learning curve, random weights a line of their own), against its last
held-out score; a line per method on a log axis; runs without a score are left out."""
import json

import pytest

from bertlab.app.ui.training import finetune_rates as R
from bertlab.train.runs import Run
from bertlab.train.specs import FinetuneSpec


def run(folder, method, lr, score=None, key="accuracy", init="pretrained", examples=100, model="default"):
    Run(folder).write_spec(FinetuneSpec(method=method, lr=lr, init=init, model=model))
    Run(folder).write_facts(train_examples=examples)
    rows = [{"split": "train", "step": 1, "loss": 0.7}]
    if score is not None:
        rows.append({"split": "eval", "step": 2, key: score})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_points_and_the_chart(tmp_path):
    runs = [run(tmp_path / "a", "full", 3e-5, 0.55), run(tmp_path / "b", "full", 3e-4, 0.61),
            run(tmp_path / "c", "lora", 1e-3, 0.60), run(tmp_path / "d", "full", 1e-3)]
    points = [R.point(d) for d in runs]
    common = {"init": "pretrained", "start": "shipped", "examples": 100, "metric": "accuracy"}
    assert points[:3] == [{"method": "full", "lr": 3e-5, "score": 0.55, **common},
                          {"method": "full", "lr": 3e-4, "score": 0.61, **common},
                          {"method": "lora", "lr": 1e-3, "score": 0.60, **common}]
    assert points[3] is None  # no evaluation yet
    fig = R.figure(points[:3], ["a", "b", "c"])
    full, lora = fig.data
    assert list(full.x) == [3e-5, 3e-4] and list(full.y) == [0.55, 0.61] and list(lora.x) == [1e-3]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.title.text == "accuracy"
    notes = {a.text: 10 ** a.x for a in fig.layout.annotations}  # log-axis annotations sit at log10(x)
    assert notes == {"BERT-base": pytest.approx(R.BERT_RANGE[0]), "full's default here": pytest.approx(R.FULL_LR)}
    band = fig.layout.shapes[0]
    assert (band.x0, band.x1) == R.BERT_RANGE and fig.layout.shapes[1].x0 == R.FULL_LR == FinetuneSpec.DEFAULT_LR["full"]
    assert R.point(run(tmp_path / "e", "full", 1e-4, 0.8, key="pearson"))["metric"] == "Pearson r"
    (tmp_path / "pre").mkdir()
    assert R.point(tmp_path / "pre") is None  # not a fine-tune run


def test_a_learning_curve_by_labelled_examples(tmp_path):
    runs = [run(tmp_path / f"{init}{n}", "full", 3e-4, score, init=init, examples=n)
            for init, n, score in (("pretrained", 50, 0.55), ("pretrained", 1000, 0.70), ("random", 50, 0.49),
                                   ("random", 1000, 0.51))]
    fig = R.figure([R.point(d) for d in runs], [d.name for d in runs], by="labelled examples")
    pre, rnd = fig.data
    assert list(pre.x) == [50, 1000] and list(pre.y) == [0.55, 0.70] and pre.line.dash == "solid"
    assert list(rnd.x) == [50, 1000] and rnd.name.endswith("random weights") and rnd.line.dash == "dash"
    assert not fig.layout.shapes and fig.layout.xaxis.title.text == "labelled examples"


def test_an_adapted_start_is_a_dotted_line_of_its_own(tmp_path):
    """issue 32, item 10: fine-tuning from a TAPT run beside the shipped model, by labelled examples; the run's
    name is said, never the server path it was read from."""
    runs = [run(tmp_path / f"{m}{n}", "full", 3e-4, score, examples=n, model=model)
            for m, model, n, score in (("s", "default", 50, 0.55), ("s", "default", 500, 0.66),
                                       ("t", "/srv/runs/tapt-1/model", 50, 0.58), ("t", "/srv/runs/tapt-1/model", 500, 0.68))]
    fig = R.figure([R.point(d) for d in runs], [d.name for d in runs], by="labelled examples")
    shipped, adapted = fig.data
    assert shipped.name.endswith("from shipped") and shipped.line.dash == "solid" and list(shipped.y) == [0.55, 0.66]
    assert adapted.name.endswith("from tapt-1") and adapted.line.dash == "dot" and list(adapted.y) == [0.58, 0.68]
    assert "/srv" not in fig.to_json()
    assert [R.start_name(m) for m in ("default", None, "hub/bert-mini", "runs/x/")] == ["shipped", "shipped", "bert-mini", "x"]
