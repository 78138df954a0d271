//===- OperandSpans.h - Memory of plan operands (internal) ------*- C++ -*-===//
//
// Whether two instructions' operands may touch the same bytes: the executor
// orders communication by it, the CUDA backend's elementwise groups decide
// which instructions may run in any order by it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_OPERANDSPANS_H
#define LOOM_LIB_RUNTIME_OPERANDSPANS_H

#include "loom/Runtime/Plan.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loomrt {

/// Bytes an operand occupies: an arena range, or (weight) a range of a
/// numbering in which distinct weights never overlap.
struct Span {
  bool weight = false;
  uint64_t begin = 0, end = 0;

  bool overlaps(const Span &other) const {
    return weight == other.weight && begin < other.end && other.begin < end;
  }
};

/// An operand's span with weights numbered by id (each weight is its own
/// allocation) and arena operands by their bytes; the executor, which knows
/// where weights sit in the plan's data, numbers them by their bytes.
inline Span spanByWeightId(const TensorRef &ref) {
  if (ref.space == TensorRef::Space::Weight)
    return {true, ref.offset, ref.offset + 1};
  return {false, ref.offset, ref.offset + std::max<uint64_t>(1, ref.bytes())};
}

inline bool anyOverlap(const std::vector<Span> &a, const std::vector<Span> &b) {
  for (const Span &x : a)
    for (const Span &y : b)
      if (x.overlaps(y))
        return true;
  return false;
}

} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_OPERANDSPANS_H
