"""Lesson 2, masking: how BERT makes its own exercises. Pre-training selects 15 % of the tokens; of
those, 80 % become [MASK], 10 % a random token and 10 % stay as they are; the loss is the
cross-entropy of the original token at every selected position, whatever happened to it:

    L_MLM = -(1/|S|) * sum_{i in S} log p(x_i | corrupted sentence)

This script draws masks with pre-training's own function, scores one draw through the shipped
model, counts what 2,000 draws did, compares the loss of the three rules, and checks the loss's
gradient at the logits, (p - onehot)/M at the M selected positions and 0 elsewhere, against autograd.

Run:  python examples/lesson02_masking.py   (about 5 s of CPU; no training)
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis.draw_score import score_draw, score_positions  # noqa: E402
from bertlab.analysis.mlm_gradient import mlm_gradient, top_entries  # noqa: E402
from bertlab.data.masking_lab import RULE_NAMES, preview, sample_stats  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model
text = "the special effects were amazing , but the story made no sense at all and the ending was awful ."
enc = tok.encode(text)

# 1. One draw (seed 3): what the model sees at each position. Only the selected ones have a label.
draw = preview(tok, enc.ids, rate=0.15, seed=3)
print(f"text: {text}\n\none draw (seed 3): {sum(r > 0 for r in draw['rule'])} of {draw['eligible']} tokens selected")
for piece, rule, seen in zip(enc.tokens, draw["rule"], draw["input_ids"]):
    if rule:
        print(f"  {piece:<10} -> {tok.id_to_token(seen):<10} ({RULE_NAMES[rule]})")

# 2. Score that draw: one forward pass of the corrupted sentence; at every selected position the loss
# -log p(original) that pre-training would add, and the model's top guesses.
scored = score_draw(model, draw["input_ids"], draw["labels"], draw["rule"], enc.token_type_ids, top_k=5)
print("\nscored (loss = -log p(original token)):")
for row in scored["positions"]:
    guesses = ", ".join(f"{tok.id_to_token(i)} {p:.0%}" for i, p in row["top"])
    print(f"  {enc.tokens[row['position']]:<10} {row['rule']:<7} loss {row['loss']:5.2f}  rank {row['rank']:>4}"
          f"  top-5: {guesses}")
print(f"this draw's MLM loss: {scored['summary']['mean_loss']:.3f}")

# 3. Many draws: the shares converge on 15 % selected and 80/10/10 among them.
stats = sample_stats(tok, enc.ids, rate=0.15, n_samples=2000, seed=0)
split = stats["split"]
print(f"\n2000 draws: {stats['selected_share']:.1%} of tokens selected (expected {stats['expected_share']:.1%})")
print(f"observed split: [MASK] {split['[MASK]']:.1%}, random {split['random']:.1%}, kept {split['kept']:.1%}"
      " (BERT: 80 / 10 / 10)")

# 4. Loss by rule over 300 draws. Kept tokens are easy (the answer is in the input); random ones are
# hardest (the input lies). Why keep 10 %? Fine-tuning text has no [MASK]: with 100 % [MASK] the
# model would only ever learn to predict at [MASK] and need not keep a real token's own vector
# useful, the train/fine-tune mismatch the 10 % kept (and 10 % random) reduce.
draws = [preview(tok, enc.ids, rate=0.15, seed=seed) for seed in range(300)]
with torch.no_grad():  # all 300 corrupted copies in one batch: one forward pass
    logits = model(torch.tensor([d["input_ids"] for d in draws])).mlm_logits  # (300, T, V)
losses = {"[MASK]": [], "random": [], "kept": []}
for d, lg in zip(draws, logits):
    for row in score_positions(lg, d["labels"], d["rule"]):
        losses[row["rule"]].append(row["loss"])
print("\nmean loss by rule over 300 draws:")
for rule, xs in losses.items():
    print(f"  {rule:<7} {sum(xs) / len(xs):5.2f}  ({len(xs)} positions)")

# 5. The 100 % [MASK] ablation: the same positions are selected (same seed), all become [MASK].
d = preview(tok, enc.ids, rate=0.15, seed=3, mask_frac=1.0, random_frac=0.0)
print("\n100 % [MASK], seed 3:", " ".join(tok.id_to_token(i) for i in d["input_ids"][1:-1]))

# 6. The gradient of draw 3's loss at the logits z. With p = softmax(z), d(-log p_y)/dz = p - onehot(y);
# the mean over the M selected positions divides it by M, and unselected positions (label -100) get 0.
g = mlm_gradient(model, draw["input_ids"], draw["labels"], enc.token_type_ids)  # the model's own loss, backwards
print(f"\ngradient at the logits, seed 3: max |formula - autograd| = {g['max_abs_diff']:.1e} "
      f"over {g['T']} x {g['V']} scores (fp32); M = {g['M']}")
print(f"at the {g['T'] - g['M']} unselected positions the largest |gradient| is {g['unselected_max']:g}")
worst = max(g["selected"], key=lambda i: g["norms"][i])  # where the loss pushes hardest
print(f"largest entries of p - onehot at position {worst} (original: {enc.tokens[worst]}):")
for e in top_entries(g, worst, k=5):
    print(f"  {tok.id_to_token(e['id']):<10} p {e['p']:.4f}  p - onehot {e['p_minus_onehot']:+.4f}  "
          f"/M {e['grad']:+.6f}  autograd {e['autograd']:+.6f}")
