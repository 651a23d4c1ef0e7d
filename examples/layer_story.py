"""The layer story (lesson 9; Tenney et al. 2019, "BERT Rediscovers the Classical NLP Pipeline"): is syntax
decodable low, semantics higher and the fine-tuned task at the top? Linear probes for part of speech, a
word's polarity in its sentence (negation flips it) and sentence sentiment, at every layer of one model,
with each task's center of gravity: the expected layer of its gains over the embeddings.

Run:  python examples/layer_story.py [--model RUN_OR_FOLDER]   (about 50 s on a 2-core CPU)
The same from a terminal:  python -m bertlab probe --story [--model runs/my-finetune]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
from bertlab.checkpoint import load_pretrained  # noqa: E402
from bertlab.train.probing import describe, layer_story  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model", default=None, help="model or run folder (default: the shipped model)")
args = parser.parse_args()
print("three probes (pos, polarity, sentiment) at every layer, each with its control task: about 50 s", flush=True)
torch.set_num_threads(1)  # small probes: a second thread buys little, and fights any other job for the cores

model, tok = load_pretrained(args.model)
s = layer_story(model.eval(), tok, name=args.model or "the shipped model")
tasks = s["tasks"]
print(f"\naccuracy on held-out words / sentences, {s['model']}:")
print(f"{'layer':<8}" + "".join(f"{t['task']:>11}" for t in tasks))
for i in range(s["num_layers"] + 1):
    print(f"{'emb' if i == 0 else i:<8}" + "".join(f"{100 * t['acc'][i]:10.1f}%" for t in tasks))
print("center of gravity: " + ", ".join(f"{t['task']} " + ("-" if t["center"] is None else f"{t['center']:.2f}")
                                        for t in tasks))
pol = next(t for t in tasks if t["task"] == "polarity")["subset"]
print(f"polarity on the {pol['validation']} held-out words {pol['name']}: "
      + " ".join(f"{100 * a:.0f}%" for a in pol["acc"]))
print(f"\n{describe(s)}\n{s['seconds']:.0f} s of probing")
