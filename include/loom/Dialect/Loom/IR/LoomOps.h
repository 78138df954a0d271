//===- LoomOps.h - Loom operations ------------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "loom/Dialect/Loom/IR/LoomAttrs.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomInterfaces.h"
#include "loom/Dialect/Loom/IR/LoomTraits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.h.inc"

namespace mlir {
namespace loom {

/// The type Loom's statistics and losses accumulate in for `element`
/// values: f64 for f64, f32 otherwise (f16, bf16, f32). Softmax sums,
/// attention's log-sum-exp and cross-entropy losses have it.
inline FloatType getStatisticsType(Type element) {
  if (element.isF64())
    return cast<FloatType>(element);
  return Float32Type::get(element.getContext());
}

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
