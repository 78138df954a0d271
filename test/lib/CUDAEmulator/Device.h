//===- Device.h - The device side of the host CUDA emulator -----*- C++ -*-===//
//
// The nvcc-compiled kernels of the CUDA backend (Kernels/*.cu) also compile
// as host C++ with LOOM_CUDA_EMULATOR defined: Device.cuh then includes this
// header, which supplies what the CUDA compiler would (the thread and block
// indices, __syncthreads, warp shuffles, atomics, mma.sync and ldmatrix) on top
// of the CUDA headers' host declarations. Emulator.cpp runs each block's
// threads as fibers on one host thread, switching at every barrier, so kernels
// run unchanged and can be compared with the CPU backend on machines without a
// GPU. See docs/cuda-emulator.md for what this does and does not check.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_EMULATOR_DEVICE_H
#define LOOM_LIB_RUNTIME_CUDA_EMULATOR_DEVICE_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// Kernels are plain host functions here. Shared memory is one object per
// host thread: the emulator runs one block at a time on a host thread, and
// that block's threads are fibers of it.
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __shared__
#define __shared__ static thread_local

namespace loomrt {
namespace cuda {
namespace emulator {

/// Where the running (emulated) thread is.
struct ThreadPosition {
  uint3 thread;
  uint3 block;
  dim3 blockSize;
  dim3 gridSize;
};

/// The running thread's position; only valid inside a launch.
const ThreadPosition &position();

/// Enqueues `body` on `stream` as `kernel` with `grid` blocks of `block`
/// threads and `shared` bytes of dynamic shared memory (the body holds
/// copies of the arguments, as a launch does). Launch errors (an invalid
/// configuration, too much shared memory) are printed and left for
/// cudaGetLastError at once; failures inside the kernel (a trap, a deadlock
/// at a barrier, a misaligned ldmatrix row) when it runs, as the device's
/// sticky error.
void launch(const void *kernel, dim3 grid, dim3 block, size_t shared,
            cudaStream_t stream, std::function<void()> body);

/// The block's dynamic shared memory, 128-byte aligned. Filled with 0xff
/// bytes (NaN for every float type) before each block, so that reads of
/// what no thread wrote show.
unsigned char *dynamicShared();

/// Waits until every thread of the block that has not exited arrives;
/// returns whether `predicate` was non-zero for all of them.
int syncThreads(int predicate);
/// Waits until every lane of the warp arrives (all must be alive).
void syncWarp();
/// Stops the launch with `message` (and the thread's position).
[[noreturn]] void fail(const char *message);
/// The lane's 8-byte slot of its warp's exchange area.
uint64_t &exchangeSlot(int lane);
/// Every lane's `bytes` (at most 32) at `mine` into `all`, lane after lane;
/// every lane of the warp must take part (a warp barrier).
void gatherWarp(const void *mine, size_t bytes, void *all);

// The warp-level tensor-core instructions of Kernels/TensorCore.cuh, with
// the register layouts the PTX ISA documents (WarpMatrix.cpp).

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d += a b.
void mmaM16N8K16BF16(float d[4], const uint32_t a[4], const uint32_t b[2]);
/// ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16 into r[count].
void loadMatrices(uint32_t *r, int count, bool trans, const void *row);

// cp.async (Kernels/AsyncCopy.cuh): each thread's copies wait in its own
// queue. Issuing one fills its destination with 0xff bytes (what the
// destination holds until the copy lands is undefined on a device) and
// reads its source; the bytes land when a wait completes the copy's group.

/// cp.async of `bytes` from `src` into dynamic shared memory at `dst` (both
/// aligned to `bytes`); zeros when `valid` is false.
void copyAsync(void *dst, const void *src, int bytes, bool valid);
/// cp.async.commit_group.
void commitAsyncCopies();
/// cp.async.wait_group `pending`: lands the calling thread's committed
/// groups but its `pending` newest.
void waitAsyncCopies(int pending);

} // namespace emulator
} // namespace cuda
} // namespace loomrt

#define threadIdx (::loomrt::cuda::emulator::position().thread)
#define blockIdx (::loomrt::cuda::emulator::position().block)
#define blockDim (::loomrt::cuda::emulator::position().blockSize)
#define gridDim (::loomrt::cuda::emulator::position().gridSize)

//===----------------------------------------------------------------------===//
// Intrinsics
//===----------------------------------------------------------------------===//

inline void __syncthreads() { ::loomrt::cuda::emulator::syncThreads(1); }
inline int __syncthreads_and(int predicate) {
  return ::loomrt::cuda::emulator::syncThreads(predicate);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu)
    ::loomrt::cuda::emulator::fail("__syncwarp with a partial mask");
  ::loomrt::cuda::emulator::syncWarp();
}
[[noreturn]] inline void __trap() {
  ::loomrt::cuda::emulator::fail("__trap()");
}

/// Lane `lane ^ laneMask`'s value of `value` (within groups of `width`
/// lanes); every lane of the warp must take part.
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  namespace emu = ::loomrt::cuda::emulator;
  static_assert(sizeof(T) <= sizeof(uint64_t) &&
                    std::is_trivially_copyable<T>::value,
                "a shuffled value fits a 64-bit slot");
  if (mask != 0xffffffffu)
    emu::fail("__shfl_xor_sync with a partial mask");
  const int lane = int(threadIdx.x % 32);
  std::memcpy(&emu::exchangeSlot(lane), &value, sizeof(T));
  emu::syncWarp();
  int source = lane ^ laneMask;
  if (source / width != lane / width)
    source = lane;
  T result;
  std::memcpy(&result, &emu::exchangeSlot(source), sizeof(T));
  emu::syncWarp(); // nobody overwrites a slot before every lane has read
  return result;
}

// Threads of a block run one at a time, so atomics are plain updates.
inline int atomicCAS(int *address, int compare, int value) {
  const int old = *address;
  if (old == compare)
    *address = value;
  return old;
}
template <typename T> T atomicAdd(T *address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

// The device's integer and float min/max (same-typed operands here).
template <typename T> T min(T a, T b) { return b < a ? b : a; }
template <typename T> T max(T a, T b) { return a < b ? b : a; }

inline unsigned __float_as_uint(float x) {
  unsigned bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline float __uint_as_float(unsigned bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

#endif // LOOM_LIB_RUNTIME_CUDA_EMULATOR_DEVICE_H
