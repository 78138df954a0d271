//===- BucketAllReduces.cpp - Data parallelism's gradient buckets ---------===//
//
// Merges runs of all-reduces whose results wait (gradients, reduced as soon
// as the backward pass produces them) into one all-reduce per bucket of at
// most bucket-mb MiB: the operands flattened and concatenated, the result
// split and reshaped back.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUCKETALLREDUCES
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() *
         int64_t(std::max(1u, type.getElementTypeBitWidth() / 8));
}

/// One bucket being filled: all-reduces of one kind, in program order.
struct Bucket {
  SmallVector<AllReduceOp> members;
  int64_t bytes = 0;
  /// The first op (in program order) that reads a member's result: every
  /// later member must come before it.
  Operation *firstRead = nullptr;
};

/// What all-reduces must share to travel in one buffer.
struct Kind {
  Attribute groups;
  CollectiveReduction reduction;
  Type element;
  bool operator==(const Kind &other) const {
    return groups == other.groups && reduction == other.reduction &&
           element == other.element;
  }
};

/// The bucket's all-reduces as one, at the last member's place; its result
/// is split back just before the first op that reads a member's, so that
/// nothing touches the buffer in flight until then.
void merge(Bucket &bucket) {
  if (bucket.members.size() < 2)
    return;
  AllReduceOp last = bucket.members.back();
  OpBuilder builder(last);
  Location loc = last.getLoc();
  Type element =
      cast<RankedTensorType>(last.getInput().getType()).getElementType();
  SmallVector<Value> flat;
  SmallVector<Type> pieces;
  int64_t total = 0;
  for (AllReduceOp member : bucket.members) {
    auto type = cast<RankedTensorType>(member.getInput().getType());
    auto line = RankedTensorType::get({type.getNumElements()}, element);
    flat.push_back(type == line
                       ? member.getInput()
                       : builder.create<ReshapeOp>(loc, line, member.getInput())
                             .getResult());
    pieces.push_back(line);
    total += type.getNumElements();
  }
  auto joined = builder.create<ConcatOp>(
      loc, RankedTensorType::get({total}, element), flat, /*axis=*/0);
  auto reduced = builder.create<AllReduceOp>(
      loc, joined.getType(), last.getReduction(), joined, last.getGroups());
  if (bucket.firstRead)
    builder.setInsertionPoint(bucket.firstRead);
  auto split =
      builder.create<SplitOp>(loc, pieces, reduced.getResult(), /*axis=*/0);
  for (auto [member, piece] : llvm::zip(bucket.members, split.getResults())) {
    Value back = piece.getType() == member.getType()
                     ? Value(piece)
                     : builder.create<ReshapeOp>(loc, member.getType(), piece)
                           .getResult();
    member.getResult().replaceAllUsesWith(back);
    member.erase();
  }
}

struct BucketAllReducesPass
    : impl::LoomBucketAllReducesBase<BucketAllReducesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (!(bucketMB >= 0)) {
      getOperation().emitError("loom-bucket-all-reduces: bucket-mb must be "
                               ">= 0 (0: no buckets), got ")
          << bucketMB;
      return signalPassFailure();
    }
    if (bucketMB == 0)
      return;
    int64_t limit = int64_t(bucketMB * 1024 * 1024);
    for (Block &block : getOperation().getBody()) {
      // Program positions, to compare "before" in constant time.
      llvm::DenseMap<Operation *, size_t> position;
      for (auto [index, op] : llvm::enumerate(block))
        position[&op] = index;
      auto firstRead = [&](AllReduceOp op) {
        Operation *first = nullptr;
        for (Operation *user : op->getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          if (top && (!first || position[top] < position[first]))
            first = top;
        }
        return first;
      };
      SmallVector<std::pair<Kind, Bucket>> open;
      SmallVector<Bucket> full;
      for (Operation &op : block) {
        // A bucket whose results are read here is closed.
        for (auto *it = open.begin(); it != open.end();) {
          if (it->second.firstRead == &op) {
            full.push_back(std::move(it->second));
            it = open.erase(it);
          } else {
            ++it;
          }
        }
        auto reduce = dyn_cast<AllReduceOp>(&op);
        if (!reduce)
          continue;
        auto type = cast<RankedTensorType>(reduce.getInput().getType());
        Kind kind{reduce.getGroupsAttr(), reduce.getReduction(),
                  type.getElementType()};
        int64_t bytes = bytesOf(reduce.getInput());
        auto *it = llvm::find_if(
            open, [&](const auto &entry) { return entry.first == kind; });
        if (it != open.end() && it->second.bytes + bytes > limit) {
          full.push_back(std::move(it->second));
          open.erase(it);
          it = open.end();
        }
        if (it == open.end()) {
          open.push_back({kind, Bucket()});
          it = std::prev(open.end());
        }
        Bucket &bucket = it->second;
        bucket.members.push_back(reduce);
        bucket.bytes += bytes;
        if (Operation *read = firstRead(reduce))
          if (!bucket.firstRead || position[read] < position[bucket.firstRead])
            bucket.firstRead = read;
      }
      for (auto &entry : open)
        full.push_back(std::move(entry.second));
      for (Bucket &bucket : full)
        merge(bucket);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
