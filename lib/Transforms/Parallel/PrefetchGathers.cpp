//===- PrefetchGathers.cpp - ZeRO-3's parameter gathers posted early ------===//
//
// ZeRO-3 gathers a parameter's shards right before the op that reads it.
// With asynchronous collectives the gather can be posted earlier instead,
// while the ops before run: each parameter gather (and the read of the
// shard it gathers) moves up to just before the op that reads the gather
// `distance` places earlier, so that the next layer's weights are in
// flight while this layer computes (FSDP's forward and backward prefetch).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPREFETCHGATHERS
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// A parameter gather: the all-gather of a `loom.param` read, and the first
/// op (in the block) that reads the gathered value.
struct Gather {
  AllGatherOp gather;
  ParamOp read;
  Operation *firstUse;
};

struct PrefetchGathersPass
    : impl::LoomPrefetchGathersBase<PrefetchGathersPass> {
  using Base::Base;

  void runOnOperation() override {
    if (distance < 0) {
      getOperation().emitError("loom-prefetch-gathers: distance must be >= 0 "
                               "(0: no prefetch), got ")
          << static_cast<int64_t>(distance);
      return signalPassFailure();
    }
    if (distance == 0)
      return;
    for (Block &block : getOperation().getBody()) {
      SmallVector<Gather> gathers;
      for (Operation &op : block) {
        auto gather = dyn_cast<AllGatherOp>(&op);
        if (!gather)
          continue;
        auto read = gather.getInput().getDefiningOp<ParamOp>();
        if (!read || !read->hasOneUse() || read->getBlock() != &block)
          continue;
        Operation *firstUse = nullptr;
        for (Operation *user : gather->getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          if (top && (!firstUse || top->isBeforeInBlock(firstUse)))
            firstUse = top;
        }
        if (firstUse)
          gathers.push_back({gather, read, firstUse});
      }
      // From the last to the first, so that each moves ahead of gathers
      // that have not moved yet: gather i goes before the op that reads
      // gather i - distance, if that is earlier than where it is. Which
      // ones move is decided before any does: only parameter reads and
      // their gathers move, each once, so the order of a target and a read
      // that has not moved yet is the block's first order (asking the
      // block after each move renumbered it every time: a pipeline's
      // ZeRO-3 step of 24 microbatches took a minute).
      SmallVector<bool> moves(gathers.size(), false);
      for (size_t i = gathers.size(); i-- > size_t(distance);)
        moves[i] = gathers[i - size_t(distance)].firstUse->isBeforeInBlock(
            gathers[i].read);
      for (size_t i = gathers.size(); i-- > size_t(distance);) {
        if (!moves[i])
          continue;
        Operation *target = gathers[i - size_t(distance)].firstUse;
        gathers[i].read->moveBefore(target);
        gathers[i].gather->moveBefore(target);
      }
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
