"""Lesson 4, next sentence and sentence order: BERT's second pre-training task. The input is
[CLS] A [SEP] B [SEP]; a small head on [CLS] (through the pooler) says whether B followed A in the
text or was drawn from another document:

    P(IsNext | A, B) = softmax(W · tanh(W_p · h_[CLS] + b_p) + b)_0

A random B usually changes topic, so NSP can be solved by spotting the topic change. ALBERT's
sentence-order task (SOP) keeps the topic and swaps A and B instead. We rank candidate B's, measure
NSP on held-out pairs, and test whether this NSP head notices a swapped order.

Run:  python examples/lesson04_next_sentence.py   (about 7 s; the first run reads the IMDB reviews once)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
import bertlab.fast  # noqa: E402
from bertlab.analysis.predict import nsp_accuracy, nsp_scores  # noqa: E402
from bertlab.data.nsp_pairs import SOURCE, heldout_pairs  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model (pre-trained with NSP)
bertlab.fast.optimize(model)  # the CPU inference path the app uses: same numbers, faster

# 1. Rank candidate second sentences for one first sentence.
first = "the acting in this movie was wonderful ."
candidates = ["the lead actress deserves an award for her role .",
              "the stock market fell sharply on monday .",
              "preheat the oven and butter the baking dish ."]
scores = nsp_scores(model, tok, first, candidates)
print(f"A: {first}")
for rank, (p, b) in enumerate(sorted(zip(scores, candidates), reverse=True), 1):
    print(f"  {rank}. P(IsNext) {p:.2f}  B: {b}")

# 2. How often is the head right on 200 held-out pairs (half true next sentences, half random)?
pairs = heldout_pairs()
acc = nsp_accuracy(model, tok, pairs)
print(f"\nheld-out NSP accuracy: {acc['accuracy']:.1%} on {acc['pairs']} pairs ({SOURCE})")
print(f"  says 'next' for {acc['next_said_next']:.0%} of true next sentences and {acc['random_said_next']:.0%} "
      "of random ones (chance: 50 %)")

# 3. Sentence order: the true pairs again, once in order (A, B) and once swapped (B, A). A head that
# understood order would score the swapped pairs much lower; one that checks the topic would not.
true_pairs = [(a, b) for a, b, is_next in pairs if is_next][:50]
in_order = nsp_accuracy(model, tok, [(a, b, 1) for a, b in true_pairs])["next_said_next"]
swapped = nsp_accuracy(model, tok, [(b, a, 1) for a, b in true_pairs])["next_said_next"]
print(f"\nsentence order on {len(true_pairs)} true pairs: 'next' for {in_order:.0%} in order, "
      f"{swapped:.0%} swapped")
print("  notice: a head that checked the order would call few swapped pairs 'next'; this one still calls\n"
      "  most of them 'next': NSP learned mostly topic. ALBERT's sentence-order task (SOP; python -m bertlab\n"
      "  pretrain --arch albert) trains on exactly such swapped pairs, so topic alone cannot solve it.")
