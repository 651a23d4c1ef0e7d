"""Corpora -> documents -> sentences -> examples -> resumable, sharded, masked batches."""
import json
import random

import pytest
import torch

from bertlab.data.corpus import (
    clean_text,
    load_documents,
    make_pretraining_examples,
    split_heldout,
    split_sentences,
    tokenize_documents,
)
from bertlab.data.masking import Batcher, Example, collate
from bertlab.tokenizer import SpecialIds, special_token_ids

IDS = dict(cls_id=2, sep_id=3)  # the synthetic vocabulary's [CLS] and [SEP]
SENT_LEN = 6  # synthetic sentences: SENT_LEN copies of one id that encodes (document, sentence)


def synthetic_docs(n_docs=600, seed=0):
    rng = random.Random(seed)
    return [[[5 + 1000 * d + s] * SENT_LEN for s in range(rng.randint(1, 40))] for d in range(n_docs)]


def who(token):  # (document, sentence) of a synthetic token
    return divmod(token - 5, 1000)


def segments(e: Example):
    """(A, B) token lists, checking the [CLS] A [SEP] (B [SEP]) layout and token types on the way."""
    ids, tt = e.ids, e.token_type_ids
    seps = [i for i, t in enumerate(ids) if t == 3]
    assert ids[0] == 2 and ids[-1] == 3 and len(tt) == len(ids) and 2 not in ids[1:]
    assert tt == [0] * (seps[0] + 1) + [1] * (len(ids) - seps[0] - 1)
    return ids[1:seps[0]], ids[seps[0] + 1:-1]


def sentences(tokens):
    """The (doc, sentence) runs of a segment: must be one document, consecutive sentences."""
    runs = sorted({who(t) for t in tokens})
    docs = {d for d, _ in runs}
    assert len(docs) == 1 and [s for _, s in runs] == list(range(runs[0][1], runs[-1][1] + 1))
    return docs.pop(), runs[0][1], runs[-1][1]


# ---- sentences and cleaning ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Mr. Smith went to Washington. He arrived at 3.5 p.m. on Monday.",
     ["Mr. Smith went to Washington.", "He arrived at 3.5 p.m. on Monday."]),
    ('"Great." He said it twice. Then left!', ['"Great."', "He said it twice.", "Then left!"]),
    ("It was seized by U.S. customs in 1967. Dr. Who is great, e.g. the daleks, i.e. robots. Next!",
     ["It was seized by U.S. customs in 1967.", "Dr. Who is great, e.g. the daleks, i.e. robots.", "Next!"]),
    ("And then... nothing. Really?! Yes. Wait... What?",
     ["And then... nothing.", "Really?!", "Yes.", "Wait...", "What?"]),
    ('He asked "Why?" and left. (It was fine.) Then "No!" she said.',
     ['He asked "Why?" and left.', "(It was fine.)", 'Then "No!" she said.']),
    ("J. R. R. Tolkien wrote it. So did I. The end", ["J. R. R. Tolkien wrote it.", "So did I.", "The end"]),
    ("the film was bad.The acting worse. it had no plot. pears, apples, etc. were sold.",
     ["the film was bad.", "The acting worse.", "it had no plot.", "pears, apples, etc. were sold."]),
    ("It cost $3.50. 40 years ago less.\n\nA title without a stop\n\nLast one.",
     ["It cost $3.50.", "40 years ago less.", "A title without a stop", "Last one."]),
    ('...And so it begins. "Is it?" "Yes." Ok.', ["...And so it begins.", '"Is it?"', '"Yes."', "Ok."]),
    ("We met Mr.Smith today.It rained. Dr.Who? No.",
     ["We met Mr.Smith today.", "It rained.", "Dr.Who?", "No."]),
    ("Paragraph one\nwrapped here.\n \nTwo.", ["Paragraph one wrapped here.", "Two."]),
    ("Two points. 1. The plot. 2. The cast. It got 3/10. Bad.",
     ["Two points.", "1. The plot.", "2. The cast.", "It got 3/10.", "Bad."]),
    ("  ", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_clean_text():
    s = clean_text("One.<br /><br />Two &amp; <i>three</i>.<BR>  Four&#8217;s \t fine <hr> x < y > z")
    assert s == "One.\n\nTwo & three.\n\nFour\u2019s fine x < y > z"
    assert split_sentences(s) == ["One.", "Two & three.", "Four\u2019s fine x < y > z"]


# ---- loading ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def imdb():
    return load_documents("imdb")


def test_imdb_loads_25000_clean_reviews(imdb):
    assert len(imdb) == 25000
    assert not any("<br" in d or "&amp;" in d for d in imdb)
    assert load_documents("imdb", max_docs=300) == imdb[:300]


def test_local_formats(tmp_path):
    (tmp_path / "a.txt").write_text("First doc.\nStill first.\n\n  \nSecond <b>doc</b>.\n\n\n", "utf-8")
    assert load_documents(tmp_path / "a.txt") == ["First doc. Still first.", "Second doc."]
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "x.txt").write_text("Doc x.\n\nParagraph two.", encoding="utf-8")
    (folder / "sub" / "y.txt").write_text("Doc y.", encoding="utf-8")
    (folder / "ignored.md").write_text("not me", encoding="utf-8")
    assert load_documents(folder) == ["Doc y.", "Doc x.\n\nParagraph two."]  # sorted paths: sub/ < x.txt
    (tmp_path / "c.csv").write_text('id,body\n1,"Hello, world."\n2,\n3,Bye.\n', encoding="utf-8")
    assert load_documents(tmp_path / "c.csv", text_column="body") == ["Hello, world.", "Bye."]
    rows = [{"text": "One.", "n": 1}, {"text": "Two.", "n": 2}, {"text": "Three.", "n": 3}]
    (tmp_path / "d.jsonl").write_text("\n".join(map(json.dumps, rows)), encoding="utf-8")
    assert load_documents(str(tmp_path / "d.jsonl"), max_docs=2) == ["One.", "Two."]
    (tmp_path / "e.json").write_text(json.dumps(rows), encoding="utf-8")
    assert load_documents(tmp_path / "e.json") == ["One.", "Two.", "Three."]


@pytest.mark.parametrize("name, content, msg", [
    ("empty.txt", b"", "empty"),
    ("blank.txt", b" \n\n \t\n", "only whitespace"),
    ("bin.txt", b"hello\x00\x01\x02world", "binary"),
    ("latin1.csv", "text\ncaf\u00e9\n".encode("latin-1"), "not UTF-8"),
    ("nocol.csv", b"title,body\na,b\n", r"no column 'text'; its columns are title, body"),
    ("nocol.jsonl", b'{"body": "x"}\n', r"no column 'text'; its columns are body"),
    ("slides.pdf", b"%PDF-1.4", "unsupported file type '.pdf'"),
    ("empty_cells.csv", b"text,x\n,1\n,2\n", "contains no text"),
])
def test_corpus_errors(tmp_path, name, content, msg):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=msg) as e:
        load_documents(path)
    assert name in str(e.value)  # the message names the file


def test_path_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="no such file or folder"):
        load_documents(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="no such file or folder"):
        load_documents("./not/here")
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(ValueError, match="no .txt files"):
        load_documents(tmp_path / "empty_dir")
    with pytest.raises(ValueError, match="max_docs"):
        load_documents("imdb", max_docs=0)
    import datasets
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="stanfordnlp/imdb: cannot reach the Hugging Face hub"):
        load_documents("stanfordnlp/imdb")
    import socket

    def no_dns(*a):
        raise OSError("Name or service not known")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # online mode, but no network
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(ValueError, match="owner/name: cannot reach the Hugging Face hub"):
        load_documents("owner/name", max_docs=3)


def test_split_heldout():
    docs = [f"doc {i}" for i in range(1000)] + ["dup"] * 5
    train, held = split_heldout(docs, 0.02, seed=0)
    assert (train, held) == split_heldout(docs, 0.02, seed=0)
    assert held != split_heldout(docs, 0.02, seed=1)[1]
    assert len(held) in (20, 24) and len(train) + len(held) == len(docs)
    assert not set(train) & set(held)  # disjoint by document, duplicates on one side
    tok_docs = [[[i, i + 1]] for i in range(100)]
    t, h = split_heldout(tok_docs, 0.1, seed=3)
    assert len(h) == 10 and not [d for d in h if d in t]
    with pytest.raises(ValueError):
        split_heldout(docs, 1.0)
    keys = ["a", "b", "a"] + [str(i) for i in range(20)]  # by sentence, as fine-tuning and probing split
    tr, va = split_heldout(range(len(keys)), 0.1, 0, keys)  # indices in, indices out
    assert sorted(tr + va) == list(range(len(keys))) and len(va) == 2 and (0 in va) == (2 in va)


# ---- tokens and examples ------------------------------------------------------------------------

def test_tokenize_documents(imdb, vocab_tokenizer):
    docs = imdb[:300]
    td = tokenize_documents(docs, vocab_tokenizer)
    assert len(td) == len(docs) and all(len(d) > 0 for d in td)
    sents = split_sentences(docs[7])
    assert td[7] == [vocab_tokenizer.encode(s).ids[1:-1] for s in sents]
    flat = [t for d in td for s in d for t in s]
    assert not set(flat) & {0, 2, 3, 4} and max(flat) < vocab_tokenizer.vocab_size


def test_nsp_examples():
    docs = synthetic_docs()
    ex = make_pretraining_examples(docs, max_len=64, objective="nsp", seed=1, **IDS)
    assert len(ex) >= 2000 and ex == make_pretraining_examples(docs, max_len=64, objective="nsp", seed=1, **IDS)
    assert abs(sum(e.label for e in ex) / len(ex) - 0.5) < 0.03
    assert any(len(e.ids) < 40 for e in ex)  # short_seq_prob gives some short ones
    for e in ex:
        assert len(e.ids) <= 64 and e.label in (0, 1)
        a, b = segments(e)
        da, _, last_a = sentences(a)
        db, first_b, _ = sentences(b)
        if e.label == 0:  # IsNext: B continues A in the same document
            assert db == da and first_b == last_a + 1
        else:  # random: B comes from another document
            assert db != da


def test_sop_examples():
    ex = make_pretraining_examples(synthetic_docs(800), max_len=64, objective="sop", seed=2, **IDS)
    assert len(ex) >= 2000 and abs(sum(e.label for e in ex) / len(ex) - 0.5) < 0.03
    for e in ex:
        a, b = segments(e)
        (da, first_a, last_a), (db, first_b, last_b) = sentences(a), sentences(b)
        assert da == db and len(e.ids) <= 64
        assert (first_b == last_a + 1) if e.label == 0 else (first_a == last_b + 1)


def test_mlm_examples():
    docs = synthetic_docs(100)
    docs[0][3] = [99] * 200  # an over-long sentence spills into several windows
    ex = make_pretraining_examples(docs, max_len=32, objective="mlm", short_seq_prob=0.0, **IDS)
    n_tokens = sum(len(s) for d in docs for s in d)
    assert sum(len(e.ids) - 2 for e in ex) == n_tokens  # nothing lost, nothing repeated
    for e in ex:
        assert e.ids[0] == 2 and e.ids[-1] == 3 and 3 not in e.ids[1:-1] and len(e.ids) <= 32
        assert e.token_type_ids == [0] * len(e.ids) and e.label == -100


def test_example_errors():
    with pytest.raises(ValueError, match="objective"):
        make_pretraining_examples(synthetic_docs(5), objective="xyz", **IDS)
    with pytest.raises(ValueError, match="at least 2"):
        make_pretraining_examples([[[5, 6]], [], [[]]], objective="nsp", **IDS)
    with pytest.raises(ValueError, match="max_len"):
        make_pretraining_examples(synthetic_docs(5), max_len=4, **IDS)


def test_imdb_pipeline(imdb, vocab_tokenizer):
    td = tokenize_documents(imdb[:300], vocab_tokenizer)
    s = special_token_ids(vocab_tokenizer)
    ex = make_pretraining_examples(td, max_len=128, objective="nsp", dupe_factor=2, cls_id=s.cls, sep_id=s.sep)
    assert len(ex) > 1000 and abs(sum(e.label for e in ex) / len(ex) - 0.5) < 0.05
    for e in ex:
        assert len(e.ids) <= 128 and e.ids[0] == 2 and e.ids.count(3) == 2
        segments(e)


# ---- batches ------------------------------------------------------------------------------------

def test_collate():
    ex = [Example([2, 7, 3, 8, 9, 3], 1, [0, 0, 0, 1, 1, 1]), Example([2, 7, 3, 8, 3], 0, [0, 0, 0, 1, 1])]
    b = collate(ex, pad_id=0)
    assert b["input_ids"].tolist() == [[2, 7, 3, 8, 9, 3], [2, 7, 3, 8, 3, 0]]
    assert b["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]]
    assert b["attention_mask"].tolist() == [[1] * 6, [1] * 5 + [0]]
    assert b["labels"].tolist() == [1, 0]  # one per example: a pair (NSP/SOP) or class label
    tagged = collate([Example([101, 7, 102], [-100, 4, -100]), Example([101, 102], [-100, -100])], pad_id=9)
    assert tagged["input_ids"].tolist() == [[101, 7, 102], [101, 102, 9]]  # the pad id it is given
    assert tagged["labels"].tolist() == [[-100, 4, -100], [-100, -100, -100]]  # per token, padded with -100
    assert tagged["token_type_ids"].tolist() == [[0] * 3] * 2
    with pytest.raises(ValueError, match="token types"):
        Example([2, 7, 3], 0, [0, 0])


@pytest.fixture(scope="module")
def examples():
    return make_pretraining_examples(synthetic_docs(60), max_len=64, objective="nsp", **IDS)


SPECIAL = SpecialIds(0, 1, 2, 3, 4, frozenset(range(5)), torch.arange(5, 70_000))


def kw(**extra):
    return dict(pad_id=0, mask=SPECIAL, seed=5) | extra


def same(b1, b2):
    return b1.keys() == b2.keys() and all(torch.equal(b1[k], b2[k]) for k in b1)


def test_batcher_resumes_exactly(examples):
    ref = Batcher(examples, 16, **kw())
    epoch0, epoch1 = list(ref), list(ref)
    assert len(epoch0) == len(ref) == -(-len(examples) // 16)
    assert not same(epoch0[0], epoch1[0])  # new order and new masks every epoch
    for stop_epoch, stop in ((0, 3), (1, 5), (0, len(ref))):
        run = Batcher(examples, 16, **kw())
        for e in range(stop_epoch):
            list(run)
        it = iter(run)
        for _ in range(stop):
            next(it)
        state = run.state_dict()
        fresh = Batcher(examples, 16, **kw())
        fresh.load_state_dict(state)
        rest = list(fresh) if stop < len(ref) else []
        expected = (epoch0, epoch1)[stop_epoch][stop:]
        assert len(rest) == len(expected) and all(same(x, y) for x, y in zip(rest, expected))
        if stop == len(ref):  # stopped at an epoch's end: resuming starts the next epoch
            assert all(same(x, y) for x, y in zip(fresh, epoch1))
    with pytest.raises(ValueError, match="batch_size"):
        Batcher(examples, 8, **kw()).load_state_dict(ref.state_dict())


def test_batcher_batches_are_masked(examples):
    for b in Batcher(examples, 32, **kw()):
        sel = b["labels"] != -100
        assert sel.any(1).all() and b["next_sentence_label"].shape == (b["input_ids"].shape[0],)
        assert not (sel & (b["attention_mask"] == 0)).any()
        assert set(b) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    mlm = make_pretraining_examples(synthetic_docs(20), max_len=64, objective="mlm", **IDS)
    assert "next_sentence_label" not in next(iter(Batcher(mlm, 8, **kw())))  # an all -100 NSP loss is NaN


def test_batcher_without_masking_keeps_the_labels():
    """Fine-tuning's batches: the same shuffling and resuming, the examples' own labels, no masks."""
    tagged = [Example([2] + [5 + i % 7] * (1 + i % 5) + [3], [-100] + [i % 3] * (1 + i % 5) + [-100])
              for i in range(23)]
    a = Batcher(tagged, 4, pad_id=0, seed=7)
    batches = list(a)
    assert len(batches) == 6 and sum(len(b["input_ids"]) for b in batches) == 23
    for b in batches:
        assert set(b) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
        assert b["labels"].shape == b["input_ids"].shape and (b["labels"][b["attention_mask"] == 0] == -100).all()
    it = iter(a)
    next(it)
    old = {k: v for k, v in a.state_dict().items() if k != "world_size"}  # as older run folders saved it
    b = Batcher(tagged, 4, pad_id=0, seed=7)
    b.load_state_dict(json.loads(json.dumps(old)))
    rest_a, rest_b = list(it), list(b)
    assert len(rest_b) == 5 and all(same(x, y) for x, y in zip(rest_a, rest_b))
    with pytest.raises(ValueError, match="batch_size"):
        Batcher(tagged, True, pad_id=0)


@pytest.mark.parametrize("n", [99, 100])
def test_batcher_sharding(examples, n):
    ex = examples[:n]
    shards = [Batcher(ex, 8, rank=r, world_size=3, **kw()) for r in range(3)]
    for epoch in (0, 1):
        idx = [s.indices(epoch) for s in shards]
        flat = [i for part in idx for i in part]
        assert len(set(flat)) == len(flat) == n - n % 3  # disjoint, and covering (but n % 3)
    assert len({len(s) for s in shards}) == 1  # same number of steps on every rank
    assert sum(len(b["input_ids"]) for s in shards for b in s) == n - n % 3
    with pytest.raises(ValueError, match="rank"):
        Batcher(ex, 8, rank=3, world_size=3, **kw())


def test_batcher_feeds_the_model(vocab_tokenizer):
    from bertlab.config import BertConfig
    from bertlab.model import BertForPreTraining
    docs = ["The film was fun. I love it! The plot was bad.", "A good movie. The actor was great."]
    td = tokenize_documents(docs, vocab_tokenizer)
    s = special_token_ids(vocab_tokenizer)
    ex = make_pretraining_examples(td, max_len=24, objective="nsp", cls_id=s.cls, sep_id=s.sep)
    config = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    model = BertForPreTraining(config)
    out = model(**next(iter(Batcher.from_tokenizer(ex, 4, vocab_tokenizer))))
    assert torch.isfinite(out.loss)


def test_a_hub_dataset_name_never_reads_a_folder_of_the_server(tmp_path, monkeypatch):
    """With the hub reachable, `datasets` read a local folder of the dataset's name first: "hub:runs/<a
    run>" trained on another visitor's private upload. The hub (here a dead address on 127.0.0.1) is
    the only place a hub name is looked up."""
    import datasets
    import huggingface_hub.constants
    secret = tmp_path / "runs" / "v2-queued"
    secret.mkdir(parents=True)
    (secret / "upload.csv").write_text("text\n" + "someone else's private essay\n" * 20)
    monkeypatch.chdir(tmp_path)
    dead = "http://127.0.0.1:9"  # the discard port: nothing answers
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", dead)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", dead)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    import time
    monkeypatch.setattr(time, "sleep", lambda s: None)  # the hub client's five retries waited 23 s
    for name in ("hub:runs/v2-queued",):
        try:
            docs = load_documents(name, max_docs=5)
        except ValueError as e:
            assert "private essay" not in str(e) and "upload.csv" not in str(e), e
        else:
            assert not any("private essay" in d for d in docs), docs
