//===- OpCost.cpp - Work and traffic of ops from their factor rules -------===//

#include "loom/Analysis/OpCost.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::loom;

OpCost &OpCost::operator+=(const OpCost &other) {
  matmulFlops += other.matmulFlops;
  otherFlops += other.otherFlops;
  bytesRead += other.bytesRead;
  bytesWritten += other.bytesWritten;
  opsWithoutRule += other.opsWithoutRule;
  return *this;
}

/// Bytes of a statically shaped tensor; 0 for anything else.
static double tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return double(tensor.getNumElements()) * double((bits + 7) / 8);
}

OpCost mlir::loom::estimateOpCost(Operation *op) {
  OpCost cost;
  bool touchesTensors = false;
  for (Type type : op->getOperandTypes()) {
    cost.bytesRead += tensorBytes(type);
    touchesTensors |= isa<RankedTensorType>(type);
  }
  for (Type type : op->getResultTypes()) {
    cost.bytesWritten += tensorBytes(type);
    touchesTensors |= isa<RankedTensorType>(type);
  }
  // Indexing, not arithmetic: the gathered (or scattered) axis is a
  // contracting factor for sharding (a table split by rows gives partial
  // results to sum), but no product runs over it. A gather reads the rows
  // it picks, not the table: the bytes of its result and indices. A
  // scatter_add adds each update once and writes the whole table.
  if (auto gather = dyn_cast<GatherOp>(op)) {
    OpCost rows;
    rows.bytesRead = tensorBytes(gather.getIndices().getType()) +
                     tensorBytes(gather.getType());
    rows.bytesWritten = tensorBytes(gather.getType());
    return rows;
  }
  if (auto scatter = dyn_cast<ScatterAddOp>(op)) {
    auto updates = cast<RankedTensorType>(scatter.getUpdates().getType());
    if (updates.hasStaticShape())
      cost.otherFlops = double(updates.getNumElements());
    return cost;
  }
  auto ruled = dyn_cast<FactorRuleOpInterface>(op);
  if (!ruled) {
    if (touchesTensors && !op->hasTrait<OpTrait::IsTerminator>())
      ++cost.opsWithoutRule;
    return cost;
  }
  FactorRule rule = ruled.getFactorRule();
  double points = 1;
  bool contracting = false;
  for (const Factor &factor : rule.getFactors()) {
    points *= double(factor.size);
    contracting |= factor.kind == FactorKind::Contracting;
  }
  if (contracting)
    cost.matmulFlops = 2 * points;
  else
    cost.otherFlops = points;
  return cost;
}

OpCost mlir::loom::estimateFunctionCost(func::FuncOp func) {
  OpCost total;
  // Terminators (return, yield) hand values on; they move nothing.
  func.walk([&](Operation *op) {
    if (op != func.getOperation() && !op->hasTrait<OpTrait::IsTerminator>())
      total += estimateOpCost(op);
  });
  return total;
}
