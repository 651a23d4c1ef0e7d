"""Folders in every BERT key layout load; broken ones fail with the file named; saving is atomic."""
import json

import pytest
import torch

from bertlab import (
    BertConfig,
    BertForPreTraining,
    checkpoint,
    load_model,
    load_pretrained,
    save_pretrained,
)

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
             max_position_embeddings=32)


@pytest.fixture
def folder(tmp_path, vocab_tokenizer):
    torch.manual_seed(0)
    m = BertForPreTraining(BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL))
    return save_pretrained(m, vocab_tokenizer, tmp_path / "model"), m


def hf_save(cls_name, tmp_path, vocab_tokenizer, safe=True):
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=vocab_tokenizer.vocab_size, **SMALL)
    hf = getattr(transformers, cls_name)(cfg).eval()
    hf.save_pretrained(tmp_path, safe_serialization=safe) if not safe else hf.save_pretrained(tmp_path)
    vocab_tokenizer.save_pretrained(tmp_path)
    return hf


def test_masked_lm_layout_loads_and_warns_about_missing_heads(tmp_path, vocab_tokenizer):
    hf = hf_save("BertForMaskedLM", tmp_path, vocab_tokenizer)
    with pytest.warns(UserWarning, match="next-sentence head") as rec:
        m, _ = load_pretrained(tmp_path)
    assert len(rec) == 1 and "pooler" in str(rec[0].message)
    ids = torch.tensor([[2, 10, 11, 4, 3]])
    with torch.no_grad():
        assert (m(ids).mlm_logits - hf(input_ids=ids).logits).abs().max() <= 1e-5


def test_encoder_only_layout_loads(tmp_path, vocab_tokenizer):
    hf = hf_save("BertModel", tmp_path, vocab_tokenizer)
    with pytest.warns(UserWarning, match="masked-LM head"):
        m, _ = load_pretrained(tmp_path)
    ids = torch.tensor([[2, 10, 11, 4, 3]])
    with torch.no_grad():
        a, b = m.bert(ids), hf(input_ids=ids)
    assert (a.last_hidden_state - b.last_hidden_state).abs().max() <= 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5


def test_torch_pickle_weights_and_tf_names(folder, tmp_path):
    path, m = folder
    from safetensors.torch import load_file
    sd = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
          for k, v in load_file(path / "model.safetensors").items()}
    (path / "model.safetensors").unlink()
    torch.save(sd, path / "pytorch_model.bin")
    m2 = load_model(path)
    for k, v in m.state_dict().items():
        assert torch.equal(v, m2.state_dict()[k]), k


def test_pickled_code_is_never_executed(folder):
    path, _ = folder

    class Evil:
        def __reduce__(self):
            return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))
    (path / "model.safetensors").unlink()
    torch.save({"x": Evil()}, path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pytorch_model.bin"):
        load_model(path)
    assert not (path.parent / "PWNED").exists()


@pytest.mark.parametrize("damage, match", [
    (lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:500]),
     "model.safetensors.*truncated or corrupt"),
    (lambda p: (p / "model.safetensors").write_bytes(b"\x00" * 64), "model.safetensors"),
    (lambda p: (p / "model.safetensors").unlink(), "no weights found"),
    (lambda p: (p / "config.json").unlink(), "no config.json"),
    (lambda p: (p / "config.json").write_text("{"), "config.json"),
    (lambda p: (p / "config.json").write_text(json.dumps({**json.loads((p / "config.json").read_text()),
                                                          "hidden_size": 64, "num_attention_heads": 2})),
     "shape"),
    (lambda p: [(p / f).unlink() for f in ("tokenizer.json", "vocab.txt")], "vocab.txt|tokenizer"),
])
def test_damaged_folders_fail_clearly(folder, damage, match):
    path, _ = folder
    damage(path)
    with pytest.raises(ValueError, match=match):
        load_pretrained(path)


def test_hub_id_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="hub"):
        load_pretrained("google/bert_uncased_L-2_H-128_A-2")
    from bertlab.checkpoint import hub_folder  # sized first, as the app asks: the same words
    for kw in ({}, {"max_bytes": 1e9}):
        with pytest.raises(ValueError, match="no model of that name here.*check the name") as e:
            hub_folder("someone/typo-model", **kw)
        assert "HF_HUB" not in str(e.value)  # what to check is the name, not the server's settings
    with pytest.raises(ValueError, match="no such folder"):
        load_pretrained("./not/here")


def test_save_is_atomic(folder, monkeypatch):
    path, m = folder
    before = (path / "model.safetensors").read_bytes()

    def crash(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr("safetensors.torch.save_file", crash)
    with pytest.raises(OSError):
        save_pretrained(m, None, path)
    assert (path / "model.safetensors").read_bytes() == before  # the old model is untouched
    assert [p.name for p in path.parent.iterdir()] == ["model"]
    monkeypatch.undo()
    save_pretrained(m, None, path, dtype=torch.float16)  # overwrite in place
    assert [p.name for p in path.parent.iterdir()] == ["model"]  # no temp or old folders left
    modes = {f.name: f.stat().st_mode & 0o777 for f in path.iterdir()}
    assert len(set(modes.values())) == 1, modes  # the weights as readable as config.json (not 0600)
    m16 = load_model(path)  # fp16 storage comes back as fp32
    assert next(m16.parameters()).dtype == torch.float32


def test_default_model_ships_and_loads():
    assert checkpoint.DEFAULT_MODEL_DIR.is_dir()
    m, tok = load_pretrained()
    assert tok.vocab_size <= m.config.vocab_size
    assert checkpoint.resolve_folder("default") == checkpoint.resolve_folder(None) == checkpoint.DEFAULT_MODEL_DIR
    import transformers  # the shipped folder is a plain Hugging Face BERT: same numbers there
    hf = transformers.BertForPreTraining.from_pretrained(checkpoint.DEFAULT_MODEL_DIR, dtype=torch.float32,
                                                         attn_implementation="eager").eval()
    enc = tok.encode("the acting was [MASK] .", "i would not recommend it .")
    ids, tt = torch.tensor([enc.ids]), torch.tensor([enc.token_type_ids])
    with torch.no_grad():
        ours, theirs = m(ids, tt), hf(input_ids=ids, token_type_ids=tt)
    assert (ours.mlm_logits - theirs.prediction_logits).abs().max() < 1e-4
    assert sum(f.stat().st_size for f in checkpoint.DEFAULT_MODEL_DIR.iterdir()) < 25e6
    assert m.config.hidden_dropout_prob == 0.1  # what fine-tuning it uses


def test_a_shard_index_cannot_point_outside_the_model_folder(tmp_path):
    """A stranger's model folder names its shards; "../other/model.safetensors" would read weights from
    another folder on the server (another visitor's run)."""
    from safetensors.torch import save_file

    from bertlab.checkpoint import read_weights
    other, model = tmp_path / "other", tmp_path / "model"
    other.mkdir()
    model.mkdir()
    save_file({"w": torch.zeros(2)}, other / "model.safetensors")
    for name in ("../other/model.safetensors", str(other / "model.safetensors"), ".."):
        (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": name}}))
        with pytest.raises(ValueError, match="file name in the model's folder"):
            read_weights(model)
    save_file({"w": torch.ones(2)}, model / "part-1.safetensors")  # a plain shard name still loads
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "part-1.safetensors"}}))
    assert read_weights(model)["w"].tolist() == [1.0, 1.0]


def test_a_deeply_nested_config_is_one_clear_error(tmp_path):
    from bertlab.checkpoint import read_weights
    from bertlab.config import read_json_config
    (tmp_path / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json_config(tmp_path / "config.json")
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(ValueError, match="malformed shard index"):
        read_weights(tmp_path)
