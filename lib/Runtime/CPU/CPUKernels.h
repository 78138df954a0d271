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
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

namespace loomrt {
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
LOOM_CPU_KERNEL(cumsum)
// Normalization.cpp
LOOM_CPU_KERNEL(softmax)
LOOM_CPU_KERNEL(log_softmax)
LOOM_CPU_KERNEL(layer_norm)
LOOM_CPU_KERNEL(layer_norm_backward)
LOOM_CPU_KERNEL(cross_entropy)
LOOM_CPU_KERNEL(cross_entropy_backward)
// DataMovement.cpp
LOOM_CPU_KERNEL(gather)
LOOM_CPU_KERNEL(scatter_add)
LOOM_CPU_KERNEL(transpose)
LOOM_CPU_KERNEL(slice)
LOOM_CPU_KERNEL(concat)
LOOM_CPU_KERNEL(split)
LOOM_CPU_KERNEL(copy)
LOOM_CPU_KERNEL(dropout)
// Attention.cpp
LOOM_CPU_KERNEL(attention)
LOOM_CPU_KERNEL(attention_backward)

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

/// Fails unless `dtype` is f32, f64 or bf16 (kernels that compute bf16 in
/// f32: matmul); `what` names the operand.
Status expectFloatOrBF16(DType dtype, const std::string &what);

/// Fails for f16, the one dtype the elementwise kernel cannot compute in
/// (bf16 values are computed in f32 and rounded, see BFloat16.h).
Status expectComputable(DType dtype, const std::string &what);

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
inline std::vector<int64_t>
contiguousStrides(const std::vector<int64_t> &shape) {
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

//===----------------------------------------------------------------------===//
// Fast float math
//===----------------------------------------------------------------------===//
//
// std::exp/erf/tanh are scalar library calls (5-15 ns each), which would make
// GELU and softmax dominate a GPT forward. These float versions are branch-free
// arithmetic, so loops over them vectorize, and stay within a few 1e-7 of the
// exact values relative to the result (also in the tails, where GELU's and
// sigmoid's results are tiny). Functions holding such loops are compiled for
// AVX2 and AVX-512 too and pick the best at load time (LOOM_VECTOR_CLONES).

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define LOOM_VECTOR_CLONES                                                     \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LOOM_VECTOR_CLONES
#endif

namespace fast {

inline float fromBits(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline int32_t toBits(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

/// e^(x + tail), where `tail` is a small correction to x that float could not
/// hold in x itself (see erfcPositive). Cephes' expf reduction and polynomial
/// (~1 ulp); 2^n is applied in two halves so that results near overflow and
/// gradual underflow stay right.
inline float exp(float x, float tail) {
  const float hi = 88.72283935546875f, lo = -104.0f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  xc = x != x ? 0.0f : xc;
  // Round to nearest by adding and subtracting 1.5 * 2^23.
  float n = ((xc + tail) * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // n * 0.693359375 is exact (9 + 8 bits), and so is the subtraction.
  float r = xc - n * 0.693359375f;
  r = (r + tail) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // Keep the int conversion defined when a non-finite tail made n so (the
  // result is replaced below then).
  n = n < -160.0f ? -160.0f : (n > 130.0f ? 130.0f : n);
  n = n != n ? 0.0f : n;
  int32_t ni = int32_t(n), n1 = ni >> 1, n2 = ni - n1;
  float result = p * fromBits((n1 + 127) << 23) * fromBits((n2 + 127) << 23);
  result = x > hi ? __builtin_inff() : result;
  result = x < lo ? 0.0f : result; // whatever the tail (inf - inf for erfc)
  return x != x ? x : result;
}

inline float exp(float x) { return fast::exp(x, 0.0f); }

/// erfc(z) for z >= 0 (Numerical Recipes' erfcc: relative error < 1.2e-7),
/// given -z*z as hi + lo: erfc(z) ~ e^-z^2 is so sensitive to z^2 (a
/// relative error of z^2 * dz) that -z*z rounded to float would be off by
/// 2e-6 relative for z ~ 6.
inline float erfcCore(float z, float negSquareHi, float negSquareLo) {
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * fast::exp(negSquareHi, p + negSquareLo);
}

/// x with the low 12 mantissa bits cleared: its square is exact in float.
inline float highHalf(float x) {
  return fromBits(toBits(x) & int32_t(0xFFFFF000));
}

/// erfc(z) for z >= 0. -z*z = -zh*zh (exact) - (z - zh)(z + zh).
inline float erfcPositive(float z) {
  float zh = highHalf(z);
  return erfcCore(z, -zh * zh, -(z - zh) * (z + zh));
}

/// erf: Taylor series near 0 (where 1 - erfc would lose relative accuracy),
/// erfc beyond.
inline float erf(float x) {
  float a = x < 0 ? -x : x;
  float x2 = x * x;
  float s = 1.0f / 9360.0f;
  s = s * x2 - 1.0f / 1320.0f;
  s = s * x2 + 1.0f / 216.0f;
  s = s * x2 - 1.0f / 42.0f;
  s = s * x2 + 1.0f / 10.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  float small = 1.1283791670955126f * x * s;
  float large = 1.0f - erfcPositive(a);
  large = x < 0 ? -large : large;
  return a < 0.5f ? small : large;
}

/// tanh: odd Taylor series below 0.5, 1 - 2 / (e^2|x| + 1) above.
inline float tanh(float x) {
  float a = x < 0 ? -x : x;
  float x2 = x * x;
  float s = -929569.0f / 638512875.0f;
  s = s * x2 + 21844.0f / 6081075.0f;
  s = s * x2 - 1382.0f / 155925.0f;
  s = s * x2 + 62.0f / 2835.0f;
  s = s * x2 - 17.0f / 315.0f;
  s = s * x2 + 2.0f / 15.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  float small = x * s;
  float large = 1.0f - 2.0f / (fast::exp(2.0f * a) + 1.0f);
  large = x < 0 ? -large : large;
  return a < 0.5f ? small : large;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + fast::exp(-x)); }

/// 0.5 x (1 + erf(x / sqrt 2)), written with erfc so that the negative tail
/// keeps its relative accuracy.
inline float gelu(float x) {
  // erfc(|x| / sqrt 2), with -z*z = -x*x / 2 split from x itself (z is
  // rounded).
  float a = x < 0 ? -x : x, ah = highHalf(a);
  float e = erfcCore(a * 0.70710678118654752f, -0.5f * ah * ah,
                     -0.5f * (a - ah) * (a + ah));
  // e == 0: the tail underflowed (x -> -inf gives 0, not -inf * 0).
  float negative = e == 0.0f ? 0.0f : 0.5f * x * e;
  return x < 0 ? negative : x * (1.0f - 0.5f * e);
}

/// 0.5 x (1 + tanh(u)) = x * sigmoid(2u): no cancellation for negative x.
inline float geluTanh(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  float d = 1.0f + fast::exp(-2.0f * u);
  return d == __builtin_inff() ? 0.0f : x / d; // x -> -inf gives 0
}

/// The derivative of the tanh GELU, as loom-decompose-gelu-grad spells it
/// out (and torch.nn.GELU's backward computes it): with t = tanh(u),
/// 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
inline float geluTanhGrad(float x) {
  float x2 = x * x;
  float t = fast::tanh(0.7978845608028654f * (x + 0.044715f * x2 * x));
  float du = 0.7978845608028654f * (1.0f + 0.134145f * x2);
  return 0.5f * (1.0f + t) + 0.5f * x * ((1.0f - t * t) * du);
}

} // namespace fast

} // namespace cpu
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CPU_CPUKERNELS_H
