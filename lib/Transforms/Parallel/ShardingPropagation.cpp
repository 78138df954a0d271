//===- ShardingPropagation.cpp - The propagation engine -------------------===//
//
// At each op the axes of every sharded operand and result are moved onto
// the op's factors (FactorSharding.h), merged per factor (the better
// priority wins; at equal priority the more split one, if the other extends
// to it), and moved back onto every tensor: a tensor gains axes only on
// open dimensions, so a sharding once set is refined, never changed. Ops
// are visited from a worklist, those whose factors are all parallel
// (elementwise ops, reshapes, transposes) before the others, and revisited
// when a value they touch changes.
//
//===----------------------------------------------------------------------===//

#include "ShardingPropagation.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

namespace {

using Entry = ShardingPropagation::Entry;
constexpr int64_t kUnset = ShardingPropagation::kUnset;

/// A factor's sharding as one tensor proposes it.
struct Candidate {
  AxisList axes;
  int64_t priority = kUnset;
  bool closed = false;
  int slot = -1;
  unsigned factor = 0;
};

/// Whether `prefix` starts `list`.
bool isPrefix(ArrayRef<StringAttr> prefix, ArrayRef<StringAttr> list) {
  return prefix.size() <= list.size() &&
         llvm::equal(prefix, list.take_front(prefix.size()));
}

std::string describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return ("'" + name.getName().getValue() + "'").str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string text = describeLocation(inner); !text.empty())
        return text;
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
  return "";
}

bool isPassThrough(const FactorRule &rule) {
  return llvm::all_of(rule.getFactors(), [](const Factor &factor) {
    return factor.kind == FactorKind::Parallel;
  });
}

} // namespace

std::string mlir::loom::describeOp(Operation *op) {
  std::string where = describeLocation(op->getLoc());
  return (op->getName().getStringRef() + (where.empty() ? "" : " at ") + where)
      .str();
}

ShardingPropagation::ShardingPropagation(ModuleOp module, func::FuncOp func,
                                         MeshAttr mesh,
                                         FlatSymbolRefAttr meshName)
    : module(module), func(func), mesh(mesh), meshName(meshName) {
  for (auto parameter : module.getOps<ParameterOp>())
    parameters[parameter.getSymNameAttr()] = parameter;
  func.walk([&](Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      SmallVector<Operation *> &users =
          parameterUsers[param.getNameAttr().getAttr()];
      users.push_back(op);
      for (Operation *user : param->getUsers())
        users.push_back(user);
    }
    if (auto assign = dyn_cast<AssignOp>(op))
      parameterUsers[assign.getNameAttr().getAttr()].push_back(op);
  });
}

void ShardingPropagation::plant(Entry &entry, ShardingAttr sharding,
                                int64_t priority, StringRef origin) {
  if (entry.isSet()) {
    // An earlier (better) round decided already; the annotation only fills
    // the dimensions that round left open and unsplit (sequence
    // parallelism's pins split the sequence of values data parallelism
    // split by the batch), and closes those it names closed.
    DimAxes axes = dimAxesOf(sharding);
    llvm::SmallDenseSet<StringAttr> used;
    for (const AxisList &dimAxes : entry.axes)
      used.insert(dimAxes.begin(), dimAxes.end());
    bool filled = false;
    for (unsigned dim = 0; dim < axes.size() && dim < entry.axes.size();
         ++dim) {
      if (entry.closed[dim] || !entry.axes[dim].empty() || axes[dim].empty() ||
          llvm::any_of(axes[dim],
                       [&](StringAttr axis) { return used.contains(axis); }))
        continue;
      entry.axes[dim] = axes[dim];
      entry.closed[dim] = !sharding.isDimOpen(dim);
      used.insert(axes[dim].begin(), axes[dim].end());
      filled = true;
    }
    // The entry now holds a decision of this round: it must not outrank
    // the rounds between (tensor parallelism's weights at priority 1 beat
    // sequence parallelism's pins at 2 where both want tp). Its earlier
    // dimensions keep their splits, which the neighbours that gave them
    // still hold at their own priority.
    if (filled)
      entry.priority = std::max(entry.priority, priority);
    entry.origin += ((filled ? "; then " : "; overrides ") + origin).str();
    return;
  }
  entry.axes = dimAxesOf(sharding);
  entry.closed.clear();
  for (unsigned dim = 0; dim < sharding.getRank(); ++dim)
    entry.closed.push_back(!sharding.isDimOpen(dim));
  entry.priority = priority;
  entry.origin = origin.str();
}

void ShardingPropagation::seedParameter(StringAttr name, ShardingAttr sharding,
                                        int64_t priority, StringRef origin) {
  plant(parameterSlot(name), sharding, priority, origin);
  enqueueAround(Value(), name);
}

void ShardingPropagation::seedValue(Value value, ShardingAttr sharding,
                                    int64_t priority, StringRef origin) {
  plant(entryOf(value), sharding, priority, origin);
  auto param = value.getDefiningOp<ParamOp>();
  enqueueAround(value, param ? param.getNameAttr().getAttr() : StringAttr());
}

const Entry *ShardingPropagation::parameterEntry(StringAttr name) const {
  return paramEntries.lookup(name);
}

Entry &ShardingPropagation::entryOf(Value value) {
  if (auto param = value.getDefiningOp<ParamOp>())
    return parameterSlot(param.getNameAttr().getAttr());
  return valueSlot(value);
}

Entry &ShardingPropagation::valueSlot(Value value) {
  Entry *&entry = values[value];
  if (!entry)
    entry = &storage.emplace_back();
  return *entry;
}

Entry &ShardingPropagation::parameterSlot(StringAttr name) {
  Entry *&entry = paramEntries[name];
  if (!entry)
    entry = &storage.emplace_back();
  return *entry;
}

const FactorRule &ShardingPropagation::ruleOf(Operation *op) {
  std::unique_ptr<FactorRule> &rule = rules[op];
  if (!rule)
    rule = std::make_unique<FactorRule>(
        cast<FactorRuleOpInterface>(op).getFactorRule());
  return *rule;
}

void ShardingPropagation::enqueue(Operation *op) {
  if (!isa<FactorRuleOpInterface>(op) || !queued.insert(op).second)
    return;
  if (isPassThrough(ruleOf(op)))
    passThroughQueue.push_back(op);
  else
    otherQueue.push_back(op);
}

void ShardingPropagation::enqueueAround(Value value, StringAttr parameter) {
  if (parameter) {
    for (Operation *op : parameterUsers.lookup(parameter))
      enqueue(op);
    return;
  }
  if (Operation *op = value.getDefiningOp())
    enqueue(op);
  for (Operation *user : value.getUsers())
    enqueue(user);
}

ShardingPropagation::Slots
ShardingPropagation::slotsOf(Operation *op, const FactorRule &rule) {
  auto parameterOf = [](Value value) {
    auto param = value.getDefiningOp<ParamOp>();
    return param ? param.getNameAttr().getAttr() : StringAttr();
  };
  Slots slots;
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    slots.push_back({&entryOf(operand), rule.getOperands()[index], false,
                     unsigned(index), operand, parameterOf(operand)});
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    slots.push_back({&entryOf(result), rule.getResults()[index], true,
                     unsigned(index), result, parameterOf(result)});
  // A stored value is the parameter: tie the two.
  if (auto assign = dyn_cast<AssignOp>(op)) {
    StringAttr name = assign.getNameAttr().getAttr();
    slots.push_back(
        {&parameterSlot(name), rule.getOperands()[0], true, 0, Value(), name});
  }
  return slots;
}

ShardingPropagation::Merge ShardingPropagation::merge(const FactorRule &rule,
                                                      ArrayRef<Slot> slots) {
  size_t numFactors = rule.getFactors().size();
  // Every tensor's proposals, in slot order (one list: a list per factor
  // was most of the merge's allocations).
  SmallVector<Candidate, 16> all;
  for (auto [slotIndex, slot] : llvm::enumerate(slots)) {
    const Entry &entry = *slot.entry;
    if (!entry.isSet())
      continue;
    FactorAxes axes =
        tensorFactorAxes(slot.dims, entry.axes, rule, mesh, nullptr);
    for (auto [dim, factors] : llvm::enumerate(slot.dims))
      for (unsigned factor : factors) {
        bool closed = dim < entry.closed.size() && entry.closed[dim];
        if (axes[factor].empty() && !closed)
          continue;
        all.push_back(
            {axes[factor], entry.priority, closed, int(slotIndex), factor});
      }
  }
  Merge result;
  result.axes.resize(numFactors);
  result.source.assign(numFactors, -1);
  for (unsigned factor = 0; factor < numFactors; ++factor) {
    const Candidate *chosen = nullptr;
    for (const Candidate &candidate : all) {
      if (candidate.factor != factor)
        continue;
      if (!chosen || candidate.priority < chosen->priority) {
        chosen = &candidate;
        continue;
      }
      if (candidate.priority > chosen->priority)
        continue;
      // Equal priority: the more split one wins if it extends the other
      // and the other is open.
      if (isPrefix(chosen->axes, candidate.axes) && !chosen->closed)
        chosen = &candidate;
    }
    if (!chosen)
      continue;
    AxisList axes = chosen->axes;
    if (rule.getFactors()[factor].kind == FactorKind::NeedReplication)
      axes.clear();
    result.axes[factor] = axes;
    result.source[factor] = chosen->slot;
  }
  // Each axis splits one factor at most: a later factor loses an axis an
  // earlier (better priority first) one took.
  SmallVector<unsigned> order =
      llvm::to_vector(llvm::seq<unsigned>(0, numFactors));
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    auto priorityOf = [&](unsigned f) {
      return result.source[f] < 0 ? kUnset
                                  : slots[result.source[f]].entry->priority;
    };
    return priorityOf(a) < priorityOf(b);
  });
  llvm::SmallDenseSet<StringAttr> used;
  for (unsigned factor : order) {
    AxisList &axes = result.axes[factor];
    auto clash = llvm::find_if(
        axes, [&](StringAttr axis) { return used.contains(axis); });
    axes.erase(clash, axes.end());
    used.insert(axes.begin(), axes.end());
  }
  // A split some tensor of the op cannot express is no split at all.
  dropInexpressible(result.axes, rule, mesh);
  // Record who disagrees with the outcome.
  for (unsigned factor = 0; factor < numFactors; ++factor)
    for (const Candidate &candidate : all)
      if (candidate.factor == factor && candidate.axes != result.axes[factor] &&
          !(isPrefix(candidate.axes, result.axes[factor]) && !candidate.closed))
        result.conflicts.push_back({candidate.slot, factor});
  return result;
}

bool ShardingPropagation::refine(const Slot &slot, const Merge &merged,
                                 ArrayRef<Slot> slots, const FactorRule &rule,
                                 int64_t priority, Operation *op) {
  DimAxes proposed = tensorDimAxes(slot.dims, merged.axes, rule, mesh);
  Entry &entry = *slot.entry;
  bool any = llvm::any_of(proposed,
                          [](const AxisList &axes) { return !axes.empty(); });
  if (!entry.isSet()) {
    if (!any)
      return false;
    entry.axes = DimAxes(proposed.size());
    entry.closed.assign(proposed.size(), false);
    entry.priority = priority;
  }
  bool changed = false;
  llvm::SmallDenseSet<StringAttr> usedHere;
  for (const AxisList &axes : entry.axes)
    usedHere.insert(axes.begin(), axes.end());
  std::optional<unsigned> firstChanged;
  for (auto [dim, axes] : llvm::enumerate(proposed)) {
    if (dim >= entry.axes.size() || entry.closed[dim])
      continue;
    AxisList &mine = entry.axes[dim];
    if (axes.size() <= mine.size() || !isPrefix(mine, axes))
      continue;
    ArrayRef<StringAttr> added =
        ArrayRef<StringAttr>(axes).drop_front(mine.size());
    if (llvm::any_of(added,
                     [&](StringAttr axis) { return usedHere.contains(axis); }))
      continue;
    mine.append(added.begin(), added.end());
    usedHere.insert(added.begin(), added.end());
    if (!firstChanged)
      firstChanged = dim;
    changed = true;
  }
  // A split added in a later round is that round's decision: at the next
  // op it must not outrank an earlier round's claim on the same axis (a
  // sequence split at priority 2 on a value data parallelism set at 0
  // would take tp from the weights tensor parallelism split at 1).
  if (changed)
    entry.priority = std::max(entry.priority, priority);
  if (firstChanged && entry.origin.empty()) {
    // From the tensor that decided this dimension's first split factor.
    int source = -1;
    for (unsigned factor : slot.dims[*firstChanged])
      if (merged.source[factor] >= 0) {
        source = merged.source[factor];
        break;
      }
    std::string from = source >= 0 ? slots[source].entry->origin : "";
    entry.origin =
        from.substr(0, from.find(", via ")) + ", via " + describeOp(op);
  }
  return changed;
}

void ShardingPropagation::visit(Operation *op, int64_t priority) {
  // An explicit reshard is a boundary: its result has the sharding it
  // states, its operand keeps its own, and the partitioner converts.
  if (isa<ReshardOp>(op))
    return;
  const FactorRule &rule = ruleOf(op);
  Slots slots = slotsOf(op, rule);
  if (llvm::none_of(slots,
                    [](const Slot &slot) { return slot.entry->isSet(); }))
    return;
  Merge merged = merge(rule, slots);
  for (const Slot &slot : slots)
    if (refine(slot, merged, slots, rule, priority, op))
      enqueueAround(slot.value, slot.parameter);
}

void ShardingPropagation::propagate(int64_t priority) {
  while (!passThroughQueue.empty() || !otherQueue.empty()) {
    std::deque<Operation *> &queue =
        passThroughQueue.empty() ? otherQueue : passThroughQueue;
    Operation *op = queue.front();
    queue.pop_front();
    queued.erase(op);
    visit(op, priority);
  }
}

void ShardingPropagation::insertReshards() {
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<FactorRuleOpInterface>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (isa<ShardOp, ReshardOp, AssignOp>(op))
      continue;
    const FactorRule &rule = ruleOf(op);
    Slots slots = slotsOf(op, rule);
    Merge merged = merge(rule, slots);
    llvm::SmallDenseSet<int> done;
    for (auto [slotIndex, factor] : merged.conflicts) {
      const Slot &slot = slots[slotIndex];
      if (!done.insert(slotIndex).second)
        continue;
      // A factor the op needs whole is gathered by the partitioner, not
      // a conflict between annotations.
      if (rule.getFactors()[factor].kind == FactorKind::NeedReplication)
        continue;
      int winner = merged.source[factor];
      if (winner < 0 || winner == slotIndex)
        continue;
      Entry target;
      target.axes = tensorDimAxes(slot.dims, merged.axes, rule, mesh);
      target.closed.assign(target.axes.size(), true);
      target.priority = slots[winner].entry->priority;
      std::string reason =
          (Twine("conflict at ") + describeOp(op) + ": " +
           (slot.isResult ? "result #" : "operand #") + Twine(slot.index) +
           " is " + formatDimAxes(slot.entry->axes) + " from " +
           slot.entry->origin + ", but " + formatDimAxes(target.axes) +
           " from " + slots[winner].entry->origin + " wins (priority " +
           Twine(slots[winner].entry->priority) + " vs " +
           Twine(slot.entry->priority) + ")")
              .str();
      target.origin = reason;
      if (slot.isResult && slot.index < op->getNumResults() &&
          !isa<AssignOp>(op)) {
        Value result = op->getResult(slot.index);
        OpBuilder builder(op->getContext());
        builder.setInsertionPointAfter(op);
        auto reshard = builder.create<ReshardOp>(
            op->getLoc(), result,
            makeSharding(op->getContext(), meshName, slot.entry->axes),
            builder.getStringAttr(reason));
        result.replaceAllUsesExcept(reshard.getResult(), reshard);
        Entry old = *slot.entry;
        valueSlot(reshard.getResult()) = old;
        valueSlot(result) = target;
      } else if (!slot.isResult) {
        OpOperand &use = op->getOpOperand(slot.index);
        OpBuilder builder(op);
        auto reshard = builder.create<ReshardOp>(
            op->getLoc(), use.get(),
            makeSharding(op->getContext(), meshName, target.axes),
            builder.getStringAttr(reason));
        use.set(reshard.getResult());
        valueSlot(reshard.getResult()) = target;
      }
    }
  }
}

void ShardingPropagation::write() {
  MLIRContext *context = module.getContext();
  Builder builder(context);
  // Each op's decision per factor, which the partitioner carries out
  // (set below with the op's shardings, in one new dictionary).
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<FactorRuleOpInterface>(op) && !isa<ShardOp, ReshardOp>(op))
      ops.push_back(op);
  });
  llvm::DenseMap<Operation *, ArrayAttr> factorsOf;
  for (Operation *op : ops) {
    const FactorRule &rule = ruleOf(op);
    Slots slots = slotsOf(op, rule);
    Merge merged = merge(rule, slots);
    if (llvm::all_of(merged.axes,
                     [](const AxisList &axes) { return axes.empty(); }))
      continue;
    SmallVector<Attribute> factors;
    for (const AxisList &axes : merged.axes)
      factors.push_back(builder.getArrayAttr(
          SmallVector<Attribute>(axes.begin(), axes.end())));
    factorsOf[op] = builder.getArrayAttr(factors);
  }
  // A pin's open dimensions are what propagation made of them: the
  // partitioner converts to the pin's sharding, which would otherwise
  // gather them (a sequence-parallel pin would gather dp's batch).
  func.walk([&](ShardOp shard) {
    ShardingAttr sharding = shard.getSharding();
    DimAxes dims = dimAxesOf(sharding);
    auto it = values.find(shard.getResult());
    if (it == values.end() || !it->second->isSet())
      return;
    const Entry &entry = *it->second;
    llvm::SmallDenseSet<StringAttr> used;
    for (const AxisList &axes : dims)
      used.insert(axes.begin(), axes.end());
    bool changed = false;
    for (unsigned dim = 0; dim < dims.size() && dim < entry.axes.size();
         ++dim) {
      if (!sharding.isDimOpen(dim) || !dims[dim].empty() ||
          entry.axes[dim].empty() ||
          llvm::any_of(entry.axes[dim],
                       [&](StringAttr axis) { return used.contains(axis); }))
        continue;
      dims[dim] = entry.axes[dim];
      used.insert(dims[dim].begin(), dims[dim].end());
      changed = true;
    }
    if (changed)
      shard.setShardingAttr(makeSharding(context, meshName, dims));
  });
  for (auto &[name, entryPointer] : paramEntries) {
    const Entry &entry = *entryPointer;
    auto parameter = parameters.lookup(name);
    if (!parameter || !entry.isSet())
      continue;
    parameter.setShardingAttr(makeSharding(context, meshName, entry.axes));
    parameter->setAttr(LoomDialect::kShardingOriginAttrName,
                       builder.getStringAttr(entry.origin));
  }
  for (BlockArgument argument : func.getArguments()) {
    auto it = values.find(argument);
    if (it == values.end() || !it->second->isSet())
      continue;
    func.setArgAttr(argument.getArgNumber(), LoomDialect::kShardingAttrName,
                    makeSharding(context, meshName, it->second->axes));
    func.setArgAttr(argument.getArgNumber(),
                    LoomDialect::kShardingOriginAttrName,
                    builder.getStringAttr(it->second->origin));
  }
  StringAttr shardingName =
      builder.getStringAttr(LoomDialect::kShardingAttrName);
  StringAttr originName =
      builder.getStringAttr(LoomDialect::kShardingOriginAttrName);
  StringAttr factorName =
      builder.getStringAttr(LoomDialect::kFactorShardingAttrName);
  func.walk([&](Operation *op) {
    ArrayAttr factors = factorsOf.lookup(op);
    auto factorsOnly = [&] {
      if (factors)
        op->setAttr(factorName, factors);
    };
    if (op->getNumResults() == 0 ||
        !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return factorsOnly();
    SmallVector<Attribute> shardings, origins;
    bool any = false;
    for (Value result : op->getResults()) {
      Entry &entry = entryOf(result);
      any |= entry.isSet();
      if (entry.isSet()) {
        shardings.push_back(makeSharding(context, meshName, entry.axes));
        origins.push_back(builder.getStringAttr(entry.origin));
      } else {
        auto type = cast<RankedTensorType>(result.getType());
        shardings.push_back(
            makeSharding(context, meshName, DimAxes(type.getRank())));
        origins.push_back(builder.getStringAttr(""));
      }
    }
    if (!any || isa<ShardOp, ReshardOp>(op))
      return factorsOnly();
    // All in one new dictionary (each setAttr makes one).
    NamedAttrList attrs(op->getDiscardableAttrDictionary());
    if (factors)
      attrs.set(factorName, factors);
    attrs.set(shardingName, shardings.size() == 1
                                ? shardings.front()
                                : Attribute(builder.getArrayAttr(shardings)));
    attrs.set(originName, origins.size() == 1
                              ? origins.front()
                              : Attribute(builder.getArrayAttr(origins)));
    op->setDiscardableAttrs(attrs.getDictionary(context));
  });
}
