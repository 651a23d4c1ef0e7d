"""Lesson 9, probing: what can a linear classifier read off each layer's frozen vectors? For every
layer we train a logistic regression from a word's vector to its part of speech (silver TextBlob
tags), and the same probe on a *control task* (Hewitt & Liang 2019: every word type gets one fixed
random tag), which a probe can only solve by memorising words. Read

    selectivity = accuracy(task) - accuracy(control)

high selectivity means the layer makes the tag easy to read, not just the word. A randomly
initialised model of the same shape is the baseline: what the architecture alone gives.

Run:  python examples/lesson09_probing.py   (about 10 s; no model training, 20 small probes)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.data import probe as probe_data  # noqa: E402
from bertlab.train.probing import probe, random_init  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model
data = probe_data.load("pos", sample=80, seed=0)  # 80 Rotten Tomatoes sentences, one tag per word
trained = probe(model, tok, data)
untrained = probe(random_init(model, seed=0), tok, data)  # same config, BERT's random initial weights

c = trained["counts"]
print(f"part-of-speech probe: {c['sentences']} sentences, {c['train']} training and {c['validation']} held-out "
      f"words, {c['labels']} tags; always the commonest tag: {trained['majority']:.1%}")
print(f"control task: {trained['control']}")
print("\n              ----- shipped model -----     ---- random weights ----")
print("layer         accuracy control selectivity   accuracy control selectivity")
for a, b in zip(trained["layers"], untrained["layers"]):
    print(f"{a['name']:<12} {a['acc']:8.1%} {a['control_acc']:8.1%} {a['selectivity']:+10.1%}   "
          f"{b['acc']:8.1%} {b['control_acc']:8.1%} {b['selectivity']:+10.1%}")
best = trained["layers"][trained["most_selective_layer"]]
print(f"\nmost selective layer of the shipped model: {best['name']} (selectivity {best['selectivity']:+.1%})")
# Notice: even the embeddings score well (a word's identity mostly decides its tag), but the control
# task scores well there too. Through the layers the control accuracy falls (word identity fades)
# while the task accuracy holds: selectivity rises. Random weights give little selectivity anywhere.
# More sentences and the per-tag table: python -m bertlab probe --task pos --compare-random --per-tag
