#!/usr/bin/env bash
# Tensor-parallel benchmark: what `loom-run --train --tp N` costs and sends.
#
#   benchmarks/tensor-parallel/run.sh [BUILD_DIR]          (default: build/)
#
# One run prints three parts:
#   (a) Step time. The benchmark GPT of benchmarks/cpu-training (vocab 8192,
#       block 128, 4 layers, 4 heads, embd 256; one batch of 8 x 128, the
#       same every step; AdamW) trained STEPS steps by one rank and by TP
#       thread ranks (--tp TP --ranks TP), each rank with one OpenBLAS
#       thread (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1): median ms/step
#       after the first 2 steps, side by side, and how far the tp run's
#       losses are from one rank's.
#   (b) Communication per rank per step of that tp run: the collectives of
#       its plan (--emit-plan) by kind, payload and ring bytes (bench.py
#       comm), next to Megatron's 4 all-reduces of b*s*h per layer plus the
#       embedding's and the LM head's; measured bytes from
#       `loom-run --report-json` where this build has it, else a TODO line.
#   (b') Memory per rank of 1 rank, tp TP and tp TP --sequence-parallel (2
#       steps each, --report-json): parameters, gradients, optimizer state,
#       planned and measured peak, and the planned peak less the model
#       states (activations and workspace), which SP shrinks (bench.py
#       memory).
#   (c) Compile time of a 175B-shaped GPT (BIG_LAYERS 96, hidden 12288, 96
#       heads, GPT-2's vocab 50257, which loom-pad-vocabulary pads to
#       50304 for tp 8 as Megatron does, sequence 2048, batch 1)
#       with tp BIG_TP=8. The model has no weights: every initializer is
#       external data in a sparse file (bench.py shapes-only-gpt). Timed:
#         import    loom-translate --import-onnx
#         pipeline  loom-opt --loom-training-pipeline=tp=8 --mlir-timing
#                   (training step, tensor-parallel tactic, propagation,
#                   partitioning)
#         lower     loom-opt --loom-lower-to-plan --mlir-timing on the
#                   pipeline's output, with and without --verify-each=false
#                   (loom-opt runs the verifier after every pass by default)
#         loom-run  loom-run --train --tp 8 --no-weights --compile-only,
#                   end to end: the same import (shapes only: no weight is
#                   read), pipeline and lowering in one process, with one
#                   verification at the end instead of one per pass, and
#                   its execution time report per pass (a plan is not
#                   built: it holds the weights' values), under
#                   ulimit -v BIG_MEM_KIB and BIG_TIMEOUT
#       The target is under 5 s from import to a partitioned plan.
#
# Environment (defaults): VOCAB=8192 BLOCK=128 LAYERS=4 HEADS=4 EMBD=256
#   BATCH=8 SEQ=128 STEPS=8 TP=2 BIG=1 BIG_LAYERS=96 BIG_EMBD=12288
#   BIG_HEADS=96 BIG_VOCAB=50257 BIG_SEQ=2048 BIG_TP=8 BIG_TIMEOUT=300
#   BIG_MEM_KIB=(half of MemTotal) BENCH_DIR=(a new mktemp -d dir, kept).
# Timings mean something only on an otherwise idle machine: run it under
# `flock /tmp/loom-build.lock` on a shared one so that no build runs meanwhile.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
python=/usr/bin/python3
bench="$root/benchmarks/tensor-parallel/bench.py"

VOCAB="${VOCAB:-8192}" BLOCK="${BLOCK:-128}" LAYERS="${LAYERS:-4}"
HEADS="${HEADS:-4}" EMBD="${EMBD:-256}" BATCH="${BATCH:-8}" SEQ="${SEQ:-128}"
STEPS="${STEPS:-8}" TP="${TP:-2}" BIG="${BIG:-1}"
BIG_LAYERS="${BIG_LAYERS:-96}" BIG_EMBD="${BIG_EMBD:-12288}"
BIG_HEADS="${BIG_HEADS:-96}" BIG_VOCAB="${BIG_VOCAB:-50257}"
BIG_SEQ="${BIG_SEQ:-2048}" BIG_TP="${BIG_TP:-8}" BIG_TIMEOUT="${BIG_TIMEOUT:-300}"
BIG_MEM_KIB="${BIG_MEM_KIB:-$(awk '/MemTotal/ { print int($2 / 2) }' /proc/meminfo)}"
dir="${BENCH_DIR:-$(mktemp -d /tmp/loom-tp-bench.XXXXXX)}"
mkdir -p "$dir"

for tool in loom-run loom-opt loom-translate; do
  [[ -x $bin/$tool ]] || { echo "error: $bin/$tool not found" >&2; exit 2; }
done
help="$("$bin/loom-run" --help 2>&1 || true)"
[[ $help == *"--tp N"* ]] ||
  { echo "error: $bin/loom-run has no --tp" >&2; exit 2; }
report_json=0
[[ $help == *"--report-json"* ]] && report_json=1

echo "== tensor parallelism: $(date -u +%Y-%m-%d), $(nproc) cores," \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 2^20 }' /proc/meminfo)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   work dir: $dir"
# A yardstick for the figures below: one OpenBLAS thread's sgemm rate on
# the lm_head's shape through numpy (bench.py sgemm).
echo "   numpy sgemm 1024x256x8192, 1 thread: $(OPENBLAS_NUM_THREADS=1 \
  OMP_NUM_THREADS=1 "$python" "$bench" sgemm) GFLOP/s"

# --- (a) step time -----------------------------------------------------------
echo
echo "== (a) training step: GPT vocab $VOCAB, $LAYERS layers, $HEADS heads," \
  "embd $EMBD; batch $BATCH x seq $SEQ; AdamW; $STEPS steps;" \
  "1 OpenBLAS thread per rank"
"$python" "$root/benchmarks/cpu-training/bench.py" prepare --dir "$dir" \
  --model gpt --vocab "$VOCAB" --block-size "$BLOCK" --layers "$LAYERS" \
  --heads "$HEADS" --embd "$EMBD" --seed 0 --batch "$BATCH" --seq "$SEQ" \
  >"$dir/prepare.txt" 2>"$dir/export.log" || {
  cat "$dir/export.log" "$dir/prepare.txt" >&2; exit 2; }
sed -n 's/^params:/   parameters:/p' "$dir/prepare.txt"
train=(--input "idx=$dir/idx.npy" --labels "$dir/labels.npy"
  --loss cross_entropy --batch-size "$BATCH" --steps "$STEPS"
  --optimizer adamw --lr 1e-3 --freeze '\.attn\.bias$')
report=()
((report_json)) && report=(--report-json "$dir/tp.report.json")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
"$bin/loom-run" "$dir/gpt.onnx" --train "${train[@]}" \
  --metrics "$dir/one.jsonl" >"$dir/one.log" 2>&1 || {
  cat "$dir/one.log" >&2; echo "error: the 1-rank run failed" >&2; exit 2; }
"$bin/loom-run" "$dir/gpt.onnx" --train --tp "$TP" --ranks "$TP" \
  "${train[@]}" --metrics "$dir/tp.jsonl" --emit-plan "$dir/tp.plan" \
  "${report[@]}" >"$dir/tp.log" 2>&1 || {
  cat "$dir/tp.log" >&2; echo "error: the tp $TP run failed" >&2; exit 2; }
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS
"$python" "$bench" steps --metrics "$dir/one.jsonl" --metrics "$dir/tp.jsonl" \
  --names "1-rank tp$TP-on-$TP-thread-ranks" | sed 's/^/   /'

# --- (b) communication -------------------------------------------------------
echo
echo "== (b) communication of the tp $TP step (f32; ring bytes each rank sends)"
comm_report=()
((report_json)) && [[ -f $dir/tp.report.json ]] &&
  comm_report=(--report-json "$dir/tp.report.json")
"$python" "$bench" comm --plan "$dir/tp.plan" --tp "$TP" --layers "$LAYERS" \
  --batch "$BATCH" --seq "$SEQ" --hidden "$EMBD" "${comm_report[@]}" |
  sed 's/^/   /'

# --- (b') memory: sequence parallelism's activations ----------------------------
echo
echo "== (b') memory per rank (planned from the plan's liveness; measured by" \
  "the runtime), 1 rank, tp $TP, tp $TP with --sequence-parallel, 2 steps"
if ((report_json)); then
  # The training flags of (a) without its --steps.
  memory_train=()
  for ((i = 0; i < ${#train[@]}; ++i)); do
    if [[ ${train[i]} == --steps ]]; then ((++i)); continue; fi
    memory_train+=("${train[i]}")
  done
  for run in one tp sp; do
    flags=()
    [[ $run != one ]] && flags=(--tp "$TP" --ranks "$TP")
    [[ $run == sp ]] && flags+=(--sequence-parallel)
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    "$bin/loom-run" "$dir/gpt.onnx" --train "${memory_train[@]}" \
      "${flags[@]}" --steps 2 --report-json "$dir/$run.memory.json" \
      >"$dir/$run.memory.log" 2>&1 || {
      cat "$dir/$run.memory.log" >&2; echo "error: the $run run failed" >&2
      exit 2; }
    unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
  done
  "$python" "$bench" memory --report "1-rank=$dir/one.memory.json" \
    --report "tp$TP=$dir/tp.memory.json" \
    --report "tp$TP+sp=$dir/sp.memory.json" | sed 's/^/   /'
  echo "   (peak - states: activations kept for the backward and workspace;" \
    "sequence parallelism splits the layer norms', residuals' and" \
    "dropouts' b*s*h on the sequence)"
else
  echo "   TODO: loom-run has no --report-json in this build"
fi

# --- (c) compile time of a 175B-shaped GPT -----------------------------------
((BIG)) || exit 0
echo
echo "== (c) compile time: GPT $BIG_LAYERS layers, hidden $BIG_EMBD," \
  "$BIG_HEADS heads, vocab $BIG_VOCAB, seq $BIG_SEQ, batch 1; tp $BIG_TP"
big="$dir/big"
mkdir -p "$big"
"$python" "$bench" shapes-only-gpt --out "$big/gpt.onnx" --layers "$BIG_LAYERS" \
  --embd "$BIG_EMBD" --heads "$BIG_HEADS" --vocab "$BIG_VOCAB" \
  --seq "$BIG_SEQ" | sed 's/^/   /'

# timed NAME LOG COMMAND...: runs COMMAND (stdout and stderr to LOG) and
# sets the globals seconds, kib and status.
timed() {
  local name="$1" log="$2"
  shift 2
  set +e
  /usr/bin/time -f "%e %M" -o "$big/$name.time" "$@" >"$log" 2>&1
  status=$?
  set -e
  read -r seconds kib < <(tail -1 "$big/$name.time")
  [[ $seconds =~ ^[0-9.]+$ ]] || seconds=0
  [[ $kib =~ ^[0-9]+$ ]] || kib=0
}
# row NAME: one result line; a failure names its status and last message.
row() {
  local name="$1" log="$2" what=ok
  if ((status != 0)); then
    local signal="" message
    ((status > 128)) && signal=", signal $((status - 128))"
    message="$( { grep -v -e '^ *#' -e '^Stack dump' -e '^PLEASE' \
      -e '^[0-9]\.' "$log" | grep -m1 -i -e error -e what -e fault \
      -e abort -e signal | cut -c1-140; } || true)"
    [[ -n $message ]] || message="$( { grep -o 'mlir::loom::[A-Za-z_:]*' \
      "$log" | head -1 | sed 's/^/crashed in /'; } || true)"
    what="FAILED (exit $status$signal): $message"
  fi
  printf "   %-10s %8.2f s %7.0f MiB  %s\n" "$name" "$seconds" \
    "$(awk -v k="$kib" 'BEGIN { print k / 1024 }')" "$what"
}
# passes LOG: the --mlir-timing lines of LOG that take 2% or more.
passes() {
  awk '/Execution time report/ { on = 1 } on && /%\)/ {
         pct = $0; sub(/^[^(]*\(/, "", pct); sub(/%.*/, "", pct)
         if (pct + 0 >= 2.0) print "        " $0 }' "$1"
}

total=0 complete=1
timed import "$big/import.log" "$bin/loom-translate" --import-onnx \
  "$big/gpt.onnx" --dim batch=1 -o "$big/imported.mlir"
row import "$big/import.log"
((status == 0)) || { echo "   error: the import failed" >&2; exit 1; }
total=$(awk -v a="$total" -v b="$seconds" 'BEGIN { print a + b }')

timed pipeline "$big/pipeline.log" "$bin/loom-opt" "$big/imported.mlir" \
  "--loom-training-pipeline=tp=$BIG_TP" --mlir-timing -o "$big/pipeline.mlir"
row pipeline "$big/pipeline.log"
if ((status == 0)); then
  passes "$big/pipeline.log"
  total=$(awk -v a="$total" -v b="$seconds" 'BEGIN { print a + b }')
  lower_input="$big/pipeline.mlir"
else
  complete=0
  rm -f "$big/pipeline.mlir"
fi

if [[ -n ${lower_input:-} ]]; then
  timed lower "$big/lower.log" "$bin/loom-opt" "$lower_input" \
    --loom-lower-to-plan --mlir-timing -o /dev/null
  row lower "$big/lower.log"
  if ((status == 0)); then
    passes "$big/lower.log"
    total=$(awk -v a="$total" -v b="$seconds" 'BEGIN { print a + b }')
  else
    complete=0
  fi
  timed lower-nv "$big/lower-nv.log" "$bin/loom-opt" "$lower_input" \
    --loom-lower-to-plan --mlir-timing --verify-each=false -o /dev/null
  row lower-nv "$big/lower-nv.log"
  ((status == 0)) && passes "$big/lower-nv.log"
else
  complete=0
  echo "   lower      skipped: no partitioned module"
fi
if ((complete)); then
  echo "   import + pipeline + lower (three tools, each parsing and printing" \
    "its module): $total s"
else
  echo "   import + pipeline + lower: incomplete (a stage failed above;" \
    "$total s in the stages that finished)"
fi

# The same compile in one process, end to end: loom-run --compile-only
# --no-weights (import of the shapes, training pipeline, loom-lower-to-plan,
# one verification; no weight read, no plan built) and its time per pass.
timed loom-run "$big/loom-run.log" bash -c 'ulimit -v "$1"; shift;
  exec timeout "$@"' _ "$BIG_MEM_KIB" "$BIG_TIMEOUT" "$bin/loom-run" \
  "$big/gpt.onnx" --train --tp "$BIG_TP" --no-weights --dim batch=1 \
  --batch-size 1 --compile-only
row loom-run "$big/loom-run.log"
((status == 124)) && echo "        (stopped after BIG_TIMEOUT=$BIG_TIMEOUT s)"
if ((status == 0)); then
  passes "$big/loom-run.log"
  echo "   loom-run --compile-only --no-weights, import to the lowered plan" \
    "module, end to end: $seconds s, peak $(awk -v k="$kib" \
    'BEGIN { printf "%.0f", k / 1024 }') MiB (target: under 5 s)"
else
  echo "   loom-run --compile-only --no-weights: FAILED (target: under 5 s)"
fi
