"""Pre-training throughput (tokens/s) of bertlab against transformers on the same work.

    python bench/bench_pretrain.py [--reps 7] [--threads 2] [--batch-size 32] [--max-docs 2000]

Same config (`mini`, vocab 8192, 128 positions), same initial weights, same real IMDB batches
(bertlab's own pipeline and Batcher, prepared once, outside the timings), same dropout masks (the
torch RNG is reseeded identically before each step of either model). One step = forward +
backward + clip_grad_norm_(1.0) + AdamW(lr 1e-3, torch defaults otherwise). The two models
alternate within every step so machine-load drift hits both alike; 3 warm-up steps each, then the
median over `--reps` timed steps of non-pad tokens (attention_mask) per second.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import BertForPreTraining, preset  # noqa: E402
from bertlab.data.corpus import (  # noqa: E402
    load_documents,
    make_pretraining_examples,
    tokenize_documents,
)
from bertlab.data.masking import Batcher  # noqa: E402
from bertlab.tokenizer import WordPieceTokenizer  # noqa: E402

WARMUP, LR, CLIP = 3, 1e-3, 1.0
ROWS = (  # name, ours' sparse_mlm, bf16 autocast for both
    ("fp32, ours sparse MLM", True, False),
    ("bf16 autocast, ours sparse MLM", True, True),
    ("fp32, ours dense MLM", False, False),
)


def prepare(max_docs: int, batch_size: int, n: int):
    """n masked batches of real IMDB pre-training examples, exactly as our trainer builds them."""
    docs = load_documents("imdb", max_docs=max_docs)
    tok = WordPieceTokenizer.train(docs, vocab_size=8192)
    examples = make_pretraining_examples(tokenize_documents(docs, tok), max_len=128,
                                         cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
    batcher = Batcher.from_tokenizer(examples, batch_size, tok, seed=0, drop_last=True)
    if len(batcher) == 0:
        raise SystemExit(f"{len(examples)} examples make no batch of {batch_size}; raise --max-docs")
    batches = list(itertools.islice(itertools.chain.from_iterable(iter(batcher) for _ in range(n)), n))
    return tok, len(docs), len(examples), batches


def models(cfg, state):
    """A fresh bertlab model and a fresh transformers model, both holding `state`."""
    import transformers
    ours = BertForPreTraining(cfg)
    ours.load_state_dict(state)
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**cfg.to_dict()))  # sdpa default
    res = theirs.load_state_dict(state, strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}  # HF ties these itself
    assert not res.unexpected_keys and set(res.missing_keys) <= tied, res
    p = theirs.cls.predictions
    assert p.decoder.weight is theirs.bert.embeddings.word_embeddings.weight
    assert p.decoder.bias is None or torch.equal(p.decoder.bias, p.bias)
    n = lambda m: sum(q.numel() for q in m.parameters())
    assert n(ours) == n(theirs), (n(ours), n(theirs))
    return ours, theirs


def make_step(model, bf16: bool, **kw):
    """One training step on a batch; returns its loss (detached)."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, foreach=None)  # CPU: the per-tensor loop
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext

    def step(b):
        with ctx():
            out = model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                        attention_mask=b["attention_mask"], labels=b["labels"],
                        next_sentence_label=b.get("next_sentence_label"), **kw)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach()
    return step


def run_row(cfg, state, batches, sparse: bool, bf16: bool, reps: int):
    """Alternate ours/theirs step by step: median tokens/s of each, the per-step ratios, the losses."""
    ours, theirs = models(cfg, state)
    steps = [make_step(ours, bf16, sparse_mlm=sparse), make_step(theirs, bf16)]
    rates, losses = [[], []], [[], []]
    for i, b in enumerate(batches[:WARMUP + reps]):
        tokens = int(b["attention_mask"].sum())
        for k, step in enumerate(steps):
            torch.manual_seed(1000 + i)  # identical dropout masks for both models
            t0 = time.perf_counter()
            loss = step(b)
            dt = time.perf_counter() - t0
            losses[k].append(float(loss))
            if i >= WARMUP:
                rates[k].append(tokens / dt)
    paired = [o / t for o, t in zip(*rates)]  # neighbours in time: drift cancels better
    return [statistics.median(r) for r in rates], paired, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=7, help="timed steps per model and row (median)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-docs", type=int, default=2000)
    a = p.parse_args()
    if a.reps < 1 or a.batch_size < 1 or a.threads < 1:
        p.error("--reps, --batch-size and --threads must be positive")
    torch.set_num_threads(a.threads)

    t0 = time.perf_counter()
    tok, n_docs, n_ex, batches = prepare(a.max_docs, a.batch_size, WARMUP + a.reps)
    prep = time.perf_counter() - t0
    cfg = preset("mini", vocab_size=tok.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    state = BertForPreTraining(cfg).state_dict()
    import transformers
    shapes = sorted({tuple(b["input_ids"].shape) for b in batches})
    ntok = [int(b["attention_mask"].sum()) for b in batches]
    nlab = [int((b["labels"] != -100).sum()) for b in batches]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads")
    print(f"config: mini (L={cfg.num_hidden_layers} H={cfg.hidden_size} A={cfg.num_attention_heads}), "
          f"vocab {cfg.vocab_size}, 128 positions, dropout {cfg.hidden_dropout_prob}, "
          f"{sum(v.numel() for k, v in state.items() if k != 'cls.predictions.decoder.weight'):,} parameters")
    print(f"data: {n_docs} IMDB docs -> {n_ex} examples; {len(batches)} batches of {shapes}, "
          f"{statistics.mean(ntok):.0f} non-pad tokens and {statistics.mean(nlab):.0f} MLM labels per batch "
          f"(mean); prepared in {prep:.1f} s (not timed)")
    print(f"step: forward + backward + clip_grad_norm_({CLIP}) + torch.optim.AdamW(lr={LR}, betas=(0.9, 0.999), "
          f"eps=1e-8, weight_decay=0.01, foreach=None -> single-tensor loop on CPU), same for both")
    print(f"timing: {WARMUP} warm-up + {a.reps} timed steps per model, alternating; median tokens/s\n")

    print(f"{'row':<32}{'bertlab tok/s':>14}{'transformers tok/s':>19}{'ratio':>8}{'paired (min-max)':>22}")
    results, all_losses = {}, {}
    for name, sparse, bf16 in ROWS:
        (ours, theirs), paired, losses = run_row(cfg, state, batches, sparse, bf16, a.reps)
        results[name], all_losses[name] = statistics.median(paired), losses
        print(f"{name:<32}{ours:>14,.0f}{theirs:>19,.0f}{ours / theirs:>7.2f}x{statistics.median(paired):>8.2f}x"
              f" ({min(paired):.2f}-{max(paired):.2f})", flush=True)
    print("ratio = bertlab tokens/s / transformers tokens/s (above 1: bertlab is faster), from the two medians;\n"
          "paired = median of the per-step ratios (each pair of steps ran back to back); a wide min-max = a noisy machine\n")

    print(f"losses on the same batches, same weights, same dropout masks (step 1, step {WARMUP + a.reps}):")
    ok = True
    for name, (lo, lt) in all_losses.items():
        d1, dmax = abs(lo[0] - lt[0]), max(abs(x - y) for x, y in zip(lo, lt))
        tol = 1e-2 if "bf16" in name else 1e-4
        ok &= d1 < tol
        print(f"  {name:<32} bertlab {lo[0]:.5f} -> {lo[-1]:.5f}   transformers {lt[0]:.5f} -> {lt[-1]:.5f}"
              f"   |diff| step 1 {d1:.1e} ({'ok' if d1 < tol else 'MISMATCH'} < {tol:g}), max {dmax:.1e}")
    if not ok:
        print("  WARNING: first-step losses disagree: the two models are not doing the same work")

    sp, bf, dense = (results[r[0]] for r in ROWS)
    print(f"\nIn short (paired ratios): bertlab pre-trains at {sp:.2f}x the tokens/s of transformers in fp32 "
          f"({bf:.2f}x under bf16 autocast); with dense MLM logits it is {dense:.2f}x, so computing vocabulary "
          f"logits only at the ~{100 * statistics.mean(nlab) / statistics.mean(ntok):.0f} % labelled tokens "
          f"(sparse MLM) is worth {sp / dense:.2f}x and the rest of the model {dense:.2f}x.")


if __name__ == "__main__":
    main()
