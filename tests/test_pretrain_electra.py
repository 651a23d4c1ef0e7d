"""ELECTRA's pre-training: the corruption and loss, the run (exact resume, the CLI), and folders that
transformers loads as ElectraForPreTraining (the discriminator) and ElectraForMaskedLM (the generator)."""
import threading

import pytest
import torch

from bertlab import load_pretrained
from bertlab.train import read_metrics
from bertlab.train.electra import ElectraPair, generator_config, rtd_stats
from bertlab.train.pretrain import pretrain
from bertlab.train.specs import PretrainSpec
from bertlab.config import preset

TINY = dict(arch="electra", preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1, layers=2,
            hidden=32, heads=2, intermediate=64, max_position=32, dropout=0.1, embedding_size=16, lr=2e-3,
            warmup=0.1, log_every=5, eval_every=10, save_every=10, eval_early=0)


pytestmark = pytest.mark.usefixtures("single_thread")


def spec(corpus, **kw):
    return PretrainSpec(corpus=str(corpus), steps=10, **{**TINY, **kw})


@pytest.fixture(scope="module")
def full_run(small_corpus, tmp_path_factory):
    run = tmp_path_factory.mktemp("electra") / "full"
    st = pretrain(run, spec(small_corpus), log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    return run


def test_the_generator_is_a_quarter_as_wide_with_the_same_head_size():
    disc = preset("mini", "electra")  # 4 layers, H 256, 4 heads, E 128
    g = generator_config(disc, 0.25)
    assert (g.num_hidden_layers, g.hidden_size, g.num_attention_heads, g.intermediate_size, g.embedding_dim) == \
        (4, 64, 1, 256, 128)
    assert generator_config(disc, 1.0).hidden_size == 256


def test_corruption_labels_and_loss():
    torch.manual_seed(0)
    c = preset("tiny", "electra", vocab_size=50, hidden_size=32, num_attention_heads=2, intermediate_size=64,
               embedding_size=16, max_position_embeddings=16)
    pair = ElectraPair(c, 0.5, rtd_weight=50.0)
    assert pair.generator.electra.embeddings is pair.discriminator.electra.embeddings  # shared, as in the paper
    assert pair.generator.generator_lm_head.weight is pair.discriminator.electra.embeddings.word_embeddings.weight
    ids = torch.randint(5, 50, (4, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]
    masked = ids.clone()
    masked[:, 2:5] = 3  # [MASK]
    # a generator sure of the original at every masked position: nothing counts as replaced
    logits = torch.full((12, 50), -1e4)
    logits[torch.arange(12), ids[:, 2:5].flatten()] = 1e4
    fake, replaced = pair.corrupt(masked, labels, logits)
    assert torch.equal(fake, ids) and not replaced.any()
    logits = torch.full((12, 50), -1e4)
    logits[:, 4] = 1e4  # always token 4, never an original here
    fake, replaced = pair.corrupt(masked, labels, logits)
    assert (fake[:, 2:5] == 4).all() and torch.equal(fake[:, :2], ids[:, :2]) and torch.equal(fake[:, 5:], ids[:, 5:])
    assert replaced[:, 2:5].all() and replaced.sum() == 12
    am = torch.ones_like(ids)
    out = pair(masked, None, am, labels=labels)
    assert torch.allclose(out.loss, out.mlm_loss + 50.0 * out.rtd_loss)
    out.loss.backward()
    for name, model in (("generator", pair.generator), ("discriminator", pair.discriminator)):
        assert model.electra.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0, name


def test_auc_counts_pairs_ranked_right():
    s = torch.tensor([0.1, 0.9, 0.4, 0.8, -1.0, 0.3])
    y = torch.tensor([0, 1, 0, 0, 1, 1])
    keep = torch.ones(6, dtype=torch.bool)
    pos, neg = s[y == 1], s[y == 0]
    brute = float((pos[:, None] > neg[None, :]).float().mean())
    st = rtd_stats(s, y, keep)
    assert st["rtd_auc"] == pytest.approx(brute) and st["rtd_recall"] == pytest.approx(2 / 3)
    assert st["rtd_acc"] == pytest.approx(2 / 6)  # right: 0.9, 0.3 (replaced); wrong: 0.1, 0.4, 0.8, -1.0


def test_stop_and_resume_equals_uninterrupted(full_run, small_corpus, tmp_path):
    part, ev = tmp_path / "part", threading.Event()

    def log(msg):
        if msg.startswith("step 5/"):
            ev.set()
    assert pretrain(part, spec(small_corpus), log=log, stop_event=ev)["state"] == "stopped"
    st = pretrain(part, spec(small_corpus), resume=True, log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    for sub in ("model", "generator"):
        a, _ = load_pretrained(full_run / sub)
        b, _ = load_pretrained(part / sub)
        for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(x, y), (sub, k)
    keys = ("loss", "mlm_acc", "rtd_loss", "rtd_acc", "rtd_auc")
    ev_a = [{k: r[k] for k in keys if k in r} for r in read_metrics(full_run)[0] if r["split"] == "eval"]
    ev_b = [{k: r[k] for k in keys if k in r} for r in read_metrics(part)[0] if r["split"] == "eval"]
    assert ev_a == ev_b and "rtd_auc" in ev_a[-1]


def test_the_run_loads_in_transformers_as_discriminator_and_generator(full_run):
    import transformers
    ours_d, tok = load_pretrained(full_run)  # the run's model: the discriminator
    ours_g, _ = load_pretrained(full_run / "generator")
    assert type(ours_d).__name__ == "ElectraForPreTraining" and type(ours_g).__name__ == "ElectraForMaskedLM"
    hf_d = transformers.ElectraForPreTraining.from_pretrained(full_run / "model", attn_implementation="eager").eval()
    hf_g = transformers.ElectraForMaskedLM.from_pretrained(full_run / "generator", attn_implementation="eager").eval()
    assert hf_g.config.hidden_size == 16 and hf_d.config.hidden_size == 32 and hf_d.config.embedding_size == 16
    assert torch.equal(hf_g.electra.embeddings.word_embeddings.weight, hf_d.electra.embeddings.word_embeddings.weight)
    enc = tok.encode_batch(["the film was great and i would really recommend it .", "the soup was cold ."])
    ids, tt, am = enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]
    with torch.no_grad():
        d = (ours_d.eval()(ids, tt, am).rtd_logits - hf_d(input_ids=ids, token_type_ids=tt, attention_mask=am).logits)
        g = (ours_g.eval()(ids, tt, am).mlm_logits - hf_g(input_ids=ids, token_type_ids=tt, attention_mask=am).logits)
    keep = am.bool()
    print(f"max |ours - transformers|: discriminator {float(d[keep].abs().max()):.1e}, "
          f"generator {float(g[keep].abs().max()):.1e}", end=" ")
    assert d[keep].abs().max() <= 1e-5 and g[keep].abs().max() <= 1e-5


def test_cli_pretrains_electra(tmp_path, small_corpus, capsys):
    from bertlab.app.cli import main
    common = ["--preset", "tiny", "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "300",
              "--max-len", "32", "--batch-size", "8", "--eval-batches", "1", "--steps", "4", "--log-every", "2",
              "--eval-every", "4", "--save-every", "4", "--eval-early", "0"]
    assert main(["pretrain", "--arch", "electra", "--generator-size", "0.5", "--rtd-weight", "20",
                 "--corpus", str(small_corpus), *common, "--out", str(tmp_path / "e")]) == 0
    out = capsys.readouterr().out
    assert "finished at step 4" in out and "generator's MLM loss" in out and "discriminator:" in out and "AUC" in out
    s = PretrainSpec.from_dict(__import__("json").loads((tmp_path / "e" / "spec.json").read_text()))
    assert (s.arch, s.objective, s.generator_size, s.rtd_weight) == ("electra", "mlm", 0.5, 20.0)
