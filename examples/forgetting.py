"""What fine-tuning forgot (lesson 8): fine-tune the shipped model on 300 sentiment sentences four ways,
then put each run's encoder back under the masked-word head it started with and count the masked words
it still guesses on held-out IMDB text. Only the task is trained, so nothing holds the weights to what
pre-training taught: a large learning rate moves them furthest (catastrophic forgetting).

Run:  python examples/forgetting.py [--out FOLDER]   (about 50 s; four short runs)
The same from a terminal:  python -m bertlab forgetting RUN [RUN ...]   (runs of python -m bertlab finetune)
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
from bertlab.train.evaluate import mlm_left  # noqa: E402
from bertlab.train.finetune import finetune  # noqa: E402
from bertlab.train.specs import FinetuneSpec  # noqa: E402

RUNS = {"frozen": dict(method="frozen"), "lora": dict(method="lora"), "full": dict(method="full"),
        "full, lr x10": dict(method="full", lr=3e-3)}  # full's default is 3e-4
parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--out", default=None, help="folder for the four runs (default: a temporary folder, deleted)")
args = parser.parse_args()
print("four fine-tuning runs, then the masked-word test: about 50 s", flush=True)

with tempfile.TemporaryDirectory() as tmp:
    root = Path(args.out) if args.out else Path(tmp)
    acc, folders = {}, []
    for name, kw in RUNS.items():
        folder = root / name.replace(", lr x10", "-lr3e-3")
        res = finetune(folder, FinetuneSpec(task="sentiment", max_examples=300, val_frac=0.3, epochs=2, batch_size=16,
                                            max_len=32, seed=0, **kw), log=lambda msg: None)
        acc[name] = res["accuracy"]
        folders.append(folder)
    rows = mlm_left(folders)  # 8 held-out batches of 32 sequences, the same masks for all

print(f"\nmasked words the shipped model guesses before fine-tuning: {rows[0]['before']:.1%}")
print("run            lr       sentiment   masked words after   kept")
for (name, a), r in zip(acc.items(), rows):
    print(f"{name:<14} {r['lr']:<8g} {a:8.1%}   {r['after']:16.1%}   {r['left']:6.0%}")
# Notice: the frozen encoder keeps every masked word (only its head trained); at its default rate full
# fine-tuning keeps most; ten times the rate forgets most of what pre-training taught in a few dozen steps.
# LoRA here also adapts the word table, which is the masked-word head's output layer too.
