"""Pre-training RoBERTa and ALBERT through the same spec, Trainer and run folder as BERT: the CLI,
exact resume, a model folder transformers loads as its own class, static vs dynamic masking."""
import json
import threading

import pytest
import torch

from bertlab import load_pretrained
from bertlab.train import read_metrics
from bertlab.train.pretrain import make_batcher, prepare_data, pretrain
from bertlab.train.specs import PretrainSpec

TINY = dict(preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1, layers=2, hidden=32, heads=2,
            intermediate=64, max_position=32, dropout=0.1,  # dropout on: a resume must replay its RNG exactly
            lr=2e-3, warmup=0.1, log_every=5, eval_every=10, save_every=10, eval_early=0)
HF_CLASS = {"roberta": "RobertaForMaskedLM", "albert": "AlbertForPreTraining"}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on shared cores: a second thread only adds contention."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def spec(corpus, arch, steps=10, **kw):
    extra = dict(embedding_size=16, layer_groups=1) if arch == "albert" else {}
    return PretrainSpec(corpus=str(corpus), arch=arch, steps=steps, **{**TINY, **extra, **kw})


@pytest.fixture(scope="module", params=["roberta", "albert"])
def full_run(request, small_corpus, tmp_path_factory):
    arch = request.param
    run = tmp_path_factory.mktemp(arch) / "full"
    st = pretrain(run, spec(small_corpus, arch), log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    return arch, run


def test_the_spec_gives_each_architecture_its_own_defaults():
    bert, roberta, albert = PretrainSpec(), PretrainSpec(arch="roberta"), PretrainSpec(arch="albert", hidden=64)
    assert (bert.objective, roberta.objective, albert.objective) == ("nsp", "mlm", "sop")
    assert PretrainSpec(objective="sop").objective == "sop"  # an explicit choice wins
    assert albert.config_overrides()["embedding_size"] == 64  # 128, capped at hidden
    assert PretrainSpec(arch="albert").config_overrides()["embedding_size"] == 128
    assert "embedding_size" not in bert.config_overrides() and bert.to_dict()["objective"] == "nsp"
    for kw, match in [(dict(arch="roberta", objective="nsp"), "objective must be mlm for roberta"),
                      (dict(arch="bert", embedding_size=64), "albert and electra option"),
                      (dict(arch="albert", layers=3, layer_groups=2), "multiple of num_hidden_groups"),
                      (dict(arch="roberta", preset="small"), "no roberta size"),
                      (dict(arch="distilbert"), "arch must be one of bert, albert, electra, roberta"),
                      (dict(arch="electra", objective="nsp"), "objective must be mlm for electra"),
                      (dict(arch="bert", generator_size=0.5), "electra options"),
                      (dict(arch="electra", init_from="default"), "starts from scratch")]:
        with pytest.raises(ValueError, match=match):
            PretrainSpec(**kw)


def test_stop_and_resume_equals_uninterrupted(full_run, small_corpus, tmp_path):
    arch, full = full_run
    part, ev = tmp_path / "part", threading.Event()

    def log(msg):
        if msg.startswith("step 5/"):
            ev.set()  # the trainer sees it before its next step
    st = pretrain(part, spec(small_corpus, arch), log=log, stop_event=ev)
    assert st["state"] == "stopped" and st["step"] < 10
    st = pretrain(part, spec(small_corpus, arch), resume=True, log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    a, tok_a = load_pretrained(full)
    b, tok_b = load_pretrained(part)
    assert type(a).__name__ == HF_CLASS[arch] and tok_a.get_vocab() == tok_b.get_vocab()
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), k
    same = ("loss", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "grad_norm", "lr", "unigram_acc")

    def rows(run):  # a training row averages the steps since the last one: a stop starts a new window
        return {(r["split"], r["step"]): {k: r[k] for k in same if k in r} for r in read_metrics(run)[0]
                if r["split"] == "eval" or r["step"] <= 5}
    ra, rb = rows(full), rows(part)
    assert set(ra) == {("train", 5), ("eval", 10)} and ra == rb
    if arch == "albert":
        assert "nsp_acc" in ra[("eval", 10)]  # sentence order, reported where NSP's accuracy is
    else:
        assert "nsp_acc" not in ra[("eval", 10)]


def test_the_run_model_loads_in_transformers_as_its_own_class(full_run):
    import transformers
    arch, run = full_run
    ours, tok = load_pretrained(run)
    theirs = getattr(transformers, HF_CLASS[arch]).from_pretrained(run / "model", attn_implementation="eager").eval()
    ours.eval()
    assert theirs.config.vocab_size == tok.vocab_size == ours.config.vocab_size
    if arch == "roberta":
        assert tok.kind == "bpe" and theirs.config.type_vocab_size == 1 and theirs.config.pad_token_id == tok.pad_token_id
        assert theirs.config.max_position_embeddings == 32 + tok.pad_token_id + 1  # RoBERTa's position offset
    else:
        assert theirs.config.embedding_size == 16 and theirs.config.num_hidden_groups == 1
    enc = tok.encode_batch(["the film was great and i would really recommend it .", "the soup was cold ."])
    ids, tt, am = enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]
    assert (am == 0).any()  # padding inside the batch
    with torch.no_grad():
        mine = ours(ids, tt, am)
        hf = theirs(input_ids=ids, token_type_ids=tt, attention_mask=am)
    keep = am.bool()
    diff = (mine.mlm_logits - hf.logits if arch == "roberta" else mine.mlm_logits - hf.prediction_logits)[keep]
    print(f"{arch}: max |ours - transformers| MLM logits {float(diff.abs().max()):.2e}", end=" ")
    assert diff.abs().max() <= 1e-5, float(diff.abs().max())
    if arch == "albert":
        print(f"SOP logits {float((mine.nsp_logits - hf.sop_logits).abs().max()):.2e}", end=" ")
        assert (mine.nsp_logits - hf.sop_logits).abs().max() <= 1e-5


def test_static_masks_repeat_across_epochs_and_dynamic_ones_do_not(full_run, small_corpus):
    arch, run = full_run
    tok, train, _, _ = prepare_data(run, spec(small_corpus, arch), log=lambda *_: None)  # the run's own data
    train = train[:24]

    def masks(static: int, epochs: int = 3) -> list[dict]:
        b = make_batcher(spec(small_corpus, arch, static_masks=static), tok, train)
        seen = []
        for e in range(epochs):
            order, per = b.indices(e), {}
            for k, batch in enumerate(b):
                for r, i in enumerate(order[k * b.batch_size:(k + 1) * b.batch_size]):
                    n = len(train[i].ids)
                    per[i] = (batch["input_ids"][r, :n].tolist(), batch["labels"][r, :n].tolist())
            seen.append(per)
        return seen
    dynamic, one, two = masks(0), masks(1), masks(2)
    assert len(dynamic[0]) == 24 and dynamic[0].keys() == dynamic[1].keys()
    assert one[0] == one[1] == one[2]  # one copy: the same masks every epoch, wherever the example sits
    assert two[0] == two[2] and sum(two[0][i] != two[1][i] for i in two[0]) >= 12  # two copies, in turn
    assert sum(dynamic[0][i] != dynamic[2][i] for i in dynamic[0]) >= 12  # dynamic: drawn again
    for i in one[0]:  # masked as ever: the labels are the original ids where selected
        ids, labels = one[0][i]
        assert any(y != -100 for y in labels) and all(y in (-100, t) for y, t in zip(labels, train[i].ids))


COMMON = ["--preset", "tiny", "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "300",
          "--max-len", "32", "--batch-size", "8", "--eval-batches", "1", "--steps", "4", "--log-every", "2",
          "--eval-every", "4", "--save-every", "4", "--eval-early", "0"]


def saved_spec(run):
    return PretrainSpec.from_dict(json.loads((run / "spec.json").read_text()))


def test_cli_pretrains_roberta(tmp_path, small_corpus, capsys):
    """`python -m bertlab pretrain --arch roberta ...`, through cli.main in this process (a new Python
    would spend most of the test importing torch; test_pretrain.py runs the real subprocess for BERT)."""
    from bertlab.app.cli import main
    assert main(["pretrain", "--arch", "roberta", "--whole-word", "--corpus", str(small_corpus), *COMMON,
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "finished at step 4" in out and "masked-token accuracy" in out and "NSP accuracy" not in out
    assert saved_spec(tmp_path / "r").arch == "roberta" and saved_spec(tmp_path / "r").objective == "mlm"
    assert (tmp_path / "r" / "model" / "merges.txt").is_file()  # its own byte-level BPE


def test_cli_pretrains_albert_and_refuses_what_an_architecture_lacks(tmp_path, small_corpus, capsys):
    from bertlab.app.cli import main  # the same parser and command as `python -m bertlab`, without a new process
    assert main(["pretrain", "--arch", "albert", "--embedding-size", "16", "--static-masks", "2",
                 "--corpus", str(small_corpus), *COMMON, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "finished at step 4" in out and "SOP accuracy" in out  # the sentence-order head was trained
    s = saved_spec(tmp_path / "a")
    assert (s.arch, s.objective, s.static_masks, s.embedding_size) == ("albert", "sop", 2, 16)
    assert main(["pretrain", "--arch", "roberta", "--objective", "nsp", "--corpus", str(small_corpus), *COMMON,
                 "--out", str(tmp_path / "bad")]) == 2
    assert "objective must be mlm for roberta" in capsys.readouterr().err


def test_the_pretrain_form_picks_an_architecture():
    from bertlab.app.ui.training import pretrain_tab
    form = dict(preset="small", layers=1, hidden=32, heads=2, intermediate=64, vocab_size=300,
                start_from=pretrain_tab.SCRATCH, corpus="imdb", upload=None, text_column="text",
                hub_name="", max_len=32, batch_size=8, steps=100, lr=1e-3, mask_rate=0.15, bf16=False)
    label = {v: k for k, v in pretrain_tab.ARCHS.items()}  # the form's labels (an older API caller sends them)
    roberta, albert = label["roberta"], label["albert"]
    s = pretrain_tab.form_spec(**form, objective="MLM only (RoBERTa; ELECTRA's generator)", arch=roberta)
    assert (s.arch, s.objective, s.preset, s.hidden) == ("roberta", "mlm", "tiny", 32)  # no small RoBERTa preset
    s = pretrain_tab.form_spec(**form, objective="MLM + sentence order (ALBERT)", arch=albert)
    assert (s.arch, s.objective, s.config_overrides()["embedding_size"]) == ("albert", "sop", 32)
    electra = label["electra"]
    s = pretrain_tab.form_spec(**form, objective="MLM only (RoBERTa; ELECTRA's generator)", arch=electra)
    assert (s.arch, s.objective, s.generator_size, s.config_overrides()["embedding_size"]) == ("electra", "mlm", 0.25, 32)
    s = pretrain_tab.form_spec(**form, objective="MLM only (RoBERTa; ELECTRA's generator)", arch=electra,
                               generator_size=0.5, rtd_weight=20.0)
    assert (s.generator_size, s.rtd_weight) == (0.5, 20.0)
    with pytest.raises(ValueError, match="generator_size must be in"):
        pretrain_tab.form_spec(**form, objective="MLM only (RoBERTa; ELECTRA's generator)", arch=electra,
                               generator_size=0.0)
    assert pretrain_tab.form_spec(**form, objective="MLM + next sentence (BERT)", generator_size=0.5).rtd_weight == 50
    assert pretrain_tab.form_spec(**form, objective="MLM + next sentence (BERT)").arch == "bert"  # as before
    with pytest.raises(ValueError, match="objective must be mlm for roberta"):
        pretrain_tab.form_spec(**form, objective="MLM + next sentence (BERT)", arch=roberta)
    assert "parameters" in pretrain_tab.size_md(**{**form, "preset": "tiny", "arch": albert})


def test_a_recipe_keeps_the_architectures_own_objective():
    """Picking a recipe (BERT's settings) after RoBERTa or ALBERT must not bring back NSP."""
    from bertlab.app.ui.training import pretrain_tab as tab
    recipe = next(iter(tab.RECIPES))
    said = {a: tab.recipe_values(recipe, a)["objective"] for a in tab.ARCHS.values()}
    assert said == {"bert": "nsp", "roberta": "mlm", "albert": "sop", "electra": "mlm", "deberta-v2": "mlm"}


def test_the_electra_masking_rule_masks_or_keeps_and_never_draws_a_random_word(full_run, small_corpus):
    """--mask-rule electra (the official ELECTRA code's 85 % [MASK], 15 % kept) against BERT's 80/10/10."""
    from bertlab.tokenizer import special_token_ids
    arch, run = full_run
    tok, train, _, _ = prepare_data(run, spec(small_corpus, arch), log=lambda *_: None)
    mask_id = special_token_ids(tok).mask
    shares = {}
    for rule in ("bert", "electra"):
        n = masked = kept = 0
        for batch in make_batcher(spec(small_corpus, arch, mask_rule=rule, mask_rate=0.5), tok, train[:96]):
            picked = batch["labels"] != -100
            n += int(picked.sum())
            masked += int((picked & (batch["input_ids"] == mask_id)).sum())
            kept += int((picked & (batch["input_ids"] == batch["labels"])).sum())
        shares[rule] = (masked / n, kept / n, 1 - (masked + kept) / n, n)
    m, k, r, n = shares["electra"]
    assert r == 0 and n > 500 and abs(m - 0.85) < 0.04, shares
    m, k, r, n = shares["bert"]
    assert abs(m - 0.8) < 0.04 and abs(r - 0.1) < 0.03, shares
