"""DeBERTa-v3's own vocabulary: a SentencePiece-style Unigram trained on the corpus ('▁' starts a word, case
kept, [PAD] [CLS] [SEP] [UNK] = 0..3, [MASK] last), saved so that we and transformers load it to the same ids;
whole-word masking finds its word starts; `pretrain --arch deberta` trains one and its model folder loads in
transformers with the same logits."""
import json

import pytest
import torch

from bertlab import family, load_pretrained
from bertlab.data import masking_lab
from bertlab.data.masking import Example, special_tokens_mask, word_continuation, word_ids_from_pieces
from bertlab.tokenizer import SubwordTokenizer, UnigramTokenizer, special_token_ids
from bertlab.train.pretrain import make_batcher, pretrain
from bertlab.train.specs import PretrainSpec

pytestmark = pytest.mark.usefixtures("single_thread")

# an unseen char (✓ -> [UNK]), a capital (unseen too: the corpus is lowercase), [MASK] inside text, odd spacing
TEXTS = ["the film was warm and the plot was boring .", "The soup \u2713 was  cold\tand [MASK] .",
         "we walked along the river bank ."]
TINY = dict(arch="deberta", preset="tiny", vocab_size=300, max_len=32, batch_size=8, eval_batches=1, layers=2,
            hidden=32, heads=2, intermediate=64, dropout=0.0, lr=2e-3, warmup=0.1, log_every=2, eval_every=4,
            save_every=4, eval_early=0, whole_word=True)


@pytest.fixture(scope="module")
def tok(small_corpus):
    return UnigramTokenizer.train([small_corpus], vocab_size=300)


def test_training_gives_deberta_v3_markers_pieces_and_pair_layout(tok, small_corpus):
    V = tok.vocab_size
    assert tok.kind == "unigram" and not tok.lowercase and tok.tokenizer_class == "DebertaV2Tokenizer"
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.unk_token_id, tok.mask_token_id) == (0, 1, 2, 3, V - 1)
    assert special_token_ids(tok).all == {0, 1, 2, 3, V - 1}
    # this corpus's few distinct words seed few pieces (a candidate must occur twice among them): fewer than asked
    assert 20 < V <= 300
    e = tok.encode(TEXTS[0])
    assert e.tokens[1].startswith("\u2581") and tok.decode(e.ids) == TEXTS[0]
    assert "".join(e.tokens[1:-1]) == "\u2581" + TEXTS[0].replace(" ", "\u2581")  # pieces spell the text
    assert tok.encode("The").tokens[1:3] == ["\u2581", "[UNK]"] and tok.encode("the").tokens[1] != "[UNK]"  # case kept
    a, b = tok.encode(TEXTS[0]), tok.encode(TEXTS[2])
    pair = tok.encode(TEXTS[0], TEXTS[2])
    assert pair.ids == [1, *a.ids[1:-1], 2, *b.ids[1:-1], 2]
    assert pair.token_type_ids == [0] * len(a) + [1] * (len(b) - 1)
    # enough distinct words reach the size asked exactly: V - 1 pieces and specials, then [MASK]
    words = [w + s for w in small_corpus.read_text().split() for s in ("", "s", "ed", "ing", "er")]
    assert len(UnigramTokenizer.train(words, vocab_size=60)) == 60
    alphabet = len(set("".join(words)) | {"\u2581"})  # every character is a piece
    for v in (alphabet, alphabet + 5):  # the trainer refuses the first, overshoots the second (all chars, 4 markers)
        with pytest.raises(ValueError, match=f"vocab_size {v} is too small for this text"):
            UnigramTokenizer.train(words, vocab_size=v)
    with pytest.raises(ValueError, match="vocab_size must be an integer >= 6"):
        UnigramTokenizer.train(words, vocab_size=5)


def test_the_saved_folder_loads_in_ours_and_transformers_to_the_same_ids(tok, tmp_path):
    import transformers
    tok.save_pretrained(tmp_path / "t")
    cfg = json.loads((tmp_path / "t" / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "DebertaV2Tokenizer" and cfg["do_lower_case"] is False
    back = SubwordTokenizer.from_pretrained(tmp_path / "t")
    assert back.kind == "unigram" and back.get_vocab() == tok.get_vocab()
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "t")
    assert type(hf).__name__ == "DebertaV2Tokenizer"
    assert (hf.pad_token_id, hf.cls_token_id, hf.sep_token_id, hf.unk_token_id, hf.mask_token_id) == (0, 1, 2, 3, len(tok) - 1)
    for a, b in [(t, None) for t in TEXTS] + [(TEXTS[0], TEXTS[1])]:
        ours, again, theirs = tok.encode(a, b), back.encode(a, b), hf(a, b)
        assert ours.ids == again.ids == theirs["input_ids"], (a, b)
        assert ours.token_type_ids == theirs["token_type_ids"]
        assert tok.decode(ours.ids) == back.decode(ours.ids) == hf.decode(ours.ids, skip_special_tokens=True)
    assert 3 in tok.encode(TEXTS[1]).ids and tok.mask_token_id in tok.encode(TEXTS[1]).ids
    back.save_pretrained(tmp_path / "again")  # a reloaded folder saves as what it was
    assert json.loads((tmp_path / "again" / "tokenizer_config.json").read_text())["tokenizer_class"] == "DebertaV2Tokenizer"


def test_whole_word_masking_finds_the_words_the_tokenizer_made(tok):
    cont = word_continuation(tok)
    assert all(cont[i] != tok.id_to_token(i).startswith("\u2581") for i in range(4, len(tok) - 1))
    enc = tok.encode(TEXTS[0])
    ids = torch.tensor([enc.ids])
    words = word_ids_from_pieces(ids, cont, special_tokens_mask(ids, special_token_ids(tok).all))[0].tolist()
    assert words == [-1 if w is None else w for w in enc.word_ids]  # the pre-tokenizer's own words
    assert max(words.count(w) for w in set(words) - {-1}) >= 2  # some word has several pieces
    for seed in range(5):  # the masking lab masks whole words: each word all picked or none
        draw = masking_lab.preview(tok, enc.ids, rate=0.3, whole_word=True, seed=seed)
        assert draw["word_ids"] == words
        picked = {w: set() for w in words}
        for w, r in zip(words, draw["rule"]):
            picked[w].add(r != masking_lab.NOT_SELECTED)
        assert all(len(p) == 1 for w, p in picked.items() if w != -1)


def test_deberta_pretrains_a_unigram_vocabulary_its_folder_loads_in_transformers(small_corpus, tmp_path):
    import transformers
    assert family.MEMBERS["deberta-v2"].tokenizer == "unigram"
    said = []
    spec = PretrainSpec(corpus=str(small_corpus), steps=4, **TINY)
    st = pretrain(tmp_path / "run", spec, log=said.append)
    assert st["state"] == "finished" and st["step"] == 4
    assert any("token Unigram vocabulary" in s for s in said)
    model, ours_tok = load_pretrained(tmp_path / "run")
    assert ours_tok.kind == "unigram" and type(model).__name__ == "DebertaV2ForMaskedLM"
    assert torch.equal(make_batcher(spec, ours_tok, [Example([1, 5, 2], 0)]).is_continuation, word_continuation(ours_tok))
    folder = tmp_path / "run" / "model"
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    hf = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert type(hf_tok).__name__ == "DebertaV2Tokenizer" and type(hf).__name__ == "DebertaV2ForMaskedLM"
    b = hf_tok(TEXTS, padding=True, truncation=True, return_tensors="pt")  # to max_len 32, as ours
    assert b["input_ids"].tolist() == ours_tok.encode_batch(TEXTS)["input_ids"].tolist()
    with torch.no_grad():
        a = model.eval()(b["input_ids"], None, b["attention_mask"]).mlm_logits
        h = hf(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    keep = b["attention_mask"].bool()
    assert a.shape == h.shape and (a - h)[keep].abs().max() <= 1e-5
