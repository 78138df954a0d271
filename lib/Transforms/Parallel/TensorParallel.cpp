//===- TensorParallel.cpp - Megatron's column/row tactic ------------------===//
//
// Annotates as little as possible and lets propagation derive the rest:
// each forward GEMM whose weight propagation has not split yet is split on
// its output features. Propagation runs incrementally after each
// annotation (the engine's worklist only revisits what it reaches), so the
// GEMM that consumes a column-split output is seen row-split before its
// turn comes and is left alone.
//
//===----------------------------------------------------------------------===//

#include "ShardingPropagation.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/Analysis/SliceAnalysis.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMTENSORPARALLEL
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// The trainable matrix parameter `value` reads, through casts, if any.
ParamOp weightRead(Value value, ModuleOp module) {
  while (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  auto param = value.getDefiningOp<ParamOp>();
  if (!param || param.getType().getRank() != 2)
    return {};
  auto parameter =
      module.lookupSymbol<ParameterOp>(param.getNameAttr().getAttr());
  return parameter && parameter.getTrainable() ? param : ParamOp();
}

/// The ops the function's results depend on: the forward part of a step.
llvm::DenseSet<Operation *> forwardOps(func::FuncOp func) {
  llvm::DenseSet<Operation *> forward;
  SmallVector<Value> work(
      func.getBody().front().getTerminator()->getOperands());
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op || !forward.insert(op).second)
      continue;
    work.append(op->operand_begin(), op->operand_end());
  }
  return forward;
}

struct TensorParallelPass : impl::LoomTensorParallelBase<TensorParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MeshOp> meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError("loom-tensor-parallel needs one loom.mesh (it has ")
          << meshes.size() << ")";
      return signalPassFailure();
    }
    MeshAttr mesh = meshes.front().getMesh();
    if (!mesh.getAxisIndex(axis)) {
      meshes.front().emitOpError("has no axis '") << axis << "' to split over";
      return signalPassFailure();
    }
    auto meshName = FlatSymbolRefAttr::get(meshes.front().getSymNameAttr());
    int64_t size = mesh.getAxisSize(axis);
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          failed(annotate(module, func, mesh, meshName, size)))
        return signalPassFailure();
  }

  LogicalResult annotate(ModuleOp module, func::FuncOp func, MeshAttr mesh,
                         FlatSymbolRefAttr meshName, int64_t size) {
    ShardingPropagation propagation(module, func, mesh, meshName);
    // The user's annotations come first, at their priorities.
    std::map<int64_t, SmallVector<ParameterOp>> byPriority;
    for (auto parameter : module.getOps<ParameterOp>())
      if (parameter.getSharding())
        byPriority[parameter.getShardingPriority().value_or(0)].push_back(
            parameter);
    for (auto &[priority, parameters] : byPriority) {
      for (ParameterOp parameter : parameters)
        propagation.seedParameter(parameter.getSymNameAttr(),
                                  *parameter.getSharding(), priority,
                                  "annotation");
      propagation.propagate(priority);
    }

    llvm::DenseSet<Operation *> forward = forwardOps(func);
    StringAttr axisName = StringAttr::get(module.getContext(), axis);
    SmallVector<std::pair<ParameterOp, ShardingAttr>> chosen;
    WalkResult walk = func.walk([&](MatmulOp matmul) {
      if (!forward.contains(matmul))
        return WalkResult::advance();
      ParamOp weight = weightRead(matmul.getRhs(), module);
      if (!weight)
        return WalkResult::advance();
      StringAttr name = weight.getNameAttr().getAttr();
      const ShardingPropagation::Entry *entry =
          propagation.parameterEntry(name);
      if (entry && entry->isSet())
        return WalkResult::advance();
      // Output features: the rows of a transposed right operand.
      unsigned features = matmul.getTransposeRhs() ? 0 : 1;
      int64_t extent = weight.getType().getDimSize(features);
      auto parameter = module.lookupSymbol<ParameterOp>(name);
      if (extent % size != 0) {
        matmul.emitOpError("multiplies by @")
            << name.getValue() << ", whose dimension " << features
            << " (output features, " << extent << ") " << axis << " = " << size
            << " does not divide; tensor parallelism needs it to";
        return WalkResult::interrupt();
      }
      DimAxes dims(2);
      dims[features].push_back(axisName);
      ShardingAttr sharding = makeSharding(module.getContext(), meshName, dims);
      propagation.seedParameter(name, sharding, /*priority=*/1,
                                "loom-tensor-parallel");
      propagation.propagate(1);
      chosen.push_back({parameter, sharding});
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    Builder builder(module.getContext());
    for (auto [parameter, sharding] : chosen) {
      parameter.setShardingAttr(sharding);
      parameter.setShardingPriorityAttr(builder.getI64IntegerAttr(1));
    }
    return success();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
