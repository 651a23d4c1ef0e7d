"""Activation checkpointing (same numbers), the training-memory estimate against one profiled CPU step,
the `memory` command, and the Scaling tab's memory section."""
import types

import pytest
import torch

from bertlab import family
from bertlab.analysis import sizing
from bertlab.analysis.memory_measure import measure_step
from bertlab.app import cli, memory_cli
from bertlab.app.ui.labs import scaling_memory
from bertlab.config import preset
from bertlab.model import set_gradient_checkpointing
from bertlab.train.pretrain import build_model
from bertlab.train.specs import PretrainSpec


def _loss_and_grads(config, checkpointing: bool, ids, labels):
    torch.manual_seed(0)
    model = set_gradient_checkpointing(family.build(config).train(), checkpointing)
    torch.manual_seed(1)  # the same dropout draws, if checkpointing replays them as it should
    loss = model(ids, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", ["bert", "albert", "distilbert"])
def test_checkpointing_gives_the_same_loss_and_gradients(kind):
    extra = {"albert": dict(inner_group_num=2)}.get(kind, {})  # ALBERT recomputes a step of two layers
    c = preset("tiny", kind, vocab_size=300, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, **extra)
    ids = torch.randint(5, 300, (3, 12), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]
    loss0, g0 = _loss_and_grads(c, False, ids, labels)
    loss1, g1 = _loss_and_grads(c, True, ids, labels)
    assert loss0.item() == loss1.item()
    assert g0.keys() == g1.keys() and len(g0) > 10
    assert all(torch.equal(g0[k], g1[k]) for k in g0)


def test_checkpointing_only_while_training(monkeypatch):
    import bertlab.model as model_module
    calls = []
    monkeypatch.setattr(model_module, "checkpoint", lambda f, *a, **kw: calls.append(1) or f(*a))
    model = set_gradient_checkpointing(family.build(preset("tiny", vocab_size=300)))
    ids = torch.randint(5, 300, (2, 8))
    model.eval()(ids)
    with torch.no_grad():
        model.train()(ids)
    assert calls == []
    model.train()(ids)
    assert len(calls) == model.config.num_hidden_layers
    with pytest.raises(ValueError, match="no layer stack"):
        set_gradient_checkpointing(torch.nn.Linear(2, 2))


def test_pretrain_spec_switches_it_on():
    spec = PretrainSpec(preset="tiny", grad_checkpointing=True, accum=2)
    assert spec.to_dict()["grad_checkpointing"] is True and "grad_checkpointing" in PretrainSpec.RESUMABLE
    model = build_model(spec, types.SimpleNamespace(vocab_size=300))
    assert model.bert.encoder.gradient_checkpointing
    assert not build_model(PretrainSpec(preset="tiny"), types.SimpleNamespace(vocab_size=300)).bert.encoder.gradient_checkpointing
    parser = cli.build_parser()
    ns = parser.parse_args(["pretrain", "--grad-checkpointing", "--accum", "2", "--out", "x"])
    assert PretrainSpec.given(ns) == {"grad_checkpointing": True, "accum": 2}


def test_estimate_within_10_percent_of_the_measured_peak():
    """tiny as pretrain builds it, two micro-batches, checkpointing off and on (bench/SCALING.md has
    tiny, mini and small at 128 tokens)."""
    c, _ = memory_cli.recipe_config("tiny", seq_len=64)
    tensors, peaks = len(list(family.build(c).parameters())), {}
    for batch in (4, 16):
        for ck in (False, True):
            r = measure_step(c, batch, 64, ck, split=batch == 4 and not ck)  # the profiler's split once
            assert abs(r["ratio"] - 1) < 0.10, (batch, ck, r["measured"], r["estimate"])
            assert r["measured"]["phase"] in ("forward", "backward", "optimizer")
            peaks[batch, ck] = r["measured"]["peak"]
            if batch == 4 and not ck:
                m = r["measured"]
                assert m["weights"] == 4 * sizing.param_counts(c)["total"]
                assert m["optimizer"] == 2 * m["weights"] + 4 * tensors  # two moments, and a step count each
                parts = sum(m[k] for k in ("weights", "gradients", "optimizer", "activations", "temporaries"))
                assert abs(parts / m["peak"] - 1) < 0.01  # the timeline's peak, filed by kind
    assert peaks[16, True] < peaks[16, False] and peaks[4, False] < peaks[16, False]
    # accumulation: the micro-batch sets the activations, and the gradients stay all along
    r = measure_step(c, 4, 64, accum=2, split=False)
    assert abs(r["ratio"] - 1) < 0.10 and peaks[4, False] < r["measured"]["peak"] < peaks[16, False]


def test_memory_command_prints_the_estimates(capsys):
    assert cli.main(["memory", "--model", "tiny", "mini", "--batch-size", "8", "--seq-len", "64"]) == 0
    out = capsys.readouterr().out
    assert out.count("| tiny |") == 2 and out.count("| mini |") == 2 and "measured" not in out
    c, _ = memory_cli.recipe_config("mini", seq_len=64)
    on = sizing.memory(c, 8, 64, training=True, sparse_mlm=True, checkpointing=True, mask_bytes=4)
    assert f"{on['total'] / 1e6:.1f} MB" in out


@pytest.mark.slow
def test_ui_section_bounds_estimates_and_measures():
    summary, table, fig, rows = scaling_memory.estimate("tiny", 32, 128, "both", 1)
    assert [r["checkpointing"] for r in rows] == [False, True] and "less" in summary and "Measure" in summary
    assert table.count("| – | – |") == 2
    assert len(fig.data) == len(scaling_memory.PARTS)
    for bad in [("base", 8, 128, "both", 1), ("tiny", 64, 128, "both", 1), ("tiny", 32, 256, "on", 1),
                ("tiny", 8, 128, "sometimes", 1), ("tiny", 8, 128, "on", 9)]:
        with pytest.raises(Exception) as e:
            scaling_memory.estimate(*bad)
        assert type(e.value).__name__ == "Error"  # gr.Error: one line on the page
    summary, table, fig, rows = scaling_memory.measure("tiny", 2, 32, "on", 1)  # a child process, as the page does
    (row,) = rows
    assert row["checkpointing"] and abs(row["ratio"] - 1) < 0.10 and "estimated" in fig.data[0].x[0]
    assert f"{row['measured'] / 1e6:.1f} MB" in table and "| – |" not in table
