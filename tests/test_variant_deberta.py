"""DeBERTa-v2/v3: our from-scratch model against transformers' (eager attention, fp32), both directions."""
import json

import pytest
import torch

from bertlab import family
from bertlab.checkpoint import read_weights, save_pretrained
from bertlab.variants.deberta import (DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Model,
                                      relative_positions)

TOL = 1e-5
V = 61
REL = dict(relative_attention=True, pos_att_type="p2c|c2p")
CONFIGS = {  # transformers' names; T = 17 tokens, so small spans and buckets clamp and log-bucket
    # v3's layout: no absolute positions or token types, shared keys, normalised table, 256 buckets
    "v3-shared-b256": REL | dict(position_buckets=256, share_att_key=True, norm_rel_ebd="layer_norm",
                                 position_biased_input=False, legacy=False),
    "v3-legacy-head-pad3": REL | dict(position_buckets=256, share_att_key=True, norm_rel_ebd="layer_norm",
                                      position_biased_input=False, pad_token_id=3),
    "unshared-b4-types-pad1": REL | dict(position_buckets=4, max_relative_positions=12, type_vocab_size=2,
                                         pad_token_id=1, hidden_act="gelu_new"),
    "c2p-unshared-b8-log": dict(relative_attention=True, pos_att_type=["c2p"], position_buckets=8,
                                max_relative_positions=32, position_biased_input=False, legacy=False),
    "p2c-shared-span6": dict(relative_attention=True, pos_att_type="p2c", share_att_key=True,
                             max_relative_positions=6, hidden_act="relu"),
    "p2c-unshared-nobuckets": dict(relative_attention=True, pos_att_type=["p2c"], position_biased_input=False,
                                   norm_rel_ebd="layer_norm", legacy=False),
    # off: c2p and p2c still count in the scale (√(3d)), as in transformers
    "no-relative": dict(relative_attention=False, pos_att_type="c2p|p2c", type_vocab_size=2),
    # v2 xlarge's layout: a convolution beside layer 1; plus factorised embeddings (E < H)
    "v2-conv-embedding16": REL | dict(position_buckets=8, max_relative_positions=16, share_att_key=True,
                                      norm_rel_ebd="layer_norm", position_biased_input=False,
                                      conv_kernel_size=3, conv_act="gelu", embedding_size=16),
}
SHAPE = dict(hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=37,
             max_position_embeddings=20, initializer_range=0.3)  # peaky attention: positions matter


def perturb(m, seed):
    """Initialisation zeroes biases and makes LayerNorms identities: noise makes them matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "LayerNorm" in n or n.endswith("bias"):
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return m


def hf_config(**kw):
    import transformers
    return transformers.DebertaV2Config(vocab_size=V, attn_implementation="eager", **SHAPE | kw)


def hf_model(cls_name, **kw):
    import transformers
    torch.manual_seed(0)
    return perturb(getattr(transformers, cls_name)(hf_config(**kw)).eval(), 0)


def batch(pad, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, V, (3, T), generator=g)
    tt = torch.randint(0, 2, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = pad
    return ids, tt, am


def run_both(ours, theirs):
    ids, tt, am = batch(ours.config.pad_token_id)
    tt = tt if ours.config.type_vocab_size else None
    with torch.no_grad():
        a = ours(ids, tt, am, output_attentions=True, output_hidden_states=True)
        b = theirs(input_ids=ids, token_type_ids=tt, attention_mask=am, output_attentions=True,
                   output_hidden_states=True)
    return a, b


def diffs(a, b, logits=True):
    """Max abs differences: (logits, worst hidden state incl. the last, worst attention map)."""
    L = len(a.attentions)
    assert L > 0 and len(a.hidden_states) == len(b.hidden_states) == L + 1 and len(b.attentions) == L
    d_log = (a.mlm_logits - b.logits).abs().max().item() if logits else 0.0
    d_hid = max((x - y).abs().max().item() for x, y in zip(a.hidden_states, b.hidden_states))
    d_hid = max(d_hid, (a.last_hidden_state - b.hidden_states[-1]).abs().max().item())
    d_att = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))
    return d_log, d_hid, d_att


@pytest.mark.parametrize("name", CONFIGS)
def test_transformers_state_dict_loads_into_ours_and_matches(name):
    hf = hf_model("DebertaV2ForMaskedLM", **CONFIGS[name])
    c = DebertaV2Config.from_dict(hf.config.to_dict())
    ours = DebertaV2ForMaskedLM(c).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)  # every key, no more, no fewer
    assert set(ours.state_dict()) == set(hf.state_dict())
    ours.tie_weights()
    words = ours.deberta.embeddings.word_embeddings
    assert words.padding_idx == CONFIGS[name].get("pad_token_id", 0)
    if c.legacy:
        p = ours.cls["predictions"]
        assert p.decoder.weight is words.weight and p.decoder.bias is p.bias
    a, b = run_both(ours, hf)
    assert a.mlm_logits.shape == (3, 17, V) and a.pooler_output is None and a.nsp_logits is None
    assert len(a.hidden_states) == SHAPE["num_hidden_layers"] + 1
    assert max(diffs(a, b)) <= TOL, diffs(a, b)


@pytest.mark.parametrize("name", CONFIGS)
def test_our_state_dict_loads_into_transformers_and_matches(name):
    import transformers
    c = DebertaV2Config(vocab_size=V, **SHAPE | CONFIGS[name])
    torch.manual_seed(5)
    ours = perturb(DebertaV2ForMaskedLM(c), 5).eval()
    hf = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config.from_dict(
        c.to_hf_dict(), attn_implementation="eager")).eval()
    hf.load_state_dict(ours.state_dict(), strict=True)
    if c.legacy:  # tied as transformers ties them
        assert hf.cls.predictions.decoder.bias.data_ptr() == hf.cls.predictions.bias.data_ptr()
    a, b = run_both(ours, hf)
    assert max(diffs(a, b)) <= TOL, diffs(a, b)


def test_bare_encoders_match_both_ways():
    import transformers
    kw = CONFIGS["unshared-b4-types-pad1"]
    hf = hf_model("DebertaV2Model", **kw)
    ours = DebertaV2Model(DebertaV2Config(vocab_size=V, **SHAPE | kw)).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    a, b = run_both(ours, hf)
    assert (a.last_hidden_state - b.last_hidden_state).abs().max() <= TOL
    assert max(diffs(a, b, logits=False)) <= TOL
    back = transformers.DebertaV2Model(hf.config).eval()
    back.load_state_dict(ours.state_dict(), strict=True)
    assert max(diffs(*run_both(ours, back), logits=False)) <= TOL


def test_save_pretrained_folder_opens_in_transformers_and_back(tmp_path):
    """bertlab's own writer (save_pretrained) and reader (read_weights) with transformers' folders."""
    import transformers
    c = DebertaV2Config(vocab_size=V, **SHAPE | CONFIGS["v3-legacy-head-pad3"])
    torch.manual_seed(2)
    ours = perturb(DebertaV2ForMaskedLM(c), 2).eval()
    save_pretrained(ours, None, tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["architectures"] == ["DebertaV2ForMaskedLM"] and cfg["model_type"] == "deberta-v2"
    assert cfg["pos_att_type"] == ["p2c", "c2p"] and cfg["position_buckets"] == 256 and cfg["legacy"] is True
    assert "cls.predictions.decoder.weight" not in read_weights(tmp_path / "m")  # tied aliases: stored once
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    assert type(hf).__name__ == "DebertaV2ForMaskedLM"
    assert max(diffs(*run_both(ours, hf))) <= TOL
    hf.save_pretrained(tmp_path / "hf")  # and back: transformers' folder, our reader
    again = DebertaV2ForMaskedLM(DebertaV2Config.from_json_file(tmp_path / "hf" / "config.json")).eval()
    missing, unexpected = again.load_state_dict(read_weights(tmp_path / "hf"), strict=False)
    assert not unexpected and set(missing) <= set(DebertaV2ForMaskedLM.tied_keys)
    again.tie_weights()
    assert again.config == c
    assert max(diffs(*run_both(again, hf))) <= TOL


@pytest.mark.skipif("deberta-v2" not in family.MEMBERS, reason="needs a 'deberta-v2' record in bertlab.family")
def test_load_model_reads_a_transformers_folder(tmp_path):
    from bertlab.checkpoint import load_model
    hf = hf_model("DebertaV2ForMaskedLM", **CONFIGS["v3-shared-b256"])
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert type(ours) is DebertaV2ForMaskedLM and not ours.training
    assert max(diffs(*run_both(ours, hf))) <= TOL


@pytest.mark.parametrize("buckets,max_pos", [(256, 512), (8, 32), (4, 12), (6, 100), (-1, 20)])
def test_relative_positions_equal_transformers(buckets, max_pos):
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position
    x = torch.zeros(1, 600, 1)
    theirs = build_relative_position(x, x, bucket_size=buckets, max_position=max_pos)[0]
    assert torch.equal(relative_positions(600, buckets, max_pos), theirs)


def test_loss_sparse_and_transformers():
    import transformers
    c = DebertaV2Config(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        **SHAPE | CONFIGS["v3-shared-b256"])
    torch.manual_seed(0)
    m = DebertaV2ForMaskedLM(c)
    ids, _, am = batch(0)
    labels = torch.full_like(ids, -100)
    labels[0, [2, 5, 9]] = ids[0, [2, 5, 9]]
    labels[1, 3] = 7
    dense = m(ids, None, am, labels=labels)
    sparse = m(ids, None, am, labels=labels, sparse_mlm=True)
    assert sparse.mlm_logits.shape == (4, V) and torch.equal(sparse.loss, sparse.mlm_loss)
    assert abs(sparse.loss.item() - dense.loss.item()) <= 1e-6
    hf = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config.from_dict(c.to_hf_dict())).eval()
    hf.load_state_dict(m.state_dict())
    with torch.no_grad():
        assert abs(hf(input_ids=ids, attention_mask=am, labels=labels).loss.item() - dense.loss.item()) <= TOL


def test_surface_causal_padding_and_refusals():
    torch.manual_seed(0)
    m = DebertaV2ForMaskedLM(DebertaV2Config(vocab_size=V, **SHAPE | CONFIGS["v3-shared-b256"])).eval()
    ln, q, k, v = m.deberta.attention_projections(2)
    att = m.deberta.encoder.layer[1].attention.self
    assert isinstance(ln, torch.nn.Identity) and (q, k, v) == (att.query_proj, att.key_proj, att.value_proj)
    ids, tt, am = batch(0)
    with torch.no_grad():
        full = m(ids, tt, am, output_attentions=True, output_hidden_states=True)
        assert torch.equal(full.mlm_logits, m(ids, None, am).mlm_logits)  # no token types: ignored
        assert full.attentions[0].shape == (3, 3, 17, 17)
        assert full.attentions[0][2, :, :4, 4:].abs().max() == 0  # padding gets no attention
        assert full.hidden_states[0][2, 4:].abs().max() == 0  # embeddings are zeroed at pads
        assert torch.equal(m.token_logits(full.last_hidden_state), full.mlm_logits)
        long = m(torch.randint(5, V, (1, 40)))  # relative positions only: longer than the position table
        assert long.mlm_logits.shape == (1, 40, V)
        changed = ids.clone()
        changed[:, 9:] = 5
        a = m(ids, causal=True, output_attentions=True)
        assert (a.last_hidden_state[:, :9] - m(changed, causal=True).last_hidden_state[:, :9]).abs().max() <= TOL
        assert a.attentions[0].triu(1).abs().max() == 0
    with pytest.raises(ValueError, match="next-sentence"):
        m(ids, next_sentence_label=torch.tensor([0, 1, 0]))
    m.deberta.virtual = lambda *a: None
    with pytest.raises(ValueError, match="prefix tuning"):
        m(ids)
    absolute = DebertaV2ForMaskedLM(DebertaV2Config(vocab_size=V, **SHAPE))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        absolute(torch.zeros(1, 21, dtype=torch.long))
    for bad, match in [(dict(conv_kernel_size=2), "odd"), (dict(pos_att_type="c2c"), "pos_att_type"),
                       (dict(norm_rel_ebd="rms"), "norm_rel_ebd"), (dict(legacy=False, embedding_size=8), "legacy")]:
        with pytest.raises(ValueError, match=match):
            DebertaV2Config(vocab_size=V, **SHAPE | bad)


def test_config_round_trips_through_transformers(tmp_path):
    import transformers
    c = DebertaV2Config(vocab_size=V, **SHAPE | CONFIGS["v2-conv-embedding16"] | dict(
        pad_token_id=2, initializer_range=0.03, hidden_dropout_prob=0.05))
    c.to_json_file(tmp_path / "config.json", "DebertaV2ForMaskedLM")
    hf = transformers.DebertaV2Config.from_pretrained(tmp_path)
    assert (hf.position_buckets, hf.max_relative_positions, hf.share_att_key) == (8, 16, True)
    assert (hf.conv_kernel_size, hf.conv_act, hf.embedding_size, hf.type_vocab_size) == (3, "gelu", 16, 0)
    assert hf.pos_att_type == ["p2c", "c2p"] and hf.layer_norm_eps == 1e-7 and hf.pad_token_id == 2
    assert DebertaV2Config.from_dict(hf.to_dict()) == c


# ---- the record: config, load_model, pre-training, fine-tuning ---------------------------------------

def test_the_record_builds_v3_configs_and_reads_config_json():
    from bertlab.config import BertConfig, preset, preset_names
    assert preset_names("deberta-v2") == ["tiny", "mini", "xsmall", "small", "base", "large"]
    base = preset("base", "deberta-v2")
    assert type(base) is DebertaV2Config and base.to_hf_dict() | {"architectures": None} == base.to_hf_dict() | dict(
        architectures=None, vocab_size=128100, hidden_size=768, num_hidden_layers=12, intermediate_size=3072,
        type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True, position_buckets=256,
        max_relative_positions=-1, pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm",
        position_biased_input=False)
    assert [(c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size)
            for c in (preset(n, "deberta-v2") for n in ("xsmall", "small", "large"))] == [
        (12, 384, 6, 1536), (6, 768, 12, 3072), (24, 1024, 16, 4096)]
    back = BertConfig.from_dict(base.to_hf_dict("DebertaV2ForMaskedLM"))  # the member's own class, by its record
    assert type(back) is DebertaV2Config and back == base
    assert type(BertConfig.from_dict({"model_type": "bert"})) is BertConfig
    assert family.ARCHS == {"deberta": "deberta-v2"} and "deberta-v2" in family.PRETRAINED_HERE


def test_our_load_model_and_save_pretrained_both_ways_from_a_preset(tmp_path):
    import transformers
    from bertlab.checkpoint import load_model
    from bertlab.config import preset
    torch.manual_seed(3)
    ours = perturb(family.build(preset("tiny", "deberta-v2", vocab_size=V, num_hidden_layers=1)), 3).eval()
    assert type(ours) is DebertaV2ForMaskedLM
    save_pretrained(ours, None, tmp_path / "m")
    again = load_model(tmp_path / "m")
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    assert type(again) is DebertaV2ForMaskedLM and type(hf).__name__ == "DebertaV2ForMaskedLM"
    assert max(diffs(*run_both(again, hf))) <= TOL
    ids, _, am = batch(0)
    with torch.no_grad():
        assert torch.equal(ours(ids, None, am).mlm_logits, again(ids, None, am).mlm_logits)


@pytest.mark.parametrize("kind", ["SequenceClassification", "TokenClassification", "QuestionAnswering"])
def test_heads_from_the_record_equal_transformers_both_ways(kind, tmp_path):
    """DebertaV2For* are generated from the record (heads.py); the sequence head is the ContextPooler's."""
    import transformers
    from bertlab.checkpoint import read_weights, to_pretraining_keys
    from bertlab.config import BertConfig
    from bertlab.heads import HEADS, read_head_config, save_classifier
    hf = hf_model(f"DebertaV2For{kind}", **CONFIGS["v3-shared-b256"], num_labels=2)
    hf.save_pretrained(tmp_path / "hf")
    arch, labels, raw = read_head_config(tmp_path / "hf")
    ours = HEADS[arch](BertConfig.from_dict(raw), 2, labels).eval()
    ours.load_state_dict(to_pretraining_keys(read_weights(tmp_path / "hf"), "deberta"), strict=True)
    save_classifier(ours, None, tmp_path / "ours")
    back = getattr(transformers, f"DebertaV2For{kind}").from_pretrained(tmp_path / "ours",
                                                                        attn_implementation="eager").eval()
    ids, _, am = batch(0)

    def logits(m, **kw):
        o = m(input_ids=ids, attention_mask=am, **kw)
        return torch.stack([o.start_logits, o.end_logits], -1) if kind == "QuestionAnswering" else o.logits
    with torch.no_grad():
        a = logits(ours)
        assert (a - logits(hf)).abs().max() <= TOL and (a - logits(back)).abs().max() <= TOL


COMMON = ["--preset", "tiny", "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "300",
          "--max-len", "32", "--batch-size", "8", "--eval-batches", "1", "--steps", "4", "--log-every", "2",
          "--eval-every", "4", "--save-every", "4", "--eval-early", "0"]


@pytest.fixture(scope="module")
def deberta_run(small_corpus, tmp_path_factory):
    """`python -m bertlab pretrain --arch deberta ...` for 4 steps, through cli.main in this process."""
    from bertlab.app.cli import main
    run = tmp_path_factory.mktemp("deberta") / "run"
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["pretrain", "--arch", "deberta", "--corpus", str(small_corpus), *COMMON, "--out", str(run)]) == 0
    finally:
        torch.set_num_threads(n)
    return run


def test_cli_pretrains_deberta_and_transformers_loads_its_model(deberta_run, capsys):
    import transformers
    from bertlab import load_pretrained
    from bertlab.train.specs import PretrainSpec
    spec = json.loads((deberta_run / "spec.json").read_text())
    assert (spec["arch"], spec["objective"]) == ("deberta-v2", "mlm")
    ours, tok = load_pretrained(deberta_run)
    theirs = transformers.DebertaV2ForMaskedLM.from_pretrained(deberta_run / "model",
                                                                attn_implementation="eager").eval()
    assert type(ours) is DebertaV2ForMaskedLM and theirs.config.vocab_size == tok.vocab_size
    assert theirs.config.position_buckets == 256 and theirs.config.share_att_key
    enc = tok.encode_batch(["the film was great and i would really recommend it .", "the soup was cold ."])
    with torch.no_grad():
        d = ours(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]).mlm_logits - theirs(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
    assert d[enc["attention_mask"].bool()].abs().max() <= TOL
    for kw, match in [(dict(arch="deberta", objective="nsp"), "objective must be mlm for deberta-v2"),
                      (dict(arch="deberta", embedding_size=64), "albert and electra option")]:
        with pytest.raises(ValueError, match=match):
            PretrainSpec(**kw)


@pytest.mark.parametrize("method", ["full", "lora", "ia3", "adapter"])
def test_finetune_deberta_with_each_method(method, deberta_run, tmp_path):
    import transformers
    from bertlab.heads import classifier_class, load_classifier
    from bertlab.train.finetune import finetune
    from test_finetune_family import write_csv
    lines = []
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = finetune(tmp_path / "run", model=str(deberta_run), task=str(write_csv(tmp_path / "t.csv")), epochs=1,
                       batch_size=8, max_len=24, seed=0, method=method, log=lines.append)
    finally:
        torch.set_num_threads(n)
    assert res["state"] == "finished", lines
    net, _ = load_classifier(res["model_dir"])
    assert type(net) is classifier_class(net.config, "sequence") and type(net).__name__ == \
        "DebertaV2ForSequenceClassification"
    if method == "adapter":  # a bertlab folder: no transformers class holds adapters
        return
    theirs = transformers.DebertaV2ForSequenceClassification.from_pretrained(
        res["model_dir"], attn_implementation="eager").eval()
    ids, _, am = batch(0)
    with torch.no_grad():
        assert (net(ids, None, am).logits - theirs(input_ids=ids, attention_mask=am).logits).abs().max() <= TOL


def test_prompt_and_prefix_tuning_refuse_deberta_in_one_sentence():
    from bertlab.config import preset
    from bertlab.heads import classifier_class
    from bertlab.methods.virtual import add_prefix, add_prompt
    c = preset("tiny", "deberta-v2", vocab_size=V, num_hidden_layers=1)
    for add in (add_prompt, add_prefix):
        with pytest.raises(ValueError, match="prompt and prefix tuning do not work on DeBERTa"):
            add(classifier_class(c, "sequence")(c, 2), 3)


@pytest.mark.parametrize("T, buckets, max_pos, S", [(32, 256, 512, 256), (600, 256, 512, 256), (17, 8, 32, 8),
                                                   (20, -1, 6, 6), (1, 256, 512, 256)])
def test_the_rows_a_text_reaches_are_all_it_gathers(T, buckets, max_pos, S):
    """Our layers project and score only the table rows T tokens reach (transformers does all 2S): every
    row the c2p and p2c gathers ask for lies in the window, and the window's ends are asked for."""
    from bertlab.variants.deberta import relative_positions, relative_window
    lo, hi = relative_window(T, buckets, max_pos, S)
    delta = relative_positions(T, buckets, max_pos)
    rows = torch.cat([(delta + S).clamp(0, 2 * S - 1).flatten(), (S - delta).clamp(0, 2 * S - 1).flatten()])
    assert int(rows.min()) == lo and int(rows.max()) == hi - 1
    assert (32, 256) != (T, buckets) or hi - lo == 63  # v3 at 32 tokens: 63 of 512 rows
