"""Command-line flags of `pretrain`, kept beside the training code they configure."""
from __future__ import annotations

import argparse

from ..config import PRESETS
from ..data.corpus import OBJECTIVES
from ..train.loop import TrainArgs
from ..train.pretrain import PretrainSpec


def add_pretrain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="mini", choices=list(PRESETS), help="model size (default: mini)")
    p.add_argument("--layers", type=int, default=None, help="override the preset's number of layers")
    p.add_argument("--hidden", type=int, default=None, help="override the preset's hidden size")
    p.add_argument("--heads", type=int, default=None, help="override the preset's attention heads")
    p.add_argument("--intermediate", type=int, default=None, help="override the preset's feed-forward size")
    p.add_argument("--corpus", default="imdb", help="imdb | a .txt/.csv/.jsonl file or folder | a hub dataset")
    p.add_argument("--text-column", default="text", help="column holding the text in .csv/.jsonl")
    p.add_argument("--max-docs", type=int, default=None, help="use only the first N documents")
    p.add_argument("--init-from", default=None, help="continue pre-training this model (keeps its vocabulary)")
    p.add_argument("--vocab-size", type=int, default=8192)
    # The CPU recipe (bench/RECIPE.md): 32-token examples leave the unigram plateau far sooner than 128.
    p.add_argument("--max-len", type=int, default=32, help="tokens per example (default 32: the CPU recipe)")
    p.add_argument("--max-position", type=int, default=None,
                   help="position table size (default: max(128, --max-len)), so a later stage can train longer texts")
    p.add_argument("--objective", default="nsp", choices=OBJECTIVES, help="pair task besides MLM")
    p.add_argument("--mask-rate", type=float, default=0.15)
    p.add_argument("--whole-word", action="store_true", help="mask all pieces of a word together")
    # Dropout 0 learns faster in short runs, far from overfitting (bench/RECIPE.md; Cramming does the same).
    p.add_argument("--dropout", type=float, default=0.0,
                   help="hidden and attention dropout while pre-training (default 0: the CPU recipe; BERT used 0.1)")
    p.add_argument("--pre-ln", action="store_true",
                   help="LayerNorm before each block (stable at higher learning rates; not BERT's post-LN: "
                        "transformers loads it as MegatronBert)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--stop-at", type=int, default=None,
                   help="stop after this step, resumably, keeping the --steps schedule (compare early parts of runs)")
    p.add_argument("--out", required=True, help="run folder (created; with --resume, continued)")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=float, default=0.05, help="fraction of steps (or steps if >= 1)")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast where the hardware has native bf16 (else fp32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--save-every", type=int, default=500)
    p.add_argument("--keep-last", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")


def specs_from_args(a):
    config = {}
    if a.dropout is not None:
        config = {"hidden_dropout_prob": a.dropout, "attention_probs_dropout_prob": a.dropout}
    if a.init_from is None:  # a continued model keeps its own position table and layout
        config["max_position_embeddings"] = a.max_position or max(128, a.max_len)
        if a.pre_ln:
            config["pre_ln"] = True
    for flag, key in (("layers", "num_hidden_layers"), ("hidden", "hidden_size"),
                      ("heads", "num_attention_heads"), ("intermediate", "intermediate_size")):
        if getattr(a, flag, None) is not None:
            config[key] = getattr(a, flag)
    if "hidden_size" in config and "intermediate_size" not in config:
        config["intermediate_size"] = 4 * config["hidden_size"]  # BERT's ratio, not the preset's width
    spec = PretrainSpec(preset=a.preset, corpus=a.corpus, text_column=a.text_column, max_docs=a.max_docs,
                        vocab_size=a.vocab_size, max_len=a.max_len, objective=a.objective,
                        mask_rate=a.mask_rate, whole_word=a.whole_word, batch_size=a.batch_size,
                        init_from=a.init_from, config=config)
    targs = TrainArgs(steps=a.steps, lr=a.lr, warmup=a.warmup, weight_decay=a.weight_decay, clip=a.clip,
                      accum=a.accum, bf16=a.bf16, seed=a.seed, log_every=a.log_every,
                      eval_every=a.eval_every, save_every=a.save_every, keep_last=a.keep_last, device=a.device,
                      stop_at=a.stop_at)
    return spec, targs
