"""DistilBERT's recipe: the student's initialisation from the teacher, the losses, the CLI end to end."""
import itertools

import pytest
import torch

from bertlab.checkpoint import save_pretrained
from bertlab.config import BertConfig
from bertlab.model import BertForPreTraining
from bertlab.checkpoint import load_pretrained
from bertlab.train.distill import DistillSpec, distill, distill_losses, make_batchers, student_from_teacher
from bertlab.train.runs import Run, read_metrics


def perturb(model, seed=0):
    """Biases and LayerNorms away from 0/1, so a wrong key mapping shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)


def tiny_bert(tok):
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=tok.vocab_size, hidden_size=24, num_hidden_layers=4,
                                         num_attention_heads=3, intermediate_size=40, max_position_embeddings=40,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


@pytest.fixture(scope="module")
def teacher(vocab_tokenizer):
    m = tiny_bert(vocab_tokenizer)
    perturb(m)
    with torch.no_grad():  # a segment-0 vector that matters: folding it into positions must be right
        m.bert.embeddings.token_type_embeddings.weight.add_(torch.randn_like(m.bert.embeddings.token_type_embeddings.weight))
    return m.eval()


@pytest.fixture(scope="module")
def teacher_dir(teacher, vocab_tokenizer, tmp_path_factory):
    return save_pretrained(teacher, vocab_tokenizer, tmp_path_factory.mktemp("teacher") / "model")


def _inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding inside the batch
    return ids, mask


def test_full_depth_student_equals_teacher(teacher, one_thread):
    ids, mask = _inputs()
    student = student_from_teacher(teacher, 4).eval()
    with torch.no_grad():
        t = teacher(ids, torch.zeros_like(ids), mask, output_hidden_states=True)
        s = student(ids, None, mask, output_hidden_states=True)
    assert (s.mlm_logits - t.mlm_logits).abs().max() <= 1e-5
    for hs, ht in zip(s.hidden_states, t.hidden_states, strict=True):
        assert (hs - ht).abs().max() <= 1e-5
    # half depth: teacher layers 0 and 2 become student layers 0 and 1
    half = student_from_teacher(teacher, 2)
    assert half.config.num_hidden_layers == 2 and half.config.model_type == "distilbert"
    for i, j in ((0, 0), (1, 2)):
        assert torch.equal(half.distilbert.transformer.layer[i].ffn.lin1.weight,
                           teacher.bert.encoder.layer[j].intermediate.dense.weight)
    assert half.vocab_projector.weight is half.distilbert.embeddings.word_embeddings.weight


def test_student_init_refuses_bad_depth(teacher):
    for n in (0, 5):
        with pytest.raises(ValueError, match="layers must be from 1 to the teacher's 4"):
            student_from_teacher(teacher, n)



def test_distillation_lowers_soft_target_loss(vocab_tokenizer, small_corpus, one_thread, tmp_path):
    spec = DistillSpec(layers=1, corpus=str(small_corpus), steps=30, lr=1e-3, warmup=0, batch_size=16,
                       max_len=24, log_every=10, eval_every=30, save_every=30, threads=1)
    batcher, held = make_batchers(spec, vocab_tokenizer)
    teacher = tiny_bert(vocab_tokenizer).train()  # a teacher that knows the corpus: 60 quick MLM steps
    opt = torch.optim.AdamW(teacher.parameters(), lr=1e-2)
    for _, b in zip(range(60), itertools.cycle(batcher)):
        teacher(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"]).loss.backward()
        opt.step()
        opt.zero_grad()
    teacher.eval()
    batch = batcher.make_batch(batcher.examples[:32], torch.Generator().manual_seed(7))
    with torch.no_grad():
        before = distill_losses(student_from_teacher(teacher, 1).eval(), teacher, batch, spec.temperature)
    res = distill(tmp_path / "run", spec, log=lambda m: None, teacher=teacher, tok=vocab_tokenizer)
    assert res["state"] == "finished" and res["step"] == 30 and res["layers"] == 1
    student, _ = load_pretrained(tmp_path / "run")
    with torch.no_grad():
        after = distill_losses(student.eval(), teacher, batch, spec.temperature)
    assert float(after["kl"]) < 0.5 * float(before["kl"]), (before, after)
    assert float(after["cos"]) < float(before["cos"])
    rows = read_metrics(tmp_path / "run")[0]
    assert [r["step"] for r in rows if r["split"] == "train"] == [10, 20, 30]
    ev = [r for r in rows if r["split"] == "eval"][-1]
    assert {"kl_loss", "mlm_loss", "cos_loss", "student_acc", "teacher_acc", "agreement"} <= set(ev)
    assert 0 <= ev["agreement"] <= 1 and held  # scored on held-out documents
    probe = __import__("json").loads((tmp_path / "run" / "probes.jsonl").read_text().splitlines()[-1])
    assert probe["step"] == 30 and all(set(g) == {"teacher", "student"} for g in probe["guesses"].values())
    # issue 32, item 14: the paper's three claims, measured on this run (structure and sums, not speed)
    m = Run(tmp_path / "run").facts()["measured"]
    assert m["teacher_params"] == sum(p.numel() for p in teacher.parameters())
    assert m["student_params"] == sum(p.numel() for p in student.parameters())
    assert m["fewer_params"] == pytest.approx(1 - m["student_params"] / m["teacher_params"]) and m["fewer_params"] > 0
    assert m["faster"] == pytest.approx(m["teacher_ms"] / m["student_ms"] - 1) and m["teacher_ms"] > 0
    assert m["kept"] == pytest.approx(ev["student_acc"] / ev["teacher_acc"])
    assert m["batch"] == [spec.batch_size, spec.max_len] or m["batch"][0] <= spec.batch_size


def test_a_stopped_distillation_resumes_exactly(teacher_dir, small_corpus, one_thread, tmp_path):
    kw = dict(teacher=str(teacher_dir), layers=2, corpus=str(small_corpus), steps=10, batch_size=8, max_len=24,
              log_every=5, eval_every=10, save_every=5, threads=1)
    assert distill(tmp_path / "full", DistillSpec(**kw), log=lambda m: None)["state"] == "finished"
    part = distill(tmp_path / "part", DistillSpec(**kw, stop_at=5), log=lambda m: None)
    assert part["state"] == "stopped" and part["step"] == 5
    assert distill(tmp_path / "part", DistillSpec(**kw), resume=True, log=lambda m: None)["step"] == 10
    a, b = load_pretrained(tmp_path / "full")[0], load_pretrained(tmp_path / "part")[0]
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), k


def test_cli_end_to_end_loads_in_transformers(teacher_dir, small_corpus, tmp_path, capsys, one_thread):
    from bertlab.app.cli import main
    out = tmp_path / "student"
    code = main(["distill", *map(str, ("--teacher", teacher_dir, "--layers", 2, "--out", out, "--steps", 5,
                                       "--corpus", small_corpus, "--batch-size", 8, "--max-len", 24,
                                       "--temperature", 3, "--alpha-kl", 4, "--threads", 1))])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert f"model: {out / 'model'}" in printed.out and "agreement" not in printed.out
    assert "the student's top guess is the teacher's" in printed.out
    from transformers import DistilBertForMaskedLM, DistilBertTokenizerFast

    ours, tok = load_pretrained(out)  # the run folder's model
    out = out / "model"
    assert type(ours).__name__ == "DistilBertForMaskedLM" and ours.config.num_hidden_layers == 2
    hf = DistilBertForMaskedLM.from_pretrained(out, attn_implementation="eager").eval()
    ids, mask = _inputs()
    with torch.no_grad():
        diff = (hf(input_ids=ids, attention_mask=mask).logits - ours(ids, None, mask).mlm_logits).abs().max()
    assert diff <= 1e-5, diff
    hf_tok = DistilBertTokenizerFast.from_pretrained(out)  # the teacher's vocabulary came along
    assert hf_tok.convert_ids_to_tokens(hf_tok("the film was great")["input_ids"]) == \
        ["[CLS]", "the", "film", "was", "great", "[SEP]"]


@pytest.mark.parametrize("args, says", [
    (["--layers", 0], "layers must be from 1"),
    (["--layers", 9], "layers must be from 1 to the teacher's 4"),
    (["--teacher", "MISSING"], "no such folder"),
])
def test_cli_bad_inputs_are_one_line(args, says, teacher_dir, small_corpus, tmp_path, capsys, one_thread):
    from bertlab.app.cli import main
    args = [str(a).replace("MISSING", str(tmp_path / "nope" / "teacher")) for a in args]
    if "--teacher" not in args:
        args += ["--teacher", str(teacher_dir)]
    code = main(["distill", *args, "--out", str(tmp_path / "student"), "--corpus", str(small_corpus), "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert err.startswith("error:") and says in err, err
    assert not (tmp_path / "student").exists()


def test_distill_leaves_the_callers_tokenizer_alone(vocab_tokenizer, small_corpus, one_thread, tmp_path):
    """The session's tokenizer is shared by other tests' models: a run's max_len must not stick to it."""
    before = vocab_tokenizer.model_max_length
    spec = DistillSpec(teacher="unused", layers=1, corpus=str(small_corpus), steps=1, batch_size=4, max_len=16,
                       log_every=100, threads=1)
    distill(tmp_path / "run", spec, log=lambda m: None, teacher=tiny_bert(vocab_tokenizer), tok=vocab_tokenizer)
    assert vocab_tokenizer.model_max_length == before
