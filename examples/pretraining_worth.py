"""What pre-training is worth (lesson 8): fine-tune the shipped model and the same model from random
weights on 50, 200 and 400 labelled sentences (the same 300 held out), and print the learning curves by
labelled examples. The gap is what the unlabelled text taught; it is widest when labels are few.

Run:  python examples/pretraining_worth.py [--out FOLDER]   (about 60 s; six runs)
The same from a terminal, one point at a time:
      python -m bertlab finetune --task sentiment --init random --train-examples 200 --max-examples 900
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
from bertlab.train.finetune import finetune  # noqa: E402
from bertlab.train.specs import FinetuneSpec  # noqa: E402

SIZES = (50, 200, 400)
parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--out", default=None, help="folder for the six runs (default: a temporary folder, deleted)")
args = parser.parse_args()
print(f"six fine-tuning runs ({len(SIZES)} sizes x 2 starts): about 60 s", flush=True)

acc = {}
with tempfile.TemporaryDirectory() as tmp:
    root = Path(args.out) if args.out else Path(tmp)
    for init in ("pretrained", "random"):
        for n in SIZES:
            # 900 sentences, a third held out (300, the same for every run); train on n of the other 600.
            spec = FinetuneSpec(task="sentiment", method="full", init=init, max_examples=900, val_frac=1 / 3,
                                train_examples=n, epochs=3, batch_size=16, max_len=32, seed=0)
            res = finetune(root / f"{init}-{n}", spec, log=lambda msg: None)
            acc[init, n] = res["accuracy"]
            print(f"{init:<10} {res['train_examples']:>4} labelled  {res['accuracy']:6.1%}  "
                  f"(held out: {res['val_examples']}, {res['seconds']:.0f} s)", flush=True)

print("\nlabelled   pre-trained   random   gap")
for n in SIZES:
    print(f"{n:>8}   {acc['pretrained', n]:10.1%}   {acc['random', n]:6.1%}   {acc['pretrained', n] - acc['random', n]:+6.1%}")
# With 300 held-out sentences one standard error is about 3 points. The random model of this shape has
# only the labelled sentences to learn words from; the pre-trained one read the IMDB reviews first
# (bench/FINETUNE.md: up to all 7,677 training sentences).
