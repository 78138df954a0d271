#!/usr/bin/env bash
# Loom's main job on its bundled example, on a fresh machine: installs
# dependencies and builds, exports the example GPT from PyTorch to ONNX
# (opset 17), imports it into the loom dialect, verifies and canonicalizes
# it, and prints the factor rule of every op (what sharding propagation
# reads), each located at its ONNX node.
#
#   scripts/example.sh [MODEL.onnx | FILE.mlir]   (default: the exported GPT)
#
# An ONNX model with symbolic dimensions needs LOOM_DIMS, e.g.
# LOOM_DIMS="--dim batch=2 --dim seq=16" (the default for the GPT).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

# Set-up progress goes to stderr; stdout is the result.
"$root/scripts/bootstrap.sh" >&2
mkdir -p "$build/examples"

input="${1:-}"
if [[ -z $input ]]; then
  input="$build/examples/gpt.onnx"
  echo "== Exporting examples/gpt/export_gpt.py (PyTorch -> ONNX opset 17)"
  /usr/bin/python3 "$root/examples/gpt/export_gpt.py" --opset 17 \
    --out "$input" 2>&1 | sed 's/^/  /'
fi
dims="${LOOM_DIMS:---dim batch=2 --dim seq=16}"
if [[ $input == *.onnx ]]; then
  imported="$build/examples/$(basename "${input%.onnx}").mlir"
  echo "== Importing ${input#$root/}: loom-translate --import-onnx $dims"
  # shellcheck disable=SC2086
  "$build/bin/loom-translate" --import-onnx "$input" $dims \
    --mlir-print-debuginfo -o "$imported"
  input="$imported"
fi

out="${input%.mlir}.opt.mlir"
remarks=$(mktemp)
trap 'rm -f "$remarks"' EXIT
"$build/bin/loom-opt" "$input" --canonicalize --cse --loom-test-print-factors \
  --mlir-print-op-on-diagnostic=false -o "$out" 2>"$remarks" || {
  cat "$remarks" >&2
  exit 1
}
ops=$(grep -c "= loom\." "$out" || true)
params=$(grep -c "loom.parameter" "$out" || true)
trainable=$(grep -c "loom.parameter .* trainable" "$out" || true)
echo "verified and canonicalized: $ops loom ops, $params parameters" \
  "($trainable trainable) -> ${out#$root/}"
echo
echo "== Factor rules of the computation (ONNX node, op, factor kinds, sizes, maps)"
# Remarks are `location: remark: op: text`; the location is an ONNX node
# name (imported models) or a line of the .mlir file.
awk '
  / remark: / {
    where = "-"
    if (match($0, /loc\("[^"]*"\)/)) {
      where = substr($0, RSTART + 5, RLENGTH - 7)
    } else if (match($0, /^[^ ]*\.mlir:[0-9]+:/)) {
      split(substr($0, RSTART, RLENGTH), parts, ":"); where = "line " parts[2]
    }
    text = $0; sub(/.* remark: /, "", text); sub(/^loc\("[^"]*"\): /, "", text)
    op = text; sub(/: .*/, "", op); sub(/^[^:]*: /, "", text)
    # Parameters and constants are trivially parallel; show the computation.
    if (op == "loom.param" || op == "loom.constant") next
    printf "  %-28s %-18s %s\n", where, op, text
  }' "$remarks"
