//===- ElementwiseSpace.h - Where an elementwise kernel iterates -*- C++
//-*-===//
//
// Internal to the runtime: the iteration space both backends' elementwise
// kernels walk (the CPU interpreter, the CUDA code generator), so that they
// broadcast identically.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_ELEMENTWISESPACE_H
#define LOOM_LIB_RUNTIME_ELEMENTWISESPACE_H

#include "loom/Runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace loomrt {

/// The output's iteration space after dropping size-1 dims and merging
/// neighbouring dims that every input walks contiguously, with each input's
/// strides in it (0 along the dims it is broadcast over).
struct ElementwiseSpace {
  enum class InputKind : uint8_t { Dense, Scalar, Strided };
  std::vector<int64_t> shape;
  /// Per input, one stride per dim of `shape`.
  std::vector<std::vector<int64_t>> strides;
  /// Per input: as many elements as the output, one, or broadcast.
  std::vector<InputKind> kinds;
  int64_t total = 1;
  /// The innermost dim (1 for a scalar space).
  int64_t inner() const { return shape.empty() ? 1 : shape.back(); }
};

/// The space of an `elementwise` instruction (its outputs share a shape; its
/// inputs broadcast to it numpy-style).
ElementwiseSpace elementwiseSpace(const Instruction &instruction);

} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_ELEMENTWISESPACE_H
