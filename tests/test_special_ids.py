"""Special token ids come from the tokenizer: a bert-base-style vocabulary ([PAD] 0, [unused0..98]
1..99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103) pre-trains without ever drawing a special
token or an [unusedN] placeholder as a random replacement."""
import pytest
import test_pretrain as tp
import torch
from conftest import WORDS

from bertlab import BertConfig, BertForPreTraining, load_pretrained, save_pretrained
from bertlab.data import masking_lab
from bertlab.data.corpus import load_documents, make_pretraining_examples, tokenize_documents
from bertlab.data.masking import MASKED, RANDOM, Batcher
from bertlab.tokenizer import WordPieceTokenizer, special_token_ids
from bertlab.train.pretrain import pretrain

SPECIAL = {0, 100, 101, 102, 103}
FIRST_WORD = 104  # ids below are special or [unusedN]


@pytest.fixture(scope="module")
def hf_style(tmp_path_factory, small_corpus):
    """A WordPiece vocab.txt laid out like bert-base-uncased's, with the words of the test corpus."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    words = sorted(set(small_corpus.read_text().lower().split()) | set(WORDS)) + letters + ["##" + c for c in letters]
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    path = tmp_path_factory.mktemp("hf_vocab") / "vocab.txt"
    path.write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    return WordPieceTokenizer.from_vocab(path)


def test_the_ids_are_read_from_the_vocabulary(hf_style, vocab_tokenizer):
    s = special_token_ids(hf_style)
    assert (s.pad, s.unk, s.cls, s.sep, s.mask) == (0, 100, 101, 102, 103)
    assert s.all == SPECIAL and hf_style.special_ids == SPECIAL
    assert torch.equal(s.random, torch.arange(FIRST_WORD, hf_style.vocab_size))  # no special, no [unusedN]
    assert special_token_ids(hf_style) is s  # read once per tokenizer
    t = special_token_ids(vocab_tokenizer)  # a vocabulary of our own: specials first
    assert (t.pad, t.unk, t.cls, t.sep, t.mask) == (0, 1, 2, 3, 4)
    assert torch.equal(t.random, torch.arange(5, vocab_tokenizer.vocab_size))


def test_pretraining_batches_never_draw_a_special_token(hf_style, small_corpus):
    s = special_token_ids(hf_style)
    docs = tokenize_documents(load_documents(small_corpus), hf_style)
    ex = make_pretraining_examples(docs, max_len=32, objective="nsp", cls_id=s.cls, sep_id=s.sep)
    assert all(e.ids[0] == 101 and e.ids[-1] == 102 for e in ex)
    batcher = Batcher.from_tokenizer(ex, 16, hf_style, rate=0.5)
    replaced = masked = 0
    for _ in range(20):  # epochs: fresh masks each time
        for b in batcher:
            selected = b["labels"] != -100
            assert not (selected & torch.isin(b["labels"], torch.tensor(sorted(SPECIAL)))).any()
            masked += int((b["input_ids"][selected] == 103).sum())
            new = b["input_ids"][selected & (b["input_ids"] != b["labels"]) & (b["input_ids"] != 103)]
            replaced += len(new)  # a RANDOM rule that drew another token
            assert (new >= FIRST_WORD).all(), new[new < FIRST_WORD]
            assert not torch.isin(b["input_ids"][~selected & (b["attention_mask"] == 1)], torch.tensor([103])).any()
    assert replaced > 1000 and 6 < masked / replaced < 10  # 80 % [MASK] vs 10 % random (a few draw the same id)


def test_the_masking_lab_uses_the_same_rule(hf_style):
    ids = hf_style.encode("the film was great and the acting was good").ids
    for seed in range(40):
        d = masking_lab.preview(hf_style, ids, rate=1.0, seed=seed)
        assert d["eligible"] == len(ids) - 2
        for rule, seen in zip(d["rule"], d["input_ids"]):
            assert rule != MASKED or seen == 103
            assert rule != RANDOM or seen >= FIRST_WORD
    stats = masking_lab.sample_stats(hf_style, ids, 0.15, n_samples=2000, seed=1)
    assert abs(stats["split"]["random"] - 0.1) < 0.03


def test_pretraining_runs_on_that_vocabulary(tmp_path, hf_style, small_corpus):
    config = BertConfig(vocab_size=hf_style.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    save_pretrained(BertForPreTraining(config), hf_style, tmp_path / "start")
    # a run made like tests/test_pretrain.py's, continuing that model (whose tokenizer it keeps)
    st = pretrain(tmp_path / "run", tp.spec(small_corpus, steps=10, init_from=str(tmp_path / "start")),
                  log=lambda *_: None)
    assert st["state"] == "finished" and st["step"] == 10
    _, tok = load_pretrained(tmp_path / "run")
    assert tok.get_vocab() == hf_style.get_vocab() and special_token_ids(tok).all == SPECIAL
    blob = torch.load(tmp_path / "run" / "data" / "examples.pt", weights_only=True)["train"]
    ids, off = blob["ids"].long(), blob["offsets"]
    assert (ids[off[:-1]] == 101).all() and (ids[off[1:] - 1] == 102).all()  # [CLS] ... [SEP] by their ids
    assert not ((ids > 0) & (ids < 100)).any()  # no [unusedN] in the data
