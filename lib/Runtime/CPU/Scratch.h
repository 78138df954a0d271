//===- Scratch.h - Per-thread scratch memory for CPU kernels ----*- C++ -*-===//
//
// Kernels' temporaries (attention's transposed and gathered operands, a bf16
// GEMM's widened operands) come from buffers that each thread keeps between
// calls. A fresh std::vector of a few hundred KiB is fresh pages on every
// call: their first-touch faults cost about as much as the arithmetic, and
// thread ranks of one process fault in one address space, where they wait
// on each other (at dp 2 on two cores the attention backward ran 25% slower
// than on one rank alone; two processes did not slow each other). Reused
// buffers fault once.
//
//   ScratchScope scratch;                 // at the top of the kernel
//   float *copy = scratch.take<float>(n); // uninitialized, 64-byte aligned
//
// Every buffer taken in a scope goes back when the scope ends; buffers are
// taken in the same order on every call of a kernel, so each finds the one
// it had last time. A thread keeps at most kScratchKeptBytes between calls.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CPU_SCRATCH_H
#define LOOM_LIB_RUNTIME_CPU_SCRATCH_H

#include <cstddef>

namespace loomrt::cpu {

/// What one thread keeps between kernel calls; buffers beyond it are freed
/// when their scope ends.
constexpr size_t kScratchKeptBytes = size_t(256) << 20;

class ScratchScope {
public:
  ScratchScope();
  ~ScratchScope();
  ScratchScope(const ScratchScope &) = delete;
  ScratchScope &operator=(const ScratchScope &) = delete;

  /// `count` uninitialized elements, valid until this scope ends.
  template <typename T> T *take(size_t count) {
    return static_cast<T *>(takeBytes(count * sizeof(T)));
  }

private:
  void *takeBytes(size_t bytes);
  size_t first_;
};

} // namespace loomrt::cpu

#endif // LOOM_LIB_RUNTIME_CPU_SCRATCH_H
