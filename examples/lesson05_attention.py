"""Lesson 5, attention heads: in every layer each head mixes the tokens' vectors with weights

    A = softmax(Q K^T / sqrt(d_head)),   out = A V      (each row of A sums to 1)

and different heads learn different habits: look at the previous or next token, at [SEP], at
[CLS], or at a related word further away (Clark et al. 2019, "What does BERT look at?"). We name
each head's habit on one sentence, read "attention from token X to token Y" in every head, and rank
the heads on the annotated sentences of examples/heads.jsonl (neighbours, subject-verb, long range),
pad two sentences into one batch with and without the attention mask, and average a layer's heads.

Run:  python examples/lesson05_attention.py   (about 3 s; no training)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis import head_finder  # noqa: E402
from bertlab.analysis.attention_views import run_attention, stats_table  # noqa: E402
from bertlab.data import head_set  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model: 4 layers x 4 heads

# 1. One sentence through the model; every head's attention map (layers, heads, T, T).
text = "the actors who played the brothers were brilliant ."
run = run_attention(model, tok, text)
print(f"{text}\n{run.num_layers} layers x {run.num_heads} heads, {len(run.tokens)} tokens: {' '.join(run.tokens)}")

# 2. Each head's habit: the share of its attention on [CLS], [SEP], the previous, next and same token.
print("\nlayer head  pattern     share  prev  next   sep   cls  entropy (0 = one token, 1 = uniform)")
for r in stats_table(run):
    print(f"{r['layer']:>5} {r['head']:>4}  {r['pattern']:<10} {r['pattern_share']:5.2f} {r['prev']:5.2f} "
          f"{r['next']:5.2f} {r['sep']:5.2f} {r['cls']:5.2f}  {r['entropy_norm']:.2f}")

# 3. Attention from one token to another in every layer and head: does the verb "were" look at its
# subject "actors" (and not at the nearer "brothers")?
x, y = run.tokens.index("were"), run.tokens.index("actors")
grid = head_finder.pair_grid(run.attentions, x, y)  # (layers, heads)
print(f"\nattention from '{run.tokens[x]}' to '{run.tokens[y]}' (rows: layers, columns: heads):")
for layer, row in enumerate(grid.tolist(), 1):
    print(f"  layer {layer}: " + "  ".join(f"{v:.2f}" for v in row))
layer, head = divmod(int(grid.argmax()), run.num_heads)
print(f"  strongest: layer {layer + 1}, head {head + 1} ({float(grid.max()):.2f}; spread evenly it would be "
      f"{1 / len(run.tokens):.2f})")

# 4. The head finder: mean attention across each annotated pair of the shipped sentence set.
sentences = head_set.load()  # examples/heads.jsonl
ranked = head_finder.rankings(head_finder.run_set(model, tok, sentences), top=3)
print(f"\nhead finder on {len(sentences)} annotated sentences (examples/heads.jsonl):")
for relation, res in ranked.items():
    print(f"  {relation}:")
    for r in res["top"]:
        print(f"    layer {r['layer']} head {r['head']}  {r['direction']:<16} mean attention {r['score']:.2f} "
              f"(even spread: {r['chance']:.2f}), its top word {r['top1']:.0%} of the time, {r['pairs']} pairs")
# Notice: the neighbour heads score far above an even spread; subject-verb and long-range links are
# rarer habits, and in a 4-layer model trained on a CPU only a few heads follow them at all.

# 5. Sparse attention: Longformer computes only a window of neighbours (2 keys a side here) and [CLS]
# as a global token. How much of each head's attention falls inside that pattern on our sentence, and
# what the published settings save in one forward pass of BERT-base at 512 and 4,096 tokens.
from bertlab.analysis import sparse  # noqa: E402
from bertlab.config import preset  # noqa: E402

keep = sparse.pattern(len(run.tokens), "longformer", window=2, n_global=1)
cover = sparse.coverage(run.attentions, keep)  # (layers, heads)
print(f"\nLongformer's pattern (2 a side, [CLS] global) computes {int(keep.sum())} of {len(run.tokens) ** 2} pairs "
      f"and keeps {float(cover.mean()):.0%} of the attention on average (least {float(cover.min()):.0%})")
for r in sparse.flops_table(preset("base")):
    print(f"  {r['tokens']:>5} tokens  {r['pattern']:<10}  pairs {r['pair_share']:6.1%}  saved {r['saved']:5.1%}")
# Notice: at 512 tokens attention's scores are a tenth of BERT-base's work and sparsity saves little;
# at 4,096 they are about half of it.

# 6. Padding: a batch is one rectangle, so the shorter sentence is filled with [PAD] up to the longer.
# The attention mask adds a huge negative number to the pads' scores before the softmax: they get
# weight 0 and each sentence comes out as if it were alone. Leave the mask out and they do not.
from bertlab.analysis import attention_views, padding  # noqa: E402

pair = ["the film was a [MASK] .", "the acting was great but the plot was far too long and slow ."]
res = padding.padding_study(model, tok, pair)
print(f"\npadding {res['lengths']} tokens into one batch of {len(res['ids'][0])} positions:")
for k, sentence in enumerate(pair, 1):
    print(f"  {k}. {sentence}")
print(f"  with the mask: largest attention on a [PAD] {max(max(r) for r in res['pad_max_masked']):g}, "
      f"max |diff| from each sentence run alone {max(s['max_diff_masked'] for s in res['sentences']):.1e}")
print("  without it, share of attention on pads per layer: " + "  ".join(f"{x:.3f}" for x in res["pad_share_layers"]))
short, guess = res["sentences"][0], res["sentences"][0]["mask"]
print(f"  sentence 1 without the mask: last-layer max |diff| {short['max_diff_unmasked']:.3f}, "
      f"lowest cosine {short['min_cos_unmasked']:.3f}")
print(f"  its [MASK]: alone '{guess['guess']}' p={guess['prob_alone']:.3f}; without the mask "
      f"p={guess['prob_unmasked']:.3f}, first guess '{guess['guess_unmasked']}' p={guess['prob_guess_unmasked']:.3f}")
# Notice: with the mask, the pads change nothing but float rounding; without it, the short sentence
# spends a good share of its attention on filler, and its vectors and its guess move.

# 7. The last layer's map averaged over its heads, as the visualisation exercise of the study guide
# "BERT and Bidirectional Models" draws it: the strongest link between two different words of our sentence.
avg = attention_views.layer_average(run, run.num_layers)  # (T, T), rows sum to 1
i, j, w = attention_views.strongest_pair(avg, run.special)
print(f"\nlayer {run.num_layers}, mean of its {run.num_heads} heads: strongest link '{run.tokens[i]}' (token {i}) -> "
      f"'{run.tokens[j]}' (token {j}), {w:.2f}")
