"""Lesson 10, variants and scaling: how big is each member of the BERT family, and what does training
one cost? Sizes are plain arithmetic on a config (no weights): per layer about 12·H² parameters
(4·H² for Q, K, V and the output, 8·H² for the feed-forward at I = 4H), and a forward pass costs
about 2 FLOPs per parameter per token. Training on D tokens costs about

    C ≈ 6·N·D   (forward 2ND + backward 4ND)

and Chinchilla's rule (Hoffmann et al. 2022) says a budget C is best spent on D ≈ 20·N tokens.

Run:  python examples/lesson10_variants_scaling.py   (about 2 s; arithmetic only)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis import compute, shapes, sizing  # noqa: E402

SEQ = 128  # tokens per sequence for memory and FLOPs

# 1. The variants table: the published encoders (no pre-training heads) and the shipped model.
configs = {name: sizing.known_config(name) for name in sizing.KNOWN_MODELS}
configs["shipped default (mini)"] = bertlab.BertConfig.from_json_file(Path(bertlab.DEFAULT_MODEL_DIR) / "config.json")
print(f"{'model':<24} {'L':>3} {'H':>5} {'E':>5} {'vocab':>7} {'parameters':>12} {'published':>10} "
      f"{'fp32 weights':>13} {'FLOPs @128':>11}")
for name, c in configs.items():
    params = sizing.param_counts(c, heads=False)["encoder_total"]
    weights = sizing.memory(c, 1, SEQ, "fp32", heads=False)["weights"]  # 4 bytes a parameter
    flops = sizing.flops(c, SEQ, heads=False)["total"]  # one forward pass of one 128-token sequence
    published = sizing.KNOWN_MODELS.get(name, {}).get("published")
    print(f"{name:<24} {c.num_hidden_layers:>3} {c.hidden_size:>5} {c.embedding_dim:>5} {c.vocab_size:>7,} "
          f"{sizing.humanize(params):>12} {sizing.humanize(published) if published else '-':>10} "
          f"{sizing.humanize(weights, 'B'):>13} {sizing.humanize(flops, 'FLOP'):>11}")
# Notice: ALBERT-base stores about a tenth of BERT-base's parameters (one shared layer, 128-wide word
# vectors) yet costs the same FLOPs: sharing saves memory, not compute. DistilBERT halves the layers
# and so the FLOPs; RoBERTa-base is BERT-base with a 50k vocabulary (more parameters, same FLOPs).

# 2. Where BERT-base's parameters sit.
base = sizing.param_counts(configs["BERT-base"], heads=False)
print("\nBERT-base by component:", ", ".join(f"{k} {sizing.humanize(base[k])}"
                                           for k in ("embeddings", "attention", "feed_forward", "pooler")))

# 3. What pre-training BERT-base cost (Devlin et al. 2019: 1M steps of 256 sequences, 90 % at 128
# tokens and 10 % at 512), counted two ways, and what Chinchilla would have done with that budget.
ex = compute.worked_example("bert-base")
C = ex["flops_exact"]["flops"]
print(f"\nBERT-base pre-training: {ex['tokens']['tokens']:.3g} tokens, N = {ex['params'] / 1e6:.1f}M parameters")
print(f"  6ND estimate {ex['flops_6nd']['flops']:.3g} FLOPs; counted layer by layer {C:.3g} FLOPs")
util = ex["implied_utilization"]["tpu-v3"]
print(f"  4 days on 16 TPU v3 chips means {util:.0%} of their peak (if they were v3; the paper does not say)")
rule = ex["chinchilla_rule"]
print(f"  Chinchilla's rule for {C:.3g} FLOPs: N = {rule['n'] / 1e6:.0f}M parameters on D = {rule['d']:.3g} tokens "
      f"({ex['tokens']['tokens'] / ex['params']:.0f} tokens a parameter for BERT-base, against 20)")

# 4. Kaplan's L(N): loss falls as a power of the non-embedding parameters, slowly (alpha = 0.076).
print("\nKaplan et al. 2020, L(N) = (N_c / N)^0.076 (nats a token, their GPT-style models):")
for name in ("shipped default (mini)", "BERT-base", "BERT-large"):
    n = compute.non_embedding_params(configs[name])
    print(f"  {name:<24} N = {sizing.humanize(n):>6}  L = {compute.kaplan_loss_n(n)['loss']:.3f}")

# 5. Encoder, decoder, encoder-decoder: BERT beside GPT-2 (sees the left only) and T5 (an encoder, then a
# decoder that also attends to it), by part, on T5's pre-training lengths (512 tokens in, its target out).
pair = shapes.pretraining_pair(512)
print(f"\nBy part (FLOPs a token: BERT, GPT-2 at 512 tokens; T5 at {pair['inputs']} in, {pair['targets']} out):")
print(f"{'model':<13} {'kind':<16} {'embed':>6} {'attn':>6} {'cross':>6} {'FFN':>6} {'total':>7} {'published':>10} "
      f"{'FLOPs/token':>11}")
for r in shapes.shapes(512, pair["targets"]):
    p = r["params"]
    print(f"{r['name']:<13} {r['kind']:<16} " + " ".join(f"{sizing.humanize(p[k]):>6}" for k in
          ("embeddings", "attention", "cross_attention", "feed_forward"))
          + f" {sizing.humanize(p['total']):>7} {sizing.humanize(r['published'][0]['params']):>10} "
          f"{sizing.humanize(r['flops_per_token']['total'], 'FLOP'):>11}")
gap = shapes.gpt2_gap()["models"]["GPT-2 small"]
print(f"GPT-2 small: the paper's {sizing.humanize(gap['paper'])} is its layers with GPT-1's vocabulary and "
      f"{shapes.GPT1['n_positions']} positions ({sizing.humanize(gap['with_gpt1_tables'])}); the released weights hold {gap['released']:,}.")
