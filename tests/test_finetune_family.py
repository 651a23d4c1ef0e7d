"""Fine-tuning for every family member: our <Member>For{Sequence,Token}Classification against
transformers' (same names, same logits within 1e-5, fp32, eval) in both directions; a tiny
fine-tune per member whose exported folder transformers loads with the same logits; LoRA, frozen
encoders and layer-wise options on non-BERT members; word labels on byte-level BPE pieces."""
import json
import warnings

import pytest
import torch

from bertlab import family
from bertlab.checkpoint import save_pretrained
from bertlab.config import BertConfig
from bertlab.data.tasks import IGNORE_INDEX, encode_tagged
from bertlab.heads import (
    HEADS,
    classifier_class,
    freeze_encoder,
    layer_index,
    load_classifier,
    save_classifier,
)
from bertlab.methods import add_lora
from bertlab.train.finetune import build_classifier, finetune, layer_decay_groups, trainable_estimate
from bertlab.train.specs import FinetuneSpec

torch.set_num_threads(1)
TOL = 1e-5
FAMILY = ("bert", "albert", "electra", "roberta", "distilbert")
KINDS = ("sequence", "token")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=40)
EXTRA = {"albert": dict(embedding_size=16, hidden_act="gelu_new"), "electra": dict(embedding_size=16),
         "roberta": dict(type_vocab_size=1, max_position_embeddings=42), "bert": dict(type_vocab_size=3)}
MEASURED: dict[str, float] = {}  # (member, kind, direction) -> max |ours - theirs|, printed at the end


@pytest.fixture(scope="module")
def bpe(small_corpus):
    from bertlab.tokenizer import BPETokenizer
    return BPETokenizer.train([str(small_corpus)], vocab_size=400)


@pytest.fixture(scope="module")
def toks(vocab_tokenizer, bpe):
    return {k: bpe if k == "roberta" else vocab_tokenizer for k in FAMILY}


def config(kind: str, tok) -> BertConfig:
    extra = EXTRA.get(kind, {})
    if kind == "roberta":
        extra = extra | dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    return BertConfig(vocab_size=tok.vocab_size, model_type=kind, **(SMALL | extra))


def perturbed(m):
    """Initialisers zero biases and make LayerNorms identities: make every parameter matter."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return m.eval()


def batch(c: BertConfig, T=13):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (3, T), generator=g)
    tt = torch.randint(0, c.type_vocab_size, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 9:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = c.pad_token_id
    return ids, tt, am


def logits_pair(ours, theirs, c: BertConfig):
    ids, tt, am = batch(c)
    kw = {} if c.model_type == "distilbert" else {"token_type_ids": tt}  # DistilBERT has no segments
    with torch.no_grad():
        a = ours(ids, tt, am).logits
        b = theirs(input_ids=ids, attention_mask=am, **kw).logits
    assert a.shape == b.shape, (a.shape, b.shape)
    keep = am.bool() if a.dim() == 3 else torch.ones(len(a), dtype=torch.bool)  # padded tokens: any value
    return (a[keep] - b[keep]).abs().max().item()


def hf_class(arch):
    import transformers
    return getattr(transformers, arch)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("member", FAMILY)
def test_transformers_folder_loads_into_ours_with_equal_logits(member, kind, toks, tmp_path):
    import transformers
    tok = toks[member]
    c = config(member, tok)
    arch = classifier_class(c, kind).architecture
    ours0 = classifier_class(c, kind)(c, 3, ["a", "b", "c"])
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(ours0.hf_config()))
    hf_cfg = transformers.AutoConfig.from_pretrained(tmp_path / "cfg", attn_implementation="eager")
    torch.manual_seed(0)
    theirs = perturbed(hf_class(arch)(hf_cfg))
    theirs.save_pretrained(tmp_path / "hf")
    tok.save_pretrained(tmp_path / "hf")
    ours, tok2 = load_classifier(tmp_path / "hf")
    assert type(ours).__name__ == arch and ours.id2label == ["a", "b", "c"]
    assert type(tok2) is type(tok) and tok2.pad_token_id == c.pad_token_id
    assert set(ours.state_dict()) == {k for k in theirs.state_dict() if not k.endswith("_ids")}
    d = logits_pair(ours, theirs, c)
    MEASURED[f"{member} {kind} transformers->ours"] = d
    assert d <= TOL


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("member", FAMILY)
def test_transformers_loads_ours_with_equal_logits(member, kind, toks, tmp_path):
    tok = toks[member]
    c = config(member, tok)
    cls = classifier_class(c, kind)
    torch.manual_seed(0)
    ours = perturbed(cls(c, 4, list("wxyz"), classifier_dropout=0.3))
    save_classifier(ours, tok, tmp_path / "ours")
    theirs, info = hf_class(cls.architecture).from_pretrained(tmp_path / "ours", attn_implementation="eager",
                                                              output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert theirs.config.id2label == dict(enumerate("wxyz"))
    theirs.eval()
    d = logits_pair(ours, theirs, c)
    MEASURED[f"{member} {kind} ours->transformers"] = d
    assert d <= TOL
    # the head's dropout travels under the member's own key, and comes back
    back, _ = load_classifier(tmp_path / "ours")
    assert back.classifier_dropout == (None if (member, kind) == ("distilbert", "token") else 0.3)


def test_heads_compute_as_their_members_do(toks):
    """Parameter names of each member's head, and the dropout transformers uses by default."""
    heads = {}
    for member in FAMILY:
        c = config(member, toks[member])
        for kind in KINDS:
            m = classifier_class(c, kind)(c, 2)
            assert family.encoder_of(m) is getattr(m, m.base_model_prefix) and m.base_model_prefix == member
            heads[member, kind] = sorted({k.rsplit(".", 1)[0] for k in m.state_dict()
                                          if not k.startswith(member + ".")})
            pooler = [k for k in m.state_dict() if ".pooler" in k]
            assert bool(pooler) == (kind == "sequence" and member in ("bert", "albert")), (member, kind)
            drop = m.dropout.p if hasattr(m, "dropout") else m.classifier.dropout.p
            assert drop == {("albert", "sequence"): 0.1, ("albert", "token"): 0.1,
                            ("distilbert", "sequence"): 0.2}.get((member, kind), c.hidden_dropout_prob)
    assert heads["electra", "sequence"] == heads["roberta", "sequence"] == ["classifier.dense", "classifier.out_proj"]
    assert heads["distilbert", "sequence"] == ["classifier", "pre_classifier"]
    assert all(heads[m, "token"] == ["classifier"] for m in FAMILY)
    assert len(HEADS) == 3 * len(family.MEMBERS)  # sequence, token and question answering, for every member
    with pytest.raises(ValueError, match="needs a bert config.*RobertaForSequenceClassification"):
        HEADS["BertForSequenceClassification"](config("roberta", toks["roberta"]), 2)


# ---- LoRA, frozen encoders, layer-wise options ------------------------------------------------------

def test_lora_on_distilbert_trains_only_lora_and_the_head(toks):
    c = config("distilbert", toks["distilbert"])
    torch.manual_seed(0)
    model = classifier_class(c, "sequence")(c, 3)
    ids, tt, am = batch(c)
    model.eval()
    with torch.no_grad():
        before = model(ids, tt, am).logits
    wrapped = add_lora(model, rank=4, alpha=8)  # BERT's names (query, value) find q_lin and v_lin
    assert sorted(wrapped) == sorted(f"distilbert.transformer.layer.{i}.attention.{n}"
                                     for i in range(2) for n in ("q_lin", "v_lin"))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == ({f"{w}.lora_{x}" for w in wrapped for x in "AB"}
                         | {f"{h}.{p}" for h in ("pre_classifier", "classifier") for p in ("weight", "bias")})
    with torch.no_grad():
        assert torch.equal(model(ids, tt, am).logits, before)  # B = 0: the same model at the start
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        loss = model(ids, tt, am, labels=torch.tensor([0, 1, 2])).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert model.distilbert.transformer.layer[0].attention.q_lin.lora_B.abs().sum() > 0
    # every BERT target name has a DistilBERT counterpart; ALBERT's feed-forward answers to "dense"
    full = classifier_class(c, "token")(c, 2)
    assert len(add_lora(full, 2, 4, ("query", "key", "value", "dense"))) == 2 * 6
    a = config("albert", toks["albert"])
    albert = classifier_class(a, "token")(a, 2)
    assert sorted(n.rsplit(".", 1)[1] for n in add_lora(albert, 2, 4, ("dense",))) == ["dense", "ffn", "ffn_output"]


def test_frozen_encoder_and_layer_depths_for_each_member(toks):
    for member in FAMILY:
        c = config(member, toks[member])
        m = freeze_encoder(classifier_class(c, "sequence")(c, 2))
        trainable = {n for n, p in m.named_parameters() if p.requires_grad}
        assert trainable and not any(n.startswith(member + ".") for n in trainable)
        if member == "albert":
            with pytest.raises(ValueError, match="ALBERT shares its layer weights"):
                layer_decay_groups(classifier_class(c, "sequence")(c, 2), 1e-3, 0.01, 0.8)
            continue
        depths = {n: layer_index(n, 2) for n, _ in classifier_class(c, "token")(c, 2).named_parameters()}
        assert {d for n, d in depths.items() if "embeddings" in n} == {0}  # ELECTRA's projection too
        assert {d for n, d in depths.items() if ".layer.1." in n} == {2}
        assert {d for n, d in depths.items() if n.startswith("classifier.")} == {2}
        assert set(depths.values()) == {0, 1, 2}


# ---- data ------------------------------------------------------------------------------------------

def test_word_labels_sit_on_the_first_byte_level_piece_as_in_running_text(bpe, vocab_tokenizer):
    sents = [["the", "film", "was", "greatest", "."], ["boring", "!"]]
    tags = [[0, 1, 2, 3, 4], [3, 4]]
    for tok in (bpe, vocab_tokenizer):
        (ex, ex2) = encode_tagged(tok, sents, tags, 32)
        running = tok.backend.encode("the film was greatest .", add_special_tokens=False)
        assert ex.ids == [tok.cls_token_id, *running.ids, tok.sep_token_id]  # the pieces of running text
        firsts = [i + 1 for i, (w, prev) in enumerate(zip(running.word_ids, [None] + running.word_ids))
                  if w != prev]
        assert [ex.label[i] for i in firsts] == tags[0]
        assert all(y == IGNORE_INDEX for i, y in enumerate(ex.label) if i not in firsts)
    pieces = bpe.convert_ids_to_tokens(encode_tagged(bpe, sents[:1], tags[:1], 32)[0].ids)
    assert pieces[:4] == ["<s>", "the", "Ġfilm", "Ġwas"]  # not 'f' 'ilm' 'w' 'a' 's'


# ---- fine-tuning runs ---------------------------------------------------------------------------------

def write_csv(path, n=40):
    good, bad = "great good fun love".split(), "bad terrible boring hate".split()
    rows = ["text,label"] + [f"the film was {(good if i % 2 else bad)[i % 4]} and the plot was "
                             f"{(good if i % 2 else bad)[(i + 1) % 4]} .,{'pos' if i % 2 else 'neg'}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_conll(path, n=24):
    tags = {"the": "DT", "film": "NN", "plot": "NN", "was": "VBD", "great": "JJ", "boring": "JJ", ".": "."}
    sents = [["the", ("film", "plot")[i % 2], "was", ("great", "boring")[i % 3 % 2], "."]
             for i in range(n)]
    path.write_text("\n\n".join("\n".join(f"{w}\t{tags[w]}" for w in s) for s in sents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, toks):
    root = tmp_path_factory.mktemp("pre")
    out = {}
    for member in FAMILY:
        torch.manual_seed(0)
        out[member] = save_pretrained(family.build(config(member, toks[member])), toks[member], root / member)
    return out


RUNS = {  # one method or option per member, so that together they cover them all
    "bert": dict(method="full"), "albert": dict(method="frozen", lr=1e-2),
    "electra": dict(method="full", layer_decay=0.8, gradual_unfreeze=True),
    "roberta": dict(method="full", task="token"), "distilbert": dict(method="lora", lora_rank=2, lora_targets=("query", "value")),
}


@pytest.mark.parametrize("member", FAMILY)
def test_tiny_finetune_exports_what_transformers_loads(member, pretrained, tmp_path):
    opts = dict(RUNS[member])
    kind = opts.pop("task", "sequence")
    task = write_csv(tmp_path / "t.csv") if kind == "sequence" else write_conll(tmp_path / "t.conll")
    lines = []
    res = finetune(tmp_path / "run", model=str(pretrained[member]), task=str(task), epochs=1, batch_size=8,
                   max_len=24, seed=0, log=lines.append, **opts)
    assert res["state"] == "finished" and res["kind"] == kind, lines
    assert 0 <= res["accuracy"] <= 1
    net, tok = load_classifier(res["model_dir"])
    cls = classifier_class(net.config, kind)
    assert type(net) is cls and net.config.model_type == member
    assert (res["trainable_params"], res["total_params"]) == trainable_estimate(
        net.config, kind, net.num_labels, FinetuneSpec(**RUNS[member] | {"task": str(task)}))
    theirs = hf_class(cls.architecture).from_pretrained(res["model_dir"], attn_implementation="eager").eval()
    mine, hf = net.state_dict(), theirs.state_dict()
    assert all(torch.equal(v, hf[k]) for k, v in mine.items())  # every weight, bit for bit
    d = logits_pair(net, theirs, net.config)
    MEASURED[f"{member} {kind} fine-tuned ({opts['method']}) ours->transformers"] = d
    assert d <= TOL
    pre, _ = pretrained_encoder(pretrained[member])
    moved = {k for k, v in family.encoder_of(net).state_dict().items() if not torch.equal(v, pre[k])}
    if opts["method"] == "frozen":
        assert not moved
    elif opts["method"] == "lora":  # merged into the wrapped layers, and only those
        assert moved and all(k.rsplit(".", 2)[-2] in ("q_lin", "v_lin") for k in moved), moved
    else:
        assert any(".layer.0." in k for k in moved)
    again, _ = build_classifier(res["model_dir"], kind, net.id2label, FinetuneSpec(), log=lines.append)
    assert "continuing with the head" in lines[-1]  # a classifier of this kind and labels keeps its head
    assert all(torch.equal(v, mine[k]) for k, v in again.state_dict().items())
    from bertlab.analysis.classify import predict  # the app's "try it"
    if kind == "token":  # on a byte-level BPE tagger
        words = predict(net, tok, "the plot was boring .")["words"]
        assert [w["word"] for w in words] == ["the", "plot", "was", "boring", "."]
    else:
        assert list(predict(net, tok, "the film was great .")["labels"]) == ["neg", "pos"]


def pretrained_encoder(folder):
    """The encoder weights of a pre-training folder, keyed as the classifier's encoder keys them."""
    from bertlab.checkpoint import load_pretrained
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, tok = load_pretrained(folder)
    return family.encoder_of(model).state_dict(), tok


def test_refusals_say_what_to_do(pretrained, toks, tmp_path):
    csv = write_csv(tmp_path / "t.csv")
    with pytest.raises(ValueError, match="ALBERT shares its layer weights"):
        finetune(tmp_path / "a", model=str(pretrained["albert"]), task=str(csv), gradual_unfreeze=True, log=print)
    with pytest.raises(ValueError, match="ALBERT shares its layer weights"):  # the app's estimate says it too
        trainable_estimate(config("albert", toks["albert"]), "sequence", 2, FinetuneSpec(layer_decay=0.8))
    torch.manual_seed(0)
    gen = save_pretrained(family.build(config("electra", toks["electra"]), ["ElectraForMaskedLM"]),
                          toks["electra"], tmp_path / "gen")
    with pytest.raises(ValueError, match="ELECTRA generator.*fine-tune the discriminator"):
        finetune(tmp_path / "g", model=str(gen), task=str(csv), log=print)
    with pytest.raises(ValueError, match="ELECTRA generator"):
        build_classifier(str(gen), "sequence", ["a", "b"], FinetuneSpec(), log=print)
    assert not (tmp_path / "a" / "spec.json").exists() and not (tmp_path / "g" / "spec.json").exists()


def test_zz_report_measured_differences():
    """Prints the measured max |ours - transformers| per member and kind (pytest -s shows it)."""
    for k, v in sorted(MEASURED.items()):
        print(f"{k}: {v:.2e}")
    assert all(v <= TOL for v in MEASURED.values())
