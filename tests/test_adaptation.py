"""Task-adaptive pre-training (issue 32, item 10): the corpus "task:<task>" is the task's own texts with
fine-tuning's held-out ones left out; a model adapted that way fine-tunes from its run, and a fine-tuning
whose split differs from the adaptation's says how many held-out texts the adaptation read."""
import pytest
import torch

from bertlab.data.tasks import TASK_CORPUS, adaptation_texts, load_task
from bertlab.train.finetune import finetune, held_out_seen
from bertlab.train.pretrain import pretrain, task_documents
from bertlab.train.specs import FinetuneSpec, PretrainSpec
from test_finetune import tiny_dir, write_sentiment_csv  # noqa: F401 (tiny_dir: a fixture)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = write_sentiment_csv(tmp_path_factory.mktemp("task") / "reviews.csv", n=200)
    path.write_text(path.read_text().replace("review,stars", "text,label", 1))  # the column names fine-tuning reads
    return path


def test_the_corpus_is_the_task_without_fine_tunings_held_out_texts(task, vocab_tokenizer):
    train, held = adaptation_texts(str(task))
    data = load_task(str(task), vocab_tokenizer, 32)  # fine-tuning's defaults: 10 % held out, seed 0
    assert set(held) == set(data.val_texts) and not set(train) & set(held)
    assert len(set(train)) + len(set(held)) == len(set(train + held))
    for bad, match in [("pos", "adapt to task sentiment"), (str(task.with_suffix(".conll")), "sentence task")]:
        with pytest.raises(ValueError, match=match):
            adaptation_texts(bad)


def test_sentiments_corpus_leaves_out_exactly_its_853_held_out_sentences(vocab_tokenizer):
    train, held = adaptation_texts("sentiment")
    assert (len(train), len(held)) == (7677, 853)
    assert set(held) == set(load_task("sentiment", vocab_tokenizer, 16).val_texts)


def test_adapt_then_fine_tune_and_a_changed_split_is_said(tmp_path, tiny_dir, task, vocab_tokenizer):
    spec = PretrainSpec(init_from=str(tiny_dir), corpus=TASK_CORPUS + str(task), objective="mlm",
                        max_len=32, batch_size=8, steps=6, lr=1e-3, eval_batches=1, eval_every=6, save_every=6,
                        eval_early=0, heldout=0.05)
    docs, held = task_documents(spec), adaptation_texts(str(task))[1]
    assert len(docs) + len(held) == 200 and not set(docs) & set(held)  # 10 % of the distinct texts held out
    st = pretrain(tmp_path / "tapt", spec, log=lambda *_: None)
    assert st["state"] == "finished"
    kw = dict(model=str(tmp_path / "tapt"), task=str(task), epochs=1,
              batch_size=16, max_len=32)
    logs = []
    res = finetune(tmp_path / "ft", FinetuneSpec(**kw), log=logs.append)
    assert res["state"] == "finished" and not any("optimistic" in m for m in logs)
    other = load_task(str(task), vocab_tokenizer, 32, seed=3)
    seen = held_out_seen(tmp_path / "tapt" / "model", other.val_texts)
    assert 0 < seen <= len(other.val_texts)  # another seed holds out texts the adaptation read
    logs = []
    finetune(tmp_path / "ft3", FinetuneSpec(**kw, seed=3), log=logs.append)
    assert any(f"{seen} of the {len(other.val_texts)} held-out texts are among" in m for m in logs)
    assert held_out_seen(tiny_dir, other.val_texts) == 0  # a model no adaptation made


def test_the_pretrain_form_offers_the_task_corpus_but_no_path():
    from bertlab.app.ui.training import pretrain_tab as tab
    recipe = next(r for r in tab.RECIPES if "TAPT" in r)
    v = tab.recipe_values(recipe)
    spec = tab.form_spec(**v)
    assert spec.corpus == TASK_CORPUS + "sentiment" and spec.init_from and spec.objective == "mlm"
    with pytest.raises(ValueError, match="corpus must be one of"):
        tab.form_spec(**{**v, "corpus": TASK_CORPUS + "/etc/passwd"})
    assert tab.recipe_values(next(iter(tab.RECIPES)))["start_from"] == tab.SCRATCH  # another recipe: from scratch
