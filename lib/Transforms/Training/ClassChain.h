//===- ClassChain.h - From a loss's logits up to their GEMM -----*- C++ -*-===//
//
// loom-pad-classes and loom-pad-vocabulary both pad the classes of a
// cross-entropy: they find the GEMM that makes the logits, give it and the
// ops between it and the loss the padded width, and tell the loss which
// entries are classes. These helpers are internal to the training passes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TRAINING_CLASSCHAIN_H
#define LOOM_LIB_TRANSFORMS_TRAINING_CLASSCHAIN_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include <optional>

namespace mlir {
namespace loom {

/// The ops from a matmul that produces the classes (`[..., V]`) down to a
/// cross-entropy's logits, which all keep the classes last.
struct ClassChain {
  MatmulOp matmul;
  /// Casts, reshapes and bias additions after the matmul, in order.
  SmallVector<Operation *> steps;
};

/// Walks up from `logits` ([..., classes]) to the matmul that makes them;
/// std::nullopt at the first op that is not part of the pattern.
std::optional<ClassChain> matchClassChain(Value logits, int64_t classes);

/// Whether `value` is a `[classes]` vector (what a linear layer adds).
bool isClassBias(Value value, int64_t classes);

/// `value` with `extra` zeros appended along `axis`.
Value padWithZeros(OpBuilder &builder, Location loc, Value value, int64_t axis,
                   int64_t extra);

/// Gives `value` (of `[..., classes]`) the padded `width` in place. Its
/// uses other than `keep` read a slice of the first `classes` entries.
void widenClasses(OpBuilder &builder, Value value, int64_t width,
                  Operation *keep);

/// The matmul's class dimension in its `rhs`.
int64_t classDimOfRhs(MatmulOp matmul);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_TRAINING_CLASSCHAIN_H
