//===- PropagateSharding.cpp - Shardings from annotations, by factors -----===//
//
// Collects the annotations (a `loom.parameter`'s sharding, a `loom.shard`, a
// function argument's `loom.sharding`) and hands them to the engine
// (ShardingPropagation.h) one priority at a time, 0 first; then makes the
// remaining conflicts explicit and writes the outcome onto the IR.
//
//===----------------------------------------------------------------------===//

#include "ShardingPropagation.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPROPAGATESHARDING
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// The explicit boundaries around one optimizer update that ZeRO shards:
/// the parameter and gradient operands and the updated parameter each go
/// through a `loom.reshard`, made before propagation (so that nothing
/// reaches the update from the parameter's other reads and stores) and
/// given their shardings once the rest has propagated.
struct ZeroUpdate {
  Operation *update;
  StringAttr parameter;
  ReshardOp param, grad, updated;
  SmallVector<StringAttr> states;
};

/// Isolates every `loom.adamw_update` and `loom.sgd_update` of `func` with
/// states behind reshards (their shardings are set later).
SmallVector<ZeroUpdate> isolateUpdates(func::FuncOp func,
                                       FlatSymbolRefAttr meshName) {
  SmallVector<ZeroUpdate> updates;
  auto readOf = [](Value value) -> StringAttr {
    auto read = value.getDefiningOp<ParamOp>();
    return read ? read.getNameAttr().getAttr() : StringAttr();
  };
  func.walk([&](Operation *op) {
    ValueRange states;
    if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
      states = adamw.getStates();
    else if (auto sgd = dyn_cast<SGDUpdateOp>(op))
      states = sgd.getStates();
    else
      return;
    StringAttr parameter = readOf(op->getOperand(0));
    if (!parameter || states.empty())
      return;
    ZeroUpdate zero{op, parameter, {}, {}, {}, {}};
    for (Value state : states)
      if (StringAttr name = readOf(state))
        zero.states.push_back(name);
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    ShardingAttr placeholder =
        makeSharding(op->getContext(), meshName, DimAxes(type.getRank()));
    OpBuilder builder(op);
    auto reason = builder.getStringAttr("ZeRO: the update runs on its shard");
    zero.param = builder.create<ReshardOp>(op->getLoc(), op->getOperand(0),
                                           placeholder, reason);
    zero.grad = builder.create<ReshardOp>(op->getLoc(), op->getOperand(1),
                                          placeholder, reason);
    op->setOperand(0, zero.param);
    op->setOperand(1, zero.grad);
    builder.setInsertionPointAfter(op);
    zero.updated =
        builder.create<ReshardOp>(op->getLoc(), op->getResult(0), placeholder,
                                  builder.getStringAttr("ZeRO: the updated "
                                                        "shard, gathered"));
    op->getResult(0).replaceAllUsesExcept(zero.updated, zero.updated);
    updates.push_back(zero);
  });
  return updates;
}

/// ZeRO's sharding of the optimizer updates over `axis`, once everything
/// annotated has propagated (so each parameter has its tensor-parallel
/// split): each update runs on the shard of its parameter refined by
/// `axis` on the first dimension whose block the axis divides (minor to
/// the split it has), with its states sharded alike (stage 1). Partitioned,
/// the gradient (a partial sum over `axis`) is reduced and scattered, the
/// parameter read sliced locally, and the updated shard gathered into the
/// parameter, which stays whole over `axis`.
void shardOptimizerStates(ModuleOp module, MutableArrayRef<ZeroUpdate> updates,
                          MeshAttr mesh, FlatSymbolRefAttr meshName,
                          ShardingPropagation &propagation, StringRef axisName,
                          int64_t stage, int64_t priority) {
  MLIRContext *context = module.getContext();
  StringAttr axis = StringAttr::get(context, axisName);
  int64_t ways = mesh.getAxisSize(axisName);
  for (ZeroUpdate &zero : updates) {
    auto type = cast<RankedTensorType>(zero.param.getType());
    const ShardingPropagation::Entry *entry =
        propagation.parameterEntry(zero.parameter);
    DimAxes whole =
        entry && entry->isSet() ? entry->axes : DimAxes(type.getRank());
    DimAxes shard = whole;
    bool split = llvm::any_of(whole, [&](const AxisList &axes) {
      return llvm::is_contained(axes, axis);
    });
    for (int64_t dim = 0; !split && dim < type.getRank(); ++dim)
      if ((type.getDimSize(dim) / axesSize(mesh, whole[dim])) % ways == 0) {
        shard[dim].push_back(axis);
        split = true;
      }
    std::string origin =
        ("ZeRO-" + Twine(stage) + ": the update of @" +
         zero.parameter.getValue() + " on its shard " + formatDimAxes(shard))
            .str();
    ShardingAttr shardSharding = makeSharding(context, meshName, shard);
    ShardingAttr wholeSharding = makeSharding(context, meshName, whole);
    for (ReshardOp reshard : {zero.param, zero.grad}) {
      reshard.setShardingAttr(shardSharding);
      propagation.seedValue(reshard.getResult(), shardSharding, priority,
                            origin);
    }
    zero.updated.setShardingAttr(wholeSharding);
    propagation.seedValue(zero.updated.getResult(), wholeSharding, priority,
                          ("ZeRO-" + Twine(stage) + ": @" +
                           zero.parameter.getValue() + " stays " +
                           formatDimAxes(whole))
                              .str());
    for (StringAttr state : zero.states)
      propagation.seedParameter(state, shardSharding, priority, origin);
  }
  propagation.propagate(priority);
}

/// Every annotation of `func` and the module's parameters, planted and
/// propagated in priority order.
void propagateAnnotations(ModuleOp module, func::FuncOp func, MeshAttr mesh,
                          FlatSymbolRefAttr meshName, int64_t zeroStage,
                          StringRef zeroAxis) {
  struct Seed {
    int64_t priority;
    Value value; // or null for a parameter
    StringAttr parameter;
    ShardingAttr sharding;
    std::string origin;
  };
  SmallVector<Seed> seeds;
  for (auto parameter : module.getOps<ParameterOp>())
    if (std::optional<ShardingAttr> sharding = parameter.getSharding()) {
      int64_t priority = parameter.getShardingPriority().value_or(0);
      seeds.push_back({priority, Value(), parameter.getSymNameAttr(), *sharding,
                       ("@" + parameter.getSymName() + " annotated " +
                        formatDimAxes(dimAxesOf(*sharding)) + " (priority " +
                        Twine(priority) + ")")
                           .str()});
    }
  for (BlockArgument argument : func.getArguments())
    if (auto sharding = func.getArgAttrOfType<ShardingAttr>(
            argument.getArgNumber(), LoomDialect::kShardingAttrName))
      seeds.push_back({0, argument, StringAttr(), sharding,
                       ("argument #" + Twine(argument.getArgNumber()) +
                        " annotated " + formatDimAxes(dimAxesOf(sharding)))
                           .str()});
  func.walk([&](ShardOp shard) {
    int64_t priority = shard.getPriority().value_or(0);
    seeds.push_back(
        {priority, shard.getResult(), StringAttr(), shard.getSharding(),
         ("loom.shard " + formatDimAxes(dimAxesOf(shard.getSharding())) +
          " (priority " + Twine(priority) + ") at " +
          describeOp(shard).substr(strlen("loom.shard at ")))
             .str()});
  });

  SmallVector<ZeroUpdate> updates;
  if (zeroStage > 0)
    updates = isolateUpdates(func, meshName);
  ShardingPropagation propagation(module, func, mesh, meshName);
  std::set<int64_t> priorities;
  for (const Seed &seed : seeds)
    priorities.insert(seed.priority);
  for (int64_t priority : priorities) {
    for (const Seed &seed : seeds) {
      if (seed.priority != priority)
        continue;
      if (seed.value)
        propagation.seedValue(seed.value, seed.sharding, priority, seed.origin);
      else
        propagation.seedParameter(seed.parameter, seed.sharding, priority,
                                  seed.origin);
    }
    propagation.propagate(priority);
  }
  if (zeroStage > 0)
    shardOptimizerStates(module, updates, mesh, meshName, propagation, zeroAxis,
                         zeroStage,
                         priorities.empty() ? 0 : *priorities.rbegin() + 1);
  propagation.insertReshards();
  propagation.write();
}

/// The one mesh every annotation of `module` names, if any.
FailureOr<std::optional<FlatSymbolRefAttr>> findMesh(ModuleOp module) {
  std::optional<FlatSymbolRefAttr> mesh;
  Operation *first = nullptr;
  auto check = [&](Operation *at, ShardingAttr sharding) -> LogicalResult {
    if (!mesh) {
      mesh = sharding.getMesh();
      first = at;
      return success();
    }
    if (*mesh == sharding.getMesh())
      return success();
    InFlightDiagnostic diag = at->emitOpError()
                              << "names mesh " << sharding.getMesh()
                              << ", but another annotation names " << *mesh
                              << "; sharding propagation needs one mesh";
    diag.attachNote(first->getLoc()) << "the other annotation";
    return diag;
  };
  WalkResult walk = module.walk([&](Operation *op) {
    if (auto parameter = dyn_cast<ParameterOp>(op))
      if (std::optional<ShardingAttr> sharding = parameter.getSharding())
        if (failed(check(op, *sharding)))
          return WalkResult::interrupt();
    if (auto shard = dyn_cast<ShardOp>(op))
      if (failed(check(op, shard.getSharding())))
        return WalkResult::interrupt();
    if (auto func = dyn_cast<func::FuncOp>(op))
      for (unsigned arg = 0; arg < func.getNumArguments(); ++arg)
        if (auto sharding = func.getArgAttrOfType<ShardingAttr>(
                arg, LoomDialect::kShardingAttrName))
          if (failed(check(op, sharding)))
            return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return mesh;
}

struct PropagateShardingPass
    : impl::LoomPropagateShardingBase<PropagateShardingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<FlatSymbolRefAttr>> meshName = findMesh(module);
    if (failed(meshName))
      return signalPassFailure();
    if (!*meshName)
      return; // nothing is annotated: every value stays replicated
    FailureOr<MeshAttr> mesh = lookupMesh(module, **meshName);
    if (failed(mesh))
      return signalPassFailure();
    if (zero > 0 && !mesh->getAxisIndex(zeroAxis)) {
      module.emitError("loom-propagate-sharding: zero=")
          << static_cast<int64_t>(zero) << " shards over axis '" << zeroAxis
          << "', which the mesh does not have";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      propagateAnnotations(module, func, *mesh, **meshName, zero, zeroAxis);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
