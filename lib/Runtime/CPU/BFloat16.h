//===- BFloat16.h - bf16 <-> f32/f64 conversions (internal) -----*- C++ -*-===//
//
// The CPU kernels hold bf16 values as f32 while they compute: a load widens
// (exact: bf16 is the upper half of an f32), a store rounds to nearest, ties
// to even. NaN stays NaN (quieted, sign kept), values beyond the largest bf16
// round to infinity, and subnormals round like any other value.
//
// The functions are branch-free on the non-NaN path so that loops over them
// vectorize.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CPU_BFLOAT16_H
#define LOOM_LIB_RUNTIME_CPU_BFLOAT16_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loomrt {
namespace cpu {

/// The bits of a bf16 value, as stored in plans and buffers.
using BF16 = uint16_t;

inline float widenBF16(BF16 value) {
  uint32_t bits = uint32_t(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// Rounds to nearest even. Adding 0x7fff plus the lowest kept bit carries
/// into the kept half exactly when the dropped half is above one half, or
/// one half with an odd kept half; a carry out of the mantissa bumps the
/// exponent, up to infinity, which is the right result.
inline BF16 roundToBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  // NaN: keep the sign and the top of the payload, force a quiet NaN (the
  // rounding above could carry a NaN with a low payload into infinity).
  uint32_t nan = (bits >> 16) | 0x0040u;
  return BF16((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// `value` rounded to the nearest bf16, kept as f32.
inline float roundThroughBF16(float value) {
  return widenBF16(roundToBF16(value));
}

/// Rounds an f64 to bf16 once. f64 -> f32 -> bf16 would round twice and can
/// miss a tie; rounding to f32 *to odd* first (truncate, then set the lowest
/// bit when anything was dropped) keeps the information a second rounding
/// needs, because f32 has more than two bits beyond bf16's.
inline BF16 roundToBF16(double value) {
  if (std::isnan(value))
    return roundToBF16(float(value));
  float narrow = float(value); // to nearest: may be one ulp too far out
  if (std::fabs(double(narrow)) > std::fabs(value))
    narrow = std::nextafter(narrow, 0.0f);
  if (double(narrow) != value) {
    uint32_t bits;
    std::memcpy(&bits, &narrow, sizeof(bits));
    bits |= 1u;
    std::memcpy(&narrow, &bits, sizeof(bits));
  }
  return roundToBF16(narrow);
}

/// Widens `count` bf16 values to f32.
inline void widenBF16(const BF16 *in, float *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = widenBF16(in[i]);
}

/// Rounds `count` f32 values to bf16.
inline void roundToBF16(const float *in, BF16 *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = roundToBF16(in[i]);
}

} // namespace cpu
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CPU_BFLOAT16_H
