"""What BERT knows (lesson 3): the shipped model takes a quiz of factual cloze prompts written for bertlab
(bertlab/data/facts.jsonl: "the capital of france is [MASK] .", 40 facts in 8 relations), scored as LAMA
(Petroni et al., 2019) scored BERT: precision@1 and @10 per relation, each answer's rank and probability, and
how many answers its vocabulary cannot even say. It read only movie reviews, and it shows.

Run:  python examples/facts.py   (about 5 s: measured 2.3 s of CPU, 16.5 s wall
      beside other jobs at load 12 on a 2-core EPYC, 2026-11-29)
The same from a terminal:  python -m bertlab facts [--model PATH_OR_HUB_ID] [--relation genre]
In the app: Fill-mask tab, "What BERT knows".
"""
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
from bertlab import load_pretrained  # noqa: E402
from bertlab.analysis import facts  # noqa: E402

print("the shipped model takes a quiz of factual cloze prompts: about 5 s", flush=True)
model, tok = load_pretrained()
res = facts.score(model, tok)
print(facts.table(res))
o, rows = res["overall"], res["rows"]
first, times = Counter(r["guesses"][0] for r in rows).most_common(1)[0]
print(f"\nright at the first guess: {sum(r['rank'] == 1 for r in rows)} of {o['prompts']}; "
      f"within the first ten: {sum(r['rank'] is not None and r['rank'] <= 10 for r in rows)}; "
      f"answers not in its vocabulary: {o['out_of_vocab']}")
print(f"its commonest first guess: {first} ({times} of {o['prompts']} prompts)")
