//===- DecomposeCollectives.cpp - Collectives on the outermost dim --------===//
//
// The runtime's all-gather and reduce-scatter move contiguous blocks, which
// is gathering or scattering along dim 0. Another axis becomes dim 0 by a
// transpose on each side; the transposes are local kernels, so the bytes on
// the wire stay the same.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDECOMPOSECOLLECTIVES
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// [axis, 0, 1, ..., axis-1, axis+1, ...]: brings `axis` to the front.
SmallVector<int64_t> axisFirst(int64_t rank, int64_t axis) {
  SmallVector<int64_t> permutation = {axis};
  for (int64_t dim = 0; dim < rank; ++dim)
    if (dim != axis)
      permutation.push_back(dim);
  return permutation;
}

SmallVector<int64_t> inverse(ArrayRef<int64_t> permutation) {
  SmallVector<int64_t> result(permutation.size());
  for (auto [index, dim] : llvm::enumerate(permutation))
    result[dim] = index;
  return result;
}

/// Rewrites `op` (an all_gather or reduce_scatter along `axis`) into
/// transpose, `makeOp` along dim 0, inverse transpose.
template <typename OpT, typename MakeFn>
void decompose(OpT op, int64_t axis, MakeFn makeOp) {
  OpBuilder builder(op);
  Location loc = op.getLoc();
  RankedTensorType input = op.getInput().getType();
  SmallVector<int64_t> toFront = axisFirst(input.getRank(), axis);
  auto front = builder.create<TransposeOp>(
      loc, op.getInput(), builder.getDenseI64ArrayAttr(toFront));
  RankedTensorType result = op.getResult().getType();
  SmallVector<int64_t> shape;
  for (int64_t dim : toFront)
    shape.push_back(result.getDimSize(dim));
  Value moved = makeOp(builder, front.getResult(),
                       RankedTensorType::get(shape, result.getElementType()));
  auto back = builder.create<TransposeOp>(
      loc, moved, builder.getDenseI64ArrayAttr(inverse(toFront)));
  op.getResult().replaceAllUsesWith(back.getResult());
  op.erase();
}

struct DecomposeCollectivesPass
    : impl::LoomDecomposeCollectivesBase<DecomposeCollectivesPass> {
  void runOnOperation() override {
    getOperation().walk([](AllGatherOp op) {
      if (op.movesWholeBlocks())
        return;
      decompose(op, op.getAxis(),
                [&](OpBuilder &builder, Value input, RankedTensorType type) {
                  return builder.create<AllGatherOp>(
                      op.getLoc(), type, input, builder.getI64IntegerAttr(0),
                      op.getGroupsAttr());
                });
    });
    getOperation().walk([](ReduceScatterOp op) {
      if (op.movesWholeBlocks())
        return;
      decompose(op, op.getAxis(),
                [&](OpBuilder &builder, Value input, RankedTensorType type) {
                  return builder.create<ReduceScatterOp>(
                      op.getLoc(), type, op.getReductionAttr(), input,
                      builder.getI64IntegerAttr(0), op.getGroupsAttr());
                });
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
