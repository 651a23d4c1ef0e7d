"""SubwordTokenizer for the whole BERT family: RoBERTa's byte-level BPE and ALBERT's Unigram checked
against `transformers` (built offline from small texts, never the hub), markers by role, the pair
layouts, loading every kind of folder, readable pieces, and masking a BPE batch."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import itertools  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from test_tokenizer import ODD, PAIRS, SENTENCES, movie_reviews  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

from bertlab.data.masking import Batcher, Example  # noqa: E402
from bertlab.tokenizer import (  # noqa: E402
    _BYTE_OF,
    FAMILY_SPECIAL_TOKENS,
    BPETokenizer,
    SubwordTokenizer,
    WordPieceTokenizer,
    special_token_ids,
)

TEXTS = SENTENCES + ODD + ["the <mask> was great", "the<mask>was", " leading space", "a\nb\tc  d",
                           "``quoted'' text", "Ünïcödé at the END"]
ROBERTA_IDS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}


def clean(s: str) -> str:
    """What we hand the Rust side (a lone surrogate becomes U+FFFD), so transformers sees the same text."""
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in s)


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return movie_reviews(300) + TEXTS * 3


@pytest.fixture(scope="module")
def bpe(corpus) -> BPETokenizer:
    return BPETokenizer.train(corpus, vocab_size=800)


@pytest.fixture(scope="module")
def bpe_dir(bpe, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("roberta")
    bpe.save_pretrained(folder)
    return folder


def albert_json(texts, path: Path) -> None:
    """An ALBERT-style tokenizer.json made with `tokenizers`' Unigram trainer: ALBERT's normalizer
    (quotes, NFKD, no accents, lowercase), its Metaspace pre-tokenizer and its markers at 0..4."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Replace("``", '"'), normalizers.Replace("''", '"'),
                                           normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=700, special_tokens=list(FAMILY_SPECIAL_TOKENS["albert"]),
                                      unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(path))


@pytest.fixture(scope="module")
def albert_dir(corpus, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("albert")  # tokenizer.json alone: markers inferred from the vocabulary
    albert_json([clean(t) for t in corpus[:100] + TEXTS], folder / "tokenizer.json")
    return folder


def assert_agree(ours, hf, texts=TEXTS, pairs=PAIRS, offsets=True):
    """Same input_ids, token_type_ids, attention_mask (and offsets, decode) as a transformers tokenizer."""
    for s in texts:
        mine = ours.encode(s)
        theirs = hf(clean(s), return_token_type_ids=True, return_offsets_mapping=offsets)
        assert mine.ids == theirs["input_ids"], (s, mine.tokens, hf.convert_ids_to_tokens(theirs["input_ids"]))
        assert mine.token_type_ids == theirs["token_type_ids"] and mine.attention_mask == theirs["attention_mask"]
        if offsets:
            assert mine.offsets == [tuple(o) for o in theirs["offset_mapping"]], s
        for skip in (True, False):
            assert ours.decode(mine.ids, skip) == hf.decode(theirs["input_ids"], skip_special_tokens=skip), s
    for a, b in pairs:
        mine, theirs = ours.encode(a, b), hf(a, b, return_token_type_ids=True)
        assert mine.ids == theirs["input_ids"] and mine.token_type_ids == theirs["token_type_ids"]
        assert mine.attention_mask == theirs["attention_mask"]
    for n1, n2, m in itertools.product([0, 1, 4, 9], [1, 3, 8, 15], [4, 6, 9, 13, 40]):
        a, b = "the " * n1, "movie " * n2
        mine, theirs = ours.encode(a, b, max_length=m), hf(a, b, truncation="longest_first", max_length=m,
                                                           return_token_type_ids=True)
        assert mine.ids == theirs["input_ids"] and mine.token_type_ids == theirs["token_type_ids"], (n1, n2, m)
        assert len(mine) <= m and mine.truncated == (len(ours.encode(a, b, max_length=10_000)) > m)
    long = "the movie was good " * 50
    assert ours.encode(long, max_length=12).ids == hf(long, truncation=True, max_length=12)["input_ids"]


# ---- RoBERTa: byte-level BPE ----------------------------------------------------------------------
def test_bpe_markers_by_role(bpe):
    assert {t: bpe.token_to_id(t) for t in ROBERTA_IDS} == ROBERTA_IDS and len(bpe) == 800
    assert bpe.special_tokens == FAMILY_SPECIAL_TOKENS["roberta"] and bpe.layout == "roberta"
    assert (bpe.pad_token_id, bpe.unk_token_id, bpe.cls_token_id, bpe.sep_token_id, bpe.mask_token_id) == (1, 3, 0, 2, 4)
    s = special_token_ids(bpe)
    assert (s.pad, s.unk, s.cls, s.sep, s.mask) == (1, 3, 0, 2, 4) and s.mask == bpe.token_to_id("<mask>")
    assert s.all == {0, 1, 2, 3, 4} == bpe.special_ids and torch.equal(s.random, torch.arange(5, 800))
    assert bpe.kind == "bpe" and not bpe.lowercase and "BPETokenizer(vocab_size=800" in repr(bpe)
    e = bpe.encode("The plot", "was thin")
    assert e.tokens[0] == "<s>" and e.tokens[-1] == "</s>" and e.token_type_ids == [0] * len(e)
    n_a = len(bpe.encode("The plot")) - 2
    assert e.tokens[n_a + 1:n_a + 3] == ["</s>", "</s>"]
    assert e.sequence_ids == [None] + [0] * n_a + [None, None] + [1] * (len(e) - n_a - 4) + [None]
    assert e.special_tokens_mask == [1] + [0] * n_a + [1, 1] + [0] * (len(e) - n_a - 4) + [1]
    assert bpe.encode("the <mask> was").ids.count(4) == 1  # the marker whole, taking the space before it


def test_bpe_is_byte_level_and_lossless(bpe):
    assert set(_BYTE_OF) == set(pre_tokenizers.ByteLevel.alphabet()) and _BYTE_OF["Ġ"] == ord(" ")
    for s in TEXTS:
        e = bpe.encode(s)
        assert "<unk>" not in e.tokens  # every byte is a piece: no text is unknown, none is lost
        assert bpe.decode(e.ids) == clean(s) or "<mask>" in s  # a marker is dropped, with the space it took
        for seq, (a, b) in zip(e.sequence_ids, e.offsets):
            assert seq is None or 0 <= a <= b <= len(s)


def test_bpe_training_is_deterministic(corpus, tmp_path):
    """Rust hash maps take a fresh random seed each, so three trainings would expose hash-order ties."""
    (tmp_path / "c.txt").write_text("\n".join(clean(t) for t in corpus[:120]), encoding="utf-8")
    runs = [BPETokenizer.train(corpus[:120], vocab_size=500), BPETokenizer.train(iter(corpus[:120]), vocab_size=500),
            BPETokenizer.train([tmp_path / "c.txt"], vocab_size=500)]
    models_ = [json.loads(t.backend.to_str())["model"] for t in runs]
    assert models_[0]["merges"] and models_[0] == models_[1] and runs[0].get_vocab() == runs[1].get_vocab()
    assert len(set(runs[2].get_vocab()) & set(runs[0].get_vocab())) > 450  # lines, not texts: nearly the same


def test_roberta_folder_for_transformers(bpe, bpe_dir):
    from transformers import AutoTokenizer, RobertaTokenizerFast
    assert {p.name for p in bpe_dir.iterdir()} >= {"tokenizer.json", "vocab.json", "merges.txt",
                                                    "tokenizer_config.json", "special_tokens_map.json"}
    cfg = json.loads((bpe_dir / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "RobertaTokenizer" and cfg["add_prefix_space"] is False
    assert (cfg["bos_token"], cfg["cls_token"], cfg["eos_token"], cfg["sep_token"], cfg["mask_token"]) == (
        "<s>", "<s>", "</s>", "</s>", "<mask>")
    for hf in (AutoTokenizer.from_pretrained(bpe_dir), RobertaTokenizerFast.from_pretrained(bpe_dir)):
        assert type(hf).__name__ == "RobertaTokenizer" and hf.mask_token_id == 4 and hf.pad_token_id == 1
        assert hf.model_max_length == bpe.model_max_length == 512
        assert_agree(bpe, hf)
    back = SubwordTokenizer.from_pretrained(bpe_dir)
    assert type(back) is BPETokenizer and back.get_vocab() == bpe.get_vocab()
    assert all(back.encode(s) == bpe.encode(s) for s in TEXTS)


def test_roberta_batch_pads_with_pad(bpe):
    batch = bpe.encode_batch(["short", "a somewhat longer sentence"], pairs=["b", "c"], pad_to=16)
    lens = [len(bpe.encode("short", "b")), len(bpe.encode("a somewhat longer sentence", "c"))]
    assert batch["input_ids"].shape == (2, 16) and batch["attention_mask"].sum(1).tolist() == lens
    assert (batch["input_ids"][0, lens[0]:] == 1).all() and (batch["token_type_ids"] == 0).all()
    with pytest.raises(ValueError, match="max_length"):
        bpe.encode("x", "y", max_length=3)  # <s> </s> </s> </s> leave no room


def test_roberta_slow_files_and_a_transformers_saved_folder(bpe, bpe_dir, tmp_path):
    from transformers import AutoTokenizer
    slow = tmp_path / "slow"
    shutil.copytree(bpe_dir, slow)
    (slow / "tokenizer.json").unlink()
    ours = SubwordTokenizer.from_pretrained(slow)
    assert type(ours) is BPETokenizer and ours.get_vocab() == bpe.get_vocab()
    assert all(ours.encode(s) == bpe.encode(s) for s in TEXTS)  # <mask> keeps roberta-base's lstrip
    # transformers 5 builds <mask> without lstrip from these two files (from tokenizer.json it keeps it)
    assert_agree(ours, AutoTokenizer.from_pretrained(slow), [s for s in TEXTS if "<mask>" not in s])
    hf_saved = tmp_path / "hf"
    AutoTokenizer.from_pretrained(bpe_dir).save_pretrained(hf_saved)
    again = WordPieceTokenizer.from_pretrained(hf_saved)  # the old entry point loads any kind
    assert type(again) is BPETokenizer and again.tokenizer_class == "RobertaTokenizer"
    assert again.special_tokens == bpe.special_tokens and all(again.encode(s) == bpe.encode(s) for s in TEXTS)
    with open(slow / "vocab.json", "w") as f:
        f.write("{broken")
    with pytest.raises(ValueError, match="vocab.json"):
        SubwordTokenizer.from_pretrained(slow)


def test_roberta_base_layout_mask_last(bpe, tmp_path):
    """roberta-base keeps <mask> at its last id (50264): the ids come from the vocabulary, never assumed."""
    from transformers import RobertaTokenizerFast
    model = json.loads(bpe.backend.to_str())["model"]
    order = sorted(model["vocab"], key=lambda t: (t == "<mask>", model["vocab"][t]))
    vocab, merges = {t: i for i, t in enumerate(order)}, [tuple(m) for m in model["merges"]]
    RobertaTokenizerFast(vocab=vocab, merges=merges).save_pretrained(tmp_path)
    ours = SubwordTokenizer.from_pretrained(tmp_path)
    s = special_token_ids(ours)
    assert (s.cls, s.pad, s.sep, s.unk, s.mask) == (0, 1, 2, 3, 799) and ours.mask_token == "<mask>"
    assert s.all == {0, 1, 2, 3, 799} and torch.equal(s.random, torch.arange(4, 799))
    assert_agree(ours, RobertaTokenizerFast.from_pretrained(tmp_path))


def test_bpe_train_rejects_bad_input(corpus):
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train(corpus, vocab_size=260)  # 256 bytes and five markers do not fit
    with pytest.raises(ValueError, match="no text"):
        BPETokenizer.train(["", " \n"])
    with pytest.raises(TypeError):
        BPETokenizer.train("one long string")


# ---- ALBERT: Unigram / SentencePiece ----------------------------------------------------------------
def test_albert_unigram_agrees_with_transformers(albert_dir, tmp_path):
    from transformers import AlbertTokenizerFast, AutoTokenizer
    ours = SubwordTokenizer.from_pretrained(albert_dir)
    assert type(ours) is SubwordTokenizer and ours.kind == "unigram" and ours.layout == "bert"
    assert ours.special_tokens == FAMILY_SPECIAL_TOKENS["albert"] and ours.lowercase
    assert (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id) == (
        0, 1, 2, 3, 4)
    e = ours.encode("The plot", "was thin")
    n_a = len(ours.encode("The plot")) - 2
    assert e.token_type_ids == [0] * (n_a + 2) + [1] * (len(e) - n_a - 2) and e.tokens.count("[SEP]") == 2
    exact = json.loads((albert_dir / "tokenizer.json").read_text())["model"]["vocab"]
    assert json.loads(ours.backend.to_str())["model"]["vocab"] == exact  # the scores to the last bit: ties break alike
    assert_agree(ours, AlbertTokenizerFast.from_pretrained(albert_dir))
    ours.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "AlbertTokenizer" and cfg["do_lower_case"] and not cfg["keep_accents"]
    hf = AutoTokenizer.from_pretrained(tmp_path)
    assert type(hf).__name__ == "AlbertTokenizer" and hf.mask_token == "[MASK]" and hf.pad_token == "<pad>"
    assert_agree(SubwordTokenizer.from_pretrained(tmp_path), hf)


# ---- WordPiece family members, markers from the config ----------------------------------------------
@pytest.mark.parametrize("name", ["ElectraTokenizer", "DistilBertTokenizer"])
def test_wordpiece_members_keep_their_class(corpus, tmp_path, name):
    """A member's folder names its class (transformers 5 makes ElectraTokenizer BertTokenizer): we keep it."""
    import transformers
    wp = WordPieceTokenizer.train(corpus[:150], vocab_size=600)
    assert wp.layout == "bert" and wp.kind == "wordpiece" and wp.special_tokens == FAMILY_SPECIAL_TOKENS["bert"]
    wp.save_pretrained(tmp_path / "member")
    cfg_path = tmp_path / "member" / "tokenizer_config.json"
    cfg_path.write_text(json.dumps({**json.loads(cfg_path.read_text()), "tokenizer_class": name}))
    back = WordPieceTokenizer.from_pretrained(tmp_path / "member")
    assert type(back) is WordPieceTokenizer and back.tokenizer_class == name
    assert all(back.encode(s) == wp.encode(s) for s in TEXTS)
    back.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "tokenizer_config.json").read_text())["tokenizer_class"] == name
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "again")
    assert type(hf) is getattr(transformers, name)
    assert_agree(back, hf, TEXTS[:8], offsets=False)


def test_markers_named_by_the_config_win(tmp_path):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<mask>", "<pad>", "good", "film"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    assert WordPieceTokenizer.from_pretrained(tmp_path).mask_token_id == 4  # inferred: BERT's strings first
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"mask_token": "<mask>"}))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"pad_token": {"content": "<pad>", "lstrip": False}}))
    t = SubwordTokenizer.from_pretrained(tmp_path)
    assert (t.mask_token_id, t.pad_token_id, t.cls_token_id) == (5, 6, 2) and special_token_ids(t).mask == 5
    assert t.encode("good <mask>").ids == [2, 7, 5, 3] and t.layout == "bert"
    assert t.encode_batch(["good", "good film"])["input_ids"][0, -1].item() == 6
    with pytest.raises(ValueError, match="lacks special token.*<nope>"):
        SubwordTokenizer(Tokenizer.from_file(str(_saved_json(t, tmp_path))), specials={"cls": "<nope>"})


def _saved_json(tok, folder: Path) -> Path:
    tok.backend.save(str(folder / "t.json"))
    return folder / "t.json"


# ---- pieces for the UI --------------------------------------------------------------------------------
def test_piece_text_reads_like_text(bpe, albert_dir, vocab_tokenizer):
    ids = bpe.encode("The acting was great").ids
    assert [bpe.id_to_token(i).startswith("Ġ") for i in ids] == [bpe.piece_text(i).startswith("▁") for i in ids]
    assert "".join(bpe.piece_text(i) for i in ids[1:-1]).replace("▁", " ") == "The acting was great"
    assert bpe.piece_text(0) == "<s>" and bpe.piece_text(4) == "<mask>"
    split = [bpe.piece_text(i) for i in bpe.encode("😀\n").ids[1:-1]]  # four bytes of one char, then a newline
    assert "".join(split) == "<0xF0><0x9F><0x98><0x80><0x0A>"
    assert bpe.piece_text(bpe.token_to_id("Ã")) == "<0xC3>"  # é's first byte alone
    unigram = SubwordTokenizer.from_pretrained(albert_dir)
    assert [unigram.piece_text(i) for i in unigram.encode("Hello world").ids] == \
        unigram.encode("Hello world").tokens and "▁world" in unigram.encode("Hello world").tokens
    wp = vocab_tokenizer.encode("the films")
    assert [vocab_tokenizer.piece_text(i) for i in wp.ids] == wp.tokens and "##s" in wp.tokens


# ---- masking a RoBERTa batch --------------------------------------------------------------------------
def test_masking_a_bpe_batch_spares_s_and_pad(bpe, corpus):
    examples = []
    for a, b in zip(corpus[:40], corpus[40:80]):
        e = bpe.encode(a, b, max_length=int(20 + len(a) % 30))  # varied lengths: padding inside batches
        examples.append(Example(e.ids, -100, e.token_type_ids))
    batcher = Batcher.from_tokenizer(examples, 8, bpe, rate=0.5, seed=3)
    never = torch.tensor([0, 1, 2])  # <s> <pad> </s>
    masked = randomized = 0
    for _ in range(5):
        for batch in batcher:
            ids, labels = batch["input_ids"], batch["labels"]  # (B, T) each
            assert (batch["attention_mask"].sum(1) >= 10).all() and (batch["attention_mask"] == 0).any()
            selected = labels != -100
            assert selected.any() and not torch.isin(labels[selected], never).any()
            assert torch.isin(labels[selected], torch.tensor([3, 4])).sum() == 0  # nor <unk>, <mask>
            kept = ~selected
            original = torch.where(selected, labels, ids)
            assert torch.equal(ids[kept], original[kept])  # <s>, </s> and <pad> stay where they were
            assert (ids[:, 0] == 0).all()
            masked += int((ids[selected] == 4).sum())
            swapped = ids[selected & (ids != labels) & (ids != 4)]
            randomized += len(swapped)
            assert not torch.isin(swapped, torch.tensor([0, 1, 2, 3, 4])).any()
    assert masked > 200 and randomized > 10
