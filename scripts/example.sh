#!/usr/bin/env bash
# Loom's main job on its bundled example, on a fresh machine: installs
# dependencies, builds, then verifies and canonicalizes the example GPT block
# and prints the factor rule of every op (what sharding propagation reads).
#
#   scripts/example.sh [FILE.mlir]     (default: examples/gpt-block/gpt_block.mlir)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
input="${1:-$root/examples/gpt-block/gpt_block.mlir}"

# Set-up progress goes to stderr; stdout is the result.
"$root/scripts/bootstrap.sh" >&2

out="$build/examples/$(basename "${input%.mlir}").opt.mlir"
mkdir -p "$(dirname "$out")"
remarks=$(mktemp)
trap 'rm -f "$remarks"' EXIT

echo "== Loom on ${input#$root/}"
"$build/bin/loom-opt" "$input" --canonicalize --loom-test-print-factors \
  --mlir-print-op-on-diagnostic=false -o "$out" 2>"$remarks" || {
  cat "$remarks" >&2
  exit 1
}
ops=$(grep -c "= loom\." "$out" || true)
params=$(grep -c "loom.parameter" "$out" || true)
echo "verified and canonicalized: $ops loom ops, $params parameters -> ${out#$root/}"
echo
echo "== Factor rules (kind of each factor, its size, indexing maps operands then results)"
# Each remark is `location: remark: op: text`; print `line  op  text`
# (folded constants have no single source line).
awk '
  / remark: / {
    line = "-"
    if (match($0, /^[^ ]*\.mlir:[0-9]+:/)) {
      split(substr($0, RSTART, RLENGTH), parts, ":"); line = parts[2]
    }
    text = $0; sub(/.* remark: /, "", text)
    op = text; sub(/: .*/, "", op); sub(/^[^:]*: /, "", text)
    printf "  line %-4s %-18s %s\n", line, op, text
  }' "$remarks"
