"""Your own pre-training objective (lesson 7): one function, registered, raced against BERT's.

A loss reads the model and a masked batch and returns (loss, metrics); `@objective(name, label)` makes it
a choice of every pre-training run (bertlab/train/objectives.py says the contract). This script writes one
here, label smoothing on the masked words, and trains the same tiny BERT from the same seed three times for
the same steps: BERT's loss, the shipped `all-tokens` one and yours. All are judged on the same held-out
masked words.

Run:  python examples/custom_objective.py [--steps 150] [--out FOLDER]   (about 55 s)
In the app: the Pre-train tab's *Loss*, and the Race tab's recipe loss-all-tokens (a loss written in
bertlab/train/objectives.py becomes a recipe there too). From a terminal:
      python -m bertlab pretrain --loss all-tokens --preset tiny --steps 300 --out runs/all-tokens
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import torch.nn.functional as F  # noqa: E402

from bertlab.train import objectives, read_metrics  # noqa: E402
from bertlab.train.pretrain import pretrain  # noqa: E402
from bertlab.train.specs import PretrainSpec  # noqa: E402


@objectives.objective("smoothed", "masked words, label smoothing 0.1")
def smoothed(model, batch):
    """Soft targets: each masked word's target keeps 90 % of the probability and spreads 10 % over the
    vocabulary, so the model is never pushed to total certainty (Szegedy et al. 2016)."""
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels=batch["labels"],
                sparse_mlm=True)  # vocabulary logits only where a word was picked: (N, V)
    targets = batch["labels"][batch["labels"] != -100]
    return F.cross_entropy(out.mlm_logits.float(), targets, label_smoothing=0.1), objectives.masked_scores(out, batch)


parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--steps", type=int, default=150, help="optimizer steps per objective (default 150)")
parser.add_argument("--out", default=None, help="folder for the three runs (default: a temporary folder, deleted)")
args = parser.parse_args()
print(f"three tiny pre-training runs of {args.steps} steps: about 55 s", flush=True)

LOSSES = ("mlm", "all-tokens", "smoothed")
with tempfile.TemporaryDirectory() as tmp:
    root = Path(args.out) if args.out else Path(tmp)
    rows = {}
    for name in LOSSES:
        spec = PretrainSpec(preset="tiny", objective="mlm", loss=name, corpus="imdb", max_docs=2000, max_len=32,
                            batch_size=32, steps=args.steps, lr=2e-3, dropout=0.0, eval_every=args.steps,
                            eval_early=0, save_every=args.steps, eval_batches=8, seed=0)
        st = pretrain(root / name, spec, log=lambda *_: None)
        ev = [r for r in read_metrics(root / name)[0] if r.get("split") == "eval"][-1]
        rows[name] = ev
        rows[name]["seconds"] = st.get("elapsed", 0)
        print(f"{name:<11} {objectives.REGISTRY[name].label:<46} held-out masked words {ev['mlm_acc']:6.1%} "
              f"(loss {ev['mlm_loss']:.2f}; {rows[name]['seconds']:.0f} s)", flush=True)

best = max(rows, key=lambda n: rows[n]["mlm_acc"])
print(f"\nbest on the held-out masked words after {args.steps} steps: {best} ({rows[best]['mlm_acc']:.1%}); "
      f"the most frequent word alone scores {rows['mlm']['unigram_acc']:.1%}")
cost = rows["all-tokens"]["seconds"] / max(rows["mlm"]["seconds"], 1e-9)
print(f"all-tokens took {cost:.1f}x BERT's time for the same steps (a vocabulary projection at every position, "
      f"not only the picked ones); to compare per second, give mlm {cost:.1f}x the steps, or race them in the app "
      f"(the Race tab gives each recipe the same minutes)")
# A few hundred steps of a 2-layer model is a tiny budget: a gap of a point can be the seed's. Try --steps 600,
# or race them in the app for minutes each.
