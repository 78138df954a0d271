//===- TestTensors.h - Host tensors for the kernel tests --------*- C++ -*-===//
//
// The CPU and CUDA kernel tests' dense host tensors, whose values the tests
// handle as doubles, and a bf16 rounding written independently of the
// kernels' bit tricks (the CPU tests compare the kernels' rounding with it),
// and random test data.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_TESTTENSORS_H
#define LOOM_TEST_UNIT_RUNTIME_TESTTENSORS_H

#include "loom/Runtime/Plan.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace loomrt {
namespace test {

inline double widenBF16(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

/// The bf16 bits' value, with the pattern of infinity read as 2^128 (the
/// value an overflowing result is compared with).
inline double bf16Magnitude(uint16_t bits) {
  if ((bits & 0x7fff) == 0x7f80)
    return std::copysign(std::ldexp(1.0, 128), widenBF16(bits));
  return widenBF16(bits);
}

/// Round to nearest, ties to even, by comparing the distances to the two
/// bf16 neighbours of `x` (the one toward zero and the next one out).
inline uint16_t referenceBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if (std::isnan(x))
    return uint16_t(0x7fc0 | ((bits >> 16) & 0x8000));
  uint16_t low = uint16_t(bits >> 16);
  if ((bits & 0xffff) == 0 || std::isinf(x))
    return low;
  uint16_t high = uint16_t(low + 1);
  double toLow = std::abs(double(x) - bf16Magnitude(low));
  double toHigh = std::abs(bf16Magnitude(high) - double(x));
  if (toLow != toHigh)
    return toLow < toHigh ? low : high;
  return (low & 1) ? high : low;
}

/// A dense tensor whose values the tests handle as doubles (bf16 ones
/// rounded to nearest even when set).
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape)
      : dtype(dtype), shape(std::move(shape)),
        bytes(size_t(numElements(this->shape)) * dtypeSize(dtype)) {}
  explicit Tensor(const TensorRef &r) : Tensor(r.dtype, r.shape) {}

  int64_t size() const { return numElements(shape); }
  TensorRef ref() const {
    TensorRef r;
    r.dtype = dtype;
    r.shape = shape;
    return r;
  }
  double get(int64_t i) const {
    const uint8_t *p = bytes.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32:
      return *reinterpret_cast<const float *>(p);
    case DType::F64:
      return *reinterpret_cast<const double *>(p);
    case DType::I32:
      return *reinterpret_cast<const int32_t *>(p);
    case DType::I64:
      return double(*reinterpret_cast<const int64_t *>(p));
    case DType::I1:
      return *p;
    case DType::BF16:
      return widenBF16(*reinterpret_cast<const uint16_t *>(p));
    default:
      return 0;
    }
  }
  void set(int64_t i, double v) {
    uint8_t *p = bytes.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32:
      *reinterpret_cast<float *>(p) = float(v);
      break;
    case DType::F64:
      *reinterpret_cast<double *>(p) = v;
      break;
    case DType::I32:
      *reinterpret_cast<int32_t *>(p) = int32_t(v);
      break;
    case DType::I64:
      *reinterpret_cast<int64_t *>(p) = int64_t(v);
      break;
    case DType::I1:
      *p = v != 0;
      break;
    case DType::BF16:
      *reinterpret_cast<uint16_t *>(p) = referenceBF16(float(v));
      break;
    default:
      break;
    }
  }
  /// The same values as another dtype (bf16 -> f32 for references).
  Tensor as(DType other) const {
    Tensor t(other, shape);
    for (int64_t i = 0; i < size(); ++i)
      t.set(i, get(i));
    return t;
  }
};

/// Random values in [lo, hi) from `rng` (integers for integer dtypes, 0/1
/// for i1).
inline Tensor randomTensor(std::mt19937 &rng, DType dtype,
                           std::vector<int64_t> shape, double lo, double hi) {
  Tensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = dist(rng);
    if (dtype == DType::I32 || dtype == DType::I64)
      v = std::floor(v);
    if (dtype == DType::I1)
      v = v > (lo + hi) / 2;
    t.set(i, v);
  }
  return t;
}

/// q, k and v ([..., S, H, D], equal shapes) interleaved into one
/// [..., S, 3, H, D] tensor, as a fused QKV projection writes them (the
/// operand of a packed_qkv attention).
inline Tensor packQkv(const Tensor &q, const Tensor &k, const Tensor &v) {
  std::vector<int64_t> shape = q.shape;
  shape.insert(shape.end() - 2, 3);
  Tensor packed(q.dtype, shape);
  const int64_t inner = shape[shape.size() - 1] * shape[shape.size() - 2];
  const Tensor *parts[] = {&q, &k, &v};
  for (int64_t e = 0; e < q.size(); ++e)
    for (int64_t part = 0; part < 3; ++part)
      packed.set(((e / inner) * 3 + part) * inner + e % inner,
                 parts[part]->get(e));
  return packed;
}

} // namespace test
} // namespace loomrt

#endif // LOOM_TEST_UNIT_RUNTIME_TESTTENSORS_H
