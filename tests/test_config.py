import json

import pytest

from bertlab.config import PRESETS, BertConfig, preset


@pytest.mark.parametrize("changes, field", [
    ({"hidden_size": 100, "num_attention_heads": 3}, "hidden_size"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"vocab_size": -5}, "vocab_size"),
    ({"vocab_size": 4}, "vocab_size"),
    ({"intermediate_size": 2.5}, "intermediate_size"),
    ({"num_attention_heads": True}, "num_attention_heads"),
    ({"hidden_dropout_prob": 1.0}, "hidden_dropout_prob"),
    ({"layer_norm_eps": 0}, "layer_norm_eps"),
    ({"hidden_act": "swish"}, "hidden_act"),
    ({"pad_token_id": 99, "vocab_size": 50}, "pad_token_id"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"pre_ln": "yes"}, "pre_ln"),
])
def test_impossible_configs_name_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        BertConfig(**changes)


def test_presets_follow_the_miniatures():
    assert set(PRESETS) == {"tiny", "mini", "small", "medium", "base", "large"}
    c = preset("mini", vocab_size=8192)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size) == (4, 256, 4, 1024)
    assert c.vocab_size == 8192 and preset("large").head_dim == 64
    with pytest.raises(ValueError, match="unknown preset"):
        preset("huge")


def test_hf_config_json_round_trip(tmp_path):
    import transformers
    c = preset("tiny", vocab_size=1234, hidden_act="gelu_new")
    c.to_json_file(tmp_path / "config.json")
    d = json.loads((tmp_path / "config.json").read_text())
    assert d["model_type"] == "bert" and d["architectures"] == ["BertForPreTraining"]
    hf = transformers.BertConfig.from_pretrained(tmp_path)
    assert (hf.vocab_size, hf.hidden_size, hf.hidden_act) == (1234, 128, "gelu_new")
    hf.save_pretrained(tmp_path / "hf")
    assert BertConfig.from_json_file(tmp_path / "hf" / "config.json") == c
    pre = c.replace(pre_ln=True)  # pre-LN: megatron-bert in config.json, the field in to_dict()
    assert BertConfig.from_dict(pre.to_hf_dict()) == BertConfig.from_dict(pre.to_dict()) == pre
    assert BertConfig.from_dict(c.to_dict()) == c


def test_bad_config_files(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(ValueError, match="a.json"):
        BertConfig.from_json_file(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.from_json_file(tmp_path / "b.json")
    (tmp_path / "c.json").write_text(json.dumps({"hidden_size": 10, "num_attention_heads": 3}))
    with pytest.raises(ValueError, match="c.json.*hidden_size"):
        BertConfig.from_json_file(tmp_path / "c.json")
