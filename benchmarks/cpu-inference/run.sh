#!/usr/bin/env bash
# CPU inference benchmark: a nanoGPT model (examples/gpt/export_gpt.py) run by
# PyTorch eager on the CPU and by Loom's CPU runtime (loom-run) on the ONNX
# export of the same model and weights, same input.
#
#   benchmarks/cpu-inference/run.sh [BUILD_DIR]          (default: build/)
#
# Steps (one run does all of them):
#   1. bench.py exports the GPT with a fixed seed to $BENCH_DIR/gpt.onnx (opset
#      17), saves the input idx.npy (int64 [BATCH, SEQ]) and PyTorch's logits,
#      and times PyTorch eager under torch.no_grad() with
#      torch.set_num_threads(THREADS): WARMUP untimed runs, then RUNS timed.
#   2. loom-run compiles the ONNX model, writes the plan gpt.plan and runs once
#      (--report, --output-dir): the cold run (arena page faults included).
#   3. loom-run runs gpt.plan (no recompilation) with --warmup WARMUP
#      --iterations ITERATIONS --report: "time: X ms per run" is the mean of
#      the timed runs.
#   4. Loom's logits (of step 2 and of step 3) must match PyTorch's within TOL
#      (max abs diff): the script exits 1 otherwise. Speed never fails it.
#   5. Prints PyTorch ms, Loom ms and the ratio pytorch/loom (PyTorch median
#      over Loom's mean; > 1: Loom is faster), loom-run's planned vs
#      measured peak memory lines, its
#      per-kernel time table and slowest instructions (from the last run), and
#      with PROFILE=1 torch.profiler's op table for PyTorch.
#
# Environment (defaults): VOCAB=8192 BLOCK=128 LAYERS=4 HEADS=4 EMBD=256
#   BATCH=8 SEQ=128 SEED=0 THREADS=$(nproc) WARMUP=5 RUNS=20 ITERATIONS=20
#   TOL=1e-4 PROFILE=0 BENCH_DIR=(a new mktemp -d dir, kept afterwards).
# THREADS sets torch.set_num_threads and OMP_NUM_THREADS / OPENBLAS_NUM_THREADS
# for loom-run. Timings mean something only on an otherwise idle machine: with
# another job on the cores, multi-threaded runs of both (OpenMP barriers with a
# descheduled thread) slow down several-fold and vary run to run; THREADS=1
# is the steadier comparison there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
loom_run="$build/bin/loom-run"
python=/usr/bin/python3
bench="$root/benchmarks/cpu-inference/bench.py"

VOCAB="${VOCAB:-8192}" BLOCK="${BLOCK:-128}" LAYERS="${LAYERS:-4}"
HEADS="${HEADS:-4}" EMBD="${EMBD:-256}" BATCH="${BATCH:-8}" SEQ="${SEQ:-128}"
SEED="${SEED:-0}" THREADS="${THREADS:-$(nproc)}" WARMUP="${WARMUP:-5}"
RUNS="${RUNS:-20}" ITERATIONS="${ITERATIONS:-20}" TOL="${TOL:-1e-4}"
PROFILE="${PROFILE:-0}"
dir="${BENCH_DIR:-$(mktemp -d /tmp/loom-cpu-bench.XXXXXX)}"
mkdir -p "$dir"
[[ -x $loom_run ]] || { echo "error: $loom_run not found" >&2; exit 2; }

echo "== CPU inference: GPT vocab $VOCAB, block $BLOCK, $LAYERS layers," \
  "$HEADS heads, embd $EMBD; batch $BATCH x seq $SEQ; $THREADS threads"
echo "   work dir: $dir"

# --- 1. export + PyTorch eager ----------------------------------------------
profile_flag=()
[[ $PROFILE != 0 ]] && profile_flag=(--profile 10)
"$python" "$bench" prepare --dir "$dir" --vocab "$VOCAB" --block-size "$BLOCK" \
  --layers "$LAYERS" --heads "$HEADS" --embd "$EMBD" --batch "$BATCH" \
  --seq "$SEQ" --seed "$SEED" --threads "$THREADS" --warmup "$WARMUP" \
  --runs "$RUNS" "${profile_flag[@]}" >"$dir/torch.txt" 2>"$dir/export.log" || {
  cat "$dir/export.log" "$dir/torch.txt" >&2; exit 2; }
torch_ms=$(awk '/^torch:/ { print $6 }' "$dir/torch.txt")   # median

# --- 2. loom-run: compile + cold run ----------------------------------------
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
ms_of() { awk '/^time:/ { print $2 }' "$1"; }
t0=$(date +%s.%N)
"$loom_run" "$dir/gpt.onnx" --input "idx=$dir/idx.npy" --emit-plan "$dir/gpt.plan" \
  --output-dir "$dir/out_cold" --report >"$dir/loom_cold.txt" 2>&1 || {
  cat "$dir/loom_cold.txt" >&2; echo "error: loom-run failed" >&2; exit 1; }
t1=$(date +%s.%N)
cold_ms=$(ms_of "$dir/loom_cold.txt")
compile_s=$(awk -v a="$t0" -v b="$t1" -v c="$cold_ms" \
  'BEGIN { printf "%.2f", b - a - c / 1e3 }')

# --- 3. loom-run: timed iterations on the plan ------------------------------
report="$dir/loom_iter.txt"
"$loom_run" "$dir/gpt.plan" --input "idx=$dir/idx.npy" --warmup "$WARMUP" \
  --iterations "$ITERATIONS" --output-dir "$dir/out_iter" --report \
  >"$report" 2>&1 || { cat "$report" >&2; echo "error: loom-run failed" >&2; exit 1; }
loom_ms=$(ms_of "$report")

# --- 4. correctness ---------------------------------------------------------
status=0
check() {   # label, loom output file
  printf "  %-28s" "$1"
  "$python" "$bench" compare "$dir/logits_torch.npy" "$2" --tol "$TOL" || status=1
}

# --- 5. summary -------------------------------------------------------------
echo
sed -n 's/^params:/model parameters:/p' "$dir/torch.txt"
echo "loom-run compile (import + passes + planning): ~${compile_s} s"
echo
printf "%-34s %12s\n" "" "ms per run"
printf "%-34s %12s   %s\n" "PyTorch eager (median)" "$torch_ms" \
  "$(sed -n 's/^torch: //p' "$dir/torch.txt")"
printf "%-34s %12s   %s\n" "Loom (mean)" "$loom_ms" \
  "(mean of $ITERATIONS runs after $WARMUP warm-up runs)"
printf "%-34s %12s\n" "Loom cold first run" "$cold_ms"
awk -v t="$torch_ms" -v l="$loom_ms" 'BEGIN {
  printf "%-34s %12.2f   (> 1: Loom faster)\n", "ratio PyTorch / Loom", t / l }'
echo
echo "correctness (max abs diff vs PyTorch):"
check "loom-run (cold run)" "$dir/out_cold/logits.npy"
check "loom-run (after $((WARMUP + ITERATIONS)) runs)" "$dir/out_iter/logits.npy"
echo
echo "loom-run --report (last run):"
sed -n '/^memory:/,/^  weights/p' "$report"
sed -n '/^kernel /,$p' "$report"
if [[ $PROFILE != 0 ]]; then
  echo
  sed -n '/^torch.profiler/,$p' "$dir/torch.txt"
fi
if (( status )); then
  echo "FAIL: Loom's logits differ from PyTorch's by more than $TOL" >&2
fi
exit "$status"
