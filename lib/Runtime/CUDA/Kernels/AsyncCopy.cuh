//===- AsyncCopy.cuh - cp.async global-to-shared copies -----*- CUDA -*-===//
//
// cp.async (sm_80+) copies global memory to shared memory without passing
// through registers, so a block can issue the loads of its next tile and go
// on computing on the current one: the flash attention kernels double-buffer
// their operand tiles with it. A thread's copies are grouped by
// commitAsyncCopies(); waitAsyncCopies<N>() returns when at most its N newest
// groups are still in flight. Like any shared-memory write, a copy is visible
// to the block's other threads only after the issuing thread waited for it
// and a __syncthreads.
//
// On the host emulator (LOOM_CUDA_EMULATOR) a copy poisons its destination
// (0xff bytes, NaN in every float type) when issued and lands when waited
// for, so a read before the wait, or a copy issued into a tile that other
// warps still read, shows (Emulator.cpp). Older architectures copy at once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_ASYNCCOPY_CUH
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_ASYNCCOPY_CUH

#include "Device.cuh"

#include <cstdint>

namespace loomrt {
namespace cuda {

/// Copies `Bytes` (4, 8 or 16) from global `src` to shared `dst`, both
/// aligned to `Bytes`; with `valid` false the destination gets zeros and
/// `src` (which must still be a valid address) is not read.
template <int Bytes>
__device__ inline void copyAsync(void *dst, const void *src, bool valid) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16,
                "cp.async copies 4, 8 or 16 bytes");
#ifdef LOOM_CUDA_EMULATOR
  emulator::copyAsync(dst, src, Bytes, valid);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = unsigned(__cvta_generic_to_shared(dst));
  const int srcBytes = valid ? Bytes : 0; // the rest is zero-filled
  if constexpr (Bytes == 16) // .cg: through L2 only, as tiles are read once
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address),
        "l"(src), "r"(srcBytes)
        : "memory");
  else
    asm volatile(
        "cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(address),
        "l"(src), "n"(Bytes), "r"(srcBytes)
        : "memory");
#else
  struct Chunk {
    unsigned char b[Bytes];
  };
  *static_cast<Chunk *>(dst) =
      valid ? *static_cast<const Chunk *>(src) : Chunk{};
#endif
}

/// Closes the group of this thread's copies issued since the last commit.
__device__ inline void commitAsyncCopies() {
#ifdef LOOM_CUDA_EMULATOR
  emulator::commitAsyncCopies();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most this thread's `Pending` newest committed groups are
/// in flight (their copies may not have landed yet).
template <int Pending> __device__ inline void waitAsyncCopies() {
#ifdef LOOM_CUDA_EMULATOR
  emulator::waitAsyncCopies(Pending);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_ASYNCCOPY_CUH
