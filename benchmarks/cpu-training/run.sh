#!/usr/bin/env bash
# CPU training benchmark: one AdamW training step of a nanoGPT model
# (examples/gpt/export_gpt.py, the configuration of benchmarks/cpu-inference)
# run by PyTorch eager on the CPU and by Loom (loom-run --train) on the
# training-mode ONNX export of the same model and weights, same batch.
#
#   benchmarks/cpu-training/run.sh [BUILD_DIR]          (default: build/)
#
# Steps (one run does all of them):
#   1. bench.py prepare exports the GPT with a fixed seed to $BENCH_DIR/gpt.onnx
#      (examples/gpt/export_for_training.py: training mode, opset 17, no
#      constant folding) and saves one batch idx.npy / labels.npy (int64
#      [BATCH, SEQ], random tokens) that every step of both sides uses.
#   2. For each thread count in THREADS:
#      a. PyTorch: a process running only the step loop (bench.py
#         torch-train, torch.set_num_threads): STEPS steps of forward,
#         F.cross_entropy, backward, AdamW step, zero_grad(set_to_none=True),
#         each timed, written as torch_T.jsonl in loom-run's --metrics format.
#      b. Loom: loom-run gpt.onnx --train --batch-size BATCH --steps STEPS
#         --optimizer adamw --lr LR --metrics loom_T.jsonl (compiles, then
#         trains), with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = T.
#      Both run under bench.py peak-rss, which records the child's peak
#      resident set (getrusage(RUSAGE_CHILDREN).ru_maxrss) and wall time.
#   3. The bare processes are measured the same way: python importing torch
#      and the exporter (bench.py torch-bare), and loom-run --help.
#   4. Prints per thread count the median step_ms over the steps after the
#      first 2 (warm-up: page faults, allocator growth, Loom's first-use
#      costs), the ratio PyTorch / Loom (> 1: Loom faster), the peak RSS of
#      each side and that minus its bare process; and checks Loom's losses
#      against PyTorch's (step 0 within TOL, every step within LOSS_TOL):
#      the script exits 1 on a mismatch or a failed run. Speed never fails it.
#      Loom's peak RSS includes compiling the model in the same process.
#
# MODEL=llama runs examples/zoo's LLaMA-style model instead (RMSNorm, rotary
# embeddings, SwiGLU, grouped-query attention) at the same sizes.
# Environment (defaults): MODEL=gpt VOCAB=8192 BLOCK=128 LAYERS=4 HEADS=4 EMBD=256
#   BATCH=8 SEQ=128 SEED=0 THREADS="1 $(nproc)" STEPS=12 LR=1e-3 TOL=1e-4
#   LOSS_TOL=1e-2 LOOM=auto (1: run Loom, 0: PyTorch only, auto: Loom only if
#   loom-run --help lists --train) BENCH_DIR=(a new mktemp -d dir, kept).
# Timings mean something only on an otherwise idle machine (see
# benchmarks/cpu-inference/run.sh); THREADS=1 is the steadier comparison.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
loom_run="$build/bin/loom-run"
python=/usr/bin/python3
bench="$root/benchmarks/cpu-training/bench.py"

VOCAB="${VOCAB:-8192}" BLOCK="${BLOCK:-128}" LAYERS="${LAYERS:-4}"
HEADS="${HEADS:-4}" EMBD="${EMBD:-256}" BATCH="${BATCH:-8}" SEQ="${SEQ:-128}"
SEED="${SEED:-0}" STEPS="${STEPS:-12}" LR="${LR:-1e-3}" TOL="${TOL:-1e-4}"
LOSS_TOL="${LOSS_TOL:-1e-2}" LOOM="${LOOM:-auto}"
THREADS="${THREADS:-$(printf '%s\n' 1 "$(nproc)" | sort -nu | xargs)}"
dir="${BENCH_DIR:-$(mktemp -d /tmp/loom-train-bench.XXXXXX)}"
mkdir -p "$dir"
MODEL="${MODEL:-gpt}"
model_flags=(--model "$MODEL" --vocab "$VOCAB" --block-size "$BLOCK"
  --layers "$LAYERS" --heads "$HEADS" --embd "$EMBD" --seed "$SEED")

if [[ $LOOM == auto ]]; then
  LOOM=0
  [[ -x $loom_run ]] && "$loom_run" --help 2>&1 | grep -- '--train' >/dev/null && LOOM=1
  ((LOOM)) || echo "note: $loom_run missing or without --train: PyTorch only"
fi
if ((LOOM)) && [[ ! -x $loom_run ]]; then
  echo "error: $loom_run not found" >&2; exit 2
fi

echo "== CPU training (AdamW lr $LR): $MODEL vocab $VOCAB, block $BLOCK," \
  "$LAYERS layers, $HEADS heads, embd $EMBD; batch $BATCH x seq $SEQ;" \
  "$STEPS steps; threads: $THREADS"
echo "   work dir: $dir"

# --- 1. export + data --------------------------------------------------------
"$python" "$bench" prepare --dir "$dir" "${model_flags[@]}" --batch "$BATCH" \
  --seq "$SEQ" >"$dir/prepare.txt" 2>"$dir/export.log" || {
  cat "$dir/export.log" "$dir/prepare.txt" >&2; exit 2; }

# --- 2. PyTorch and Loom, each thread count ----------------------------------
rss() { "$python" "$bench" peak-rss "$@"; }
for t in $THREADS; do
  export OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" MKL_NUM_THREADS="$t"
  rss "$dir/torch_$t.rss.json" -- "$python" "$bench" torch-train --dir "$dir" \
    "${model_flags[@]}" --threads "$t" --steps "$STEPS" --lr "$LR" \
    --metrics "$dir/torch_$t.jsonl" >"$dir/torch_$t.log" 2>&1 || {
    cat "$dir/torch_$t.log" >&2; echo "error: PyTorch run failed" >&2; exit 2; }
  if ((LOOM)); then
    rss "$dir/loom_$t.rss.json" -- "$loom_run" "$dir/gpt.onnx" --train \
      --input "idx=$dir/idx.npy" --labels "$dir/labels.npy" \
      --loss cross_entropy --batch-size "$BATCH" --steps "$STEPS" \
      --optimizer adamw --lr "$LR" --freeze '\.attn\.bias$' \
      --metrics "$dir/loom_$t.jsonl" >"$dir/loom_$t.log" 2>&1 || {
      cat "$dir/loom_$t.log" >&2; echo "error: loom-run failed ($t threads)" >&2; }
  fi
done

# --- 3. bare processes -------------------------------------------------------
rss "$dir/torch_bare.rss.json" -- "$python" "$bench" torch-bare >/dev/null
if ((LOOM)); then
  rss "$dir/loom_bare.rss.json" -- "$loom_run" --help >/dev/null
fi

# --- 4. summary --------------------------------------------------------------
echo
sed -n 's/^params:/model parameters:/p; s/^state:/training state:/p' \
  "$dir/prepare.txt"
echo
no_loom=()
((LOOM)) || no_loom=(--no-loom)
"$python" "$bench" summary --dir "$dir" --threads "$THREADS" --tol "$TOL" \
  --loss-tol "$LOSS_TOL" "${no_loom[@]}"
