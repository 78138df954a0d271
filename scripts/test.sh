#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds, and
# runs every test (lit + FileCheck, GoogleTest, ONNX conformance,
# docs-in-sync) through ctest; then builds the runtime alone, without
# LLVM/MLIR, runs its unit tests, and checks that its loom-run runs a plan the
# full build compiled. Extra arguments go to the first ctest (e.g. -R lit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
"$root/scripts/bootstrap.sh"
# Tests run on every core (LOOM_TEST_JOBS overrides): most are one-threaded.
jobs="${LOOM_TEST_JOBS:-$(nproc)}"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"

echo "== Runtime-only build (no LLVM/MLIR)"
runtime="${RUNTIME_BUILD_DIR:-$root/build-runtime}"
BUILD_DIR="$runtime" "$root/scripts/bootstrap.sh" --runtime-only
ctest --test-dir "$runtime" --output-on-failure -j "$jobs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/examples/gpt/export_gpt.py" --opset 17 \
  --out "$work/gpt.onnx" --save-reference "$work/ref" >/dev/null 2>&1
"$build/bin/loom-run" "$work/gpt.onnx" "$work/ref/input.npy" \
  --emit-plan "$work/gpt.plan"
"$runtime/bin/loom-run" "$work/gpt.plan" "$work/ref/input.npy" \
  --output-dir "$work/out"
/usr/bin/python3 "$root/test/Examples/Inputs/compare_outputs.py" \
  "$work/ref" "$work/out" logits
if "$runtime/bin/loom-run" "$work/gpt.onnx" "$work/ref/input.npy" 2>"$work/err"; then
  echo "the runtime-only loom-run compiled an ONNX model" >&2
  exit 1
fi
grep -q "built without the compiler" "$work/err"
echo "runtime-only loom-run: plan runs and matches PyTorch; models are refused"
