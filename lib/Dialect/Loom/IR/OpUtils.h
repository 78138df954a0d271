//===- OpUtils.h - Helpers shared by loom op implementations ----*- C++ -*-===//
//
// Private to lib/Dialect/Loom/IR: shape arithmetic and diagnostics used by
// the verifiers, type inference and folders of several op families.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_DIALECT_LOOM_IR_OPUTILS_H
#define LOOM_LIB_DIALECT_LOOM_IR_OPUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace mlir {
namespace loom {
namespace opimpl {

/// Emits `'<op name>' op <args...>` at `loc` when there is a location, the
/// same text `emitOpError` would produce, and returns failure. Type
/// inference runs without an op, so it cannot use `emitOpError` itself.
template <typename OpTy, typename... Args>
LogicalResult emitInferError(std::optional<Location> loc, Args &&...args) {
  return emitOptionalError(loc, "'", OpTy::getOperationName(), "' op ",
                           std::forward<Args>(args)...);
}

/// Numpy broadcasting of two shapes. On failure, `error` says which
/// dimensions disagree.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                std::string &error);

/// True if `from` broadcasts to exactly `to` under numpy rules.
bool isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

/// Checks that `axis` indexes a dimension of a rank-`rank` tensor.
bool isValidAxis(int64_t axis, int64_t rank);

/// Shapes as MLIR prints them: `8x128x768`, or `scalar` for rank 0.
std::string formatShape(ArrayRef<int64_t> shape);

} // namespace opimpl
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_DIALECT_LOOM_IR_OPUTILS_H
