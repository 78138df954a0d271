#!/usr/bin/env bash
# Everything a GPU session checks, on the GPU machine (nvcc, CMake, ninja, no
# MLIR), from the repository root with .gpu-kit/ (scripts/gpu-kit.sh) beside
# it:
#   1. the runtime-only build with the CUDA backend (GoogleTest built from
#      .gpu-kit/googletest when the machine has none);
#   2. ctest -L gpu: the CUDA kernels against the CPU kernels, the NCCL
#      engine (cuda-kernels, nccl-*);
#   3. the end-to-end cases: plans compiled elsewhere, run with
#      --device cuda against the CPU backend and PyTorch (gpu_checks.py),
#      and the parallel layouts on thread ranks (gpu-parallel-layouts.sh);
#   4. the attention kernels against PyTorch's scaled_dot_product_attention
#      (benchmarks/attention-cuda), and the GPT-2-small bf16 training
#      benchmark against PyTorch eager;
#   5. the pipeline schedules' bubbles on the machine's CPUs (4 ranks with a
#      core each), against the simulation (benchmarks/pipeline/bench.py;
#      with `bench`, or alone with `pipeline`).
# Logs go to $OUT (the device tool's output folder) when it is set.
#   scripts/gpu-session.sh [tests|bench|pipeline|all]   (default all)
# With the device tool's 10-minute calls, run `tests` and `bench` as two
# calls: build-gpu/ stays while the machine is warm, so the second builds
# nothing.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
out="${OUT:-$root/.gpu-kit/out}"
mkdir -p "$out"
build="$root/build-gpu"
kit="$root/.gpu-kit"
jobs="$(nproc)"
status=0

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
  --format=csv 2>&1 | tee "$out/gpu.txt"

gtest_args=()
if [[ -d $kit/googletest ]]; then
  cmake -G Ninja -S "$kit/googletest" -B /tmp/gtest-build \
    -DCMAKE_INSTALL_PREFIX=/tmp/gtest -DBUILD_GMOCK=OFF >/dev/null &&
    cmake --build /tmp/gtest-build -j "$jobs" >/dev/null &&
    cmake --install /tmp/gtest-build >/dev/null &&
    gtest_args=(-DGTest_ROOT=/tmp/gtest)
fi
# The host CUDA emulator is for machines without a GPU: not built here.
cmake -G Ninja -S "$root" -B "$build" -DLOOM_RUNTIME_ONLY=ON \
  -DLOOM_BUILD_EMULATOR=OFF -DCMAKE_BUILD_TYPE=Release "${gtest_args[@]}" \
  2>&1 | tail -n 5
if ! ninja -C "$build" -j "$jobs" 2>&1 | tee "$out/build.log" | tail -n 3; then
  echo "gpu-session: the runtime-only build failed (see build.log)"
  exit 1
fi
"$build/bin/loom-run" --list-devices | tee -a "$out/gpu.txt"

if [[ $what == all || $what == tests ]]; then
  (cd "$build" && ctest -L gpu --output-on-failure 2>&1) |
    tee "$out/ctest-gpu.log" | tail -n 25 || status=1
  # "100% tests passed, 0 tests failed out of N", or without the middle
  # part in newer CTest.
  grep -q "^100% tests passed" "$out/ctest-gpu.log" || status=1
  # ctest counts a skipped test as passed; on a GPU machine the kernels'
  # tests must run (the 2-rank NCCL tests may skip: they need two GPUs).
  if grep -q "cuda-kernels .*Skipped" "$out/ctest-gpu.log"; then
    echo "gpu-session: cuda-kernels was skipped: its tests saw no GPU"
    status=1
  fi
  python3 "$root/test/GPU/gpu_checks.py" check "$kit/cases" \
    --loom-run "$build/bin/loom-run" 2>&1 | tee "$out/e2e.log" || status=1
  # Multi-rank training through the session library: the hand-written
  # 2-rank data-parallel step (two.plan) and tensor-parallel step (tp.plan:
  # sliced weights, whole tensors saved) on two thread ranks sharing the
  # GPU, against their 1-rank form on the CPU (the same losses and state up
  # to the order of the sums), and checkpoints that resume bit for bit.
  dp="$kit/dp"
  train=(--train --input "x=$dp/x.npy" --labels "$dp/labels.npy"
    --batch-size 4 --shuffle 3)
  for plan in two tp; do
    [[ -f $dp/$plan.plan ]] || continue
    dpout="$out/dp-$plan"
    mkdir -p "$dpout"
    {
      "$build/bin/loom-run" "$dp/one.plan" "${train[@]}" --steps 6 \
        --metrics "$dpout/one.jsonl" --save-weights "$dpout/one" &&
        "$build/bin/loom-run" "$dp/$plan.plan" "${train[@]}" --steps 6 \
          --ranks 2 --device cuda --metrics "$dpout/two.jsonl" \
          --save-weights "$dpout/two" &&
        python3 "$root/test/Examples/Inputs/compare_training_runs.py" \
          "$dpout/one.jsonl" "$dpout/one" "$dpout/two.jsonl" "$dpout/two" \
          --rtol 1e-5 &&
        "$build/bin/loom-run" "$dp/$plan.plan" "${train[@]}" --steps 3 \
          --ranks 2 --device cuda --checkpoint "$dpout/ckpt" >/dev/null &&
        "$build/bin/loom-run" "$dp/$plan.plan" "${train[@]}" --steps 6 \
          --ranks 2 --device cuda --resume "$dpout/ckpt" \
          --metrics "$dpout/resumed.jsonl" >/dev/null &&
        python3 -c "import sys; a = open(sys.argv[1]).read().splitlines(); \
b = open(sys.argv[2]).read().splitlines(); k = lambda l: l.split(', \"step_ms')[0]; \
ok = [k(x) for x in a[3:]] == [k(x) for x in b]; \
print(sys.argv[3], 'resume:', 'bit-exact' if ok else 'DIFFERENT'); \
sys.exit(0 if ok else 1)" \
          "$dpout/two.jsonl" "$dpout/resumed.jsonl" "$plan"
    } 2>&1 | tee "$out/dp-$plan.log" | tail -n 4
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  done
  # Pipelines (each schedule), ZeRO 1 and 3, tensor parallel and 3D on
  # thread ranks sharing the GPU, against one CPU rank.
  "$root/scripts/gpu-parallel-layouts.sh" check "$kit/layouts" \
    "$build/bin/loom-run" 2>&1 | tee "$out/layouts.log" || status=1
fi
if [[ $what == all || $what == bench || $what == pipeline ]] &&
  [[ -d $kit/pipeline ]]; then
  # The pipeline schedules' measured bubble against the simulated one, on
  # this machine's CPUs: 4 ranks with a core each (docs/design/pipeline.md).
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1 python3 \
    "$root/benchmarks/pipeline/bench.py" --loom-run "$build/bin/loom-run" \
    --idx "$kit/pipeline/idx.npy" --labels "$kit/pipeline/labels.npy" \
    --work /tmp/pipeline-bench --plans "$kit/pipeline" 2>&1 |
    tee "$out/pipeline.log" | tail -n 8 || status=1
fi
if [[ $what == all || $what == bench ]]; then
  PYTHONUNBUFFERED=1 python3 "$root/benchmarks/attention-cuda/bench.py" \
    --loom-bench "$build/bin/loom-bench-attention" 2>&1 |
    tee "$out/bench-attention.log" | tail -n 8 || status=1
  PYTHONUNBUFFERED=1 python3 "$root/benchmarks/gpt2-cuda/bench.py" run \
    "$kit/gpt2" --loom-run "$build/bin/loom-run" \
    --profile "$out/loom-profile.txt" 2>&1 |
    tee "$out/bench.log" | tail -n 12 || status=1
fi
exit $status
