"""Every classic task head: sentence pairs, regression, multi-label, extractive QA and the pooling choice.
Task files load (and bad ones give one clear ValueError); the metrics equal hand-computed values,
scipy.stats and the SQuAD v1.1 script; each head's export loads into transformers' own class with the
same logits (and back); a few fine-tuning steps on each shipped example file lower the loss."""
import json
import re
import string
from collections import Counter
from pathlib import Path

import pytest
import torch

from bertlab.checkpoint import save_pretrained
from bertlab.config import BertConfig
from bertlab.data import qa
from bertlab.data.tasks import TaskBatcher, collate_task, label_problem, load_task, task_kind
from bertlab.heads import classifier_class, load_classifier, save_classifier
from bertlab.heads_family import custom_pooling
from bertlab.model import BertForPreTraining
from bertlab.train.finetune import build_classifier, compute_loss, finetune
from bertlab.train.finetune_metrics import (
    multilabel_metrics,
    normalize_answer,
    pearson,
    ranks,
    regression_metrics,
    spearman,
    squad_metrics,
)
from bertlab.train.runs import read_metrics
from bertlab.train.specs import FinetuneSpec

torch.set_num_threads(1)
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = {"pair": ("same_sentiment.csv", dict(pair_column="text_b")), "regression": ("polarity.csv", {}),
         "multi": ("aspects.jsonl", {}), "qa": ("movie_qa.json", {})}
FAMILY = ("bert", "albert", "electra", "roberta", "distilbert")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=40)
EXTRA = {"albert": dict(embedding_size=16, hidden_act="gelu_new"), "electra": dict(embedding_size=16),
         "roberta": dict(type_vocab_size=1, max_position_embeddings=42)}
TOL = 1e-5


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bpe(small_corpus):
    from bertlab.tokenizer import BPETokenizer
    return BPETokenizer.train([str(small_corpus)], vocab_size=400)


@pytest.fixture(scope="module")
def wp():
    """WordPiece learnt from the example files themselves: real words, a small vocabulary."""
    from bertlab.tokenizer import WordPieceTokenizer
    texts = [(EXAMPLES / n).read_text(encoding="utf-8") for n, _ in FILES.values()]
    return WordPieceTokenizer.train(texts, vocab_size=1500)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, wp):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    c = BertConfig(vocab_size=wp.vocab_size, **(SMALL | dict(max_position_embeddings=128)))
    save_pretrained(BertForPreTraining(c), wp, folder)
    return folder


# ---- loading task files --------------------------------------------------------------------------

def test_pairs_go_in_as_segments_a_and_b(tmp_path, vocab_tokenizer, bpe):
    rows = "".join(f"the film was great {i},it was bad {i % 3},{'same' if i % 2 else 'different'}\n" for i in range(24))
    f = write(tmp_path / "pairs.csv", "text,text_b,label\n" + rows)
    for tok in (vocab_tokenizer, bpe):
        data = load_task(str(f), tok, 64, pair_column="text_b", val_frac=0.2)
        assert data.problem == "single" and data.labels == ["different", "same"]
        ex = data.train[0]
        a = data.val_texts[0]  # val_texts hold (a, b) pairs
        assert isinstance(a, tuple) and len(a) == 2
        enc = tok.encode(*a)
        val = data.val[0]
        assert val.ids == enc.ids and val.token_type_ids == enc.token_type_ids
        if tok is vocab_tokenizer:  # [CLS] a [SEP] b [SEP], types 0 then 1
            sep = val.ids.index(tok.sep_token_id)
            assert val.ids[0] == tok.cls_token_id and val.token_type_ids == [0] * (sep + 1) + [1] * (len(val.ids) - sep - 1)
        else:  # RoBERTa: <s> a </s></s> b </s>, all type 0
            sep = val.ids.index(tok.sep_token_id)
            assert val.ids[sep + 1] == tok.sep_token_id and set(val.token_type_ids) == {0}
        assert len(ex.ids) == len(ex.token_type_ids)
    short = load_task(str(f), vocab_tokenizer, 12, pair_column="text_b")  # cut longest-first
    assert max(len(e.ids) for e in short.train) == 12
    b = collate_task(data.train[:4], 0)
    assert b["labels"].dtype == torch.long and b["token_type_ids"].shape == b["input_ids"].shape


def test_the_label_column_decides_the_problem(tmp_path, vocab_tokenizer):
    many = write(tmp_path / "score.csv", "text,label\n" + "".join(f"film {i},{i * 0.37:.2f}\n" for i in range(30)))
    data = load_task(str(many), vocab_tokenizer)
    assert data.problem == "regression" and data.labels == ["label"] and isinstance(data.train[0].label, float)
    assert any("regression" in n for n in data.notes)
    b = collate_task(data.train[:3], 0, "regression")
    assert b["labels"].dtype == torch.float32 and b["labels"].shape == (3,)
    stars = write(tmp_path / "stars.csv", "text,label\n" + "".join(f"film {i},{1 + i % 5}\n" for i in range(30)))
    assert load_task(str(stars), vocab_tokenizer).problem == "single"  # five whole numbers: classes
    assert load_task(str(stars), vocab_tokenizer, problem="regression").problem == "regression"
    assert label_problem([1, 2, 3]) == "single" and label_problem([0.5, 1, 2]) == "regression"
    assert label_problem(list(range(11))) == "regression" and label_problem(["a|b", "c"]) == "multi"
    lists = write(tmp_path / "multi.jsonl", "".join(json.dumps({"text": f"film {i}", "label": ["a", "b"][:1 + i % 2]
                                                                   + (["c"] if i % 3 == 0 else [])}) + "\n"
                                                       for i in range(30)))
    data = load_task(str(lists), vocab_tokenizer)
    assert data.problem == "multi" and data.labels == ["a", "b", "c"]
    assert all(sum(e.label) >= 1 and set(e.label) <= {0.0, 1.0} for e in data.train)
    assert collate_task(data.train[:5], 0, "multi")["labels"].shape == (5, 3)
    piped = write(tmp_path / "multi.csv", "text,label\n" + "".join(f"film {i},{'a|c' if i % 2 else 'b'}\n" for i in range(30)))
    data = load_task(str(piped), vocab_tokenizer)
    assert data.problem == "multi" and data.labels == ["a", "b", "c"]
    assert sorted({tuple(e.label) for e in data.train + data.val}) == [(0.0, 1.0, 0.0), (1.0, 0.0, 1.0)]
    assert data.summary().endswith("3 labels, several per text")


def test_squad_files_are_windowed_with_offsets(tmp_path, vocab_tokenizer, bpe):
    path = EXAMPLES / "movie_qa.json"
    assert qa.is_squad(path) and task_kind(str(path)) == "qa" and not qa.is_squad(EXAMPLES / "aspects.jsonl")
    items, notes = qa.read_squad(path)
    assert len(items) >= 40 and not notes
    assert all(it.context[it.start:it.start + len(it.answers[0])] == it.answers[0] for it in items)
    for tok in (vocab_tokenizer, bpe):
        examples, windows, lost = qa.encode_qa(tok, items[:6], 48)
        assert lost == 0 and len(windows) == len(examples) > 6  # long contexts: several windows each
        for ex, w in zip(examples, windows):
            it = items[w.item]
            assert len(ex.ids) <= 48 and ex.ids[-1] == tok.sep_token_id
            s, e = ex.label
            if (s, e) == (0, 0):
                continue  # the window misses the answer: [CLS]
            k0, k1 = s - w.ctx_start, e - w.ctx_start
            span = it.context[w.offsets[k0][0]:w.offsets[k1][1]]
            assert normalize_answer(span) == normalize_answer(it.answers[0]), (span, it.answers[0])
        assert sum(ex.label != (0, 0) for ex in examples) >= 6  # every answer lies in some window
        # a window is the tokenizer's own pair: question A, context piece B
        ex, w = examples[0], windows[0]
        full = tok.encode(items[0].question, items[0].context[:w.offsets[-1][1]])
        assert ex.ids == full.ids and ex.token_type_ids == full.token_type_ids
    data = load_task(str(path), vocab_tokenizer, 96, val_frac=0.2)
    assert data.kind == data.problem == "qa" and data.labels == ["start", "end"]
    val_items, val_windows = data.qa_val
    val_ctx = {it.context for it in val_items}
    assert sum(it.context in val_ctx for it in items) == len(val_items)  # a context's questions stay together
    assert 0 < len(val_ctx) < len({it.context for it in items}) and len(val_windows) == len(data.val)
    b = collate_task(data.train[:4], 0, "qa")
    assert set(b) == {"input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions"}


@pytest.mark.parametrize("name,content,kw,match", [
    ("p.csv", "text,label\n" + "a,x\n" * 12, dict(pair_column="text_b"), "no pair column 'text_b'"),
    ("p2.csv", "text,label\n" + "a,x\n" * 12, dict(pair_column="text"), "must differ"),
    ("r.csv", "text,label\n" + "".join(f"t{i},{i}\n" for i in range(11)) + "t,lots\n",
     dict(problem="regression"), "holds 'lots', not a number"),
    ("n.jsonl", "".join(json.dumps({"text": f"t{i}", "label": [["a"], "b"]}) + "\n" for i in range(12)), {},
     "could not be read|nested list"),
    ("s.csv", "text,label\n" + "".join(f"t{i},a|b\n" for i in range(12)), dict(problem="single"), "looks like|same label"),
    ("q.csv", "text,label\n" + "a,x\n" * 12, dict(problem="qa"), "SQuAD-format .json"),
    ("bad.json", '{"data": [{"paragraphs": [{"context": "a film", "qas": [{"id": "1", "question": "what?", '
                 '"answers": [{"text": "a play", "answer_start": 0}]}]}]}]}', {}, r"not in the context"),
    ("nocontext.json", '{"data": [{"paragraphs": [{"qas": []}]}]}', {}, r"paragraphs\[0\].*context"),
    ("broken.json", '{"data": [{"paragraphs": [', {}, "not valid JSON"),
    ("few.json", json.dumps({"data": [{"paragraphs": [{"context": "the film was great", "qas": [
        {"id": str(i), "question": "how?", "answers": [{"text": "great", "answer_start": 13}]} for i in range(3)]}]}]}),
     {}, "3 answerable questions"),
])
def test_malformed_files_give_one_clear_error(tmp_path, vocab_tokenizer, name, content, kw, match):
    f = write(tmp_path / name, content)
    with pytest.raises(ValueError, match=match):
        load_task(str(f), vocab_tokenizer, **kw)


def test_builtin_tasks_refuse_other_problems(vocab_tokenizer):
    with pytest.raises(ValueError, match="problem multi needs a file"):
        load_task("sentiment", vocab_tokenizer, problem="multi")
    with pytest.raises(ValueError, match="problem"):
        task_kind("x.csv", "many")


# ---- metrics -------------------------------------------------------------------------------------

def test_regression_metrics_by_hand_and_against_scipy():
    x, y = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 3.0, 2.0, 5.0])
    # by hand: means 2.5 and 2.75; sum of products 5.5; sqrt(5 * 8.75) = 6.614...
    assert pearson(x, y) == pytest.approx(5.5 / (5 * 8.75) ** 0.5)
    assert ranks(torch.tensor([10.0, 20.0, 20.0, 5.0])).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert spearman(x, y) == pytest.approx(0.8)  # rank differences 0, 1, 1, 0: 1 - 6 * 2 / (4 * 15)
    assert pearson(x, torch.ones(4)) == 0.0  # a constant has no correlation
    m = regression_metrics(x, y)
    assert m["mse"] == pytest.approx((0 + 1 + 1 + 1) / 4) and m["baseline_mse"] == pytest.approx(2.1875)
    import scipy.stats as stats  # the oracle (requirements-dev)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        a = torch.randint(0, 6, (40,), generator=g).double()  # many ties
        b = a + torch.randn(40, generator=g, dtype=torch.float64) * 2
        assert pearson(a, b) == pytest.approx(stats.pearsonr(a.numpy(), b.numpy())[0], abs=1e-12)
        assert spearman(a, b) == pytest.approx(stats.spearmanr(a.numpy(), b.numpy())[0], abs=1e-12)
        assert torch.equal(ranks(a), torch.from_numpy(stats.rankdata(a.numpy())))


def test_multilabel_metrics_by_hand():
    true = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    pred = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]])
    m = multilabel_metrics(pred, true)
    # label 0: tp 2 -> F1 1; label 1: tp 1, fn 1 -> 2/3; label 2: fp 1, fn 1 -> 0
    assert m["f1"] == pytest.approx([1.0, 2 / 3, 0.0]) and m["macro_f1"] == pytest.approx(5 / 9)
    assert m["micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 1 + 2))  # tp 3, fp 1, fn 2
    assert m["accuracy"] == pytest.approx(2 / 4) and m["support"] == [2, 2, 1]  # rows 2 and 4 whole
    assert m["precision"] == pytest.approx([1.0, 1.0, 0.0]) and m["recall"] == pytest.approx([1.0, 0.5, 0.0])


# The SQuAD v1.1 evaluation script's definitions, as published (evaluate-v1.1.py), for comparison.
def _squad_normalize(s):
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)
    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _squad_f1(prediction, ground_truth):
    prediction_tokens = _squad_normalize(prediction).split()
    ground_truth_tokens = _squad_normalize(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def test_squad_metrics_match_the_script():
    preds = ["The Eiffel Tower!", "in Paris , France", "an apple a day", "", "Denver Broncos"]
    golds = [["eiffel tower"], ["Paris", "Paris, France"], ["the apple"], ["something"], ["Broncos", "the Denver Broncos"]]
    m = squad_metrics(preds, golds)
    em = [max(float(_squad_normalize(p) == _squad_normalize(g)) for g in gs) for p, gs in zip(preds, golds)]
    f1 = [max(_squad_f1(p, g) for g in gs) for p, gs in zip(preds, golds)]
    assert m["exact_match"] == pytest.approx(sum(em) / 5) and m["f1"] == pytest.approx(sum(f1) / 5)
    assert em == [1.0, 0.0, 0.0, 0.0, 1.0]  # "in paris france" vs "paris france": no exact match
    assert f1[1] == pytest.approx(0.8) and f1[2] == pytest.approx(2 * 0.5 * 1 / 1.5)  # by hand
    assert normalize_answer("  The  Cat's   hat. ") == "cats hat"


def test_best_span_respects_order_and_length():
    w = qa.QAWindow(0, 2, [(0, 3), (4, 8), (9, 12), (13, 17)])
    start = torch.tensor([9.0, 0, 0, 5, 1, 0])  # position 0 ([CLS]) is never an answer
    end = torch.tensor([9.0, 0, 4, 0, 0, 6])
    score, a, b = qa.best_span(start, end, w)
    assert (a, b) == (4, 17) and score == pytest.approx(11.0)  # tokens 1..3 of the context
    assert qa.best_span(start, end, w, max_answer=2)[1:] == (9, 17)  # at most 2 tokens: 2..3 (1 + 6 = 7)


# ---- exports equal transformers -----------------------------------------------------------------

def config(member: str, tok) -> BertConfig:
    extra = EXTRA.get(member, {})
    if member == "roberta":
        extra = extra | dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    return BertConfig(vocab_size=tok.vocab_size, model_type=member, **(SMALL | extra))


def perturbed(m):
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return m.eval()


def inputs(c: BertConfig, T=13):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (3, T), generator=g)
    tt = torch.randint(0, c.type_vocab_size, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 9:] = 0
    am[2, 4:] = 0
    ids[am == 0] = c.pad_token_id
    return ids, tt, am


def run_both(ours, theirs, c):
    ids, tt, am = inputs(c)
    kw = {} if c.model_type == "distilbert" else {"token_type_ids": tt}
    with torch.no_grad():
        return ours(ids, tt, am), theirs(input_ids=ids, attention_mask=am, **kw)


@pytest.fixture(scope="module")
def toks(vocab_tokenizer, bpe):
    return {k: bpe if k == "roberta" else vocab_tokenizer for k in FAMILY}


@pytest.mark.parametrize("problem", ["regression", "multi"])
@pytest.mark.parametrize("member", FAMILY)
def test_regression_and_multilabel_export_to_transformers(member, problem, toks, tmp_path):
    transformers = pytest.importorskip("transformers")
    tok, c = toks[member], config(member, toks[member])
    torch.manual_seed(0)
    n = 1 if problem == "regression" else 4
    ours = perturbed(classifier_class(c, "sequence")(c, n, None if n == 1 else list("wxyz"), problem=problem))
    save_classifier(ours, tok, tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["problem_type"] == {"regression": "regression", "multi": "multi_label_classification"}[problem]
    assert cfg["num_labels"] == n
    theirs, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "m", attn_implementation="eager", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert type(theirs).__name__ == type(ours).__name__ and theirs.config.problem_type == cfg["problem_type"]
    a, b = run_both(ours, theirs.eval(), c)
    assert (a.logits - b.logits).abs().max() <= TOL
    # the losses agree too: MSE on the one output, BCE with logits on 0/1 per label
    y = torch.tensor([0.5, -1.0, 2.0]) if n == 1 else torch.tensor([[1.0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1]])
    ids, tt, am = inputs(c)
    kw = {} if member == "distilbert" else {"token_type_ids": tt}
    with torch.no_grad():
        assert ours(ids, tt, am, labels=y).loss.item() == pytest.approx(
            theirs(input_ids=ids, attention_mask=am, labels=y, **kw).loss.item(), abs=1e-5)
    back, _ = load_classifier(tmp_path / "m")
    assert back.problem == problem and back.kind == "sequence" and back.num_labels == n


@pytest.mark.parametrize("member", FAMILY)
def test_question_answering_exports_both_ways(member, toks, tmp_path):
    transformers = pytest.importorskip("transformers")
    tok, c = toks[member], config(member, toks[member])
    cls = classifier_class(c, "qa")
    assert cls.__name__ == f"{ {'distilbert': 'DistilBert'}.get(member, member.title())}ForQuestionAnswering"
    torch.manual_seed(0)
    ours = perturbed(cls(c, classifier_dropout=0.2 if member == "distilbert" else None))
    assert ours.problem == ours.kind == "qa"
    save_classifier(ours, tok, tmp_path / "ours")
    theirs, info = transformers.AutoModelForQuestionAnswering.from_pretrained(
        tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert type(theirs).__name__ == cls.__name__
    a, b = run_both(ours, theirs.eval(), c)
    assert (a.start_logits - b.start_logits).abs().max() <= TOL
    assert (a.end_logits - b.end_logits).abs().max() <= TOL
    sp, ep = torch.tensor([1, 3, 20]), torch.tensor([2, 5, 0])  # 20: past the input, left out as in transformers
    ids, tt, am = inputs(c)
    kw = {} if member == "distilbert" else {"token_type_ids": tt}
    with torch.no_grad():
        assert ours(ids, tt, am, start_positions=sp, end_positions=ep).loss.item() == pytest.approx(
            theirs(input_ids=ids, attention_mask=am, start_positions=sp, end_positions=ep, **kw).loss.item(), abs=1e-5)
    # and the other way: a folder transformers wrote loads into ours
    torch.manual_seed(1)
    hf = perturbed(type(theirs)(theirs.config))
    hf.save_pretrained(tmp_path / "hf")
    tok.save_pretrained(tmp_path / "hf")
    back, _ = load_classifier(tmp_path / "hf")
    assert type(back) is cls and back.kind == "qa"
    x, y = run_both(back, hf, c)
    assert (x.start_logits - y.start_logits).abs().max() <= TOL and (x.end_logits - y.end_logits).abs().max() <= TOL


@pytest.mark.parametrize("member", FAMILY)
def test_pooling_choices(member, toks, tmp_path):
    """auto and pooler (and cls where the member's head reads token 0) are transformers' class; the rest
    are saved with "bertlab_pooling", come back equal in bertlab, and transformers would pool otherwise."""
    transformers = pytest.importorskip("transformers")
    tok, c = toks[member], config(member, toks[member])
    for pooling in ("auto", "pooler", "cls", "mean", "max"):
        torch.manual_seed(0)
        ours = perturbed(classifier_class(c, "sequence")(c, 3, pooling=pooling))
        folder = tmp_path / pooling
        save_classifier(ours, tok, folder)
        cfg = json.loads((folder / "config.json").read_text())
        custom = custom_pooling(member, pooling)
        assert cfg.get("bertlab_pooling") == custom
        assert (custom is None) == (pooling in ("auto", "pooler") or (pooling == "cls" and member not in ("bert", "albert")))
        back, _ = load_classifier(folder)
        assert back.pooling == (custom or "auto")
        ids, tt, am = inputs(c)
        with torch.no_grad():
            assert (back(ids, tt, am).logits - ours(ids, tt, am).logits).abs().max() <= TOL
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
                folder, attn_implementation="eager").eval()
        a, b = run_both(ours, theirs, c)
        d = (a.logits - b.logits).abs().max().item()
        assert d <= TOL if custom is None else d > 1e-3, (pooling, d)
    with pytest.raises(ValueError, match="pooling is for sentence heads"):
        classifier_class(c, "token")(c, 3, pooling="mean")


@pytest.mark.parametrize("layers", [2, 5])
@pytest.mark.parametrize("member", FAMILY)
def test_last4_reads_the_last_layers_cls_side_by_side(member, layers, toks, tmp_path):
    """issue 32, item 11: last4's logits are the head applied to token 0 of transformers' own last four
    hidden states (both of a 2-layer model's) side by side; saved and loaded equal; transformers' class
    refuses the 4H-wide head rather than pooling otherwise."""
    transformers = pytest.importorskip("transformers")
    import warnings
    tok, c = toks[member], config(member, toks[member])
    c.num_hidden_layers = layers
    torch.manual_seed(0)
    ours = perturbed(classifier_class(c, "sequence")(c, 3, pooling="last4"))
    folder = tmp_path / "last4"
    save_classifier(ours, tok, folder)
    assert json.loads((folder / "config.json").read_text())["bertlab_pooling"] == "last4"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoder = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
        with pytest.raises(RuntimeError, match="mismatch"):
            transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    ids, tt, am = inputs(c)
    kw = {} if member == "distilbert" else {"token_type_ids": tt}
    with torch.no_grad():
        hs = encoder(input_ids=ids, attention_mask=am, output_hidden_states=True, **kw).hidden_states
        v = torch.cat([h[:, 0] for h in hs[-min(4, layers):]], -1)  # (B, 4H)
        assert v.shape[1] == min(4, layers) * c.hidden_size
        if member == "distilbert":
            expect = ours.classifier(torch.relu(ours.pre_classifier(v)))
        else:
            expect = ours.classifier(v)
        got = ours(ids, tt, am)
        back, _ = load_classifier(folder)
        assert back.pooling == "last4"
        assert (got.logits - expect).abs().max() <= TOL
        assert (back(ids, tt, am).logits - got.logits).abs().max() <= TOL
        assert got.hidden_states is None and len(ours(ids, tt, am, output_hidden_states=True).hidden_states) == layers + 1


def test_mean_and_max_pooling_ignore_padding(vocab_tokenizer):
    c = config("bert", vocab_tokenizer)
    for pooling in ("mean", "max"):
        torch.manual_seed(0)
        m = perturbed(classifier_class(c, "sequence")(c, 2, pooling=pooling))
        ids, tt, am = inputs(c)
        with torch.no_grad():
            full = m(ids, tt, am).logits[2]
            alone = m(ids[2:, :4], tt[2:, :4], am[2:, :4]).logits[0]  # the same row without its padding
        assert (full - alone).abs().max() < 1e-5


# ---- fine-tuning on the example files -------------------------------------------------------------

@pytest.mark.parametrize("what", list(FILES))
def test_a_few_steps_on_each_example_lower_the_loss(what, wp, tiny_dir):
    name, kw = FILES[what]
    data = load_task(str(EXAMPLES / name), wp, 96, max_examples=40, **kw)
    spec = FinetuneSpec(model=str(tiny_dir), task=str(EXAMPLES / name))
    torch.manual_seed(0)
    net, _ = build_classifier(str(tiny_dir), data.kind, data.labels, spec, log=lambda m: None, problem=data.problem)
    assert net.problem == ("single" if what == "pair" else what)
    batch = TaskBatcher.from_tokenizer(data.train[:32], 32, wp, mask=False, problem=data.problem).make_batch(data.train[:32])
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3)

    def loss_now():
        net.eval()
        with torch.no_grad():
            return compute_loss(net, batch)[0].item()
    before = loss_now()
    net.train()
    for _ in range(25):
        loss, metrics = compute_loss(net, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = loss_now()
    assert after < 0.8 * before, (what, before, after)


@pytest.mark.parametrize("what,keys", [("pair", {"accuracy", "macro_f1"}), ("regression", {"pearson", "spearman"}),
                                       ("multi", {"accuracy", "micro_f1", "macro_f1"}), ("qa", {"exact_match", "f1"})])
def test_finetune_runs_each_head_end_to_end(what, keys, tmp_path, tiny_dir, wp):
    transformers = pytest.importorskip("transformers")
    name, kw = FILES[what]
    res = finetune(tmp_path / "run", model=str(tiny_dir), task=str(EXAMPLES / name), epochs=1, batch_size=16,
                   max_examples=60 if what != "qa" else None, max_len=96, log=lambda m: None, threads=1, **kw)
    assert res["state"] == "finished" and keys <= res.keys() and res["problem"] == ("single" if what == "pair" else what)
    evals = [r for r in read_metrics(tmp_path / "run")[0] if r["split"] == "eval"]
    assert evals and keys | {"loss"} <= evals[-1].keys()
    folder = tmp_path / "run" / "model"
    net, tok = load_classifier(folder)
    assert net.problem == res["problem"] and net.kind == ("qa" if what == "qa" else "sequence")
    auto = transformers.AutoModelForQuestionAnswering if what == "qa" else transformers.AutoModelForSequenceClassification
    theirs = auto.from_pretrained(folder, attn_implementation="eager").eval()
    b = tok.encode_batch(["who directed the film ?", "a gorgeous film"], ["the film was directed by mara .", "yes"])
    with torch.no_grad():
        mine = net(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
        other = theirs(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])
    other = torch.stack([other.start_logits, other.end_logits], -1) if what == "qa" else other.logits
    assert (mine - other).abs().max() <= TOL
    if what == "qa":
        got = qa.answer_question(net, tok, "Who directed The Salt Road?", "The Salt Road is a 2009 drama directed by Mara.")
        assert set(got) == {"answer", "start", "end", "score"} and got["answer"] in "The Salt Road is a 2009 drama directed by Mara."


def test_init_random_keeps_the_shape_not_the_weights(tiny_dir):
    """issue 32, item 9: init random is the same classifier with BERT's initialisation (normal, std
    initializer_range; LayerNorm at one) from the seed instead of the source's encoder; pretrained loads it."""
    import bertlab
    from bertlab.family import encoder_of
    pre, _ = bertlab.load_pretrained(str(tiny_dir))
    theirs = encoder_of(pre).state_dict()
    built = {}
    for init, seed in (("pretrained", 0), ("random", 0), ("random", 0), ("random", 1)):
        torch.manual_seed(seed)
        net, _ = build_classifier(str(tiny_dir), "sequence", ["a", "b"], FinetuneSpec(init=init), log=lambda m: None)
        built.setdefault(init, []).append(encoder_of(net).state_dict())
    assert all(torch.equal(v, theirs[k]) for k, v in built["pretrained"][0].items())
    a, b, c = built["random"]
    assert all(torch.equal(v, b[k]) for k, v in a.items())  # the seed decides
    q = next(k for k in a if k.endswith("query.weight"))
    assert not torch.equal(a[q], c[q]) and not torch.equal(a[q], theirs[q])
    std = pre.config.initializer_range
    assert abs(a[q].std().item() - std) < 0.2 * std
    assert all(torch.equal(v, torch.ones_like(v)) for k, v in a.items() if "LayerNorm.weight" in k)
    with pytest.raises(ValueError, match="init"):
        FinetuneSpec(init="scratch")
