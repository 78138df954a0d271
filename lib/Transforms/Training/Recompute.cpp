//===- Recompute.cpp - Activation recompute in the backward pass ----------===//

#include "Recompute.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::loom;

unsigned mlir::loom::recomputeSegments(func::FuncOp gradient,
                                       ArrayRef<Operation *> forward,
                                       ArrayRef<unsigned> segmentEnds) {
  llvm::DenseMap<Operation *, unsigned> segmentOf, indexOf;
  unsigned segment = 0;
  for (auto [index, op] : llvm::enumerate(forward)) {
    segmentOf[op] = segment;
    indexOf[op] = unsigned(index);
    if (segment < segmentEnds.size() && index == segmentEnds[segment])
      ++segment;
  }
  llvm::DenseSet<Operation *> cloned;
  auto isBackward = [&](Operation *user) {
    return !segmentOf.count(user) && !cloned.count(user);
  };
  // A value a later segment's forward reads is that segment's input (or
  // shared by the layers, like a mask): kept anyway, never recomputed.
  auto isCheckpoint = [&](Operation *op) {
    for (Operation *user : op->getUsers()) {
      auto it = segmentOf.find(user);
      if (it != segmentOf.end() && it->second > segmentOf.lookup(op))
        return true;
    }
    return isa<ParamOp, ConstantOp>(op) || !isMemoryEffectFree(op);
  };

  unsigned count = 0;
  // Last to first, so that a segment's clones read the originals of the
  // values that earlier segments share with it.
  for (int s = int(segmentEnds.size()) - 1; s >= 0; --s) {
    llvm::SetVector<Operation *> recompute;
    SmallVector<Operation *> worklist;
    for (Operation *op : forward)
      if (segmentOf.lookup(op) == unsigned(s) && !isCheckpoint(op) &&
          llvm::any_of(op->getUsers(), isBackward))
        worklist.push_back(op);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!recompute.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (segmentOf.count(def) && segmentOf.lookup(def) == unsigned(s) &&
              !isCheckpoint(def))
            worklist.push_back(def);
    }
    if (recompute.empty())
      continue;
    // Right before the first backward op that reads one of them.
    Operation *first = nullptr;
    for (Operation *op : recompute)
      for (Operation *user : op->getUsers())
        if (isBackward(user) && (!first || user->isBeforeInBlock(first)))
          first = user;
    if (!first)
      continue;
    SmallVector<Operation *> ordered(recompute.begin(), recompute.end());
    llvm::sort(ordered, [&](Operation *a, Operation *b) {
      return indexOf.lookup(a) < indexOf.lookup(b);
    });
    OpBuilder builder(first);
    IRMapping mapping;
    for (Operation *op : ordered) {
      Operation *clone = builder.clone(*op, mapping);
      // Distinct from the original, so that CSE keeps both.
      clone->setAttr(LoomDialect::kRecomputedAttrName, builder.getUnitAttr());
      // A pipeline stage's recompute runs in its backward action.
      if (clone->hasAttr(LoomDialect::kStageAttrName))
        clone->setAttr(LoomDialect::kBackwardAttrName, builder.getUnitAttr());
      cloned.insert(clone);
      ++count;
    }
    for (Operation *op : ordered)
      for (Value result : op->getResults())
        result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
          return isBackward(use.getOwner());
        });
  }
  return count;
}
