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

/// Every annotation of `func` and the module's parameters, planted and
/// propagated in priority order.
void propagateAnnotations(ModuleOp module, func::FuncOp func, MeshAttr mesh,
                          FlatSymbolRefAttr meshName) {
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
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      propagateAnnotations(module, func, *mesh, **meshName);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
