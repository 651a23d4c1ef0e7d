#!/usr/bin/env bash
# One factor at a time: each line is a pre-training run from scratch on IMDB, same seed and data.
# Usage: bash bench/recipe_runs.sh OUTDIR NAME...   (names below; all of them when none given)
# THREADS=1 runs two at a time on a 2-core machine (the r_* runs were timed so, beside another run).
# `common` keeps BERT's dropout 0.1, which the older runs trained with (the CLI default is 0 since);
# a run's own --dropout comes later on the command line and wins.
set -u
out=${1:-runs/recipe}; shift || true
common="--corpus imdb --dropout 0.1 --bf16 --seed 0 --log-every 25 --save-every 100000 --threads ${THREADS:-2}"
declare -A R=(
  [base128]="--max-len 128 --batch-size 32 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 1500 --eval-every 150"
  [len64]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 1500 --eval-every 150"
  [len64_mlm_d0]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.15 --objective mlm --dropout 0 --steps 1500 --eval-every 150"
  [len64_m30]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.30 --objective nsp --steps 1500 --eval-every 150"
  [len32]="--max-len 32 --batch-size 128 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 1500 --eval-every 150"
  [len64_lr2]="--max-len 64 --batch-size 64 --lr 2e-3 --mask-rate 0.15 --objective nsp --steps 1500 --eval-every 150"
  [s_len64]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 1000 --eval-every 100"
  [s_len64_m30]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.30 --objective nsp --steps 1000 --eval-every 100"
  [s_len32]="--max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 1000 --eval-every 100"
  [s_len64_lr2]="--max-len 64 --batch-size 64 --lr 2e-3 --mask-rate 0.15 --objective nsp --steps 1000 --eval-every 100"
  [len32_lr2_d0]="--max-position 128 --max-len 32 --batch-size 128 --lr 2e-3 --dropout 0 --mask-rate 0.15 --objective nsp --steps 2600 --eval-every 200"
  [default20]="--max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 3700 --eval-every 250"
  [default20_v4k]="--max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --mask-rate 0.15 --objective nsp --steps 3700 --eval-every 250 --vocab-size 4096"
  # default20's schedule (3,700 steps), stopped early with --stop-at: comparable step by step with it.
  [r_len32_d0]="--max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --dropout 0 --mask-rate 0.15 --objective nsp --steps 3700 --stop-at 2250 --eval-every 250"
  [r_len32_preln_lr2]="--max-position 128 --max-len 32 --batch-size 128 --lr 2e-3 --pre-ln --dropout 0.1 --mask-rate 0.15 --objective nsp --steps 3700 --stop-at 1000 --eval-every 250"
  [r_len32_preln]="--max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --pre-ln --dropout 0 --mask-rate 0.15 --objective nsp --steps 3700 --stop-at 1000 --eval-every 250"
  [r_tiny_len32]="--preset tiny --max-position 128 --max-len 32 --batch-size 128 --lr 1e-3 --dropout 0 --mask-rate 0.15 --objective nsp --steps 3700 --eval-every 250"
  [s_len64_mlm_d0]="--max-len 64 --batch-size 64 --lr 1e-3 --mask-rate 0.15 --objective mlm --dropout 0 --steps 1000 --eval-every 100"
)
names=("$@"); [ ${#names[@]} -eq 0 ] && names=(base128 len64 len64_mlm_d0 len64_m30 len32 len64_lr2)
for n in "${names[@]}"; do
  [ -d "$out/$n/model" ] && continue  # done (a --stop-at run also leaves its model)
  rm -rf "$out/$n"
  echo "== $n: ${R[$n]}"
  python -m bertlab pretrain $common ${R[$n]} --out "$out/$n" > "$out/$n.log" 2>&1
  tail -3 "$out/$n.log"
done
