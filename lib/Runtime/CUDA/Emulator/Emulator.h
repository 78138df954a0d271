//===- Emulator.h - Host side of the CUDA emulator (internal) ---*- C++ -*-===//
//
// What the emulated CUDA runtime API (RuntimeAPI.cpp) shares with the launch
// machinery (Emulator.cpp): the thread's last launch error and the dynamic
// shared memory limits kernels opt into.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H
#define LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H

#include <cuda_runtime_api.h>

#include <cstddef>

namespace loom {
namespace runtime {
namespace cuda {
namespace emulator {

/// The calling thread's last launch error, cleared (cudaGetLastError).
cudaError_t takeLastError();
/// The same, left as it is (cudaPeekAtLastError).
cudaError_t peekLastError();
/// cudaFuncAttributeMaxDynamicSharedMemorySize of `kernel`.
void setSharedLimit(const void *kernel, size_t bytes);
/// The most dynamic shared memory a kernel may opt into.
size_t optInSharedBytes();
/// The running thread's ThreadPosition (for run-time compiled programs,
/// which see it as ProgramPrelude.h's LoomEmulatorPosition).
const void *positionAddress();

} // namespace emulator
} // namespace cuda
} // namespace runtime
} // namespace loom

#endif // LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H
