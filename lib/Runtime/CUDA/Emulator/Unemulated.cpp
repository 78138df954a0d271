//===- Unemulated.cpp - Kernel families the emulator cannot run -----------===//
//
// GEMMs go to cuBLASLt and elementwise programs are compiled by NVRTC and
// loaded by the driver: libraries, not source the emulator could run. Their
// factories here say so, so that a test of them fails with that reason (the
// emulator's tests skip them; docs/cuda-emulator.md).
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common.h"

using namespace loom::runtime;
using namespace loom::runtime::cuda;

KernelOr cuda::createMatmul(const LaunchContext &, const Instruction &) {
  return Status::error("matmul is not emulated (it runs in cuBLASLt)");
}

KernelOr cuda::createElementwise(const LaunchContext &, const Instruction &) {
  return Status::error(
      "elementwise is not emulated (its programs are compiled by NVRTC)");
}

size_t cuda::compileElementwisePrograms(const std::vector<Instruction> &, int,
                                        unsigned) {
  return 0;
}
