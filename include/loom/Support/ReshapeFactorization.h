//===- ReshapeFactorization.h - Common factors of two shapes ----*- C++ -*-===//
//
// A reshape keeps the row-major order of elements, so a dimension of its
// input can be split over several output dimensions and vice versa. To
// describe this as a factor rule, both shapes are written as one sequence
// of factors: `[B, S, D] -> [B, S, H, Dh]` is factors `B, S, H, Dh` with the
// input's `D` made of `[H, Dh]`. Sharding a factor then shards both sides
// consistently.
//
// Such a common refinement exists within a group of dimensions exactly when
// the cumulative sizes of both sides form a divisibility chain. When it does
// not (`[6, 4] -> [4, 6]`), each dimension of the group gets a factor of its
// own that cannot be split.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_RESHAPEFACTORIZATION_H
#define LOOM_SUPPORT_RESHAPEFACTORIZATION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>

namespace mlir {
namespace loom {

struct ReshapeFactor {
  int64_t size;
  /// False for factors of groups without a common refinement: they belong
  /// to one side only and the reshape needs them whole.
  bool splittable;
};

struct ReshapeFactorization {
  llvm::SmallVector<ReshapeFactor> factors;
  /// For each input (output) dimension, its factors from major to minor;
  /// size-1 dimensions have none.
  llvm::SmallVector<llvm::SmallVector<unsigned, 2>> inputDims;
  llvm::SmallVector<llvm::SmallVector<unsigned, 2>> outputDims;
};

/// Factorizes a reshape from `input` to `output`; both shapes must hold the
/// same number of elements.
ReshapeFactorization factorizeReshape(llvm::ArrayRef<int64_t> input,
                                      llvm::ArrayRef<int64_t> output);

} // namespace loom
} // namespace mlir

#endif // LOOM_SUPPORT_RESHAPEFACTORIZATION_H
