#!/usr/bin/env bash
# Builds Loom's libFuzzer targets with clang-19 (ASan + UBSan) in
# build-fuzz/ and fuzzes each for SECONDS: the ONNX importer, seeded with the
# lit tests' models, and the runtime's readers of untrusted files (plans,
# .npy, TensorProto), seeded with tools/loom-plan-fuzzer/corpus.
#
#   scripts/fuzz.sh [SECONDS]     default 60 per target; CI runs a short session
#
# Crashing inputs are written to build-fuzz/crashes/ and fail the script.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"

"$root/scripts/bootstrap.sh" --deps-only
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
if [[ ! -f $build/build.ninja ]]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=/usr/lib/llvm-19/bin/clang \
    -DCMAKE_CXX_COMPILER=/usr/lib/llvm-19/bin/clang++ \
    -DLOOM_ENABLE_FUZZER=ON -DLOOM_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target loom-onnx-fuzzer loom-plan-fuzzer

# Seeds: every ONNX text test case (split at split-file markers) and the
# binary models the tests generate.
corpus="$build/corpus"
mkdir -p "$corpus" "$build/crashes"
for test in "$root"/test/Import/ONNX/*.onnxtext; do
  awk -v dir="$corpus" -v base="$(basename "$test")" '
    /^#--- / { file = dir "/" base "." $2; next }
    file { print > file; next }
    { print > (dir "/" base) }' "$test"
done
python=/usr/bin/python3
"$python" "$root/test/Import/ONNX/Inputs/make_model.py" named "$corpus/named.onnx"
"$python" "$root/test/Import/ONNX/Inputs/make_model.py" external "$corpus/ext.onnx"
rm -f "$corpus"/*.data

echo "fuzz: running loom-onnx-fuzzer for ${seconds}s"
ASAN_OPTIONS=detect_leaks=0 "$build/bin/loom-onnx-fuzzer" "$corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$build/crashes/" 2>&1 | tail -n 25

plan_corpus="$build/plan-corpus"
mkdir -p "$plan_corpus"
cp "$root"/tools/loom-plan-fuzzer/corpus/* "$plan_corpus/"
echo "fuzz: running loom-plan-fuzzer for ${seconds}s"
ASAN_OPTIONS=detect_leaks=0 "$build/bin/loom-plan-fuzzer" "$plan_corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$build/crashes/" 2>&1 | tail -n 25
