//===- ConstantFold.h - Folding loom ops on constant tensors ----*- C++ -*-===//
//
// Private to lib/Dialect/Loom/IR. Folders compute in double (floats) or
// int64 (integers and i1) and round to the result element type at the end,
// so a folded f32 value may differ from the runtime's f32 arithmetic by one
// ulp, which is within Loom's "equal up to float reassociation" contract.
//
// Only `dense` constants fold. Non-splat results are limited to
// kMaxFoldedElements elements so that folding never materializes weights;
// `dense_resource` blobs never fold.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_DIALECT_LOOM_IR_CONSTANTFOLD_H
#define LOOM_LIB_DIALECT_LOOM_IR_CONSTANTFOLD_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <optional>

namespace mlir {
namespace loom {
namespace opimpl {

constexpr int64_t kMaxFoldedElements = 4096;

/// One element: `f` for float element types, `i` for integers and i1.
struct Scalar {
  double f = 0.0;
  int64_t i = 0;
  static Scalar ofFloat(double value) { return {value, 0}; }
  static Scalar ofInt(int64_t value) { return {0.0, value}; }
};

using ScalarFn =
    llvm::function_ref<std::optional<Scalar>(llvm::ArrayRef<Scalar>)>;

/// Folds an elementwise op whose operands are all `dense` constants; the
/// operands broadcast to `resultType` as in numpy. `fn` sees one element of
/// each operand and returns nullopt where the result is not representable
/// (integer division by zero, ...), which stops the fold.
Attribute foldElementwise(llvm::ArrayRef<Attribute> operands,
                          ShapedType resultType, ScalarFn fn);

/// True if `attr` is a `dense` splat whose every element equals `value`.
bool isSplatOf(Attribute attr, double value);

/// Folds an op that only moves elements (transpose, slice, concat, split,
/// gather) on `dense` constants of any element type: element `i` of the
/// result is element `pick(i).second` of input `pick(i).first`. A single
/// splat input gives a splat.
Attribute
foldRearrange(llvm::ArrayRef<Attribute> inputs, ShapedType resultType,
              llvm::function_ref<std::pair<unsigned, int64_t>(int64_t)> pick);

/// The multi-index of linear index `linear` in `shape` (row-major).
llvm::SmallVector<int64_t> delinearize(int64_t linear,
                                       llvm::ArrayRef<int64_t> shape);

/// The linear index of `index` in `shape` (row-major).
int64_t linearize(llvm::ArrayRef<int64_t> index, llvm::ArrayRef<int64_t> shape);

} // namespace opimpl
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_DIALECT_LOOM_IR_CONSTANTFOLD_H
