"""DistilBERT's recipe: the student's initialisation from the teacher, the losses, the CLI end to end."""
import itertools

import pytest
import torch

from bertlab.checkpoint import save_pretrained
from bertlab.config import BertConfig
from bertlab.model import BertForPreTraining
from bertlab.train.distill import DistillSpec, distill, distill_losses, make_batcher, student_from_teacher


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


@pytest.fixture
def one_thread():
    """Tiny models on a shared 2-core machine: one thread is ~50x faster than two fighting others."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_distillation_lowers_soft_target_loss(vocab_tokenizer, small_corpus, one_thread):
    spec = DistillSpec(layers=1, corpus=str(small_corpus), steps=30, lr=1e-3, warmup=0, batch_size=16,
                       max_len=24, log_every=100, threads=1)
    batcher = make_batcher(spec, vocab_tokenizer)
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
    res = distill(spec, None, log=lambda m: None, teacher=teacher, tok=vocab_tokenizer)
    with torch.no_grad():
        after = distill_losses(res["student"], teacher, batch, spec.temperature)
    assert len(res["history"]) == 30
    assert float(after["kl"]) < 0.5 * float(before["kl"]), (before, after)
    assert float(after["cos"]) < float(before["cos"])


def test_cli_end_to_end_loads_in_transformers(teacher_dir, small_corpus, tmp_path, capsys, one_thread):
    from bertlab.app.cli import main
    out = tmp_path / "student"
    code = main(["distill", *map(str, ("--teacher", teacher_dir, "--layers", 2, "--out", out, "--steps", 5,
                                       "--corpus", small_corpus, "--batch-size", 8, "--max-len", 24,
                                       "--temperature", 3, "--alpha-kl", 4, "--threads", 1))])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert f"model: {out}" in printed.out and "step 5/5" in printed.err
    from transformers import DistilBertForMaskedLM, DistilBertTokenizerFast

    from bertlab.checkpoint import load_pretrained
    ours, tok = load_pretrained(out)
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


def test_distill_leaves_the_callers_tokenizer_alone(vocab_tokenizer, small_corpus, one_thread):
    """The session's tokenizer is shared by other tests' models: a run's max_len must not stick to it."""
    before = vocab_tokenizer.model_max_length
    spec = DistillSpec(teacher="unused", layers=1, corpus=str(small_corpus), steps=1, batch_size=4, max_len=16,
                       log_every=100, threads=1)
    distill(spec, None, log=lambda m: None, teacher=tiny_bert(vocab_tokenizer), tok=vocab_tokenizer)
    assert vocab_tokenizer.model_max_length == before
