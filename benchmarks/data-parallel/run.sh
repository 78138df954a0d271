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
