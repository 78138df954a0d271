//===- Emulator.h - Host side of the CUDA emulator (internal) ---*- C++ -*-===//
//
// What the emulated CUDA runtime API (RuntimeAPI.cpp, Streams.cpp) shares
// with the launch machinery (Emulator.cpp) and the libraries (Programs.cpp,
// Blas.cpp): stream queues, the device's sticky error, the thread's last
// launch error and the dynamic shared memory limits kernels opt into.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H
#define LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace loomrt {
namespace cuda {
namespace emulator {

/// Enqueues `work` on `stream` (Streams.cpp): deferred on a created stream,
/// run at once on the legacy default stream. Returns the sticky error set
/// before the call (the work is dropped), or cudaErrorInvalidResourceHandle
/// for an unknown stream.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);
/// Runs what `stream` holds (the legacy stream: what the blocking streams
/// hold); returns the sticky error.
cudaError_t synchronizeStream(cudaStream_t stream);
/// Runs what every stream holds; returns the sticky error.
cudaError_t synchronizeDevice();
/// Makes `error` the device's sticky error (a failure of deferred work).
void failDevice(cudaError_t error);
/// The sticky error (cudaSuccess when there is none).
cudaError_t deviceError();

/// What LOOM_EMULATOR_STATS=1 counts: the runtime calls that cost a device
/// time or a synchronization, printed to stderr at exit (Streams.cpp).
enum class Call {
  Launch,
  Matmul,
  /// Matmuls with LOOM_EMULATOR_SLOW_ALGORITHM's algorithm (Blas.cpp).
  SlowMatmul,
  CopyToDevice,
  CopyToHost,
  CopyOnDevice,
  Memset,
  Synchronize,
  Malloc,
  Free,
  Compile,
  GraphLaunch,
  Count
};
void count(Call call);

/// A device block of `bytes` (DeviceMemory.cpp): 256-byte aligned, filled
/// with 0xff bytes, between inaccessible guard pages; null when there is no
/// memory for it.
void *allocateDeviceBlock(size_t bytes);
void freeDeviceBlock(void *block);
/// " in block (x,y,z), thread (x,y,z)" while a kernel's thread runs on the
/// calling host thread, else "".
std::string runningThread();

/// The calling thread's last launch error, cleared (cudaGetLastError), or
/// the sticky error.
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
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_EMULATOR_EMULATOR_H
