//===- GradientContext.h - What a gradient rule is given --------*- C++ -*-===//
//
// The argument of GradientOpInterface::backpropagate. The interface is
// declared with the dialect (LoomInterfaces.td); its implementations, the
// gradient rules, are external models that lib/Transforms/Training attaches
// (registerGradientExternalModels, loom/InitAllDialects.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_GRADIENTCONTEXT_H
#define LOOM_DIALECT_LOOM_IR_GRADIENTCONTEXT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
namespace loom {

/// What a rule needs from the autodiff pass: a builder placed after the
/// forward computation, which operands need a gradient, and where to add
/// one.
struct GradientContext {
  OpBuilder &builder;
  /// True for values that depend on a trainable parameter.
  llvm::function_ref<bool(Value)> isActive;
  /// Adds `gradient` to the adjoint of `value` (shapes must match).
  llvm::function_ref<void(Value value, Value gradient)> accumulate;
};

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOM_IR_GRADIENTCONTEXT_H
