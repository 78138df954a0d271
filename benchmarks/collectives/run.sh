#!/usr/bin/env bash
# Communication benchmark (issue 6): all-reduce and all-gather bus bandwidth
# for 1 KiB-256 MiB on 2/4/8 ranks, in one output:
#   - the threads engine (loom-run --ranks N) against memcpy of the same
#     bytes per rank by N threads at once: the memory bandwidth that bounds
#     any collective inside one machine;
#   - Loom's MPI engine against OpenMPI's own MPI_Allreduce / MPI_Allgather,
#     timed by the same binary on the same buffers.
# Each table prints the ratio loom / reference per size.
#
#   benchmarks/collectives/run.sh [BUILD_DIR]     (default: $BUILD or build/)
#
# Builds loom-bench-collectives in BUILD_DIR when it is missing (configure
# the build first; a runtime-only build will do). Environment (defaults):
#   RANKS="2 4 8"  BENCH_MAX_BYTES=256M (largest size; K/M/G suffixes)
#   BENCH_SECONDS=0.2 (timed seconds per figure, after the warm-up)
# Memory: the threads engine holds 2 x size per rank (4 GiB at 8 x 256 MiB).
# With more ranks than cores every rank is oversubscribed, so such figures
# measure scheduling as much as copying (see README.md); the MPI runs use
# mpi_yield_when_idle for both sides, else OpenMPI's busy-polling blocking
# collectives starve the ranks that hold the data.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${BUILD:-build}}"
[[ $build == /* ]] || build="$root/$build"
bench="$build/bin/loom-bench-collectives"
RANKS="${RANKS:-2 4 8}"
max="${BENCH_MAX_BYTES:-256M}"
seconds="${BENCH_SECONDS:-0.2}"

if [[ ! -x $bench ]]; then
  echo "building $bench"
  cmake --build "$build" --target loom-bench-collectives
fi
mpi=0
if "$bench" --help | grep -q 'MPI engine available'; then
  if command -v mpirun >/dev/null; then mpi=1
  else echo "note: mpirun not found: threads engine only"; fi
else
  echo "note: $bench was built without MPI: threads engine only"
fi
mpirun=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader
  --mca mpi_yield_when_idle 1)

start=$SECONDS
echo "== Loom collectives: ranks $RANKS, sizes 1 KiB to $max (x4)," \
  "$(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo |
  head -1))"
((mpi)) && echo "   $(mpirun --version 2>&1 | head -1); ${mpirun[*]}"
for n in $RANKS; do
  echo
  echo "=== $n ranks: threads engine vs memcpy ==="
  "$bench" --engine threads --ranks "$n" --max-bytes "$max" \
    --seconds "$seconds"
  if ((mpi)); then
    echo
    echo "=== $n ranks: Loom MPI engine vs OpenMPI ==="
    "${mpirun[@]}" -np "$n" "$bench" --engine mpi --max-bytes "$max" \
      --seconds "$seconds"
  fi
done
echo
echo "done in $((SECONDS - start)) s"
