#!/usr/bin/env bash
# Import benchmark: a GPT-2-XL-shaped ONNX model (~1.6B parameters, 6.5 GB of
# float32 weights in ONNX external data) imported by loom-translate, next to
# ONNX's own Python loader reading the same model as the reference.
#
#   benchmarks/onnx-import/run.sh [BUILD_DIR]       (default: build/)
#
# BENCH_DIR (default /tmp/loom-onnx-import-bench) holds the generated model;
# it needs ~20 GB of free disk for the model and the bytecode output. Extra
# generator flags (e.g. a smaller config) go in GEN_FLAGS.
# Targets (issue 3): well under a minute, peak RSS <= ~1.2x weight bytes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
dir="${BENCH_DIR:-/tmp/loom-onnx-import-bench}"
python=/usr/bin/python3
translate="$build/bin/loom-translate"
mkdir -p "$dir"
model="$dir/gpt.onnx"

if [[ ! -f $model.data ]]; then
  echo "generating $model ..." >&2
  "$python" "$root/benchmarks/onnx-import/make_gpt_onnx.py" --out "$model" \
    --no-check ${GEN_FLAGS:-} >&2
fi
weight_bytes=$(stat -c %s "$model.data")

# Runs a command under /usr/bin/time; prints "seconds peak_kib".
measure() {
  local log="$dir/time.log"
  /usr/bin/time -f "%e %M" -o "$log" "$@" >/dev/null
  cat "$log"
}

row() {
  local name="$1" seconds="$2" kib="$3"
  awk -v n="$name" -v s="$seconds" -v k="$kib" -v w="$weight_bytes" \
    'BEGIN { printf "%-44s %8.1f s %9.0f MiB %7.2fx\n", n, s, k / 1024, k * 1024 / w }'
}

echo "model: $model ($(awk -v w="$weight_bytes" 'BEGIN { printf "%.2f GB", w / 1e9 }') of weights)"
printf "%-44s %10s %13s %8s\n" "run" "time" "peak RSS" "RSS/weights"

read -r s k < <(measure "$python" -c \
  "import onnx, sys; onnx.load(sys.argv[1], load_external_data=True)" "$model")
row "reference: onnx.load(load_external_data)" "$s" "$k"

read -r s k < <(measure "$translate" --import-onnx "$model" --dim batch=1 \
  -o "$dir/gpt.mlir")
row "loom-translate (weights referenced)" "$s" "$k"

read -r s k < <(measure "$translate" --import-onnx "$model" --dim batch=1 \
  --external-weights=load --emit-bytecode -o "$dir/gpt.mlirbc")
row "loom-translate --external-weights=load (bc)" "$s" "$k"
rm -f "$dir/gpt.mlirbc"

echo "targets: < 60 s and RSS/weights <= 1.2 for every loom-translate run"
