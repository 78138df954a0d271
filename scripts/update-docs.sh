#!/usr/bin/env bash
# Regenerates docs/reference from the ODS definitions (after editing .td files).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
cmake --build "$build" --target mlir-doc
mkdir -p "$root/docs/reference"
cp "$build/docs/Dialects/LoomDialect.md" "$build/docs/Dialects/PlanDialect.md" \
  "$build/docs/LoomTrainingPasses.md" "$build/docs/LoomFusionPasses.md" \
  "$build/docs/LoomParallelPasses.md" "$build/docs/LoomConversionPasses.md" \
  "$build/docs/PlanPasses.md" "$root/docs/reference/"
echo "updated docs/reference"
