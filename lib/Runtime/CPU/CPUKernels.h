//===- CPUKernels.h - The CPU backend's kernels (internal) ------*- C++ -*-===//
//
// The entry points of every CPU kernel (one check and one run function each,
// collected by KernelRegistry.cpp) and the helpers the kernel files share:
// attribute access, operand validation, runtime error reporting and parallel
// loops.
//
// Thread safety: kernels keep no mutable global state, so several ranks may
// run kernels concurrently. The one exception is OpenBLAS's global thread
// count, which the batched matmul lowers while it runs GEMMs in parallel over
// batches (see Gemm.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CPU_CPUKERNELS_H
#define LOOM_LIB_RUNTIME_CPU_CPUKERNELS_H

#include "loom/Runtime/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <omp.h>

namespace loom {
namespace runtime {
namespace cpu {

//===----------------------------------------------------------------------===//
// Kernel entry points
//===----------------------------------------------------------------------===//

#define LOOM_CPU_KERNEL(name)                                                  \
  Status check_##name(const Instruction &instruction);                         \
  void run_##name(const KernelArgs &args);

// Gemm.cpp
LOOM_CPU_KERNEL(matmul)
// Elementwise.cpp
LOOM_CPU_KERNEL(elementwise)
// Reduce.cpp
LOOM_CPU_KERNEL(reduce_sum)
LOOM_CPU_KERNEL(reduce_mean)
LOOM_CPU_KERNEL(reduce_max)
// Normalization.cpp
LOOM_CPU_KERNEL(softmax)
LOOM_CPU_KERNEL(log_softmax)
LOOM_CPU_KERNEL(layer_norm)
LOOM_CPU_KERNEL(cross_entropy)
// DataMovement.cpp
LOOM_CPU_KERNEL(gather)
LOOM_CPU_KERNEL(transpose)
LOOM_CPU_KERNEL(slice)
LOOM_CPU_KERNEL(concat)
LOOM_CPU_KERNEL(split)
LOOM_CPU_KERNEL(copy)
LOOM_CPU_KERNEL(dropout)

#undef LOOM_CPU_KERNEL

//===----------------------------------------------------------------------===//
// Validation helpers (defined in KernelRegistry.cpp)
//===----------------------------------------------------------------------===//

/// Fails unless the instruction has exactly `inputs` inputs and `outputs`
/// outputs.
Status expectOperandCounts(const Instruction &instruction, size_t inputs,
                           size_t outputs);

/// Fails unless `dtype` is f32 or f64; `what` names the operand.
Status expectFloat(DType dtype, const std::string &what);

/// Fails when `dtype` cannot be handled at all by the CPU kernels (f16,
/// bf16); `what` names the operand.
Status expectSupported(DType dtype, const std::string &what);

/// Fails unless `a` and `b` have the same dtype; the names go into the
/// message.
Status expectSameDType(const TensorRef &a, const std::string &aName,
                       const TensorRef &b, const std::string &bName);

/// Fails unless `a` and `b` have the same shape.
Status expectSameShape(const TensorRef &a, const std::string &aName,
                       const TensorRef &b, const std::string &bName);

/// Fails when the instruction has an attribute not in `known`, so that a
/// misspelt attribute is not silently ignored.
Status expectKnownAttrs(const Attributes &attrs,
                        std::initializer_list<const char *> known);

/// Reads an integer attribute; `fallback` when absent and `required` false.
Status getIntAttr(const Attributes &attrs, const std::string &name,
                  int64_t &value, bool required, int64_t fallback = 0);

/// Reads a number (float or integer) attribute.
Status getDoubleAttr(const Attributes &attrs, const std::string &name,
                     double &value, bool required, double fallback = 0);

/// Reads an integer list attribute ("[]" is an empty list).
Status getIntListAttr(const Attributes &attrs, const std::string &name,
                      std::vector<int64_t> &value, bool required);

/// Reads a word attribute (`mean`, `tanh`, ...).
Status getWordAttr(const Attributes &attrs, const std::string &name,
                   std::string &value, bool required,
                   const std::string &fallback = "");

/// Resolves `axis` (negative counts from the end) against `rank`.
Status normalizeAxis(int64_t axis, int64_t rank, int64_t &normalized);

/// Records a runtime error in `args.error`; the first one wins. Safe to call
/// from OpenMP worker threads.
void reportError(const KernelArgs &args, const std::string &message);

//===----------------------------------------------------------------------===//
// Shared runtime helpers
//===----------------------------------------------------------------------===//

/// How many threads a loop of `work` units should use, so that each thread
/// gets at least `grain` units (tiny tensors run on the calling thread instead
/// of paying for a parallel region).
inline int threadsFor(int64_t work, int64_t grain) {
  int64_t maxThreads = omp_get_max_threads();
  if (grain < 1)
    grain = 1;
  int64_t wanted = work / grain;
  return int(std::max<int64_t>(1, std::min(wanted, maxThreads)));
}

/// Row-major strides (in elements) of `shape`.
inline std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Product of shape[begin..end).
inline int64_t dimProduct(const std::vector<int64_t> &shape, size_t begin,
                          size_t end) {
  int64_t product = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i)
    product *= shape[i];
  return product;
}

} // namespace cpu
} // namespace runtime
} // namespace loom

#endif // LOOM_LIB_RUNTIME_CPU_CPUKERNELS_H
