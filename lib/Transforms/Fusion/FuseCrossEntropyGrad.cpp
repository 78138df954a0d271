//===- FuseCrossEntropyGrad.cpp - A loss and its gradient in one kernel ---===//
//
// The training step's loss reads the logits once for the log-sum-exp of
// every row, and its gradient reads them again for the same log-sum-exp
// and once more for the probabilities. At GPT-2 size the logits are 0.8 GB
// of bf16, so the separate kernels move 1.6 to 2.5 GB besides the gradient
// they write. The gradient's scale (the loss seed with the reduction
// folded in) is a constant of the step, or with `ignore_index` and a mean
// the seed over a count of the labels, which autodiff computes after the
// loss but which does not depend on it: moved up, it is known before the
// loss, so one kernel can compute both from one read of each row.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSECROSSENTROPYGRAD
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// The loss in `grad`'s block over the same logits, labels, ignored label
/// and classes as `grad`.
CrossEntropyOp findLoss(CrossEntropyGradOp grad) {
  for (Operation *user : grad.getLogits().getUsers()) {
    auto loss = dyn_cast<CrossEntropyOp>(user);
    if (loss && loss->getBlock() == grad->getBlock() &&
        loss.getLogits() == grad.getLogits() &&
        loss.getLabels() == grad.getLabels() &&
        loss.getIgnoreIndexAttr() == grad.getIgnoreIndexAttr() &&
        loss.getClassesAttr() == grad.getClassesAttr())
      return loss;
  }
  return {};
}

/// Whether `value` is available at `anchor`, or would be if the pure ops
/// of `anchor`'s block that compute it from values available there moved
/// up to just before it; `moves` collects those ops, operands first. The
/// search fails at `anchor` itself (a scale computed from the loss).
bool availableOrHoistable(Value value, Operation *anchor,
                          DominanceInfo &dominance,
                          llvm::SetVector<Operation *> &moves) {
  if (dominance.properlyDominates(value, anchor))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def == anchor || def->getBlock() != anchor->getBlock() ||
      !isPure(def) || def->getNumRegions() != 0)
    return false;
  if (moves.contains(def))
    return true;
  for (Value operand : def->getOperands())
    if (!availableOrHoistable(operand, anchor, dominance, moves))
      return false;
  moves.insert(def);
  return true;
}

void fuse(CrossEntropyOp loss, CrossEntropyGradOp grad, Operation *anchor,
          ArrayRef<Operation *> moves) {
  for (Operation *op : moves)
    op->moveBefore(anchor);
  OpBuilder builder(anchor);
  auto fused = builder.create<CrossEntropyWithGradOp>(
      builder.getFusedLoc({loss.getLoc(), grad.getLoc()}),
      TypeRange{loss.getType(), grad.getType()}, loss.getLogits(),
      loss.getLabels(), grad.getScale(), loss.getReduction(),
      loss.getIgnoreIndexAttr(), loss.getClassesAttr());
  loss.getResult().replaceAllUsesWith(fused.getLoss());
  grad.getResult().replaceAllUsesWith(fused.getDlogits());
  loss.erase();
  grad.erase();
}

struct FuseCrossEntropyGradPass
    : impl::LoomFuseCrossEntropyGradBase<FuseCrossEntropyGradPass> {
  void runOnOperation() override {
    struct Pair {
      CrossEntropyOp loss;
      CrossEntropyGradOp grad;
      Operation *anchor;
      SmallVector<Operation *> moves;
    };
    SmallVector<Pair> pairs;
    DenseSet<Operation *> taken;
    auto &dominance = getAnalysis<DominanceInfo>();
    getOperation().walk([&](CrossEntropyGradOp grad) {
      CrossEntropyOp loss = findLoss(grad);
      if (!loss || taken.contains(loss))
        return;
      // The fused op stands at the first of the two, so that both results
      // are defined before their uses; the scale must be defined there, or
      // be computed by ops that can move there.
      Operation *anchor = loss->isBeforeInBlock(grad) ? loss : grad;
      llvm::SetVector<Operation *> moves;
      if (!availableOrHoistable(grad.getScale(), anchor, dominance, moves))
        return;
      taken.insert(loss);
      pairs.push_back({loss, grad, anchor, moves.takeVector()});
    });
    for (Pair &pair : pairs)
      fuse(pair.loss, pair.grad, pair.anchor, pair.moves);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
