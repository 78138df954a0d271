//===- Unemulated.cpp - The kernel family the emulator cannot run ---------===//
//
// GEMMs go to cuBLASLt, a library rather than source the emulator could
// run. The factory here says so, so that a test of them fails with that
// reason (the emulator's tests skip them; docs/cuda-emulator.md).
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common.h"

using namespace loom::runtime;
using namespace loom::runtime::cuda;

KernelOr cuda::createMatmul(const LaunchContext &, const Instruction &) {
  return Status::error("matmul is not emulated (it runs in cuBLASLt)");
}
