//===- Recompute.cpp - Activation recompute in the backward pass ----------===//

#include "Recompute.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::loom;

/// Clones `ops` (forward ops, in any order) right before the first backward
/// op that reads one of them, in forward order, and points the backward's
/// reads at the clones. Returns how many were cloned.
static unsigned
cloneBeforeBackward(const llvm::SetVector<Operation *> &ops,
                    const llvm::DenseMap<Operation *, unsigned> &indexOf,
                    llvm::function_ref<bool(Operation *)> isBackward,
                    llvm::DenseSet<Operation *> &cloned) {
  Operation *first = nullptr;
  for (Operation *op : ops)
    for (Operation *user : op->getUsers())
      if (isBackward(user) && (!first || user->isBeforeInBlock(first)))
        first = user;
  if (!first)
    return 0;
  SmallVector<Operation *> ordered(ops.begin(), ops.end());
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
  }
  for (Operation *op : ordered)
    for (Value result : op->getResults())
      result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
        return isBackward(use.getOwner());
      });
  return unsigned(ordered.size());
}

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
    count += cloneBeforeBackward(recompute, indexOf, isBackward, cloned);
  }
  return count;
}

unsigned mlir::loom::recomputeAttentionCores(func::FuncOp gradient,
                                             ArrayRef<Operation *> forward) {
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, op] : llvm::enumerate(forward))
    indexOf[op] = unsigned(index);
  llvm::DenseSet<Operation *> cloned;
  auto isBackward = [&](Operation *user) {
    return !indexOf.count(user) && !cloned.count(user);
  };
  auto isPureForward = [&](Operation *op) {
    return op && indexOf.count(op) && isMemoryEffectFree(op) &&
           !isa<ParamOp, ConstantOp>(op);
  };
  // The few ops between a softmax and the products around it (scale, mask,
  // dropout, casts); further than this is another layer.
  constexpr unsigned kReach = 12;
  // The matmuls nearest to `from` along operands (`up`) or users, and every
  // op on the way.
  auto walk = [&](Operation *from, bool up,
                  llvm::SetVector<Operation *> &matmuls,
                  llvm::DenseSet<Operation *> &seen) {
    SmallVector<std::pair<Operation *, unsigned>> work{{from, 0}};
    while (!work.empty()) {
      auto [op, depth] = work.pop_back_val();
      if (!seen.insert(op).second)
        continue;
      if (op != from && isa<MatmulOp>(op)) {
        matmuls.insert(op);
        continue;
      }
      if (depth == kReach)
        continue;
      if (up) {
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp(); isPureForward(def))
            work.push_back({def, depth + 1});
      } else {
        for (Operation *user : op->getUsers())
          if (isPureForward(user))
            work.push_back({user, depth + 1});
      }
    }
  };

  unsigned count = 0;
  // Last to first, like the backward pass that reads them.
  for (Operation *op : llvm::reverse(forward)) {
    auto softmax = dyn_cast<SoftmaxOp>(op);
    if (!softmax)
      continue;
    // The scores q kᵀ (and their scale and mask) before the softmax, the
    // probabilities (and their dropout) up to their product with v.
    llvm::SetVector<Operation *> scores, products;
    llvm::DenseSet<Operation *> before, after;
    walk(softmax, /*up=*/true, scores, before);
    walk(softmax, /*up=*/false, products, after);
    if (scores.empty() || products.empty())
      continue;
    // The core: the ops on a path from a scores matmul to a product, the
    // scores included and the products (which make the layer's output)
    // not.
    llvm::SetVector<Operation *> unused;
    llvm::DenseSet<Operation *> downstream, upstream;
    for (Operation *matmul : scores)
      walk(matmul, /*up=*/false, unused, downstream);
    for (Operation *product : products)
      walk(product, /*up=*/true, unused, upstream);
    // (cloneBeforeBackward orders them as the forward does.)
    llvm::SetVector<Operation *> core;
    for (Operation *candidate : downstream)
      if (upstream.contains(candidate) && !products.contains(candidate) &&
          isPureForward(candidate))
        core.insert(candidate);
    if (!core.contains(softmax))
      continue;
    count += cloneBeforeBackward(core, indexOf, isBackward, cloned);
  }
  return count;
}
