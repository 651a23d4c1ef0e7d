"""`--objective causal`: GPT's objective on BERT's backbone. The mask (no token hears what follows it), the
next-token loss by hand, a tiny run whose model folder transformers loads as BertLMHeadModel (and back),
the spec's refusals, the race recipe, and Generate: greedy = argmax at every step; a masked-word model is
told what it is."""
import json
import math

import pytest
import torch
import torch.nn.functional as F

from bertlab import load_pretrained
from bertlab.analysis.generate import attention_masks, generate
from bertlab.checkpoint import load_model
from bertlab.config import BertConfig
from bertlab.model import BertForPreTraining
from bertlab.train import objectives, race
from bertlab.train.pretrain import pretrain
from bertlab.train.specs import RECIPES, PretrainSpec, RaceSpec

TINY = dict(objective="causal", preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1, layers=2,
            hidden=32, heads=2, intermediate=64, max_position=32, lr=2e-3, log_every=5, eval_every=10,
            save_every=10, eval_early=0)


pytestmark = pytest.mark.usefixtures("single_thread")  # conftest's: tiny models, one thread


def tiny_model(is_decoder: bool) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=32, max_position_embeddings=16,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                         is_decoder=is_decoder)).eval()


@pytest.fixture(scope="module")
def run(small_corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("causal") / "run"
    st = pretrain(path, PretrainSpec(corpus=str(small_corpus), steps=10, **TINY), log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    return path


def test_a_token_never_hears_the_tokens_after_it():
    ids = torch.randint(5, 50, (1, 10), generator=torch.Generator().manual_seed(1))
    later = ids.clone()
    later[0, 6:] = torch.randint(5, 50, (4,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for is_decoder in (True, False):
            m = tiny_model(is_decoder)
            a, b = m(ids).mlm_logits, m(later).mlm_logits
            same = torch.allclose(a[0, :6], b[0, :6], atol=1e-6)
            assert same == is_decoder  # a bidirectional BERT's earlier tokens do hear the change
    assert attention_masks(3) == {"bidirectional": [[1, 1, 1]] * 3, "causal": [[1, 0, 0], [1, 1, 0], [1, 1, 1]]}


def test_the_next_token_loss_is_the_cross_entropy_of_each_following_token():
    m = tiny_model(True)
    ids = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 8, 8, 12, 14, 3]])  # the first row padded
    att = (ids != 0).long()
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": att}
    with torch.no_grad():
        loss, metrics = objectives.next_token(m, batch)
        logits = m(ids, attention_mask=att).mlm_logits  # (B, T, V)
    terms = [-F.log_softmax(logits[b, t], -1)[ids[b, t + 1]] for b in range(2) for t in range(5) if att[b, t + 1]]
    assert len(terms) == 9 and abs(float(loss) - float(sum(terms) / len(terms))) < 1e-5
    right = [int(logits[b, t].argmax() == ids[b, t + 1]) for b in range(2) for t in range(5) if att[b, t + 1]]
    assert abs(float(metrics["mlm_acc"]) - sum(right) / 9) < 1e-6


def test_a_causal_run_loads_in_transformers_with_the_same_logits_both_ways(run, tmp_path):
    from transformers import BertLMHeadModel
    cfg = json.loads((run / "model" / "config.json").read_text())
    assert cfg["architectures"] == ["BertLMHeadModel"] and cfg["is_decoder"] is True
    ours = load_model(run / "model").eval()
    hf = BertLMHeadModel.from_pretrained(run / "model").eval()
    ids = torch.randint(5, ours.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    att = torch.ones_like(ids)
    att[1, 9:] = 0
    with torch.no_grad():
        assert (hf(ids, attention_mask=att).logits - ours(ids, attention_mask=att).mlm_logits).abs().max() < 1e-5
        hf.save_pretrained(tmp_path / "hf")  # ... and back: transformers' folder into ours
        with pytest.warns(UserWarning, match="no weights for the next-sentence head"):  # BertLMHeadModel has none
            back = load_model(tmp_path / "hf").eval()
        assert back.config.is_decoder and (hf(ids).logits - back(ids).mlm_logits).abs().max() < 1e-5
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    ev = [r for r in rows if r.get("split") == "eval"][-1]
    assert ev["attn_next"] == 0 and 0 < ev["mlm_acc"] <= 1  # no token looked right; next-token accuracy


def test_the_spec_refuses_causal_where_it_means_nothing():
    assert PretrainSpec(objective="causal").config_overrides()["is_decoder"] is True
    assert "is_decoder" not in PretrainSpec(objective="mlm").config_overrides()
    for kw in (dict(arch="electra"), dict(arch="deberta"), dict(arch="roberta"), dict(loss="all-tokens"),
               dict(whole_word=True), dict(span_masking=True), dict(static_masks=2), dict(pre_ln=True)):
        with pytest.raises(ValueError, match="objective causal predicts each next token"):
            PretrainSpec(objective="causal", **kw)
    with pytest.raises(ValueError, match="is_decoder"):
        BertConfig(model_type="roberta", is_decoder=True)
    assert RECIPES["causal"][1] == {"arch": "bert", "objective": "causal"}
    spec = race.recipe_spec(RaceSpec(recipes=("mlm", "causal")), "causal")
    assert spec.objective == "causal" and spec.config_overrides()["is_decoder"]
    # a classifier fine-tuned from it keeps its name and the mask
    d = BertConfig(is_decoder=True).to_hf_dict("BertForSequenceClassification")
    assert d["architectures"] == ["BertForSequenceClassification"] and d["is_decoder"] is True


def test_greedy_generation_is_the_argmax_at_every_step(run):
    from bertlab.tokenizer import SubwordTokenizer
    model, tok = load_model(run / "model").eval(), SubwordTokenizer.from_pretrained(run / "model")
    res = generate(model, tok, "the film was", 6)
    assert res["mode"] == "causal" and res["sampling"] == "greedy"
    ids = [i for i in tok.encode("the film was").ids if i != tok.sep_token_id]
    banned = sorted(tok.special_ids - {tok.sep_token_id})
    for step in res["steps"]:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).mlm_logits[0, -1]
        logits[banned] = -math.inf
        assert step["id"] == int(logits.argmax())
        ids.append(step["id"])
    assert res["stopped"] == (res["steps"][-1]["id"] == tok.sep_token_id)
    a, b = (generate(model, tok, "the film was", 6, top_k=5, seed=3) for _ in range(2))
    assert a["steps"] == b["steps"] and a["seed"] == 3  # sampling repeats with its seed


def test_a_masked_word_model_is_shown_failing_with_its_reason():
    from bertlab.app.ui.text import generate_view
    from bertlab.app.ui.shared import models
    view, fig, res = generate_view.generate_view("the acting was", 5, "greedy", 10, 0, models.DEFAULT)
    assert res["mode"] == "masked" and len(res["steps"]) == 5
    _, n = max(((t, [s["token"] for s in res["steps"]].count(t)) for t in {s["token"] for s in res["steps"]}),
                 key=lambda x: x[1])
    assert "masked-word model" in view and f"{n} time" in view and "out of 5" in view
    model, tok = load_pretrained()
    with pytest.raises(ValueError, match="new_tokens must be"):
        generate(model, tok, "the acting was", 0)
    with pytest.raises(ValueError, match="positions"):
        generate(model, tok, " ".join(["good"] * 120), 20)
    for bad in (("", 5, "greedy", 10, 0), ("the", 99, "greedy", 10, 0), ("the", 5, "sample", 1, 0)):
        with pytest.raises(Exception) as e:
            generate_view.generate_view(*bad, models.DEFAULT)
        assert type(e.value).__name__ == "Error"  # gr.Error: one message


def test_the_race_table_says_a_causal_row_scores_next_tokens():
    row = dict(recipe="causal", label=RECIPES["causal"][0], params=1e6, minutes=1.0, steps=10, mlm_acc=0.2,
               finetune_mean=0.6, latency_ms=1.0)
    md = race.table_md(dict(task="sentiment", seeds=1, rows=[row, {**row, "recipe": "mlm"}], threads=1,
                            side_by_side=False, minutes_total=2, estimate_minutes=2))
    assert "20.0% (next token)" in md and md.count("(next token)") == 1
