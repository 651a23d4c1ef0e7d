"""The training side on another device, checked on the CPU (devicecheck.py: the model on meta, every op
mixing two devices fails): evaluators move their fixed batches to the model, each job's loss runs on
device batches, ELECTRA's detection statistics stay on the device with nothing read, and every job's
`device` field defaults to auto (the CPU here)."""
import pytest
import torch
from devicecheck import OneDevice, assert_device_clean

import bertlab
from bertlab.data.corpus import Example
from bertlab.data.masking import Batcher
from bertlab.train import distill, electra, objectives, pretrain
from bertlab.train.loop import resolve_device
from bertlab.train.specs import KINDS, TrainArgs


@pytest.fixture(scope="module")
def shipped():
    return bertlab.load_pretrained()


def batcher_and_examples(tok, n=8, T=12):
    g = torch.Generator().manual_seed(0)
    ex = [Example([tok.cls_token_id, *torch.randint(10, 500, (T - 2,), generator=g).tolist(), tok.sep_token_id], -100)
          for _ in range(n)]
    return Batcher.from_tokenizer(ex, 4, tok), ex


def on_meta(model):
    return model.to("meta").eval()


def test_pretraining_evaluator_moves_its_batches_to_the_model(shipped):
    model, tok = shipped
    b, ex = batcher_and_examples(tok)
    ev = pretrain.Evaluator(b, ex, 2, [1] * tok.vocab_size, tok)
    res = assert_device_clean(ev, on_meta(bertlab.BertForPreTraining(model.config)))
    assert {"mlm_loss", "mlm_acc", "unigram_acc", "attn_entropy"} <= set(res)


def test_electra_evaluation_and_statistics_stay_on_the_device(shipped):
    _, tok = shipped
    pair = electra.ElectraPair(bertlab.preset("tiny", "electra", vocab_size=tok.vocab_size,
                                              pad_token_id=tok.pad_token_id))
    b, ex = batcher_and_examples(tok)
    batch = {k: v.to("meta") for k, v in b.make_batch(ex[:4], torch.Generator().manual_seed(0)).items()}
    pair = on_meta(pair).train()
    loss, m = assert_device_clean(lambda: [x.cpu() if torch.is_tensor(x) else {k: v.cpu() for k, v in x.items()}
                                           for x in electra.compute_loss(pair, batch)])
    assert {"rtd_auc", "rtd_acc", "mlm_acc"} <= set(m)
    s, y, keep = (torch.randn(4, 6, device="meta"), torch.zeros(4, 6, dtype=torch.long, device="meta"),
                  torch.ones(4, 6, dtype=torch.bool, device="meta"))
    with OneDevice():  # a training step's statistics: nothing read from the device
        st = electra.rtd_stats(s, y, keep, lazy=True)
    assert all(v.device.type == "meta" for v in st.values())


def test_each_jobs_loss_runs_on_device_batches(shipped):
    model, tok = shipped
    b, ex = batcher_and_examples(tok)
    batch = {k: v.to("meta") for k, v in b.make_batch(ex[:4], torch.Generator().manual_seed(0)).items()}
    bert = on_meta(bertlab.BertForPreTraining(model.config)).train()
    loss, m = assert_device_clean(lambda: [x.cpu() if torch.is_tensor(x) else {k: v.cpu() for k, v in x.items()}
                                           for x in objectives.masked_words(bert, batch)])
    assert set(m) == {"mlm_loss", "mlm_acc"}


def test_lazy_detection_statistics_equal_the_read_ones_and_skip_padding():
    g = torch.Generator().manual_seed(3)
    s, y = torch.randn(5, 9, generator=g), torch.rand(5, 9, generator=g) < 0.3
    keep = torch.ones(5, 9, dtype=torch.bool)
    keep[2:, 6:] = False
    s[~keep] = 100.0  # padding scored high would count as caught if it were ranked
    eager, lazy = electra.rtd_stats(s, y, keep), electra.rtd_stats(s, y, keep, lazy=True)
    assert eager.keys() == lazy.keys()
    assert all(eager[k] == pytest.approx(float(lazy[k])) for k in eager)
    kept_s, kept_y = s[keep], y[keep]
    pos, neg = kept_s[kept_y], kept_s[~kept_y]
    assert eager["rtd_auc"] == pytest.approx(float((pos[:, None] > neg[None, :]).float().mean()))
    none = electra.rtd_stats(s, torch.zeros_like(y), keep)  # no replaced token: recall and AUC undefined
    assert "rtd_auc" not in none and "rtd_recall" not in none
    assert torch.isnan(electra.rtd_stats(s, torch.zeros_like(y), keep, lazy=True)["rtd_auc"])


def test_distillation_evaluator_moves_its_batches_to_the_student(shipped):
    model, tok = shipped
    teacher = bertlab.BertForPreTraining(model.config)
    pair = distill.DistillPair(teacher, distill.student_from_teacher(teacher, 2))
    b, ex = batcher_and_examples(tok)
    spec = distill.DistillSpec(eval_batches=1)
    fixed = [b.make_batch(ex[:4], torch.Generator().manual_seed(0))]
    res = assert_device_clean(distill.Evaluator(spec, fixed, tok, None), on_meta(pair))
    assert {"kl_loss", "student_acc", "agreement"} <= set(res)


def test_every_job_runs_where_a_gpu_is_and_says_so_when_none_is(monkeypatch):
    for kind, cls in KINDS.items():
        if "device" in {f for f in cls.__dataclass_fields__}:
            assert cls.__dataclass_fields__["device"].default == "auto", kind
    assert {k for k, c in KINDS.items() if "device" in c.__dataclass_fields__} == set(KINDS)
    assert TrainArgs().device == "auto" and resolve_device("auto").type == "cpu"  # no GPU here
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto").type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        resolve_device("cuda")
