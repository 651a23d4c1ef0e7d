"""Pre-training end to end on a tiny corpus: the run folder, resume, evaluation, errors, the CLI."""
import json
import os
import subprocess
import sys

import pytest
import torch

from bertlab import load_pretrained
from bertlab.train import read_metrics, read_status
from bertlab.train.pretrain import pretrain
from bertlab.train.specs import PretrainSpec

TINY = dict(preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=2, layers=1, hidden=32, heads=2,
            intermediate=64, max_position=32, dropout=0.1,  # dropout on: a resume must replay its RNG exactly
            lr=2e-3, warmup=0.1, log_every=5, eval_every=10, save_every=10)


def spec(corpus, steps=30, **kw):
    return PretrainSpec(corpus=str(corpus), steps=steps, **{**TINY, **kw})


def test_run_folder_metrics_and_model(tmp_path, small_corpus):
    st = pretrain(tmp_path / "run", spec(small_corpus, steps=30), log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 30
    rows, _ = read_metrics(tmp_path / "run")
    train = [r for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    assert train[-1]["loss"] < train[0]["loss"]  # it learns
    for key in ("mlm_loss", "mlm_acc", "unigram_acc", "nsp_acc", "attn_entropy", "attn_prev", "attn_next",
                "attn_entropy_L0"):
        assert key in evals[-1], key
    assert [r["step"] for r in evals] == [10, 20, 30]
    probes = [json.loads(line) for line in (tmp_path / "run" / "probes.jsonl").read_text().splitlines()]
    assert len(probes) == 3 and all(len(v) == 3 for v in probes[-1]["top3"].values())
    model, tok = load_pretrained(tmp_path / "run")  # the run stands for its exported model
    assert model.config.max_position_embeddings == 32 and tok.model_max_length == 32
    import transformers
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "run" / "model")
    assert hf.config.vocab_size == model.config.vocab_size


def test_stop_and_resume_equals_uninterrupted(tmp_path, small_corpus):
    import threading
    full = tmp_path / "full"
    pretrain(full, spec(small_corpus, objective="sop", steps=20), log=lambda *_: None)
    part = tmp_path / "part"
    ev = threading.Event()

    def log(msg):
        if msg.startswith("step 5/"):
            ev.set()  # the trainer sees it before its next step
    st = pretrain(part, spec(small_corpus, objective="sop", steps=20), log=log, stop_event=ev)
    assert st["state"] == "stopped" and st["step"] < 20
    st = pretrain(part, spec(small_corpus, objective="sop", steps=20), resume=True, log=lambda *_: None)
    assert st["state"] == "finished"
    a, _ = load_pretrained(full)
    b, _ = load_pretrained(part)
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), k


def test_a_starting_run_says_what_it_prepares_and_evaluates_early(tmp_path, small_corpus, monkeypatch):
    from bertlab.train import runs
    monkeypatch.setenv("BERTLAB_CACHE", str(tmp_path / "cache"))
    said, write = [], runs.write_status

    def spy(run_dir, **fields):
        if fields.get("state") == "starting":
            said.append((run_dir.name, fields["message"], fields["pid"]))
        return write(run_dir, **fields)
    monkeypatch.setattr(runs, "write_status", spy)
    kw = dict(steps=30, log_every=4, eval_every=30, eval_early=100)
    assert pretrain(tmp_path / "first", spec(small_corpus, **kw), log=lambda *_: None)["state"] == "finished"
    first = [m for r, m, _ in said if r == "first"]
    assert all(pid is None for *_, pid in said)  # the job manager, not a stale file, judges a starting process
    for words in ("reading the corpus", "WordPiece vocabulary of 300 tokens", "tokenising", "building the model"):
        assert any(words in m for m in first), (words, first)
    assert all("cached for next time" in m for m in first if m.startswith("preparing"))
    evals = [r["step"] for r in read_metrics(tmp_path / "first")[0] if r["split"] == "eval"]
    probes = [json.loads(line)["step"] for line in (tmp_path / "first" / "probes.jsonl").read_text().splitlines()]
    assert evals == probes == [10, 25, 30]  # early, then every eval_every; the probe table's steps are right

    pretrain(tmp_path / "second", spec(small_corpus, steps=2, eval_early=0), log=lambda *_: None)
    assert any("reusing the vocabulary and examples" in m for r, m, _ in said if r == "second")
    with pytest.raises(ValueError, match="already has checkpoints"):  # refused before its status is touched
        pretrain(tmp_path / "first", spec(small_corpus, **kw), log=lambda *_: None)
    assert read_status(tmp_path / "first")["state"] == "finished"
    few = tmp_path / "few.txt"
    few.write_text("one short document.\n\nand another one.\n")
    with pytest.raises(ValueError, match="too few"):
        pretrain(tmp_path / "few", spec(few), log=lambda *_: None)
    st = read_status(tmp_path / "few")  # a failed preparation says so; it never stays "starting"
    assert st["state"] == "failed" and "too few" in st["message"]


def test_mlm_only_objective_has_no_nsp_metrics(tmp_path, small_corpus):
    pretrain(tmp_path / "r", spec(small_corpus, objective="mlm", whole_word=True, mask_rate=0.3, steps=10),
             log=lambda *_: None)
    rows, _ = read_metrics(tmp_path / "r")
    assert "nsp_acc" not in rows[-1] and "mlm_acc" in rows[-1]


def cli(*a, timeout=300, **env):
    return subprocess.run([sys.executable, "-m", "bertlab", *a], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})


@pytest.mark.parametrize("content, match", [
    (b"", "no text|empty"),
    (b"\x00\x01\x02binary\xff\xfe" * 50, "binary|UTF-8"),
])
def test_cli_corpus_errors_are_clear(tmp_path, content, match):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    r = cli("pretrain", "--corpus", str(bad), "--out", str(tmp_path / "run"), "--steps", "2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error:")
    assert __import__("re").search(match, r.stderr)


def test_cli_csv_without_the_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("review,label\nhello there,1\n")
    r = cli("pretrain", "--corpus", str(bad), "--out", str(tmp_path / "run"), "--steps", "2")
    assert r.returncode == 2 and "text" in r.stderr and "review" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_cli_impossible_settings(tmp_path, small_corpus):
    r = cli("pretrain", "--corpus", str(small_corpus), "--out", str(tmp_path / "r"), "--mask-rate", "1.5")
    assert r.returncode == 2 and "mask_rate" in r.stderr
    r = cli("pretrain", "--corpus", str(small_corpus), "--out", str(tmp_path / "r"), "--lr", "-1")
    assert r.returncode == 2 and "lr" in r.stderr
    r = cli("pretrain", "--corpus", str(small_corpus), "--out", str(tmp_path / "r"), "--hidden", "30", "--heads", "4")
    assert r.returncode == 2 and "divisible" in r.stderr and "Traceback" not in r.stderr


def test_cli_architecture_flags_override_the_preset():
    import argparse

    def parse(*argv):  # the flags are generated from the spec's fields
        p = argparse.ArgumentParser()
        PretrainSpec.add_arguments(p)
        return PretrainSpec(**PretrainSpec.given(p.parse_args(argv)))
    s = parse("--preset", "mini", "--layers", "2", "--hidden", "64", "--heads", "2")
    assert s.config_overrides() == {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                                    "intermediate_size": 256,
                                    "max_position_embeddings": 128,  # room for a later 128-token stage
                                    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # the CPU recipe
    assert (s.max_len, s.batch_size) == (32, 128)  # the CPU recipe is the default
    s = parse("--intermediate", "100", "--max-len", "256")
    assert s.config_overrides() == {"intermediate_size": 100, "max_position_embeddings": 256,
                                    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    s = parse("--init-from", "default", "--max-len", "128", "--dropout", "0.1")
    assert s.config_overrides() == {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}  # its own table
    s = parse("--pre-ln", "--dropout", "0")
    assert s.config_overrides()["pre_ln"] is True and s.config_overrides()["hidden_dropout_prob"] == 0.0


@pytest.mark.slow
def test_cli_pretrain_evaluate_and_torchrun(tmp_path, small_corpus):
    common = ["--corpus", str(small_corpus), "--preset", "tiny", "--vocab-size", "300", "--max-len", "32",
              "--batch-size", "8", "--log-every", "5", "--eval-every", "10", "--save-every", "10", "--lr", "2e-3"]
    r = cli("pretrain", *common, "--steps", "20", "--out", str(tmp_path / "one"))
    assert r.returncode == 0, r.stderr
    assert "finished at step 20" in r.stdout and "masked-token accuracy" in r.stdout
    r = cli("evaluate", str(tmp_path / "one"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert 0 <= res["mlm_acc"] <= 1 and res["masked_tokens"] > 0
    # the same trainer on 2 processes (DDP, gloo): each rank reads its own share
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29533",
                        "-m", "bertlab", "pretrain", *common, "--steps", "20", "--threads", "1",
                        "--out", str(tmp_path / "ddp")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert read_status(tmp_path / "ddp")["state"] == "finished"
    rows = [x for x in read_metrics(tmp_path / "ddp")[0] if x["split"] == "train"]
    assert rows[-1]["loss"] < rows[0]["loss"]


def test_init_from_keeps_the_weights_and_takes_a_new_dropout(tmp_path, small_corpus):
    """A later stage may switch dropout off; its other shape settings come from the model it continues."""
    from bertlab.train.pretrain import build_model, prepare_data
    pretrain(tmp_path / "s1", spec(small_corpus, steps=10), log=lambda *_: None)
    s2 = spec(small_corpus, init_from=str(tmp_path / "s1"), dropout=0.0)
    tok, *_ = prepare_data(tmp_path / "s2", s2, log=lambda *_: None)
    model = build_model(s2, tok)
    before, _ = load_pretrained(tmp_path / "s1")
    assert model.config.hidden_dropout_prob == 0.0 and model.config.attention_probs_dropout_prob == 0.0
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
    assert before.config.hidden_dropout_prob == 0.1
    for (k, a), b in zip(model.state_dict().items(), before.state_dict().values()):
        assert torch.equal(a, b), k


@pytest.mark.slow
def test_shipped_model_learned_context():
    """The shipped model is the recipe's product: it must beat word counting by far and answer each
    context differently (it scores 40.7 % on the full held-out evaluation; a sample has ±0.7 points)."""
    from bertlab.analysis.predict import fill_mask
    from bertlab.train.evaluate import evaluate_model
    res = evaluate_model(None, batches=10)
    assert res["masked_tokens"] > 4000 and res["mlm_acc"] > 0.37 and res["unigram_acc"] < 0.06
    model, tok = load_pretrained()
    top = lambda s: [c["token_str"] for c in fill_mask(model, tok, s, top_k=5)[0]]  # noqa: E731
    acting, recommend = top("the acting was [MASK] ."), top("i would [MASK] recommend this film .")
    assert {"highly", "not"} <= set(recommend) and {"good", "bad", "terrible"} & set(acting)
    assert not set(acting) & set(recommend)
    assert set(top("this is one of the [MASK] movies i have ever seen .")[:2]) == {"worst", "best"}


def test_the_prepared_data_cache_keeps_to_its_budget(tmp_path):
    """Every corpus and data setting added a cache entry for good (issue 30, item 3): past
    BERTLAB_CACHE_MB the least recently used go, the one just written stays."""
    import os

    from bertlab.train.pretrain import prune_cache
    root = tmp_path / "pretrain-data"
    for i, name in enumerate(["old", "used", "new"]):
        (root / name).mkdir(parents=True)
        (root / name / "examples.pt").write_bytes(b"x" * 400_000)
        os.utime(root / name, (1000 + i, 1000 + i))
    os.utime(root / "used", (5000, 5000))  # reused lately
    assert prune_cache(root, keep=root / "new", budget_mb=1.0) == ["old"]
    assert sorted(p.name for p in root.iterdir()) == ["new", "used"]
    assert prune_cache(root, keep=root / "new", budget_mb=0.5) == ["used"]
    assert prune_cache(root, keep=root / "new", budget_mb=0.0) == []  # the entry just written stays


def test_a_server_warms_the_cache_for_its_default_recipe(tmp_path, small_corpus, monkeypatch):
    """What a class's first run would spend a minute on (issue 31, item 10) is done once, up front: the
    run then starts from the cached data, and a second warm-up does nothing."""
    from bertlab.train.pretrain import cache_dir, warm_cache
    monkeypatch.setenv("BERTLAB_CACHE", str(tmp_path / "cache"))
    s = spec(small_corpus)
    entry = warm_cache(s, log=lambda *_: None)
    assert entry == cache_dir(s) and (entry / "examples.pt").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["pretrain-data"]  # no scratch left behind
    stamp = (entry / "examples.pt").stat().st_mtime_ns
    assert warm_cache(s) == entry and (entry / "examples.pt").stat().st_mtime_ns == stamp
    said = []
    assert pretrain(tmp_path / "run", s, log=said.append)["state"] == "finished"
    assert any("reusing prepared data" in m for m in said), said


@pytest.mark.slow
def test_the_app_warms_its_default_recipe_in_the_background(tmp_path, small_corpus, monkeypatch):
    from bertlab.app.ui.training import pretrain_tab
    from bertlab.train.pretrain import cache_dir
    monkeypatch.setenv("BERTLAB_CACHE", str(tmp_path / "cache"))
    s = spec(small_corpus)
    monkeypatch.setattr(pretrain_tab, "default_spec", lambda: s)
    proc = pretrain_tab.warm_default_recipe()
    assert proc.wait(timeout=120) == 0 and (cache_dir(s) / "examples.pt").exists()
    assert pretrain_tab.warm_default_recipe() is None  # there already


def test_span_masking_pretrains_and_masks_runs(tmp_path, small_corpus):
    """The spec's span_masking reaches the batches: runs of whole words hidden at the mask rate."""
    from bertlab.train.pretrain import make_batcher, prepare_data
    from bertlab.train.specs import RECIPES, RaceSpec
    s = spec(small_corpus, steps=6, objective="mlm", span_masking=True, max_len=64, max_position=64)
    st = pretrain(tmp_path / "r", s, log=lambda *_: None)
    assert st["state"] == "finished"
    tok, train, _, _ = prepare_data(tmp_path / "r", s, log=lambda *_: None)
    plain = make_batcher(s.replace(span_masking=False), tok, train)
    spans = make_batcher(s, tok, train)
    assert spans.mask_kw["spans"] and spans.is_continuation is not None and not plain.mask_kw["spans"]
    a, b = (next(iter(x))["labels"] != -100 for x in (plain, spans))

    def run(sel):
        return sel.sum().item() / max(1, ((sel[:, 1:].int() > sel[:, :-1].int()).sum() + sel[:, 0].int().sum()).item())
    assert run(b) > 1.5 * run(a)
    assert RECIPES["span"][1]["span_masking"] is True
    RaceSpec(recipes=("mlm", "span"))
