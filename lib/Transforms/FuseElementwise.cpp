//===- FuseElementwise.cpp - Group elementwise chains into fusions --------===//
//
// Greedy producer-consumer fusion in program order. A group is a set of
// elementwise ops over one result shape; an op joins the group of one of its
// producers when every operand from outside that group is defined before the
// group's first op. The fusion op is then created at the first op, where all
// of its inputs are available and which precedes every use of its results.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "loom/Transforms/Passes.h.inc"

namespace {

struct Group {
  SmallVector<Operation *> ops;
  ArrayRef<int64_t> shape;
};

bool isSplatConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && isa<SplatElementsAttr>(constant.getValue());
}

ArrayRef<int64_t> resultShape(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

class Fuser {
public:
  explicit Fuser(Block &block) : block(block) {
    for (auto [index, op] : llvm::enumerate(block))
      position[&op] = index;
  }

  void run() {
    for (Operation &op : block) {
      if (!FusionOp::isFusible(&op) || isa<ConstantOp>(op))
        continue;
      if (std::optional<unsigned> group = findGroup(&op)) {
        groups[*group].ops.push_back(&op);
        groupOf[&op] = *group;
        continue;
      }
      groupOf[&op] = groups.size();
      groups.push_back({{&op}, resultShape(&op)});
    }
    for (unsigned index = 0; index < groups.size(); ++index)
      outline(index);
  }

private:
  /// The group `op` joins: one of its producers' groups, or several of them
  /// merged (an optimizer update is a DAG of several chains, one per
  /// state). A candidate must have `op`'s shape, and every operand from
  /// outside the candidate must be available before its first op.
  std::optional<unsigned> findGroup(Operation *op) {
    SmallVector<unsigned> candidates;
    for (Value operand : op->getOperands()) {
      auto it = groupOf.find(operand.getDefiningOp());
      if (it != groupOf.end() && groups[it->second].shape == resultShape(op) &&
          !llvm::is_contained(candidates, it->second))
        candidates.push_back(it->second);
    }
    if (candidates.size() > 1)
      if (std::optional<unsigned> merged = merge(op, candidates))
        return merged;
    for (unsigned candidate : candidates)
      if (canJoin(op, {candidate}))
        return candidate;
    return std::nullopt;
  }

  /// Whether `op` can join the union of `members`.
  bool canJoin(Operation *op, ArrayRef<unsigned> members) {
    Operation *first = groups[members.front()].ops.front();
    for (unsigned member : members)
      if (position.lookup(groups[member].ops.front()) < position.lookup(first))
        first = groups[member].ops.front();
    auto available = [&](Value value) {
      auto owner = groupOf.find(value.getDefiningOp());
      if (owner != groupOf.end() && llvm::is_contained(members, owner->second))
        return true;
      if (isSplatConstant(value))
        return true;
      Operation *def = value.getDefiningOp();
      return !def || def->getBlock() != &block ||
             position.lookup(def) < position.lookup(first);
    };
    if (!llvm::all_of(op->getOperands(), available))
      return false;
    for (unsigned member : members)
      for (Operation *memberOp : groups[member].ops)
        if (!llvm::all_of(memberOp->getOperands(), available))
          return false;
    return true;
  }

  /// Merges `candidates` into the first of them when `op` can join them all.
  std::optional<unsigned> merge(Operation *op, ArrayRef<unsigned> candidates) {
    if (!canJoin(op, candidates))
      return std::nullopt;
    unsigned target = candidates.front();
    Group &merged = groups[target];
    for (unsigned other : candidates.drop_front()) {
      for (Operation *memberOp : groups[other].ops) {
        merged.ops.push_back(memberOp);
        groupOf[memberOp] = target;
      }
      groups[other].ops.clear();
    }
    llvm::sort(merged.ops, [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    });
    return target;
  }

  void outline(unsigned index) {
    Group &group = groups[index];
    if (group.ops.empty()) // merged into another group
      return;
    llvm::SmallPtrSet<Operation *, 16> members(group.ops.begin(),
                                               group.ops.end());
    llvm::SetVector<Value> inputs;
    for (Operation *op : group.ops)
      for (Value operand : op->getOperands())
        if (!members.contains(operand.getDefiningOp()) &&
            !isSplatConstant(operand))
          inputs.insert(operand);
    SmallVector<Value> outputs;
    for (Operation *op : group.ops)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !members.contains(user);
            }))
          outputs.push_back(result);
    // A group whose results are all unused is dead code; leave it to DCE.
    if (outputs.empty())
      return;

    SmallVector<Location> locs;
    for (Operation *op : group.ops)
      locs.push_back(op->getLoc());
    OpBuilder builder(group.ops.front());
    auto fusion = builder.create<FusionOp>(builder.getFusedLoc(locs),
                                           ValueRange(outputs).getTypes(),
                                           inputs.getArrayRef());
    Block &body = fusion.getBody().front();
    IRMapping mapping;
    for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
      mapping.map(input, arg);
    builder.setInsertionPointToStart(&body);
    for (Operation *op : group.ops) {
      for (Value operand : op->getOperands())
        if (!mapping.contains(operand) && isSplatConstant(operand))
          mapping.map(operand,
                      builder.clone(*operand.getDefiningOp())->getResult(0));
      builder.clone(*op, mapping);
    }
    SmallVector<Value> yielded;
    for (Value output : outputs)
      yielded.push_back(mapping.lookup(output));
    builder.create<YieldOp>(fusion.getLoc(), yielded);

    for (auto [output, result] : llvm::zip(outputs, fusion.getResults()))
      output.replaceAllUsesWith(result);
    for (Operation *op : llvm::reverse(group.ops))
      op->erase();
  }

  Block &block;
  llvm::DenseMap<Operation *, unsigned> position;
  llvm::DenseMap<Operation *, unsigned> groupOf;
  std::vector<Group> groups;
};

struct FuseElementwisePass
    : impl::LoomFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      Fuser(block).run();
    // Splat constants now copied into bodies may have no uses left.
    getOperation().walk([](ConstantOp constant) {
      if (constant->use_empty() && !isa<FusionOp>(constant->getParentOp()))
        constant->erase();
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
