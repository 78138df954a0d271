#!/usr/bin/env bash
# Installs Loom's dependencies (Debian packages; idempotent, quiet when all
# are present) and builds Loom with CMake + Ninja + ccache.
#
#   scripts/bootstrap.sh                 full build in build/
#   scripts/bootstrap.sh --runtime-only  runtime only (no LLVM/MLIR) in build-runtime/
#   scripts/bootstrap.sh --deps-only     install dependencies, build nothing
#
# BUILD_DIR overrides the build directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=full
for arg in "$@"; do
  case "$arg" in
    --runtime-only) mode=runtime ;;
    --deps-only) mode=deps ;;
    *) echo "bootstrap.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

runtime_packages=(cmake ninja-build ccache g++ libgtest-dev libopenblas-dev
  libopenblas-openmp-dev libopenmpi-dev openmpi-bin)
compiler_packages=(python3 python3-venv libonnx-testdata llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler python3-onnx python3-numpy
  python3-torch clang-19 libclang-rt-19-dev libomp-19-dev libmimalloc-dev)
packages=("${runtime_packages[@]}")
[[ $mode == runtime ]] || packages+=("${compiler_packages[@]}")

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { echo "bootstrap: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ $mode == deps ]] && exit 0

# ccache hits across clones: hash paths relative to the checkout.
export CCACHE_BASEDIR="$root"
export CCACHE_NOHASHDIR=1

if [[ $mode == runtime ]]; then
  build="${BUILD_DIR:-$root/build-runtime}"
  # As a GPU machine builds it (scripts/gpu-session.sh): no host CUDA
  # emulator, whose tests the full build runs.
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DLOOM_RUNTIME_ONLY=ON -DLOOM_BUILD_EMULATOR=OFF >/dev/null
else
  build="${BUILD_DIR:-$root/build}"
  # onnx 1.17 beside Debian's 1.12, for ONNX's version converter (the opset
  # 18-21 test models); pinned, from PyPI.
  if [[ ! -x $build/py-onnx/bin/python ]]; then
    mkdir -p "$build"
    /usr/bin/python3 -m venv "$build/py-onnx"
    "$build/py-onnx/bin/pip" install -q --disable-pip-version-check \
      onnx==1.17.0
  fi
  if [[ ! -f $build/build.ninja ]]; then
    cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
fi
cmake --build "$build"
