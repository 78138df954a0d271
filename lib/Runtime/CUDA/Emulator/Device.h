//===- Device.h - The device side of the host CUDA emulator -----*- C++ -*-===//
//
// The nvcc-compiled kernels of the CUDA backend (Kernels/*.cu) also compile
// as host C++ with LOOM_CUDA_EMULATOR defined: Device.cuh then includes this
// header, which supplies what the CUDA compiler would (the thread and block
// indices, __syncthreads, warp shuffles, atomics, wmma fragments) on top of
// the CUDA headers' host declarations. Emulator.cpp runs each block's threads
// as fibers on one host thread, switching at every barrier, so kernels run
// unchanged and can be compared with the CPU backend on machines without a
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

namespace loom {
namespace runtime {
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
/// at a barrier, a misaligned wmma operand) when it runs, as the device's
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

} // namespace emulator
} // namespace cuda
} // namespace runtime
} // namespace loom

#define threadIdx (::loom::runtime::cuda::emulator::position().thread)
#define blockIdx (::loom::runtime::cuda::emulator::position().block)
#define blockDim (::loom::runtime::cuda::emulator::position().blockSize)
#define gridDim (::loom::runtime::cuda::emulator::position().gridSize)

//===----------------------------------------------------------------------===//
// Intrinsics
//===----------------------------------------------------------------------===//

inline void __syncthreads() { ::loom::runtime::cuda::emulator::syncThreads(1); }
inline int __syncthreads_and(int predicate) {
  return ::loom::runtime::cuda::emulator::syncThreads(predicate);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu)
    ::loom::runtime::cuda::emulator::fail("__syncwarp with a partial mask");
  ::loom::runtime::cuda::emulator::syncWarp();
}
[[noreturn]] inline void __trap() {
  ::loom::runtime::cuda::emulator::fail("__trap()");
}

/// Lane `lane ^ laneMask`'s value of `value` (within groups of `width`
/// lanes); every lane of the warp must take part.
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  namespace emu = ::loom::runtime::cuda::emulator;
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

//===----------------------------------------------------------------------===//
// wmma
//===----------------------------------------------------------------------===//

// Warp-wide matrix fragments. A device spreads a fragment over the warp's
// lanes in an unspecified layout; here every lane holds all of it, which
// gives the same results for code that only loads, multiplies and stores
// fragments (as the flash kernels do). The *_sync calls wait, as documented,
// until every lane of the warp has arrived, so that no lane stores a tile
// before the others have loaded it. Operands are checked for wmma's
// alignment rules: a 32-byte aligned pointer and a leading dimension that is
// a multiple of 16 bytes.
namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  static constexpr int num_elements = rows * cols;
  /// Row-major, widened to f32 (bf16 and f32 widen exactly).
  float x[rows * cols];
};

namespace detail {
inline float widen(float v) { return v; }
inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> void checkOperand(const T *p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ::loom::runtime::cuda::emulator::fail(
        "wmma operand is not 32-byte aligned");
  if ((ldm * sizeof(T)) % 16 != 0)
    ::loom::runtime::cuda::emulator::fail(
        "wmma leading dimension is not a multiple of 16 bytes");
}
template <typename Fragment, typename T>
void load(Fragment &f, const T *p, unsigned ldm, bool rowMajor) {
  checkOperand(p, ldm);
  ::loom::runtime::cuda::emulator::syncWarp();
  for (int r = 0; r < Fragment::rows; ++r)
    for (int c = 0; c < Fragment::cols; ++c)
      f.x[r * Fragment::cols + c] =
          widen(rowMajor ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]);
}
} // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, float value) {
  for (float &e : f.x)
    e = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const T *p,
                      unsigned ldm) {
  static_assert(!std::is_same<Layout, void>::value,
                "operand fragments have a layout");
  detail::load(f, p, ldm, std::is_same<Layout, row_major>::value);
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
                      unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_row_major);
}

template <int M, int N, int K>
void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                       unsigned ldm, layout_t layout) {
  detail::checkOperand(p, ldm);
  ::loom::runtime::cuda::emulator::syncWarp();
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      (layout == mem_row_major ? p[size_t(r) * ldm + c]
                               : p[size_t(c) * ldm + r]) = f.x[r * N + c];
}

/// d = a b + c, each product exact (bf16 x bf16 fits f32), summed in f32.
template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float> &d,
              const fragment<matrix_a, M, N, K, T, LayoutA> &a,
              const fragment<matrix_b, M, N, K, T, LayoutB> &b,
              const fragment<accumulator, M, N, K, float> &c) {
  ::loom::runtime::cuda::emulator::syncWarp();
  float result[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = c.x[i * N + j];
      for (int k = 0; k < K; ++k)
        sum += a.x[i * K + k] * b.x[k * N + j];
      result[i * N + j] = sum;
    }
  std::memcpy(d.x, result, sizeof result);
}

} // namespace wmma
} // namespace nvcuda

#endif // LOOM_LIB_RUNTIME_CUDA_EMULATOR_DEVICE_H
