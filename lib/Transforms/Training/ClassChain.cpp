//===- ClassChain.cpp - From a loss's logits up to their GEMM -------------===//

#include "ClassChain.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::loom;

bool mlir::loom::isClassBias(Value value, int64_t classes) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getRank() == 1 && type.getDimSize(0) == classes;
}

std::optional<ClassChain> mlir::loom::matchClassChain(Value logits,
                                                      int64_t classes) {
  ClassChain chain;
  Value value = logits;
  while (true) {
    auto type = cast<RankedTensorType>(value.getType());
    if (!type.hasStaticShape() || type.getShape().back() != classes)
      return std::nullopt;
    Operation *def = value.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto matmul = dyn_cast<MatmulOp>(def)) {
      chain.matmul = matmul;
      std::reverse(chain.steps.begin(), chain.steps.end());
      return chain;
    }
    if (auto cast = dyn_cast<CastOp>(def)) {
      if (!isa<FloatType>(getElementTypeOrSelf(cast.getInput().getType())))
        return std::nullopt;
      value = cast.getInput();
    } else if (auto reshape = dyn_cast<ReshapeOp>(def)) {
      value = reshape.getInput();
    } else if (auto biasAdd = dyn_cast<BiasAddOp>(def)) {
      value = biasAdd.getInput();
    } else if (auto add = dyn_cast<AddOp>(def)) {
      // One operand has the result's shape, the other is a [classes] bias.
      if (add.getLhs().getType() == type && isClassBias(add.getRhs(), classes))
        value = add.getLhs();
      else if (add.getRhs().getType() == type &&
               isClassBias(add.getLhs(), classes))
        value = add.getRhs();
      else
        return std::nullopt;
    } else {
      return std::nullopt;
    }
    chain.steps.push_back(def);
  }
}

Value mlir::loom::padWithZeros(OpBuilder &builder, Location loc, Value value,
                               int64_t axis, int64_t extra) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = extra;
  auto zerosType = RankedTensorType::get(shape, type.getElementType());
  Value zeros = builder.create<ConstantOp>(
      loc, zerosType, cast<ElementsAttr>(builder.getZeroAttr(zerosType)));
  return builder.create<ConcatOp>(loc, ValueRange{value, zeros}, axis);
}

void mlir::loom::widenClasses(OpBuilder &builder, Value value, int64_t width,
                              Operation *keep) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> padded(type.getShape());
  padded.back() = width;
  value.setType(
      RankedTensorType::get(padded, type.getElementType(), type.getEncoding()));
  if (llvm::all_of(value.getUsers(),
                   [&](Operation *user) { return user == keep; }))
    return;
  builder.setInsertionPointAfterValue(value);
  auto slice =
      builder.create<SliceOp>(value.getLoc(), value, starts, limits, strides);
  value.replaceUsesWithIf(slice, [&](OpOperand &use) {
    return use.getOwner() != keep && use.getOwner() != slice;
  });
}

int64_t mlir::loom::classDimOfRhs(MatmulOp matmul) {
  int64_t rank = matmul.getRhs().getType().getRank();
  return matmul.getTransposeRhs() ? rank - 2 : rank - 1;
}
