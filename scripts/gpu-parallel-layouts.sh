#!/usr/bin/env bash
# The parallel layouts on a GPU: every kind of layout Loom compiles
# (pipelines with each schedule, ZeRO 1 and 3, tensor parallel, 3D) for the
# example GPT, trained by thread ranks that share one GPU (--device cuda),
# each against the 1-rank plan trained on the CPU.
#   gpu-parallel-layouts.sh make DIR LOOM_RUN   (here: PyTorch and MLIR)
#   gpu-parallel-layouts.sh check DIR LOOM_RUN  (there: the runtime-only build)
# `check` prints one line per layout and exits 1 if any differs by more
# than --rtol 1e-4 (the GPU's f32 kernels sum in other orders than the
# CPU's over 10 AdamW steps).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="$1" dir="$2" loom_run="$3"
# `make` needs PyTorch (Debian's /usr/bin/python3 here), `check` numpy
# (the first python3 on the GPU machine).
python=python3
needs=numpy
[[ $what == make ]] && needs=torch
python3 -c "import $needs" 2>/dev/null || python=/usr/bin/python3
# name, ranks, compile flags
layouts=(
  "pp2-1f1b 2 --pp 2 --microbatches 4"
  "pp2-zbh1 2 --pp 2 --microbatches 4 --schedule zb-h1"
  "pp2-interleaved 2 --pp 2 --microbatches 4 --schedule interleaved --virtual-stages 2"
  "pp4-gpipe 4 --pp 4 --microbatches 4 --schedule gpipe"
  "dp2-zero1 2 --dp 2 --zero 1 --grad-accum 4"
  "dp2-zero3 2 --dp 2 --zero 3 --grad-accum 4"
  "tp2 2 --tp 2 --grad-accum 4"
  "dp2-pp2-tp2 8 --dp 2 --pp 2 --tp 2 --microbatches 4"
)
# Mixed precision, both on the GPU: ZeRO-1's layout (a whole bf16 copy of
# each GEMM weight, assembled by the runtime from the f32 master's shards,
# and gathered in bf16 after each update) against data parallelism without
# ZeRO, which it equals bit for bit on the CPU. (ZeRO-2 reduces each
# microbatch's gradient, so with accumulation it sums in another order.)
bf16_pairs=(
  "dp2-bf16 2 --dp 2 --grad-accum 4 --precision bf16"
  "dp2-zero1-bf16 2 --dp 2 --zero 1 --grad-accum 4 --precision bf16"
)
data=(--input "idx=$dir/input.npy" --labels "$dir/labels.npy" --batch-size 8)
if [[ $what == make ]]; then
  set -e
  mkdir -p "$dir"
  tmp="$(mktemp -d)"
  "$python" "$root/test/Examples/Inputs/train_reference.py" gpt "$tmp" \
    --optimizer adamw --lr 1e-2 --weight-decay 0.01 --eps 1e-5 --steps 10 \
    --batch-size 8 --grad-accum 4 >/dev/null
  cp "$tmp/model.onnx" "$tmp/input.npy" "$tmp/labels.npy" "$dir/"
  rm -rf "$tmp"
  hyper=(--optimizer adamw --lr 1e-2 --betas 0.9,0.999 --eps 1e-5
    --weight-decay 0.01 --steps 0)
  "$loom_run" "$dir/model.onnx" --train --grad-accum 4 "${data[@]}" \
    "${hyper[@]}" --emit-plan "$dir/one.plan" >/dev/null
  for layout in "${layouts[@]}" "${bf16_pairs[@]}"; do
    read -r name ranks flags <<<"$layout"
    # shellcheck disable=SC2086
    "$loom_run" "$dir/model.onnx" --train --ranks "$ranks" $flags \
      "${data[@]}" "${hyper[@]}" --emit-plan "$dir/$name.plan" >/dev/null
  done
  exit 0
fi
# Many small files: kept off $OUT (the device tool brings back 8 files).
out="$(mktemp -d)"
mkdir -p "$out"
status=0
"$loom_run" "$dir/one.plan" --train "${data[@]}" --steps 10 \
  --metrics "$out/one.jsonl" --save-weights "$out/one" >/dev/null || exit 1
for layout in "${layouts[@]}"; do
  read -r name ranks _ <<<"$layout"
  start=$(date +%s%N)
  if ! "$loom_run" "$dir/$name.plan" --train "${data[@]}" --steps 10 \
    --ranks "$ranks" --device cuda --metrics "$out/$name.jsonl" \
    --save-weights "$out/$name" >"$out/$name.log" 2>&1; then
    echo "$name: FAILED on the GPU:"
    tail -n 5 "$out/$name.log"
    status=1
    continue
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  echo -n "$name ($ranks thread ranks, $ms ms for 10 steps): "
  "$python" "$root/test/Examples/Inputs/compare_training_runs.py" \
    "$out/one.jsonl" "$out/one" "$out/$name.jsonl" "$out/$name" \
    --rtol 1e-4 || status=1
done
train() { # NAME: the plan trained on the GPU for 10 steps
  "$loom_run" "$dir/$1.plan" --train "${data[@]}" --steps 10 --ranks 2 \
    --device cuda --metrics "$out/$1.jsonl" --save-weights "$out/$1" \
    >"$out/$1.log" 2>&1 || {
    echo "$1: FAILED on the GPU:"
    tail -n 5 "$out/$1.log"
    return 1
  }
}
for pair in "dp2-bf16 dp2-zero1-bf16"; do
  read -r base zero <<<"$pair"
  if train "$base" && train "$zero"; then
    echo -n "$zero against $base, both on the GPU: "
    "$python" "$root/test/Examples/Inputs/compare_training_runs.py" \
      "$out/$base.jsonl" "$out/$base" "$out/$zero.jsonl" "$out/$zero" \
      --exact || status=1
  else
    status=1
  fi
done
exit $status
