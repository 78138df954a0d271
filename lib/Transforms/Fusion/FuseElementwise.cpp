//===- FuseElementwise.cpp - Group elementwise chains into fusions --------===//
//
// Greedy producer-consumer fusion in program order. A group is a set of
// elementwise ops over one result shape; an op joins the group of one of its
// producers when every operand from outside that group is defined before the
// group's first op. The fusion op is then created at the first op, where all
// of its inputs are available and which precedes every use of its results.
//
// Two rewrites widen what fuses, both to save memory traffic:
//  - An outside operand defined after the group's first op by an
//    elementwise op whose own operands are available earlier (a causal mask
//    compared from a buffer), or by a parameter read (an optimizer state),
//    is moved above the first op, with its constants, so the consumer still
//    joins.
//  - A widening cast of a value in memory (a bf16 GEMM result read as f32)
//    is recomputed in each group that reads it rather than stored once in
//    the wide type and read back: reading the narrow value costs less than
//    writing and reading the wide one.
//  - An op that reads a value computed by a group of an earlier stretch
//    (the ops between two kernels that are not elementwise: a GEMM, a
//    reduction) gets its own copy of that value's computation when the
//    group's inputs it needs are fewer bytes than the value. That is the
//    backward of an activation: the GELU of a bf16 GEMM result needs
//    x + bias, erf(...) and exp(-x^2) as f32 tensors, which would otherwise
//    join the forward kernel and be stored until the backward reads them;
//    recomputed, the backward reads the bf16 GEMM result instead.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "loom/Transforms/Fusion/Passes.h.inc"

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

int64_t numElements(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

/// Bytes of one element of `value`.
unsigned elementBytes(Value value) {
  return (cast<RankedTensorType>(value.getType()).getElementTypeBitWidth() +
          7) /
         8;
}

/// How deep a chain of producers is moved up so that a consumer can join a
/// group (a compare and its constant: two).
constexpr int kMaxHoistDepth = 3;

/// The most ops a value's recomputation in a later stretch copies (GELU and
/// its derivative's exponential: about ten).
constexpr unsigned kMaxRecomputedOps = 16;

/// Whether `op` runs as a kernel of its own that is not an elementwise
/// fusion: the ops between two of them form a stretch.
bool endsStretch(Operation &op) {
  return !FusionOp::isFusible(&op) &&
         !isa<ConstantOp, ParamOp, ReshapeOp, AssignOp>(op) &&
         !op.hasTrait<OpTrait::IsTerminator>();
}

class Fuser {
public:
  explicit Fuser(Block &block) : block(block) { renumber(); }

  void run() {
    // Ops are only inserted before, or moved above, the op being visited.
    for (Operation &op : block) {
      if (!FusionOp::isFusible(&op) || isa<ConstantOp>(op))
        continue;
      recomputeFarOperands(&op);
      recomputeWideningCasts(&op, place(&op));
    }
    for (unsigned index = 0; index < groups.size(); ++index)
      outline(index);
  }

private:
  /// Numbers the ops (spaced 2^32 apart) and the stretches. Afterwards
  /// only fusible ops are inserted or moved, each right before an op whose
  /// stretch it takes: `placed` gives it the position halfway to its
  /// predecessor's, and the block is renumbered only when a gap is used up,
  /// not after every change (which made the pass quadratic in the block's
  /// length; MLIR's own order indices have gaps of 5, which the hoists
  /// before one group's first op use up at once).
  void renumber() {
    position.clear();
    stretch.clear();
    unsigned stretches = 0;
    uint64_t index = 0;
    for (Operation &op : block) {
      position[&op] = ++index << 32;
      stretch[&op] = stretches;
      if (endsStretch(op))
        ++stretches;
    }
  }

  /// Gives `op`, just inserted or moved before `next`, its position and
  /// `next`'s stretch.
  void placed(Operation *op, Operation *next) {
    stretch[op] = stretch.lookup(next);
    Operation *prev = op->getPrevNode();
    uint64_t low = prev ? position.lookup(prev) : 0;
    uint64_t high = position.lookup(next);
    if (high - low < 2)
      return renumber();
    position[op] = low + (high - low) / 2;
  }

  bool before(Operation *a, Operation *b) const {
    return position.lookup(a) < position.lookup(b);
  }

  /// Puts `op` into a group (joining or merging its producers' groups, or a
  /// new one) and returns it.
  unsigned place(Operation *op) {
    std::optional<unsigned> group = findGroup(op);
    if (!group) {
      group = groups.size();
      groups.push_back({{}, resultShape(op)});
    }
    groups[*group].ops.push_back(op);
    groupOf[op] = *group;
    return *group;
  }

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
    for (unsigned candidate : candidates) {
      SmallVector<Operation *> hoists;
      if (canJoin(op, {candidate}, hoists)) {
        hoist(hoists, groups[candidate].ops.front());
        return candidate;
      }
    }
    return std::nullopt;
  }

  /// The earliest first op of `members`.
  Operation *firstOp(ArrayRef<unsigned> members) {
    Operation *first = groups[members.front()].ops.front();
    for (unsigned member : members)
      if (before(groups[member].ops.front(), first))
        first = groups[member].ops.front();
    return first;
  }

  /// Whether `op` can join the union of `members`; `hoists` gets the ops
  /// that must move above the union's first op for that (dependencies
  /// first).
  bool canJoin(Operation *op, ArrayRef<unsigned> members,
               SmallVectorImpl<Operation *> &hoists) {
    Operation *first = firstOp(members);
    auto available = [&](Value value) {
      auto owner = groupOf.find(value.getDefiningOp());
      if (owner != groupOf.end() && llvm::is_contained(members, owner->second))
        return true;
      if (isSplatConstant(value))
        return true;
      Operation *def = value.getDefiningOp();
      return !def || def->getBlock() != &block || before(def, first) ||
             canHoist(def, first, members, hoists, 0);
    };
    if (!llvm::all_of(op->getOperands(), available))
      return false;
    for (unsigned member : members)
      for (Operation *memberOp : groups[member].ops)
        if (!llvm::all_of(memberOp->getOperands(), available))
          return false;
    return true;
  }

  /// Whether `def`, at or after `first` (the first op of `members`), can
  /// move above it: it is an elementwise op or a constant, outside `members`
  /// and any fusion already under way (its group, if any, is just `def`, which
  /// is then created at the new place), and its operands are defined above
  /// `first` or can move too.
  bool canHoist(Operation *def, Operation *first, ArrayRef<unsigned> members,
                SmallVectorImpl<Operation *> &hoists, int depth) {
    if (llvm::is_contained(hoists, def))
      return true;
    // Only elementwise ops, constants and parameter reads move: moving a
    // collective could reorder communication, and a larger op would live
    // longer. A loom.param reads the value the parameter had when the step
    // began wherever it stands, and its buffer lives all along anyway (an
    // optimizer state read late, so that the update joins the group that
    // casts the weight's gradient).
    if (depth >= kMaxHoistDepth || !isPure(def) ||
        !(FusionOp::isFusible(def) || isa<ConstantOp, ParamOp>(def)))
      return false;
    auto owner = groupOf.find(def);
    if (owner != groupOf.end() && (llvm::is_contained(members, owner->second) ||
                                   groups[owner->second].ops.size() != 1))
      return false;
    for (Value operand : def->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && producer->getBlock() == &block &&
          !before(producer, first) &&
          !canHoist(producer, first, members, hoists, depth + 1))
        return false;
    }
    hoists.push_back(def);
    return true;
  }

  void hoist(ArrayRef<Operation *> hoists, Operation *first) {
    if (hoists.empty())
      return;
    for (Operation *op : hoists) {
      op->moveBefore(first);
      placed(op, first);
    }
  }

  /// Gives `op` (just placed in `group`) its own copy of every widening cast
  /// of a value in memory that it reads from another group, so that the
  /// cast's wide result need not be stored for it.
  void recomputeWideningCasts(Operation *op, unsigned group) {
    for (OpOperand &use : op->getOpOperands()) {
      auto castOp = use.get().getDefiningOp<CastOp>();
      if (!castOp || castOp->getBlock() != &block)
        continue;
      auto owner = groupOf.find(castOp);
      if (owner == groupOf.end() || owner->second == group ||
          resultShape(castOp) != groups[group].shape ||
          elementBytes(castOp.getInput()) >= elementBytes(castOp.getResult()))
        continue;
      // The input must be in memory already: not computed inside a fusion.
      Operation *source = castOp.getInput().getDefiningOp();
      if (source && groupOf.count(source))
        continue;
      OpBuilder builder(op);
      Operation *copy = builder.clone(*castOp);
      placed(copy, op);
      use.set(copy->getResult(0));
      Group &members = groups[group];
      members.ops.insert(members.ops.end() - 1, copy);
      groupOf[copy] = group;
    }
  }

  /// The ops of group `group` that `value` is computed from (program order)
  /// when copying them is cheaper than reading `value`: at most
  /// kMaxRecomputedOps, and the group's inputs they read (splat constants
  /// are free) take fewer bytes per element of `value` than `value` does.
  std::optional<SmallVector<Operation *>> cheapComputation(Value value,
                                                           unsigned group) {
    SmallVector<Operation *> cone, stack{value.getDefiningOp()};
    llvm::SmallPtrSet<Operation *, 16> seen(stack.begin(), stack.end());
    llvm::SetVector<Value> inputs;
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      cone.push_back(op);
      if (cone.size() > kMaxRecomputedOps)
        return std::nullopt;
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        auto owner = groupOf.find(def);
        if (owner != groupOf.end() && owner->second == group) {
          if (seen.insert(def).second)
            stack.push_back(def);
        } else if (!isSplatConstant(operand)) {
          inputs.insert(operand);
        }
      }
    }
    double elements = double(numElements(value)), inputBytes = 0;
    for (Value input : inputs)
      inputBytes += elementBytes(input) * double(numElements(input)) / elements;
    if (!(inputBytes < double(elementBytes(value))))
      return std::nullopt;
    llvm::sort(cone, [&](Operation *a, Operation *b) { return before(a, b); });
    return cone;
  }

  /// Before `op` is placed: replaces each operand that a group of an
  /// earlier stretch computes cheaply (cheapComputation) by a copy of its
  /// computation, made just before `op` in a new group (or a copy made
  /// earlier in this stretch), so that the value need not be stored.
  void recomputeFarOperands(Operation *op) {
    for (OpOperand &use : op->getOpOperands()) {
      Operation *def = use.get().getDefiningOp();
      auto owner = groupOf.find(def);
      if (owner == groupOf.end() || stretch.lookup(def) == stretch.lookup(op))
        continue;
      if (Operation *copy = copyInStretch(def, op)) {
        use.set(copy->getResult(0));
        continue;
      }
      std::optional<SmallVector<Operation *>> cone =
          cheapComputation(use.get(), owner->second);
      if (!cone)
        continue;
      OpBuilder builder(op);
      IRMapping mapping;
      Group copies{{}, resultShape(def)};
      for (Operation *original : *cone) {
        if (Operation *copy = copyInStretch(original, op)) {
          mapping.map(original->getResult(0), copy->getResult(0));
          continue;
        }
        Operation *copy = builder.clone(*original, mapping);
        placed(copy, op);
        copies.ops.push_back(copy);
        copiesOf[original].push_back(copy);
        groupOf[copy] = groups.size();
      }
      groups.push_back(std::move(copies));
      use.set(mapping.lookupOrDefault(use.get()));
    }
  }

  /// A copy of `original` made by recomputeFarOperands in `op`'s stretch,
  /// before `op`.
  Operation *copyInStretch(Operation *original, Operation *op) {
    auto it = copiesOf.find(original);
    if (it == copiesOf.end())
      return nullptr;
    for (Operation *copy : it->second)
      if (stretch.lookup(copy) == stretch.lookup(op) && before(copy, op))
        return copy;
    return nullptr;
  }

  /// Merges `candidates` into the first of them when `op` can join them all.
  std::optional<unsigned> merge(Operation *op, ArrayRef<unsigned> candidates) {
    SmallVector<Operation *> hoists;
    if (!canJoin(op, candidates, hoists))
      return std::nullopt;
    hoist(hoists, firstOp(candidates));
    unsigned target = candidates.front();
    Group &merged = groups[target];
    for (unsigned other : candidates.drop_front()) {
      for (Operation *memberOp : groups[other].ops) {
        merged.ops.push_back(memberOp);
        groupOf[memberOp] = target;
      }
      groups[other].ops.clear();
    }
    llvm::sort(merged.ops,
               [&](Operation *a, Operation *b) { return before(a, b); });
    return target;
  }

  /// Erases the members that nothing outside the group needs, directly or
  /// through other members (dead code, or a cast whose readers all
  /// recompute it). Returns whether any member is left.
  bool eraseDeadMembers(Group &group) {
    llvm::SmallPtrSet<Operation *, 16> members(group.ops.begin(),
                                               group.ops.end());
    llvm::SmallPtrSet<Operation *, 16> live;
    // Members come in program order, so a member's readers in the group
    // come after it.
    for (Operation *op : llvm::reverse(group.ops))
      if (llvm::any_of(op->getUsers(), [&](Operation *user) {
            return !members.contains(user) || live.contains(user);
          }))
        live.insert(op);
    SmallVector<Operation *> kept;
    for (Operation *op : group.ops)
      if (live.contains(op))
        kept.push_back(op);
    for (Operation *op : llvm::reverse(group.ops))
      if (!live.contains(op))
        op->erase();
    group.ops = std::move(kept);
    return !group.ops.empty();
  }

  void outline(unsigned index) {
    Group &group = groups[index];
    if (group.ops.empty()) // merged into another group
      return;
    if (!eraseDeadMembers(group))
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
  /// Increasing along the block (renumber, placed).
  llvm::DenseMap<Operation *, uint64_t> position;
  /// How many ops that end a stretch (endsStretch) precede each op.
  llvm::DenseMap<Operation *, unsigned> stretch;
  /// The copies recomputeFarOperands made of each op.
  llvm::DenseMap<Operation *, SmallVector<Operation *, 1>> copiesOf;
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
