#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds, and
# runs every test (lit + FileCheck, GoogleTest, docs-in-sync) through ctest.
# Extra arguments go to ctest (e.g. -R lit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure "$@"
