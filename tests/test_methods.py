"""The fine-tuning methods on their own (tests/test_methods_peft.py holds peft's side): what each
trains on every family member, the identity at init of LoRA, IA3, BitFit and Houlsby adapters,
the refusals, the adapters' own folder, and a few steps of each method through finetune()."""
import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

import bertlab
from bertlab.config import BertConfig
from bertlab.heads import classifier_class
from bertlab.methods import (
    METHODS,
    AdaptedLinear,
    IA3Linear,
    LoRAEmbedding,
    LoRALinear,
    add_lora,
    apply_method,
    load_finetuned,
    merged_copy,
    save_finetuned,
)
from bertlab.methods.registry import DEFAULT, NAMES, RECORDS, SAVES, Method
from bertlab.train.runs import read_metrics
from bertlab.train.specs import FinetuneSpec

torch.set_num_threads(1)
FAMILY = ("bert", "albert", "electra", "roberta", "distilbert")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=40)
EXTRA = {"albert": dict(embedding_size=16), "electra": dict(embedding_size=16), "roberta": dict(type_vocab_size=1)}
H, I, L = 32, 48, 2
LAYERS = {"albert": 1}  # layer modules: ALBERT's one shared layer runs L times


def config(member: str, vocab_size: int = 60) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, model_type=member, **(SMALL | EXTRA.get(member, {})))


def classifier(member: str, kind: str = "sequence", seed: int = 0):
    c = config(member)
    torch.manual_seed(seed)
    m = classifier_class(c, kind)(c, 3)
    g = torch.Generator().manual_seed(seed + 5)
    with torch.no_grad():  # zero biases and identity LayerNorms would hide mistakes
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return m.eval(), c


def inputs(c: BertConfig, T=9):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (2, T), generator=g)
    am = torch.ones(2, T, dtype=torch.long)
    am[1, 6:] = 0
    return ids, torch.zeros_like(ids), am


@torch.no_grad()
def logits(m, c):
    return m(*inputs(c)).logits


def spec(method: str, **kw) -> FinetuneSpec:
    return FinetuneSpec(method=method, lora_rank=2, lora_alpha=4.0, virtual_tokens=3, adapter_size=4, **kw)


def trained(m) -> set[str]:
    return {n for n, p in m.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("member", FAMILY)
def test_each_method_on_each_member(member):
    """Identity at init where the method promises it; what trains; prefix and prompt change the logits."""
    prefix, n = member + ".", LAYERS.get(member, L)
    for method in METHODS:
        m, c = classifier(member)
        before = logits(m, c)
        names = apply_method(m, spec(method))
        after = logits(m, c)
        head = {n for n in trained(m) if not n.startswith(prefix)}
        enc = trained(m) - head
        assert head == {n for n, _ in m.named_parameters() if not n.startswith(prefix)}, method  # the head trains
        if method in ("prefix", "prompt"):
            assert (after - before).abs().max() > 1e-3 and enc == {prefix + method} == set(names), method
            continue
        assert torch.allclose(after, before, atol=1e-6), method  # B = 0, scales = 1, up = 0: the base model
        if method == "full":
            assert enc == {n for n, _ in m.named_parameters() if n.startswith(prefix)}
        elif method == "frozen":
            assert not enc and names == []
        elif method == "bitfit":
            assert enc and all(n.endswith(".bias") for n in enc) and set(names) == enc
        elif method == "lora":
            # the default targets: query, key, value, attention output, feed-forward in and out, the word table
            words = prefix + "embeddings.word_embeddings"
            assert words in names and len(names) == 6 * n + 1
            assert enc == ({f"{w}.lora_{x}" for w in names if w != words for x in "AB"}
                           | {f"{words}.lora_embedding_{x}" for x in "AB"})
        elif method == "ia3":
            assert enc == {f"{w}.ia3_l" for w in names} and len(names) == 4 * n
            assert sorted(m.get_submodule(w).scale_input for w in names) == [False] * 2 * n + [True] * 2 * n
        elif method == "adapter":
            assert len(names) == 2 * n and all(isinstance(m.get_submodule(w), AdaptedLinear) for w in names)
            assert all(".adapter." in n or "LayerNorm" in n or "layer_norm" in n for n in enc)
            per_adapter = H * 4 + 4 + 4 * H + H  # down (H -> 4) and up (4 -> H), with biases
            norms = sum(p.numel() for k, p in m.named_parameters() if k in enc and ".adapter." not in k)
            assert sum(p.numel() for k, p in m.named_parameters() if k in enc) == 2 * n * per_adapter + norms


@pytest.mark.parametrize("member", FAMILY)
def test_lora_targets_by_what_they_are(member):
    counts = {"query": 1, "key": 1, "value": 1, "attention_output": 1, "ffn": 2}
    for target, per_layer in counts.items():
        m, _ = classifier(member)
        names = add_lora(m, 2, 4, (target,))
        assert len(names) == per_layer * LAYERS.get(member, L), (member, target, names)
        sizes = {(m.get_submodule(n).in_features, m.get_submodule(n).out_features) for n in names}
        assert sizes == ({(H, I), (I, H)} if target == "ffn" else {(H, H)}), (member, target)
    m, _ = classifier(member)  # the word table: one module, (V, E) wide, whatever the layers
    names = add_lora(m, 2, 4, ("embeddings",))
    table = m.get_submodule(names[0])
    assert names == [member + ".embeddings.word_embeddings"] and isinstance(table, LoRAEmbedding)
    assert table.lora_embedding_A.shape == (2, table.num_embeddings) and table.lora_embedding_B.shape[1] == 2
    m, c = classifier(member)
    add_lora(m, 2, 4, ("query", "value"), dropout=0.5)
    assert all(x.lora_dropout.p == 0.5 for x in m.modules() if isinstance(x, LoRALinear))


def test_refusals():
    m, _ = classifier("bert", "token")
    with pytest.raises(ValueError, match="per-token head"):
        apply_method(m, spec("prompt"))
    apply_method(m, spec("prefix"))  # prefix tuning keeps the length: fine for tagging
    m, _ = classifier("bert")
    with pytest.raises(ValueError, match="no room for text"):
        apply_method(m, FinetuneSpec(method="prefix", virtual_tokens=39))
    with pytest.raises(ValueError, match="unknown target"):
        add_lora(m, 2, 4, ("queries",))
    m, _ = classifier("bert")
    apply_method(m, spec("prompt"))
    with pytest.raises(ValueError, match="virtual tokens already"):
        apply_method(m, spec("prefix"))
    with pytest.raises(ValueError, match="left-context-only"):
        m.bert(torch.ones(1, 4, dtype=torch.long), causal=True)


@pytest.mark.parametrize("member", FAMILY)
def test_ia3_and_lora_merge_into_a_plain_classifier(member):
    for method in ("lora", "ia3"):
        m, c = classifier(member)
        apply_method(m, spec(method, lora_targets=("query", "key", "value", "attention_output", "ffn")))
        with torch.no_grad():
            for p in m.parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.3)
        plain = merged_copy(m).eval()
        assert not any(isinstance(x, (LoRALinear, IA3Linear)) for x in plain.modules())
        assert (logits(plain, c) - logits(m, c)).abs().max() <= 1e-5, (member, method)


@pytest.mark.parametrize("member", ("bert", "albert", "distilbert"))
def test_prefix_and_prompt_need_their_positions(member):
    """Virtual tokens take positions: the text must leave them room, and max_position counts them."""
    m, c = classifier(member)
    apply_method(m, spec("prefix"))
    m(torch.full((1, c.max_tokens - 3), 7))  # the 3 virtual tokens take the first positions
    with pytest.raises(ValueError, match="less 3 virtual tokens"):
        m(torch.full((1, c.max_tokens - 2), 7))


def test_houlsby_adapters_save_and_load(tmp_path, vocab_tokenizer):
    c = config("bert", vocab_tokenizer.vocab_size)
    torch.manual_seed(0)
    m = classifier_class(c, "sequence")(c, 2, ["neg", "pos"])
    apply_method(m, spec("adapter"))
    with torch.no_grad():
        for p in m.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.3)
    m.eval()
    out = save_finetuned(m, vocab_tokenizer, tmp_path / "model", spec("adapter"), "default")
    raw = json.loads((out / "config.json").read_text())
    assert raw["bertlab_adapter_size"] == 4 and raw["architectures"] == ["BertForSequenceClassification"]
    back, tok = load_finetuned(out)
    assert back.id2label == ["neg", "pos"] and tok.vocab_size == vocab_tokenizer.vocab_size
    assert (logits(back, c) - logits(m, c)).abs().max() <= 1e-6
    save_finetuned(m, vocab_tokenizer, out, spec("adapter"), "default")  # saving again replaces it
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an adapter model"):
        save_finetuned(m, vocab_tokenizer, tmp_path / "other", spec("adapter"), "default")


def write_csv(path, labels=("pos", "neg"), n=160):
    """Toy reviews whose label its two sentiment words give away."""
    import random
    rng = random.Random(0)
    good, bad, nouns = "great good fun love".split(), "bad terrible boring hate".split(), "film plot acting end".split()
    rows = ["text,label"]
    for i in range(n):
        w, a = rng.sample(good if i % 2 == 0 else bad, 2), rng.sample(nouns, 2)
        rows.append(f"the {a[0]} was {w[0]} and the {a[1]} was {w[1]} .,{labels[i % 2]}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def tuned_base(tmp_path_factory, vocab_tokenizer):
    """A tiny BERT fully fine-tuned on the toy task: an encoder that has something to offer, as a
    pre-trained one does (a random tiny encoder gives frozen methods nothing to learn from)."""
    from bertlab.checkpoint import save_pretrained
    from bertlab.model import BertForPreTraining
    from bertlab.train.finetune import finetune
    torch.manual_seed(0)
    tmp = tmp_path_factory.mktemp("base")
    save_pretrained(BertForPreTraining(config("bert", vocab_tokenizer.vocab_size)), vocab_tokenizer, tmp / "base")
    finetune(tmp / "tuned", model=str(tmp / "base"), task=str(write_csv(tmp / "t.csv")), method="full", epochs=3,
             batch_size=16, lr=5e-3, log=lambda m: None)
    return tmp / "tuned"


@pytest.mark.parametrize("method", METHODS)
def test_a_few_steps_of_each_method_lower_the_loss(method, tuned_base, tmp_path):
    """30 steps on other label names (so a fresh head) lower the training loss, and <run>/model/
    reads back as the method saved it."""
    from bertlab.train.finetune import finetune
    csv = write_csv(tmp_path / "t.csv", labels=("yes", "no"))
    res = finetune(tmp_path / "run", model=str(tuned_base), task=str(csv), method=method, epochs=3, batch_size=16,
                   log_every=1, virtual_tokens=4, adapter_size=8, lora_targets=("query", "value", "ffn"),
                   log=lambda m: None, **({"lr": 5e-3} if method == "full" else {}))
    assert res["state"] == "finished" and res["labels"] == ["no", "yes"]
    losses = [r["loss"] for r in read_metrics(tmp_path / "run")[0] if r.get("split") == "train"]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.8 * first, (method, losses)
    assert res["adapter_dir"] is None or method in ("lora", "ia3")
    model, _ = load_finetuned(tmp_path / "run")  # <run>/model/ reads back as the method saved it
    assert model.kind == "sequence" and model.id2label == ["no", "yes"]
    if method in ("lora", "ia3"):
        assert res["adapter_dir"] == str(tmp_path / "run" / "adapter")
        assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
        assert load_finetuned(tmp_path / "run" / "adapter")[0].id2label == ["no", "yes"]


def test_a_method_is_its_record():
    """What bertlab says about a method is read from its record: how it saves, the spec fields it reads
    (real FinetuneSpec fields), and the --method help, which names every method."""
    fields = {f.name: f for f in dataclasses.fields(FinetuneSpec)}
    for m in RECORDS:
        assert m.saves in SAVES and set(m.options) <= set(fields), m.name
        assert not m.mergeable or m.saves == "peft", m.name
    assert all(n in fields["method"].metadata["help"] for n in NAMES)
    with pytest.raises(ValueError, match="saves"):
        Method("x", "X", "x", "x", 1e-3, ("#000000", "circle"), lambda model, spec: [], saves="zip")


# the files that may name a method in a string: its records, peft's type names, the virtual tokens'
# attributes, the saving module's run folder "adapter", and the lessons' prepared runs
NAMING = ("methods/registry.py", "methods/peft_format.py", "methods/virtual.py", "methods/saving.py", "app/lessons/")


def test_no_other_file_tests_a_methods_name():
    """A new method is its module and its record: no other code branches on a method's name. (The
    default, "full", is skipped: it is also a word of attention patterns and probes.)"""
    root = Path(bertlab.__file__).parent
    files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
    files["../app.py"] = (root.parent / "app.py").read_text()
    for name in NAMES:
        if name == DEFAULT:
            continue
        said = re.compile(rf"[\"']{name}[\"']")
        stray = [f for f, text in files.items() if said.search(text) and not f.startswith(NAMING)]
        assert not stray, (name, stray)
