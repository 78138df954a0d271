#!/usr/bin/env bash
# Data-parallel and ZeRO benchmark.
#
#   benchmarks/data-parallel/run.sh [BUILD_DIR]          (default: build/)
#
# (a) ZeRO's memory table for a 7.5B GPT-shaped model (Megatron's shape: 36
#     layers, hidden 4096, 32 heads, vocabulary 51200; sequence 1024), shapes
#     only: for N = 1, 4, 16, 64 data-parallel ranks and every ZeRO stage,
#     `loom-run --train --dp N --zero K --no-weights --compile-only
#     --report-json` compiles the AdamW step without any weight or run, and
#     the planned parameters, gradients and optimizer state per rank are
#     printed beside ZeRO's formula (zero_memory.py; it says "all figures
#     match" or "MISMATCH"), with the planned peak and the compile time.
# (b) is described above its code below.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="${1:-$HERE/../../build}"
PYTHON=/usr/bin/python3
LOOM_RUN="$BUILD/bin/loom-run"
[ -x "$LOOM_RUN" ] || { echo "no $LOOM_RUN: build Loom first" >&2; exit 1; }
WORK="$(mktemp -d /tmp/loom-dp-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

echo "== (a) ZeRO memory per rank, 7.5B GPT shape, compiled without weights"
"$PYTHON" "$HERE/zero_memory.py" --loom-run "$LOOM_RUN" --work "$WORK"

# (b) Overlap: the benchmark GPT of benchmarks/cpu-training (vocab 8192, 4
#     layers, 4 heads, embd 256; batch 8 x 128; AdamW) trained with --dp 2
#     under `mpirun -np 2` (one OpenBLAS thread per process), gradients in
#     one all-reduce per tensor (--bucket-mb 0), in 4 MiB buckets and in
#     25 MiB buckets (DDP's default, here one bucket for most of the
#     model): the median step time, and from the last step's --trace how
#     long the all-reduces were in flight and which fraction of that the
#     backward pass's kernels covered (overlap.py). With threads when there
#     is no mpirun (--ranks 2).
echo
echo "== (b) dp 2 step with and without gradient buckets"
"$PYTHON" "$HERE/../cpu-training/bench.py" prepare --dir "$WORK" \
  --model gpt --vocab 8192 --block-size 128 --layers 4 --heads 4 --embd 256 \
  --seed 0 --batch 8 --seq 128 >"$WORK/prepare.txt" 2>"$WORK/export.log" || {
  cat "$WORK/export.log" "$WORK/prepare.txt" >&2; exit 2; }
sed -n 's/^params:/   parameters:/p' "$WORK/prepare.txt"
launch=(--ranks 2)
how="2 thread ranks"
if command -v mpirun >/dev/null; then
  launch=()
  how="mpirun -np 2"
fi
echo "   ($how, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1)"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for mb in 0 4 25; do
  cmd=("$LOOM_RUN" "$WORK/gpt.onnx" --train --dp 2 --bucket-mb "$mb"
    --input "idx=$WORK/idx.npy" --labels "$WORK/labels.npy"
    --loss cross_entropy --batch-size 8 --steps 12 --optimizer adamw
    --lr 1e-3 --freeze '\.attn\.bias$' --metrics "$WORK/b$mb.jsonl"
    --trace "$WORK/b$mb.trace.json" "${launch[@]}")
  if ((${#launch[@]} == 0)); then
    mpirun --allow-run-as-root --oversubscribe -np 2 "${cmd[@]}" \
      >"$WORK/b$mb.log" 2>&1 || { cat "$WORK/b$mb.log" >&2; exit 2; }
  else
    "${cmd[@]}" >"$WORK/b$mb.log" 2>&1 || { cat "$WORK/b$mb.log" >&2; exit 2; }
  fi
  "$PYTHON" "$HERE/overlap.py" --trace "$WORK/b$mb.trace.json" \
    --metrics "$WORK/b$mb.jsonl" --name "--bucket-mb $mb"
done
