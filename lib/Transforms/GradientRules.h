//===- GradientRules.h - Reverse-mode rules of the loom ops -----*- C++ -*-===//
//
// The gradient rule of every differentiable loom op, written as loom ops so
// that backward graphs lower and run like forward ones. Used by the
// loom-autodiff pass (Autodiff.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_GRADIENTRULES_H
#define LOOM_LIB_TRANSFORMS_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
namespace loom {

/// What a rule needs from the pass: a builder placed after the forward
/// computation, which operands need a gradient, and where to add one.
struct GradientContext {
  OpBuilder &builder;
  /// True for values that depend on a trainable parameter.
  llvm::function_ref<bool(Value)> isActive;
  /// Adds `gradient` to the adjoint of `value` (shapes must match).
  llvm::function_ref<void(Value value, Value gradient)> accumulate;
};

/// Propagates the adjoints `resultGradients` of `op`'s results (null where a
/// result has none) to its active operands. Fails, with an error at the op,
/// for an op that has no rule.
LogicalResult backpropagate(Operation *op, ArrayRef<Value> resultGradients,
                            GradientContext &context);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_GRADIENTRULES_H
