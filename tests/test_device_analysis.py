"""Every analysis runs on a model that is not on the CPU: the inputs it builds go to the model's device
and its answers come back as plain CPU values. No GPU is needed: the model goes to torch's `meta`
device (shapes, no data) and each call runs under `OneDevice`, which fails any op mixing tensors of
two devices as CUDA would (meta alone lets a CPU index or id tensor through: `embedding(cpu_ids)` on
meta weights works). Reading a meta tensor back (`.cpu()`, `.tolist()`, `float()`, ...) gives zeros
(True for booleans) instead of an error, so a call runs to its end, as it would on a GPU.
On a machine with one, BERTLAB_TEST_DEVICE=cuda runs the same tests on the GPU itself."""
import os

import pytest
import torch
from devicecheck import OneDevice, assert_device_clean  # noqa: F401

from bertlab import BertConfig, family
from bertlab.heads import classifier_class

DEV = os.environ.get("BERTLAB_TEST_DEVICE", "meta")  # where the models under test go
meta_only = pytest.mark.skipif(DEV != "meta", reason="checks the meta stand-in itself")
on_a_gpu = pytest.mark.skipif(DEV == "meta", reason="compares real numbers: needs BERTLAB_TEST_DEVICE=cuda")

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=64)
EXTRA = {"albert": dict(embedding_size=16), "electra": dict(embedding_size=16),
         "electra-generator": dict(embedding_size=16), "distilbert": {}, "bert": {}}
FAMILY = ("bert", "albert", "electra", "distilbert", "roberta")
TEXT = "the film was great and the plot was fun ."
MASKED = "the film was [MASK] and the plot was [MASK] ."

# ---- models ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bpe(small_corpus):
    from bertlab.tokenizer import BPETokenizer
    return BPETokenizer.train([str(small_corpus)], vocab_size=400)


def _config(kind: str, tok) -> BertConfig:
    extra = EXTRA[kind] if kind in EXTRA else dict(pad_token_id=tok.pad_token_id, type_vocab_size=1,
                                                   max_position_embeddings=66)
    return BertConfig(vocab_size=tok.vocab_size, model_type=kind.split("-")[0], **(SMALL | extra))


@pytest.fixture(scope="module")
def toks(vocab_tokenizer, bpe):
    return {k: bpe if k == "roberta" else vocab_tokenizer for k in FAMILY + ("electra-generator",)}


def on_device(kind: str, tok):
    """A small random pre-trained model of family `kind` (electra: the discriminator), on DEV."""
    torch.manual_seed(0)
    model = family.build(_config(kind, tok), ["ElectraForMaskedLM"] if kind == "electra-generator" else [])
    return model.eval().to(DEV)


def classifier_on_device(kind: str, tok, head: str = "sequence", **kw):
    torch.manual_seed(0)
    return classifier_class(_config(kind, tok), head)(_config(kind, tok), **kw).eval().to(DEV)


# ---- the check itself -----------------------------------------------------------------------------
@meta_only
def test_the_check_catches_a_cpu_tensor_given_to_a_meta_model(vocab_tokenizer):
    """A CPU ids tensor into a meta model, a CPU index into a meta tensor, a CPU generator for meta
    sampling, numpy of a device tensor and a device tensor handed back all fail; reads do not."""
    model = on_device("bert", vocab_tokenizer)
    ids = torch.tensor([[2, 5, 3]])
    for wrong in (lambda: model(ids),
                  lambda: torch.zeros(4, device="meta").index_select(0, torch.tensor([1])),
                  lambda: torch.zeros(4, device="meta")[torch.tensor([1, 2])],
                  lambda: torch.multinomial(torch.ones(4, device="meta"), 1, generator=torch.Generator()),
                  lambda: torch.zeros(4, device="meta").numpy()):
        with pytest.raises(AssertionError, match="not device-clean"):
            assert_device_clean(wrong)
    with pytest.raises(AssertionError, match="handed back"):
        assert_device_clean(lambda: {"x": [torch.zeros(2, device="meta")]})
    with OneDevice():
        logits = model(ids.to("meta")).mlm_logits
    assert assert_device_clean(logits.tolist) == torch.zeros(1, 3, vocab_tokenizer.vocab_size).tolist()
    reads = assert_device_clean(lambda: (float(logits[0, 0, 0]), bool(logits.bool().all()), logits.cpu().shape,
                                         logits.to("cpu", torch.float64).dtype))
    assert reads == (0.0, True, logits.shape, torch.float64)
    assert assert_device_clean(lambda: torch.ones(2) * torch.tensor(3.0)).tolist() == [3.0, 3.0]


@meta_only
def test_the_old_fill_mask_would_fail(vocab_tokenizer):
    """What fill_mask did before (ids built on the CPU) is caught."""
    model = on_device("bert", vocab_tokenizer)
    enc = vocab_tokenizer.encode("the acting was [MASK] .")
    with pytest.raises(AssertionError, match="same device"):
        assert_device_clean(model, torch.tensor([enc.ids]), torch.tensor([enc.token_type_ids]))


# ---- pre-training heads ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bert", "albert", "distilbert", "roberta", "electra-generator"])
def test_masked_word_views(kind, toks):
    from bertlab.analysis import draw_score
    from bertlab.analysis.lens import logit_lens
    from bertlab.analysis.predict import fill_in_turn, fill_mask
    tok = toks[kind]
    model = on_device(kind, tok)
    top = assert_device_clean(fill_mask, model, tok, MASKED, top_k=3)
    assert [len(t) for t in top] == [3, 3] and isinstance(top[0][0]["score"], float)
    both = assert_device_clean(fill_in_turn, model, tok, MASKED)
    assert len(both["in_turn"]["chain"]) == 2 and isinstance(both["independent"]["chain_log_prob"], float)
    assert_device_clean(fill_mask, model, tok, MASKED, top_k=3, causal=True)
    assert_device_clean(logit_lens, model, tok, MASKED, top_k=3, mask_index=1)
    ids = tok.encode(MASKED).ids
    labels = [-100] * len(ids)
    labels[3] = ids[2]
    rule = [0] * len(ids)
    rule[3] = 2
    assert_device_clean(draw_score.score_draw, model, ids, labels, rule, top_k=3)
    assert_device_clean(draw_score.draw_logits, model, ids, [0] * len(ids))


def test_replaced_tokens_on_an_electra_discriminator(vocab_tokenizer):
    from bertlab.analysis.predict import replaced_tokens
    assert_device_clean(replaced_tokens, on_device("electra", vocab_tokenizer), vocab_tokenizer, TEXT)


@pytest.mark.parametrize("kind", ["bert", "albert"])
def test_sentence_pair_scores(kind, vocab_tokenizer):
    from bertlab.analysis.predict import nsp_accuracy, nsp_scores
    model = on_device(kind, vocab_tokenizer)
    assert_device_clean(nsp_scores, model, vocab_tokenizer, "the film was great .", ["i love it .", "the bank ."])
    assert_device_clean(nsp_accuracy, model, vocab_tokenizer, [("the film .", "it was fun .", 1),
                                                               ("the plot .", "the river bank .", 0)])


# ---- attention --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", FAMILY)
def test_attention_views(kind, toks):
    from bertlab.analysis import attention_views as av
    from bertlab.analysis import head_finder, masked
    from bertlab.analysis.qkv import head_math
    tok = toks[kind]
    model = on_device(kind, tok)
    assert_device_clean(av.run_attention, model, tok, TEXT, "it was fun ." if kind != "roberta" else None)
    enc = tok.encode(TEXT)
    assert_device_clean(av.forward, model, enc.ids, enc.token_type_ids)
    assert_device_clean(head_math, model, enc.ids, enc.token_type_ids, 2, 1, 3)
    words = TEXT.split()
    assert_device_clean(head_finder.run_set, model, tok, [{"words": words, "subject_verb": [[1, 2]],
                                                          "long_range": [[0, 6]]}])
    # a run as run_attention makes it, but with the maps left on the model's device
    T = len(enc.ids)
    run = av.AttentionRun(tokens=list(enc.tokens), ids=list(enc.ids), token_type_ids=list(enc.token_type_ids),
                          attentions=torch.zeros(2, 2, T, T, device=DEV), special=[False] * T,
                          truncated=False, max_length=64, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
    if family.has_mlm_head(model):
        assert_device_clean(masked.mask_token, model, tok, run, 2, top_k=3)


def test_attention_statistics_on_device_maps():
    """The pure functions keep to the maps' device, whatever the ids or mask were made on."""
    from bertlab.analysis import attention, attention_views as av, head_finder
    L, A, T = 2, 2, 6
    att = torch.zeros(L, A, T, T, device=DEV)
    ids, mask = torch.tensor([[2, 7, 8, 9, 3, 0]]), torch.tensor([[1, 1, 1, 1, 1, 0]])
    layers = [a[None] for a in att]
    assert_device_clean(attention.head_stats, layers, ids, mask, cls_id=2, sep_id=3)
    assert_device_clean(attention.layer_diagnostics, layers, mask)
    assert_device_clean(lambda: attention.rollout(layers, attention_mask=mask).cpu())
    assert_device_clean(lambda: av.restrict(att, [1, 2, 3]).cpu())
    run = av.AttentionRun(tokens=list("abcdef"), ids=ids[0].tolist(), token_type_ids=[0] * T, attentions=att,
                          special=[True, False, False, False, True, False], truncated=False, max_length=64,
                          cls_id=2, sep_id=3)
    assert_device_clean(av.stats_table, run)
    assert_device_clean(lambda: av.rollout_map(run).cpu())
    groups = [[1], [2, 3], [4]]
    assert_device_clean(lambda: head_finder.word_attention(att, groups).cpu())
    pairs = head_finder.sentence_pairs(3, [[0, 2]], [])
    assert_device_clean(lambda: [r["top"] for r in head_finder.rankings(head_finder.head_scores(
        [(att, groups, pairs)])).values()])


# ---- vectors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", FAMILY)
def test_embeddings_and_contexts(kind, toks):
    from bertlab.analysis import contexts, embeddings
    tok = toks[kind]
    model = on_device(kind, tok)
    sentences = [TEXT, "the film by the river bank was quiet .", "i love this film ."]
    assert_device_clean(embeddings.analyze, model, tok, sentences, word="film")
    assert_device_clean(contexts.build_index, model, tok, sentences)
    assert_device_clean(contexts.query_vector, model, tok, TEXT, "film", 1)
    assert_device_clean(lambda: embeddings.pca_2d(torch.zeros(5, 8, device=DEV))[0].cpu())


def test_nearest_contexts_keep_to_the_index_device(vocab_tokenizer):
    from bertlab.analysis import contexts
    n = 4
    on = dict(device=DEV)
    index = contexts.Index(["a b c d"], [[(0, 1)] * n], [["a"] * n], torch.zeros(2, n, 8, **on),
                           torch.zeros(n, dtype=torch.int32, **on), torch.zeros(n, dtype=torch.int32, **on),
                           torch.zeros(n, dtype=torch.int16, **on), torch.ones(n, dtype=torch.bool, **on))
    assert_device_clean(contexts.nearest, index, torch.zeros(8, device=DEV), 1, k=2)


@pytest.mark.parametrize("kind", FAMILY)
def test_probing_features(kind, toks):
    from bertlab.data.probe import ProbeData
    from bertlab.train import probing
    tok = toks[kind]
    model = on_device(kind, tok)
    words = ProbeData("w", "word", [["the", "film", "was", "fun"], ["i", "love", "it"]], [[0, 1, 0, 1], [0, 1, 0]],
                      ["a", "b"], ("w-device",))
    sents = ProbeData("s", "sentence", [TEXT, "it was bad ."], [1, 0], ["neg", "pos"], ("s-device",))
    for data, feature in ((words, "first"), (words, "mean"), (sents, "cls")):
        assert_device_clean(probing.compute_features, model, tok, data, feature)
    assert_device_clean(probing.fingerprint, model, tok)


# ---- fine-tuned heads -----------------------------------------------------------------------------
HEADS = [("sequence", dict(num_labels=2)), ("sequence", dict(num_labels=3, problem="multi")),
         ("sequence", dict(num_labels=1)), ("token", dict(num_labels=3)), ("qa", {})]


@pytest.mark.parametrize("kind", FAMILY)
@pytest.mark.parametrize("head, kw", HEADS, ids=["single", "multi", "regression", "token", "qa"])
def test_classify_predict(kind, head, kw, toks):
    from bertlab.analysis import classify
    tok = toks[kind]
    model = classifier_on_device(kind, tok, head, **kw)
    if head == "qa":
        assert_device_clean(classify.predict, model, tok, TEXT, question="how was the film ?")
        from bertlab.data.qa import answer_question
        assert_device_clean(answer_question, model, tok, "how was the film ?", TEXT)
    else:
        assert_device_clean(classify.predict, model, tok, TEXT)


@pytest.mark.parametrize("method", ["lora", "ia3", "adapter", "prompt", "prefix"])
def test_classify_with_parameter_efficient_methods(method, vocab_tokenizer):
    """LoRA, IA3, adapters and virtual tokens add tensors of their own: they follow the model too."""
    from bertlab import methods
    from bertlab.analysis import classify
    torch.manual_seed(0)
    c = _config("bert", vocab_tokenizer)
    model = classifier_class(c, "sequence")(c, num_labels=2)
    {"lora": lambda: methods.add_lora(model, 4), "ia3": lambda: methods.add_ia3(model),
     "adapter": lambda: methods.add_adapters(model, 8), "prompt": lambda: methods.add_prompt(model, 3),
     "prefix": lambda: methods.add_prefix(model, 3)}[method]()
    assert_device_clean(classify.predict, model.eval().to(DEV), vocab_tokenizer, TEXT)


def _task_files(d):
    rows = [(f"the film was {w} .", "pos" if w in ("great", "fun") else "neg")
            for w in ("great", "bad", "fun", "boring", "terrible", "good") * 4]
    (d / "single.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    (d / "score.csv").write_text("text,label\n" + "".join(f"{t},{1.0 + i % 5}\n" for i, (t, _) in enumerate(rows)))
    (d / "multi.csv").write_text("text,label\n" + "".join(f"{t},{y}|{'long' if i % 2 else 'short'}\n"
                                                          for i, (t, y) in enumerate(rows)))
    (d / "tags.conll").write_text("\n\n".join("\n".join(f"{w}\t{'ADJ' if w in ('great', 'bad') else 'X'}"
                                                        for w in t.split()) for t, _ in rows) + "\n")
    import json
    paras = [{"context": f"the {n} was {w} . i would watch it again .",
              "qas": [{"id": f"q{n}{w}", "question": f"how was the {n} ?",
                       "answers": [{"text": w, "answer_start": len(f"the {n} was ")}]}]}
             for n in ("film", "plot", "story", "scene") for w in ("great", "bad", "fun", "boring", "good")]
    (d / "squad.json").write_text(json.dumps({"data": [{"title": "films", "paragraphs": paras}]}))
    return {"single": d / "single.csv", "multi": d / "multi.csv", "regression": d / "score.csv",
            "token": d / "tags.conll", "qa": d / "squad.json"}


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    return _task_files(tmp_path_factory.mktemp("tasks"))


@pytest.mark.parametrize("problem", ["single", "multi", "regression", "token", "qa"])
def test_finetune_evaluator(problem, task_files, vocab_tokenizer):
    from bertlab.data.tasks import load_task
    from bertlab.train.finetune_metrics import Evaluator
    data = load_task(str(task_files[problem]), vocab_tokenizer, max_len=32)
    head = {"token": "token", "qa": "qa"}.get(problem, "sequence")
    kw = {} if head == "qa" else dict(num_labels=data.num_labels,
                                      problem=None if head == "token" else data.problem)
    model = classifier_on_device("bert", vocab_tokenizer, head, **kw)
    assert_device_clean(Evaluator(data, 8, vocab_tokenizer.pad_token_id), model)


@on_a_gpu
def test_same_answers_as_on_the_cpu(vocab_tokenizer):
    """On a real device the numbers match the CPU's (float32 sums in another order)."""
    import copy

    from bertlab.analysis import attention_views, classify
    from bertlab.analysis.predict import fill_in_turn, fill_mask, nsp_scores
    torch.manual_seed(0)
    cpu = family.build(_config("bert", vocab_tokenizer)).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    a, b = (fill_mask(m, vocab_tokenizer, MASKED, top_k=3) for m in (cpu, dev))
    assert [[c["token"] for c in x] for x in a] == [[c["token"] for c in x] for x in b]
    assert [c["score"] for c in a[0]] == pytest.approx([c["score"] for c in b[0]], abs=1e-4)
    ta, tb = (fill_in_turn(m, vocab_tokenizer, MASKED) for m in (cpu, dev))
    assert ta["in_turn"]["tokens"] == tb["in_turn"]["tokens"] and ta["in_turn"]["order"] == tb["in_turn"]["order"]
    assert ta["in_turn"]["chain"] == pytest.approx(tb["in_turn"]["chain"], abs=1e-4)
    seconds = ["i love it .", "the bank ."]
    assert nsp_scores(cpu, vocab_tokenizer, TEXT, seconds) == pytest.approx(
        nsp_scores(dev, vocab_tokenizer, TEXT, seconds), abs=1e-4)
    ra, rb = (attention_views.run_attention(m, vocab_tokenizer, TEXT) for m in (cpu, dev))
    assert torch.allclose(ra.attentions, rb.attentions, atol=1e-4)
    torch.manual_seed(0)
    head = classifier_class(cpu.config, "sequence")(cpu.config, num_labels=2).eval()
    pa, pb = (classify.predict(m, vocab_tokenizer, TEXT) for m in (head, copy.deepcopy(head).to(DEV)))
    assert pa["label"] == pb["label"]
    assert list(pa["labels"].values()) == pytest.approx(list(pb["labels"].values()), abs=1e-4)


# ---- the CPU-only speed-up ------------------------------------------------------------------------
@pytest.mark.skipif(DEV == "cpu", reason="checks a model off the CPU")
def test_fast_optimize_leaves_a_model_off_the_cpu_alone(vocab_tokenizer):
    from bertlab import fast
    model = on_device("bert", vocab_tokenizer)
    before = [type(m) for m in model.modules()]
    assert fast.optimize(model) is model
    assert [type(m) for m in model.modules()] == before and not fast.is_optimized(model)
    cpu = family.build(_config("bert", vocab_tokenizer))
    assert fast.is_optimized(fast.optimize(cpu))  # on the CPU it still swaps the modules in
