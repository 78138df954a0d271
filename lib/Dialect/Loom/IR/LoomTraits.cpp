//===- LoomTraits.cpp - Loom op traits ------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomTraits.h"

#include "mlir/IR/Operation.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::loom;

bool mlir::loom::hasRepresentableElementCount(ShapedType type) {
  if (!type.hasStaticShape())
    return true; // Loom's type constraints reject dynamic shapes themselves.
  int64_t count = 1;
  for (int64_t size : type.getShape())
    if (size < 0 || llvm::MulOverflow(count, size, count))
      return false;
  return true;
}

LogicalResult opimpl::verifyTensorSizes(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || hasRepresentableElementCount(shaped))
      return success();
    return op->emitOpError() << what << " #" << index << " of type " << type
                             << " has more elements than fit in 64 bits";
  };
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", index)))
      return failure();
  return success();
}
