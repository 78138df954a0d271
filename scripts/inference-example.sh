#!/usr/bin/env bash
# Loom's main job on its bundled example, on a fresh machine: installs
# dependencies and builds, exports the example GPT from PyTorch to ONNX
# (opset 17) together with PyTorch's outputs, compiles it to a runtime plan
# and runs it on the CPU runtime with loom-run, then compares the logits with
# PyTorch's and prints the run report (planned vs measured peak memory, time
# per kernel).
#
#   scripts/inference-example.sh [MODEL.onnx INPUT.npy...]   (default: the exported GPT)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

# Set-up progress goes to stderr; stdout is the result.
"$root/scripts/bootstrap.sh" >&2
work="$build/examples"
mkdir -p "$work"

if (($#)); then
  model="$1"
  shift
  inputs=("$@")
  reference=""
else
  model="$work/gpt.onnx"
  reference="$work/gpt-reference"
  echo "== Exporting examples/gpt/export_gpt.py (PyTorch -> ONNX opset 17)"
  /usr/bin/python3 "$root/examples/gpt/export_gpt.py" --opset 17 \
    --out "$model" --save-reference "$reference" 2>&1 | sed 's/^/  /'
  inputs=("$reference/input.npy")
fi

plan="$work/$(basename "${model%.*}").plan"
echo
echo "== loom-run ${model#$root/} ${inputs[*]#$root/} --emit-plan ${plan#$root/} --report"
rm -rf "$work/outputs"
"$build/bin/loom-run" "$model" "${inputs[@]}" --emit-plan "$plan" \
  --output-dir "$work/outputs" --report | sed 's/^/  /'
echo "  outputs in ${work#$root/}/outputs; the plan (docs/design/plan-format.md):"
grep -a -m 1 -B 4 -A 8 '^rank ' "$plan" | sed 's/^/    /'
echo "    ..." 

if [[ -n $reference ]]; then
  echo
  echo "== Loom vs PyTorch (same weights and input)"
  /usr/bin/python3 "$root/test/Examples/Inputs/compare_outputs.py" \
    "$reference" "$work/outputs" logits | sed 's/^/  /'
fi
