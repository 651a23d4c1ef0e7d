"""The pre-training loss as an extension point (issue 32, item 15): a registered function is a spec
choice, a CLI flag and a race recipe; BERT's loss is the model's own; all-tokens equals the same loss
computed by hand on transformers' logits for the same weights; each member trains with it and resumes."""
import json

import pytest
import torch
import torch.nn.functional as F

from bertlab import family
from bertlab.config import BertConfig
from bertlab.data.masking import Batcher
from bertlab.data.corpus import Example
from bertlab.tokenizer import SpecialIds
from bertlab.train import objectives, read_metrics
from bertlab.train.pretrain import pretrain
from bertlab.train.race import recipe_spec
from bertlab.train.specs import RECIPES, PretrainSpec, RaceSpec

TINY = dict(preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1, layers=1, hidden=32, heads=2,
            intermediate=64, max_position=32, dropout=0.0, lr=2e-3, warmup=0.1, log_every=5, eval_every=10,
            save_every=10, eval_early=0)


def masked_batch(vocab=120, seed=0):
    """Four [CLS] ... [SEP] rows of random ids with next-sentence labels, 30 % picked by BERT's rule."""
    g = torch.Generator().manual_seed(seed)
    ex = [Example([2, *torch.randint(5, vocab, (n,), generator=g).tolist(), 3], i % 2)
          for i, n in enumerate((12, 7, 15, 9))]
    special = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, all=frozenset(range(5)), random=torch.arange(5, vocab))
    return Batcher(ex, 4, 0, mask=special, rate=0.3, seed=seed).make_batch(ex, torch.Generator().manual_seed(seed))


def tiny_bert(vocab=120):
    torch.manual_seed(0)
    c = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)
    return family.build(c).eval()


def test_the_registry_makes_choices_recipes_and_refusals():
    assert {"mlm", "all-tokens"} <= set(objectives.REGISTRY)
    assert RECIPES["loss-all-tokens"][1] == dict(arch="bert", objective="mlm", loss="all-tokens")
    assert "mlm" not in [k[5:] for k in RECIPES if k.startswith("loss-")]  # BERT's own loss is recipe "mlm"
    assert all(o.note for o in objectives.REGISTRY.values())  # each says why, beside its choice
    with pytest.raises(ValueError, match="registered in bertlab/train/objectives.py"):
        PretrainSpec(loss="nope")
    with pytest.raises(ValueError, match="electra trains its own"):
        PretrainSpec(arch="electra", loss="all-tokens")
    with pytest.raises(ValueError, match="lowercase"):
        objectives.objective("Bad Name", "x")


def test_mlm_is_the_models_own_loss():
    model, b = tiny_bert(), masked_batch()
    with torch.no_grad():
        loss, m = objectives.masked_words(model, b)
        out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"],
                    next_sentence_label=b["next_sentence_label"])  # dense logits: the same loss
    assert abs(float(loss) - float(out.loss)) < 1e-5
    assert set(m) == {"mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc"}


def test_all_tokens_equals_the_loss_by_hand_on_transformers_logits():
    """The oracle: transformers' BertForPreTraining on the same weights, its logits and the loss written out."""
    transformers = pytest.importorskip("transformers")
    model, b = tiny_bert(), masked_batch()
    hf = transformers.BertForPreTraining(transformers.BertConfig(**model.config.to_dict())).eval()
    res = hf.load_state_dict(model.state_dict(), strict=False)
    assert not res.unexpected_keys and set(res.missing_keys) <= {"cls.predictions.decoder.bias"}, res  # tied to cls.predictions.bias
    with torch.no_grad():
        ref = hf(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])
        loss, m = objectives.all_tokens(model, b)
    picked, real = b["labels"] != -100, b["attention_mask"].bool()
    logits = ref.prediction_logits  # (B, T, V)
    own = torch.where(picked, b["labels"], b["input_ids"])
    by_hand = (F.cross_entropy(logits[picked], b["labels"][picked])
               + F.cross_entropy(logits[real & ~picked], own[real & ~picked])
               + F.cross_entropy(ref.seq_relationship_logits, b["next_sentence_label"]))
    assert abs(float(loss) - float(by_hand)) < 1e-5
    assert abs(float(m["mlm_loss"]) - float(F.cross_entropy(logits[picked], b["labels"][picked]))) < 1e-5
    assert float(m["copy_loss"]) < float(m["mlm_loss"]) * 2  # finite and of the same order at random weights


@pytest.mark.parametrize("arch", ["bert", "roberta", "albert"])
def test_each_member_pretrains_with_all_tokens_and_resumes(arch, tmp_path, small_corpus):
    torch.set_num_threads(1)
    extra = dict(embedding_size=16) if arch == "albert" else {}
    s = PretrainSpec(corpus=str(small_corpus), arch=arch, steps=10, loss="all-tokens", **{**TINY, **extra})
    st = pretrain(tmp_path / "r", s, log=lambda *_: None)
    assert st["state"] == "finished"
    assert json.loads((tmp_path / "r" / "spec.json").read_text())["loss"] == "all-tokens"
    rows, _ = read_metrics(tmp_path / "r")
    train = [r for r in rows if r["split"] == "train"]
    assert "copy_loss" in train[-1] and "mlm_acc" in [r for r in rows if r["split"] == "eval"][-1]
    st = pretrain(tmp_path / "r", s.replace(steps=15), resume=True, log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 15


def test_a_function_registered_from_outside_trains_and_races(tmp_path, small_corpus):
    calls = []

    @objectives.objective("test-smoothed", "masked words, label smoothing 0.1")
    def smoothed(model, batch):
        """Soft targets: 10 % of each target's mass spread over the vocabulary."""
        calls.append(1)
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels=batch["labels"],
                    sparse_mlm=True)
        y = batch["labels"][batch["labels"] != -100]
        return F.cross_entropy(out.mlm_logits.float(), y, label_smoothing=0.1), objectives.masked_scores(out, batch)
    try:
        assert RECIPES["loss-test-smoothed"][0] == "BERT MLM only, loss: masked words, label smoothing 0.1"
        assert recipe_spec(RaceSpec(recipes=("mlm", "loss-test-smoothed")), "loss-test-smoothed").loss == "test-smoothed"
        s = PretrainSpec(corpus=str(small_corpus), steps=5, objective="mlm", loss="test-smoothed", **TINY)
        assert pretrain(tmp_path / "r", s, log=lambda *_: None)["state"] == "finished"
        assert len(calls) == 5
    finally:
        objectives.REGISTRY.pop("test-smoothed")
        RECIPES.pop("loss-test-smoothed")
