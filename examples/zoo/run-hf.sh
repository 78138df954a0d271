#!/usr/bin/env bash
# The model zoo on Hugging Face `transformers` models (random weights, no
# downloads): creates a virtualenv beside Debian's torch with `transformers`
# pinned to VERSION (default 4.36.2; 4.30.2 writes the older idioms: Max in
# LLaMA's attention, NeoX's Tile + GatherElements), then runs zoo.py
# --source hf. Needs PyPI. Extra arguments go to zoo.py.
#   examples/zoo/run-hf.sh [VERSION] [zoo.py options]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="${1:-4.36.2}"
shift || true
venv="$root/build/zoo-hf-$version"
if [[ ! -x $venv/bin/python ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "transformers==$version"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$venv/bin/python" "$root/examples/zoo/zoo.py" "$out" \
  --loom-run "$root/build/bin/loom-run" --source hf "$@" 2>/dev/null
