"""`python -m bertlab classify`: any fine-tuned folder, full or adapter, of every head says what it
predicts (probabilities and logits, a value, per-label probabilities, tags, an answer span); transformers
reads the full folder's logits the same; a mistake is one line on stderr and exit code 2."""
import json
import random
import shutil
import subprocess
import sys

import pytest
import torch

from bertlab import BertConfig, BertForPreTraining, save_pretrained
from bertlab.analysis import classify
from bertlab.app.cli import main
from bertlab.train.finetune import finetune
from bertlab.train.specs import FinetuneSpec

GOOD, BAD = "great good fun love".split(), "bad terrible boring hate".split()
NOUNS = "film movie plot story acting scene".split()


def _rows(n=48, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        good = i % 2 == 0
        w, a = rng.sample(GOOD if good else BAD, 2), rng.sample(NOUNS, 2)
        yield i, good, f"the {a[0]} was {w[0]} and the {a[1]} was {w[1]} ."


def write_tasks(d):
    """One tiny file per head: single label, sentence pairs, a number, several labels, tags, SQuAD."""
    rows = list(_rows())
    (d / "single.csv").write_text("text,label\n" + "".join(f"{t},{'pos' if g else 'neg'}\n" for _, g, t in rows))
    (d / "pair.csv").write_text("text,second,label\n" + "".join(
        f"{t},it was {'fun' if (i // 2) % 2 else 'bad'} .,{'same' if g == bool((i // 2) % 2) else 'other'}\n"
        for i, g, t in rows))
    (d / "score.csv").write_text("text,label\n" + "".join(f"{t},{(4.5 if g else 1.0) + i % 5 / 10}\n"
                                                          for i, g, t in rows))
    (d / "multi.csv").write_text("text,label\n" + "".join(
        f"{t},{('pos|' if g else 'neg|') + ('long' if i % 3 else 'short')}\n" for i, g, t in rows))
    (d / "tags.conll").write_text("\n\n".join("\n".join(f"{w}\t{'ADJ' if w in GOOD + BAD else 'X'}"
                                                        for w in t.split()) for _, _, t in rows) + "\n")
    paras = [{"context": f"the {n} was {w} . i would watch it again .",
              "qas": [{"id": f"q{k}", "question": f"how was the {n} ?",
                       "answers": [{"text": w, "answer_start": len(f"the {n} was ")}]}]}
             for k, (n, w) in enumerate((n, w) for n in NOUNS for w in GOOD + BAD)]
    (d / "squad.json").write_text(json.dumps({"data": [{"title": "films", "paragraphs": paras}]}))


@pytest.fixture(scope="module")
def folders(tmp_path_factory, vocab_tokenizer):
    """run name -> its saved model folder, each fine-tuned a few steps on its task."""
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("classify")
    cfg = BertConfig(vocab_size=vocab_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    base = save_pretrained(BertForPreTraining(cfg), vocab_tokenizer, d / "base")
    write_tasks(d)
    jobs = {"full": dict(task="single.csv"), "lora": dict(task="single.csv", method="lora"),
            "pair": dict(task="pair.csv", pair_column="second"), "score": dict(task="score.csv", problem="regression"),
            "multi": dict(task="multi.csv", problem="multi"), "tags": dict(task="tags.conll"),
            "qa": dict(task="squad.json", max_len=48, method="lora")}
    out = {"base": base}
    for name, kw in jobs.items():
        kw = {"max_len": 24, **kw, "task": str(d / kw["task"])}
        res = finetune(d / name, FinetuneSpec(model=str(base), epochs=1, batch_size=8, **kw), log=lambda m: None)
        assert res["state"] == "finished", (name, res)
        out[name] = res["model_dir"]
        if res.get("adapter_dir"):  # LoRA: the merged model in model_dir, peft's adapter folder beside it
            out[f"{name}-adapter"] = res["adapter_dir"]
    return out


def run(capsys, *args):
    code = main(["classify", *map(str, args)])
    o = capsys.readouterr()
    return code, o.out, o.err


def as_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_one_label_probabilities_and_logits_match_transformers(folders, capsys):
    import transformers
    res = as_json(capsys, "the film was great and fun .", "--model", folders["full"])
    assert res["problem"] == "single" and res["kind"] == "sequence" and set(res["labels"]) == {"neg", "pos"}
    logits = torch.tensor([res["logits"][k] for k in ("neg", "pos")])
    assert torch.allclose(logits.softmax(-1), torch.tensor([res["labels"][k] for k in ("neg", "pos")]), atol=1e-6)
    assert res["label"] == max(res["labels"], key=res["labels"].get)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(folders["full"]).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folders["full"])
    with torch.no_grad():
        theirs = hf(**tok("the film was great and fun .", return_tensors="pt")).logits[0]
    assert torch.allclose(logits, theirs, atol=1e-5), (logits, theirs)
    code, out, _ = run(capsys, "the film was great and fun .", "--model", folders["full"])
    assert code == 0 and "logit" in out and ("pos" in out and "neg" in out)


def test_an_adapter_folder_and_every_head(folders, capsys):
    lora = as_json(capsys, "the plot was boring .", "--model", folders["lora-adapter"])
    assert set(lora["labels"]) == {"neg", "pos"} and abs(sum(lora["labels"].values()) - 1) < 1e-5
    merged = as_json(capsys, "the plot was boring .", "--model", folders["lora"])
    assert all(abs(lora["logits"][k] - merged["logits"][k]) < 1e-5 for k in ("neg", "pos"))  # the adapter = merged
    pair = as_json(capsys, "the film was great .", "--pair", "it was fun .", "--model", folders["pair"])
    alone = as_json(capsys, "the film was great .", "--model", folders["pair"])
    assert pair["pair"] and set(pair["labels"]) == {"same", "other"} and pair["logits"] != alone["logits"]
    score = as_json(capsys, "the film was great .", "--model", folders["score"])
    assert score["problem"] == "regression" and isinstance(score["value"], float) and "labels" not in score
    multi = as_json(capsys, "the film was great .", "--model", folders["multi"])
    assert multi["problem"] == "multi" and set(multi["labels"]) == {"pos", "neg", "long", "short"}
    assert all(0 < p < 1 for p in multi["labels"].values()) and set(multi["predicted"]) <= set(multi["labels"])
    tags = as_json(capsys, "the plot was great .", "--model", folders["tags"])
    assert [w["word"] for w in tags["words"]] == "the plot was great .".split()
    assert {w["label"] for w in tags["words"]} <= {"ADJ", "X"}
    passage = "the acting was terrible . i would watch it again ."
    qa = as_json(capsys, passage, "--question", "how was the acting ?", "--model", folders["qa"])
    assert qa["kind"] == "qa" and passage[qa["start"]:qa["end"]] == qa["answer"] and qa["answer"]
    assert 0 < qa["score"] <= 1 and qa["start_token"] <= qa["end_token"]
    code, out, _ = run(capsys, passage, "--question", "how was the acting ?", "--model", folders["qa"])
    assert code == 0 and out.startswith("answer: ")


def test_the_ui_and_the_cli_share_one_prediction(folders):
    model, tok = classify.load(folders["full"])
    a = classify.predict(model, tok, "a boring film")
    b = classify.predict(model, tok, "a boring film")
    assert a == b and a["truncated"] is False
    long = classify.predict(model, tok, "great " * 200)
    assert long["truncated"] is True


@pytest.mark.parametrize("args, words", [
    (["good film", "--model", "{tmp}/nothing"], "no such folder"),
    (["good film", "--model", "{base}"], "not a fine-tuned"),
    (["", "--model", "{full}"], "empty"),
    (["   ", "--model", "{full}"], "empty"),
    (["x" * 200_001, "--model", "{full}"], "at most 200,000"),
    (["good film", "--question", "why?", "--model", "{full}"], "does not answer questions"),
    (["good film", "--model", "{qa}"], "give a question"),
    (["good film", "--pair", "fine", "--model", "{tags}"], "leave the second text out"),
])
def test_mistakes_are_one_line_and_exit_code_2(folders, capsys, tmp_path, args, words):
    args = [a.format(tmp=tmp_path, base=folders["base"], full=folders["full"], qa=folders["qa"], tags=folders["tags"])
            for a in args]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and words in err, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("drop", [".lora_embedding_B", "layer.0.attention.self.query.lora_B.weight"])
def test_an_adapter_file_missing_half_a_lora_pair_is_one_line(folders, capsys, tmp_path, drop):
    from safetensors.torch import load_file, save_file
    bad = tmp_path / "adapter"
    shutil.copytree(folders["lora-adapter"], bad)
    tensors = load_file(bad / "adapter_model.safetensors")
    assert any(k.endswith(drop) for k in tensors)
    save_file({k: v for k, v in tensors.items() if not k.endswith(drop)}, bad / "adapter_model.safetensors")
    code, out, err = run(capsys, "good film", "--model", str(bad))
    assert code == 2 and out == "" and "incomplete" in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.slow
def test_a_real_process_says_it_in_one_line(folders, tmp_path):
    r = subprocess.run([sys.executable, "-m", "bertlab", "classify", "--model", str(tmp_path / "gone"), "good film",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run([sys.executable, "-m", "bertlab", "classify", "--model", folders["full"], "good film",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and set(json.loads(r.stdout)["labels"]) == {"neg", "pos"}, r.stderr
