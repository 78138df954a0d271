#!/usr/bin/env bash
# Prepares what a GPU session needs in .gpu-kit/ (ignored by git; carried to
# the GPU machine with the device tool's `carry`), on this machine, which has
# the full build and PyTorch:
#   .gpu-kit/cases/       the end-to-end cases (test/GPU/gpu_checks.py make)
#   .gpu-kit/gpt2/        the GPT-2-small benchmark plan (benchmarks/gpt2-cuda)
#   .gpu-kit/dp/          the 2-rank data-parallel and tensor-parallel
#                         training checks
#   .gpu-kit/layouts/     the parallel layouts' plans (gpu-parallel-layouts.sh)
#   .gpu-kit/pipeline/    the pipeline benchmark's plans and predictions
#                         (benchmarks/pipeline/bench.py --emit)
#   .gpu-kit/googletest/  GoogleTest's source, for the unit tests there
# Then, on the GPU machine: scripts/gpu-session.sh (see
# docs/design/cuda-backend.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
kit="$root/.gpu-kit"
python=/usr/bin/python3
rm -rf "$kit" && mkdir -p "$kit"
"$python" "$root/test/GPU/gpu_checks.py" make "$kit/cases" \
  --loom-run "$build/bin/loom-run" --python "$python"
"$python" "$root/benchmarks/gpt2-cuda/bench.py" make "$kit/gpt2" \
  --loom-run "$build/bin/loom-run" --python "$python"
# The data- and tensor-parallel training checks: the 1- and 2-rank plans of
# test/Examples/train-data-parallel.test and train-tensor-parallel.test and
# their data.
mkdir -p "$kit/dp"
"$build/bin/loom-run" "$root/test/Examples/Inputs/data-parallel-1-rank.mlir" \
  --emit-plan "$kit/dp/one.plan" >/dev/null
"$build/bin/loom-run" "$root/test/Examples/Inputs/data-parallel-2-ranks.mlir" \
  --emit-plan "$kit/dp/two.plan" >/dev/null
"$build/bin/loom-run" "$root/test/Examples/Inputs/tensor-parallel-2-ranks.mlir" \
  --emit-plan "$kit/dp/tp.plan" >/dev/null
"$python" -c "import numpy as np; r = np.random.default_rng(1); \
np.save('$kit/dp/x.npy', r.normal(size=(12, 8)).astype(np.float32)); \
np.save('$kit/dp/labels.npy', r.integers(0, 4, size=12))"
# The parallel layouts of the example GPT (pipelines, ZeRO, tensor
# parallel, 3D) as plans compiled here, each run there on thread ranks
# sharing the GPU against the 1-rank plan on the CPU.
"$root/scripts/gpu-parallel-layouts.sh" make "$kit/layouts" \
  "$build/bin/loom-run"
# The pipeline benchmark's plans (benchmarks/pipeline/bench.py --emit):
# its 4 ranks have a core each on the GPU machine's CPUs, where this
# machine's 2 cores time-slice them.
mkdir -p "$kit/pipeline"
"$python" "$root/benchmarks/cpu-training/bench.py" prepare \
  --dir "$kit/pipeline" --model gpt --vocab 8192 --block-size 128 \
  --layers 4 --heads 4 --embd 256 --seed 0 --batch 8 --seq 128 >/dev/null
"$python" "$root/benchmarks/pipeline/bench.py" --loom-run "$build/bin/loom-run" \
  --model "$kit/pipeline/gpt.onnx" --idx "$kit/pipeline/idx.npy" \
  --labels "$kit/pipeline/labels.npy" --work "$kit/pipeline" \
  --emit "$kit/pipeline"
rm -f "$kit/pipeline/gpt.onnx"
cp -r /usr/src/googletest "$kit/googletest"
du -sh "$kit"
