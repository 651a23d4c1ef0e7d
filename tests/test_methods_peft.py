"""peft 0.21 is the oracle of LoRA, IA3, prefix and prompt tuning, as transformers is the model's.

Both directions on tiny random classifiers of each family saved by transformers: what bertlab
trains and saves, peft.PeftModel.from_pretrained(<transformers' classifier of the base>, folder)
loads with the same logits (fp32, eval, within 1e-5); what peft trains and saves, load_finetuned
reads with the same logits; the trainable parameters equal peft's count; the merged LoRA / IA3
folder loads as a plain transformers classifier with the same logits."""
import json
import warnings

import pytest
import torch

from bertlab.config import BertConfig
from bertlab.heads import classifier_class, load_classifier, trainable_parameters
from bertlab.methods import apply_method, load_finetuned, save_finetuned
from bertlab.methods.peft_format import CONFIG, WEIGHTS
from bertlab.train.specs import FinetuneSpec

torch.set_num_threads(1)
TOL = 1e-5
FAMILY = ("bert", "albert", "electra", "roberta", "distilbert")
PREFIX_FAMILY = ("bert", "electra", "roberta")  # transformers' ALBERT and DistilBERT take no cache
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=40)
EXTRA = {"albert": dict(embedding_size=16, hidden_act="gelu_new"), "electra": dict(embedding_size=16),
         "roberta": dict(type_vocab_size=1, max_position_embeddings=42), "bert": dict(type_vocab_size=3)}
# peft's own names for what our spec targets (peft has no IA3 defaults for these members)
MEASURED: dict[str, float] = {}  # "method member direction" -> max |ours - peft|, printed at the end
PEFT_LORA = {"distilbert": ["q_lin", "v_lin"]}
PEFT_IA3 = {"albert": (["key", "value", "attention.dense", "ffn_output"], ["attention.dense", "ffn_output"]),
            "distilbert": (["k_lin", "v_lin", "out_lin", "lin2"], ["out_lin", "lin2"]),
            "electra": (["key", "value", "output.dense"], ["output.dense"])}


@pytest.fixture(scope="module")
def bpe(small_corpus):
    from bertlab.tokenizer import BPETokenizer
    return BPETokenizer.train([str(small_corpus)], vocab_size=400)


@pytest.fixture(scope="module")
def bases(tmp_path_factory, vocab_tokenizer, bpe):
    """member -> (folder of a random transformers classifier with 3 labels, its config)."""
    import transformers
    out = {}
    for member in FAMILY:
        tok = bpe if member == "roberta" else vocab_tokenizer
        extra = EXTRA.get(member, {})
        if member == "roberta":
            extra = extra | dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
                                 eos_token_id=tok.sep_token_id)
        c = BertConfig(vocab_size=tok.vocab_size, model_type=member, **(SMALL | extra))
        folder = tmp_path_factory.mktemp(member) / "base"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(classifier_class(c, "sequence")(c, 3, list("abc")).hf_config()))
        hf_cfg = transformers.AutoConfig.from_pretrained(folder)
        torch.manual_seed(0)
        hf = transformers.AutoModelForSequenceClassification.from_config(hf_cfg)
        noisy(hf.parameters(), 0.1)  # biases and LayerNorms matter too
        hf.save_pretrained(folder)
        tok.save_pretrained(folder)
        out[member] = folder, c
    return out


def noisy(params, scale, seed=5):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn(p.shape, generator=g) * scale)


def batch(c: BertConfig, T=11):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (3, T), generator=g)
    tt = torch.randint(0, c.type_vocab_size, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 8:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = c.pad_token_id
    return ids, tt, am


@torch.no_grad()
def ours_logits(model, c):
    ids, tt, am = batch(c)
    return model.eval()(ids, tt, am).logits


@torch.no_grad()
def hf_logits(model, c):
    ids, tt, am = batch(c)
    kw = {} if c.model_type == "distilbert" else {"token_type_ids": tt}  # DistilBERT has no segments
    return model.eval()(input_ids=ids, attention_mask=am, **kw).logits


def hf_base(folder):
    import transformers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="eager")


def spec_for(method: str) -> FinetuneSpec:
    return FinetuneSpec(method=method, lora_rank=2, lora_alpha=4.0, virtual_tokens=3,
                        lora_targets=("query", "key", "value", "attention_output", "ffn"))


def peft_config(method: str, member: str, c: BertConfig):
    import peft
    if method == "lora":
        return peft.LoraConfig(task_type="SEQ_CLS", r=2, lora_alpha=4, target_modules=PEFT_LORA.get(member, ["query", "value"]))
    if method == "ia3":
        targets, ff = PEFT_IA3.get(member, (None, None))
        return peft.IA3Config(task_type="SEQ_CLS", target_modules=targets, feedforward_modules=ff)
    if method == "prefix":
        return peft.PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=3)
    return peft.PromptTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=3, token_dim=c.embedding_dim,
                                   num_attention_heads=c.num_attention_heads, num_layers=c.num_hidden_layers)  # DistilBERT's n_heads


CASES = ([("lora", m) for m in FAMILY] + [("ia3", m) for m in FAMILY] + [("prompt", m) for m in FAMILY]
         + [("prefix", m) for m in PREFIX_FAMILY])


@pytest.mark.parametrize("method,member", CASES)
def test_ours_saved_loads_in_peft_with_equal_logits(method, member, bases, tmp_path):
    import peft
    base, c = bases[member]
    ours, tok = load_classifier(base)
    before = ours_logits(ours, c)
    apply_method(ours, spec_for(method))
    noisy([p for p in ours.parameters() if p.requires_grad], 0.3)  # LoRA's B, IA3's scales leave 0 and 1
    mine = ours_logits(ours, c)
    assert (mine - before).abs().max() > 1e-3  # the method changes the model
    spec = spec_for(method)
    out = save_finetuned(ours, tok, tmp_path / "model", spec, str(base), adapter_folder=tmp_path / "adapter")
    folder = tmp_path / ("adapter" if method in ("lora", "ia3") else "model")
    assert out == tmp_path / "model" and {CONFIG, WEIGHTS} <= {f.name for f in folder.iterdir()}
    cfg = json.loads((folder / CONFIG).read_text())
    assert cfg["base_model_name_or_path"] == str(base.resolve()) and cfg["task_type"] == "SEQ_CLS"
    theirs = peft.PeftModel.from_pretrained(hf_base(base), folder)
    d = (mine - hf_logits(theirs, c)).abs().max().item()
    MEASURED[f"{method} {member} ours->peft"] = d
    assert d <= TOL, f"{method} {member}: {d:.2e}"
    back, _ = load_finetuned(folder)  # and back into bertlab
    assert (ours_logits(back, c) - mine).abs().max() <= TOL
    if method in ("lora", "ia3"):  # the merged export is a plain transformers classifier
        merged = hf_base(tmp_path / "model")
        assert (hf_logits(merged, c) - mine).abs().max() <= TOL
        assert (ours_logits(load_finetuned(tmp_path / "model")[0], c) - mine).abs().max() <= TOL


@pytest.mark.parametrize("method,member", CASES)
def test_peft_saved_loads_into_ours_with_equal_logits_and_counts(method, member, bases, tmp_path):
    import peft
    base, c = bases[member]
    torch.manual_seed(0)
    theirs = peft.get_peft_model(hf_base(base), peft_config(method, member, c))
    noisy([p for p in theirs.parameters() if p.requires_grad], 0.3)
    theirs.save_pretrained(tmp_path / "peft")
    ours, tok = load_finetuned(tmp_path / "peft")
    d = (ours_logits(ours, c) - hf_logits(theirs, c)).abs().max().item()
    MEASURED[f"{method} {member} peft->ours"] = d
    assert d <= TOL, f"{method} {member}: {d:.2e}"
    assert tok.vocab_size == c.vocab_size
    # the same method applied here trains as many parameters as peft's
    fresh, _ = load_classifier(base)
    spec = FinetuneSpec(method=method, lora_rank=2, lora_alpha=4.0, virtual_tokens=3, lora_targets=("query", "value"))
    apply_method(fresh, spec)
    assert trainable_parameters(fresh)[0] == theirs.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("member", FAMILY)
def test_lora_on_the_word_table_equals_peft_both_ways(member, bases, tmp_path):
    """LoRA on the word embeddings (peft's LoRA Embedding layer: A zero, B random) beside linear targets."""
    import peft
    base, c = bases[member]
    spec = FinetuneSpec(method="lora", lora_rank=2, lora_alpha=4.0, lora_targets=("query", "value", "embeddings"))
    ours, tok = load_classifier(base)
    before = ours_logits(ours, c)
    apply_method(ours, spec)
    assert (ours_logits(ours, c) - before).abs().max() <= TOL  # A starts at zero: exactly the base model
    noisy([p for p in ours.parameters() if p.requires_grad], 0.3)
    mine = ours_logits(ours, c)
    assert (mine - before).abs().max() > 1e-3
    save_finetuned(ours, tok, tmp_path / "model", spec, str(base), adapter_folder=tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / CONFIG).read_text())
    assert any(t.endswith("embeddings.word_embeddings") for t in cfg["target_modules"])
    theirs = peft.PeftModel.from_pretrained(hf_base(base), tmp_path / "adapter")
    d = (mine - hf_logits(theirs, c)).abs().max().item()
    MEASURED[f"lora+embeddings {member} ours->peft"] = d
    assert d <= TOL, f"{member}: {d:.2e}"
    assert (ours_logits(load_finetuned(tmp_path / "adapter")[0], c) - mine).abs().max() <= TOL
    assert (hf_logits(hf_base(tmp_path / "model"), c) - mine).abs().max() <= TOL  # merged into the word table
    # peft's own adapter on the word table loads here, and the same spec trains as many parameters
    torch.manual_seed(0)
    theirs = peft.get_peft_model(hf_base(base), peft.LoraConfig(
        task_type="SEQ_CLS", r=2, lora_alpha=4, target_modules=PEFT_LORA.get(member, ["query", "value"]) + ["word_embeddings"]))
    noisy([p for p in theirs.parameters() if p.requires_grad], 0.3)
    theirs.save_pretrained(tmp_path / "peft")
    d = (ours_logits(load_finetuned(tmp_path / "peft")[0], c) - hf_logits(theirs, c)).abs().max().item()
    MEASURED[f"lora+embeddings {member} peft->ours"] = d
    assert d <= TOL, f"{member}: {d:.2e}"
    fresh, _ = load_classifier(base)
    apply_method(fresh, spec)
    assert trainable_parameters(fresh)[0] == theirs.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("member", ["bert", "albert"])
def test_a_trained_pooler_is_peft_modules_to_save(member, bases, tmp_path):
    """train_pooler = peft's modules_to_save ["classifier", "pooler"]: the same count, and the saved
    adapter loads in peft with the trained pooler (equal logits)."""
    import peft
    base, c = bases[member]
    ours, tok = load_classifier(base)
    spec = spec_for("lora").replace(train_pooler=True)
    added = apply_method(ours, spec)
    assert added[-1] == f"{member}.pooler"
    targets = (["query", "key", "value", "attention.dense", "ffn", "ffn_output"] if member == "albert" else
               ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"])
    theirs = peft.get_peft_model(hf_base(base), peft.LoraConfig(
        task_type="SEQ_CLS", r=2, lora_alpha=4, target_modules=targets, modules_to_save=["classifier", "pooler"]))
    assert trainable_parameters(ours)[0] == theirs.get_nb_trainable_parameters()[0]
    noisy([p for p in ours.parameters() if p.requires_grad], 0.3)
    mine = ours_logits(ours, c)
    save_finetuned(ours, tok, tmp_path / "model", spec, str(base), adapter_folder=tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / CONFIG).read_text())
    assert "pooler" in cfg["modules_to_save"]
    loaded = peft.PeftModel.from_pretrained(hf_base(base), tmp_path / "adapter")
    assert (mine - hf_logits(loaded, c)).abs().max() <= TOL
    with pytest.raises(ValueError, match="no pooler"):
        apply_method(load_classifier(bases["electra"][0])[0], spec)


def test_peft_prefix_and_prompt_change_bert(bases):
    """transformers 5.23 feeds peft's prefix into BERT (a cache of P keys and values, positions after
    it) and the prompt as input vectors: both change the logits, and ours follow."""
    import peft
    base, c = bases["bert"]
    plain = hf_logits(hf_base(base), c)
    for method in ("prefix", "prompt"):
        torch.manual_seed(0)
        theirs = peft.get_peft_model(hf_base(base), peft_config(method, "bert", c))
        assert (hf_logits(theirs, c) - plain).abs().max() > 1e-2, method


def test_untrained_pooler_travels_with_the_adapter(tmp_path, vocab_tokenizer):
    """A base without a pooler (MLM-only pre-training) gets a random one, here and in transformers:
    peft's folder then carries ours (modules_to_save), or the logits would differ."""
    import peft

    from bertlab.checkpoint import save_pretrained
    from bertlab.model import BertForPreTraining
    c = BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)
    torch.manual_seed(0)
    pre = BertForPreTraining(c)
    pre.bert.pooler = None  # as a masked-LM-only checkpoint
    save_pretrained(pre, vocab_tokenizer, tmp_path / "base")
    ours = classifier_class(c, "sequence")(c, 2)
    ours.bert.load_state_dict(pre.bert.state_dict(), strict=False)
    apply_method(ours, spec_for("lora"))
    noisy([p for p in ours.parameters() if p.requires_grad], 0.3)
    save_finetuned(ours, vocab_tokenizer, tmp_path / "m", spec_for("lora"), str(tmp_path / "base"),
                   adapter_folder=tmp_path / "a")
    assert "pooler" in json.loads((tmp_path / "a" / CONFIG).read_text())["modules_to_save"]
    theirs = peft.PeftModel.from_pretrained(hf_base(tmp_path / "base"), tmp_path / "a")
    assert (ours_logits(ours, c) - hf_logits(theirs, c)).abs().max() <= TOL


def test_zz_report_measured_differences():
    """Prints the measured max |ours - peft| per method, member and direction (pytest -s shows it)."""
    for k, v in sorted(MEASURED.items()):
        print(f"{k}: {v:.2e}")
    assert all(v <= TOL for v in MEASURED.values())


@pytest.mark.parametrize("kind,method", [("token", "lora"), ("qa", "lora"), ("token", "prefix"), ("qa", "ia3")])
def test_token_and_qa_heads_save_for_peft(kind, method, tmp_path, vocab_tokenizer):
    """Tagging (TOKEN_CLS) and extractive QA (QUESTION_ANS, qa_outputs saved): the same folder format."""
    import peft
    import transformers
    c = BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)
    cls = classifier_class(c, kind)
    ours = cls(c, 2) if kind == "qa" else cls(c, 3, list("abc"))
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text(json.dumps(ours.hf_config()))
    auto = transformers.AutoModelForQuestionAnswering if kind == "qa" else transformers.AutoModelForTokenClassification
    torch.manual_seed(0)
    hf = auto.from_config(transformers.AutoConfig.from_pretrained(tmp_path / "base"))
    noisy(hf.parameters(), 0.1)
    hf.save_pretrained(tmp_path / "base")
    vocab_tokenizer.save_pretrained(tmp_path / "base")
    ours, tok = load_classifier(tmp_path / "base")
    apply_method(ours, spec_for(method))
    noisy([p for p in ours.parameters() if p.requires_grad], 0.3)
    save_finetuned(ours, tok, tmp_path / "m", spec_for(method), str(tmp_path / "base"), adapter_folder=tmp_path / "a")
    folder = tmp_path / ("a" if method in ("lora", "ia3") else "m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = peft.PeftModel.from_pretrained(auto.from_pretrained(tmp_path / "base", attn_implementation="eager"),
                                                folder).eval()
    ids, tt, am = batch(c)
    # peft 0.21's PeftModelForQuestionAnswering.forward drops token_type_ids for LoRA and IA3 (it does not
    # pass them on): the question's and the context's segments would be lost, so QA calls its base_model
    run = theirs.base_model if kind == "qa" else theirs
    with torch.no_grad():
        mine, other = ours.eval()(ids, tt, am), run(input_ids=ids, attention_mask=am, token_type_ids=tt)
    if kind == "qa":
        assert json.loads((folder / CONFIG).read_text())["modules_to_save"] == ["qa_outputs"]
        pairs = [(mine.start_logits, other.start_logits), (mine.end_logits, other.end_logits)]
    else:
        pairs = [(mine.logits, other.logits)]
    keep = am.bool()
    assert all((a[keep] - b[keep]).abs().max() <= TOL for a, b in pairs), kind


def test_a_peft_adapter_from_the_hub_loads(bases, tmp_path, monkeypatch):
    """A hub id of a peft adapter: resolve_folder fetches its weights and tokenizer, and
    adapter_config.json is fetched beside them (the hub is simulated: tests run offline)."""
    import shutil

    import huggingface_hub
    import peft

    import bertlab.methods.saving as methods
    base, c = bases["bert"]
    torch.manual_seed(0)
    theirs = peft.get_peft_model(hf_base(base), peft_config("lora", "bert", c))
    noisy([p for p in theirs.parameters() if p.requires_grad], 0.3)
    theirs.save_pretrained(tmp_path / "saved")
    snapshot = tmp_path / "snapshot"  # what snapshot_download leaves with bertlab's file patterns
    snapshot.mkdir()
    shutil.copy(tmp_path / "saved" / WEIGHTS, snapshot)
    fetched = []

    def fake_download(repo_id, filename, **kw):
        fetched.append((repo_id, filename))
        if not (tmp_path / "saved" / filename).exists():
            raise FileNotFoundError(filename)
        return str(shutil.copy(tmp_path / "saved" / filename, snapshot))
    monkeypatch.setattr(methods, "resolve_folder", lambda name: snapshot if name == "someone/adapter" else base)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    ours, _ = load_finetuned("someone/adapter")
    assert ("someone/adapter", CONFIG) in fetched
    assert (ours_logits(ours, c) - hf_logits(theirs, c)).abs().max() <= TOL
