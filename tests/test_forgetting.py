"""What fine-tuning forgot (issue 32, item 4): train/evaluate.py's mlm_left puts each run's encoder back
under the masked-word head it started with. Run folders are made by hand (a saved classifier and its
spec.json) so the checks take seconds: an unchanged encoder keeps exactly the starting accuracy, a
disturbed one keeps less, the methods that keep every weight say so, and bad folders are one message."""
import json

import pytest
import torch

import bertlab
from bertlab.app.cli import main
from bertlab.family import encoder_of
from bertlab.heads import save_classifier
from bertlab.train.evaluate import mlm_left, starting_point
from bertlab.train.finetune import build_classifier
from bertlab.train.runs import Run
from bertlab.train.specs import FinetuneSpec

BATCHES = 2


@pytest.fixture(scope="module")
def start():
    hit = {}

    def cached(source, batches, batch_size):  # the shipped model's masks, made once for the module
        if (source, batches, batch_size) not in hit:
            hit[source, batches, batch_size] = starting_point(source, batches, batch_size)
        return hit[source, batches, batch_size]
    return cached


def make_run(folder, method: str, noise: float = 0.0, **spec):
    """A fine-tune run folder as finetune leaves it: spec.json and model/ (the encoder disturbed by `noise`)."""
    s = FinetuneSpec(method=method, **spec)
    torch.manual_seed(0)
    net, tok = build_classifier(None, "sequence", ["neg", "pos"], s, log=lambda m: None)
    if noise:
        with torch.no_grad():
            for name, p in encoder_of(net).named_parameters():
                if name.endswith("weight") and p.ndim == 2:
                    p.add_(torch.randn_like(p) * noise)
    save_classifier(net, tok, folder / "model")
    Run(folder).write_spec(s.replace(lr=s.lr))
    return folder


@pytest.mark.slow  # the shipped model's held-out masks: tokenizing IMDB takes seconds
def test_an_unchanged_encoder_keeps_everything_and_a_disturbed_one_less(tmp_path, start):
    runs = [make_run(tmp_path / "frozen", "frozen"), make_run(tmp_path / "full", "full", noise=0.05, lr=3e-3),
            make_run(tmp_path / "prompt", "prompt")]
    rows = mlm_left(runs, batches=BATCHES, start=start)
    frozen, full, prompt = rows
    pre, ev, before = start("default", BATCHES, 32)
    assert before == ev.mlm(pre)["mlm_acc"] and 0.2 < before < 0.8  # the shipped model guesses ~40 %
    assert frozen["after"] == frozen["before"] == before and frozen["left"] == 1 and not frozen["untouched"]
    assert full["after"] < 0.8 * before and full["left"] == pytest.approx(full["after"] / before)
    assert full["lr"] == 3e-3 and full["method"] == "full"
    assert prompt["untouched"] and prompt["after"] == before
    # the disturbed encoder's own number, by hand: its weights under the shipped masked-word head
    shipped, _ = bertlab.load_pretrained()
    ft, _ = bertlab.heads.load_classifier(tmp_path / "full" / "model")
    encoder_of(shipped).load_state_dict(encoder_of(ft).state_dict(), strict=False)
    assert ev.mlm(shipped.eval())["mlm_acc"] == pytest.approx(full["after"], abs=1e-9)


def test_bad_folders_are_one_message(tmp_path, start):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a fine-tuning run"):
        mlm_left([tmp_path / "empty"], batches=BATCHES, start=start)
    Run(tmp_path / "young").write_spec(FinetuneSpec())
    with pytest.raises(ValueError, match="no saved model yet"):
        mlm_left([tmp_path / "young"], batches=BATCHES, start=start)


@pytest.mark.slow
def test_the_command_line_prints_the_table(tmp_path, capsys):
    make_run(tmp_path / "frozen", "frozen")
    assert main(["forgetting", str(tmp_path / "frozen"), "--batches", str(BATCHES)]) == 0
    out = capsys.readouterr().out
    assert "frozen" in out and "100%" in out
    assert main(["forgetting", str(tmp_path / "frozen"), "--batches", str(BATCHES), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["left"] == 1 and rows[0]["method"] == "frozen"
    assert main(["forgetting", str(tmp_path / "nothing")]) != 0
    assert "not a fine-tuning run" in "".join(capsys.readouterr())
