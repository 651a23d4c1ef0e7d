"""DeBERTa-v3's replaced-token detection (objective rtd): ELECTRA's pair with a half-depth generator and
gradient-disentangled embedding sharing; the saved discriminator loads in transformers as DebertaV2Model."""
import threading

import pytest
import torch

from bertlab import family
from bertlab.checkpoint import load_weights
from bertlab.config import BertConfig, preset
from bertlab.train.pretrain import pretrain
from bertlab.train.specs import PretrainSpec

TINY = dict(arch="deberta", objective="rtd", preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1,
            layers=2, hidden=32, heads=2, intermediate=64, dropout=0.0, lr=2e-3, warmup=0.1, log_every=5,
            eval_every=10, save_every=10, eval_early=0)
Pair = family.load("bertlab.train.deberta:DebertaPair")

pytestmark = pytest.mark.usefixtures("single_thread")


def spec(corpus, **kw):
    return PretrainSpec(corpus=str(corpus), steps=10, **{**TINY, **kw})


@pytest.fixture(scope="module")
def rtd_run(small_corpus, tmp_path_factory):
    run = tmp_path_factory.mktemp("deberta-rtd") / "full"
    st = pretrain(run, spec(small_corpus), log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    return run


def test_gdes_the_discriminator_loss_leaves_the_generator_table_alone():
    torch.manual_seed(0)
    c = preset("tiny", "deberta-v2", vocab_size=50, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    pair = Pair(c)
    assert pair.generator.config.num_hidden_layers == 1 and pair.generator.config.hidden_size == 32  # half depth
    E_G, E_D = pair.generator.deberta.embeddings.word_embeddings.weight, pair.words.weight
    assert not E_D.any()  # E_Δ starts at zero
    ids = torch.randint(5, 50, (4, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]
    out = pair(ids, None, torch.ones_like(ids), labels=labels)
    assert torch.isfinite(out.loss) and torch.allclose(out.loss, out.mlm_loss + 50.0 * out.rtd_loss)
    out.rtd_loss.backward(retain_graph=True)  # the discriminator's loss alone
    assert E_G.grad is None or not E_G.grad.any()
    assert E_D.grad is not None and E_D.grad.any()
    pair.zero_grad()
    out.mlm_loss.backward()  # the generator's moves E_G
    assert E_G.grad.any()


def test_run_loads_in_transformers_resumes_exactly_and_refuses_elsewhere(rtd_run, small_corpus, tmp_path):
    import transformers
    from bertlab.tokenizer import SubwordTokenizer
    hf = transformers.DebertaV2Model.from_pretrained(rtd_run / "model", attn_implementation="eager").eval()
    ours = Pair(BertConfig.from_json_file(rtd_run / "model" / "config.json")).eval()
    from bertlab.train import runs
    ckpt = runs.latest_checkpoint(rtd_run)
    ours.load(ckpt)
    with ours.folded():  # the saved table is E_G + E_Δ
        assert torch.equal(ours.words.weight, hf.embeddings.word_embeddings.weight)
    disc = family.load("bertlab.variants.deberta:DebertaV2ForReplacedTokenDetection")(ours.config).eval()
    load_weights(disc, rtd_run / "model")
    import warnings

    import bertlab
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no head initialised at random, no weight dropped
        loaded, _ = bertlab.load_pretrained(rtd_run)  # the discriminator the run saved, its head included
    assert type(loaded) is type(disc) and family.is_discriminator(loaded) and not family.has_mlm_head(loaded)
    assert all(torch.equal(v, disc.state_dict()[k]) for k, v in loaded.state_dict().items())
    tok = SubwordTokenizer.from_pretrained(rtd_run / "model")
    enc = tok.encode_batch(["the film was great and i would really recommend it .", "the soup was cold ."])
    ids, am = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        a = ours(ids, None, am).last_hidden_state
        for b in (disc(ids, None, am).last_hidden_state, hf(input_ids=ids, attention_mask=am).last_hidden_state):
            assert (a - b)[am.bool()].abs().max() <= 1e-5
    m = [r for r in __import__("bertlab.train", fromlist=["read_metrics"]).read_metrics(rtd_run)[0]
         if r["split"] == "train"]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in m) and "rtd_loss" in m[-1]
    # stop at step 5, resume: the same models as the uninterrupted run
    part, ev = tmp_path / "part", threading.Event()
    assert pretrain(part, spec(small_corpus), log=lambda s: s.startswith("step 5/") and ev.set(),
                    stop_event=ev)["state"] == "stopped"
    assert pretrain(part, spec(small_corpus), resume=True, log=lambda *_: None)["state"] == "finished"
    from safetensors.torch import load_file
    for sub in ("model", "generator"):
        x, y = load_file(rtd_run / sub / "model.safetensors"), load_file(part / sub / "model.safetensors")
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), sub
    for kw, match in [(dict(arch="bert"), "objective rtd is DeBERTa"), (dict(generator_size=0.5), "electra"),
                      (dict(loss="all-tokens"), "own pair of losses")]:
        with pytest.raises(ValueError, match=match):
            spec(small_corpus, **kw)
