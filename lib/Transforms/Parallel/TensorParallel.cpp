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
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMTENSORPARALLEL
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

/// The trainable matrix parameter `value` reads, through casts, if any.
ParamOp weightRead(Value value, SymbolTable &symbols) {
  while (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  auto param = value.getDefiningOp<ParamOp>();
  if (!param || param.getType().getRank() != 2)
    return {};
  auto parameter = symbols.lookup<ParameterOp>(param.getNameAttr().getAttr());
  return parameter && parameter.getTrainable() ? param : ParamOp();
}

/// Whether `matmul`'s result reaches a loss as its logits (through casts,
/// reshapes and bias additions, which keep the classes): its output
/// features are classes.
bool feedsLoss(MatmulOp matmul) {
  SmallVector<std::pair<Value, int>> work = {{matmul.getResult(), 0}};
  while (!work.empty()) {
    auto [value, depth] = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (isa<CrossEntropyOp>(user))
        return true;
      if (depth < 4 && isa<CastOp, ReshapeOp, BiasAddOp, AddOp>(user))
        work.push_back({user->getResult(0), depth + 1});
    }
  }
  return false;
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

  /// The value a forward normalization over the last dimension
  /// normalizes, and the op that reads it, for each normalization: a
  /// loom.layer_norm, or one built from primitive ops, found at its
  /// reduce_mean over the last dimension (LLaMA's RMSNorm: of x^2 or x*x;
  /// a decomposed layer norm: of x itself, for the mean).
  SmallVector<OpOperand *>
  normalizedInputs(func::FuncOp func,
                   const llvm::DenseSet<Operation *> &forward) {
    SmallVector<OpOperand *> inputs;
    llvm::DenseSet<Value> seen;
    auto add = [&](OpOperand &operand) {
      auto type = cast<RankedTensorType>(operand.get().getType());
      if (type.getRank() >= 3 && seen.insert(operand.get()).second)
        inputs.push_back(&operand);
    };
    func.walk([&](Operation *op) {
      if (!forward.contains(op))
        return;
      if (auto norm = dyn_cast<LayerNormOp>(op)) {
        auto type = cast<RankedTensorType>(norm.getInput().getType());
        if (int64_t(norm.getAxis()) == type.getRank() - 1)
          add(norm.getInputMutable());
        return;
      }
      auto mean = dyn_cast<ReduceMeanOp>(op);
      if (!mean)
        return;
      auto type = cast<RankedTensorType>(mean.getInput().getType());
      if (mean.getAxes().size() != 1 ||
          mean.getAxes().front() != type.getRank() - 1)
        return;
      // The square's base, where the mean is of a square.
      Operation *square = mean.getInput().getDefiningOp();
      if (auto pow = dyn_cast_or_null<PowOp>(square)) {
        auto exponent = pow.getRhs().getDefiningOp<ConstantOp>();
        auto value = exponent ? dyn_cast<DenseElementsAttr>(exponent.getValue())
                              : DenseElementsAttr();
        if (value && value.isSplat() &&
            value.getSplatValue<APFloat>().convertToDouble() == 2.0) {
          add(pow.getLhsMutable());
          return;
        }
      }
      if (auto mul = dyn_cast_or_null<MulOp>(square);
          mul && mul.getLhs() == mul.getRhs()) {
        add(mul->getOpOperand(0));
        return;
      }
      add(mean.getInputMutable());
    });
    return inputs;
  }

  /// Pins the input of every forward normalization split on its sequence
  /// dimension (the one before the normalized last dimension).
  LogicalResult pinSequence(ModuleOp module, func::FuncOp func,
                            FlatSymbolRefAttr meshName, int64_t size,
                            const llvm::DenseSet<Operation *> &forward) {
    StringAttr axisName = StringAttr::get(module.getContext(), axis);
    for (OpOperand *input : normalizedInputs(func, forward)) {
      Operation *norm = input->getOwner();
      auto type = cast<RankedTensorType>(input->get().getType());
      int64_t sequence = type.getRank() - 2;
      if (type.getDimSize(sequence) % size != 0)
        return norm->emitOpError("normalizes rows of a sequence of ")
               << type.getDimSize(sequence) << ", which " << axis << " = "
               << size << " does not divide; sequence parallelism needs it to";
      DimAxes dims(type.getRank());
      dims[sequence].push_back(axisName);
      // Only the sequence is pinned: the other dimensions stay open, or
      // the pin would gather the batch that data parallelism splits (every
      // layer norm's input all-gathered over dp and split again).
      SmallVector<bool> open(type.getRank(), true);
      open[sequence] = false;
      OpBuilder builder(norm);
      Value normalized = input->get();
      auto pin = builder.create<ShardOp>(
          norm->getLoc(), normalized,
          makeSharding(module.getContext(), meshName, dims, open),
          builder.getI64IntegerAttr(2));
      // Every operand of the op that is the value (both of x * x).
      for (OpOperand &operand : norm->getOpOperands())
        if (operand.get() == normalized)
          operand.set(pin);
    }
    return success();
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
    // (A table: a 96-layer model has thousands of parameters and states,
    // and a module's lookup walks them all.)
    SymbolTable symbols(module);
    StringAttr axisName = StringAttr::get(module.getContext(), axis);
    SmallVector<std::pair<ParameterOp, ShardingAttr>> chosen;
    // Annotates `weight`'s dimension `dim` unless propagation split the
    // weight already; `what` names the dimension in errors.
    auto annotate = [&](Operation *at, ParamOp weight, unsigned dim,
                        StringRef what, bool vocabulary) -> LogicalResult {
      StringAttr name = weight.getNameAttr().getAttr();
      const ShardingPropagation::Entry *entry =
          propagation.parameterEntry(name);
      if (entry && entry->isSet())
        return success();
      int64_t extent = weight.getType().getDimSize(dim);
      // A vocabulary tp does not divide stays whole (padding it, as
      // Megatron does, is not done yet); other dimensions must divide.
      if (extent % size != 0 && vocabulary)
        return success();
      if (extent % size != 0)
        return at->emitOpError("reads @")
               << name.getValue() << ", whose dimension " << dim << " (" << what
               << ", " << extent << ") " << axis << " = " << size
               << " does not divide; tensor parallelism needs it to";
      DimAxes dims(2);
      dims[dim].push_back(axisName);
      ShardingAttr sharding = makeSharding(module.getContext(), meshName, dims);
      propagation.seedParameter(name, sharding, /*priority=*/1,
                                "loom-tensor-parallel");
      propagation.propagate(1);
      chosen.push_back({symbols.lookup<ParameterOp>(name), sharding});
      return success();
    };
    WalkResult walk = func.walk([&](Operation *op) {
      if (!forward.contains(op))
        return WalkResult::advance();
      LogicalResult done = success();
      if (auto matmul = dyn_cast<MatmulOp>(op)) {
        // A GEMM by a weight: split its output features (the rows of a
        // transposed right operand).
        // A loss head is split on its classes when they are a vocabulary
        // (more of them than input features); a classifier's narrow head
        // stays whole, as Megatron's classification heads do.
        ParamOp weight = weightRead(matmul.getRhs(), symbols);
        unsigned features = matmul.getTransposeRhs() ? 0 : 1;
        bool head = weight && feedsLoss(matmul);
        if (weight && !(head && weight.getType().getDimSize(features) <=
                                    weight.getType().getDimSize(1 - features)))
          done = annotate(op, weight, features, "output features", head);
      } else if (auto gather = dyn_cast<GatherOp>(op)) {
        // An embedding lookup: split the vocabulary.
        if (ParamOp table = weightRead(gather.getInput(), symbols);
            table && gather.getAxis() == 0)
          done = annotate(op, table, 0, "vocabulary", /*vocabulary=*/true);
      }
      return failed(done) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // Heads split for the queries must be split alike for the keys and
    // values: grouped-query attention needs tp to divide its key/value
    // heads.
    WalkResult heads = func.walk([&](AttentionOp attention) {
      auto shards = [&](Value value) {
        int64_t count = 1;
        for (const AxisList &axes : propagation.valueEntry(value).axes)
          count *= axesSize(mesh, axes);
        return count;
      };
      int64_t query = shards(attention.getQ());
      for (Value kv : {attention.getK(), attention.getV()})
        if (shards(kv) != query) {
          attention.emitOpError("has its query heads split ")
              << query << " ways but its key/value heads " << shards(kv)
              << " ways: " << axis << " = " << size
              << " must divide the key/value heads (" << kv.getType() << ")";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (heads.wasInterrupted())
      return failure();
    // The same for attention built from primitive ops. A reshape that cuts
    // a split dimension into heads and a head size keeps the split only
    // when the split divides the heads (the dimension's major factor).
    // Where some heads keep it (the queries) and others cannot (the keys
    // and values of grouped-query attention with fewer heads than tp), the
    // layout is no tensor parallelism: an error. Where none can (fewer
    // heads than tp throughout), attention simply runs whole on each rank.
    struct Cut {
      ReshapeOp reshape;
      unsigned dim;
      int64_t ways, heads;
    };
    SmallVector<Cut> kept, lost;
    func.walk([&](ReshapeOp reshape) {
      if (!forward.contains(reshape))
        return;
      FactorRule rule =
          cast<FactorRuleOpInterface>(reshape.getOperation()).getFactorRule();
      const DimAxes &in = propagation.valueEntry(reshape.getInput()).axes;
      for (auto [dim, axes] : llvm::enumerate(in)) {
        int64_t ways = axesSize(mesh, axes);
        ArrayRef<unsigned> factors = rule.getOperands()[0][dim];
        auto major = llvm::find_if(factors, [&](unsigned factor) {
          return rule.getFactors()[factor].size > 1;
        });
        if (ways == 1 || major == factors.end() ||
            llvm::count_if(factors, [&](unsigned factor) {
              return rule.getFactors()[factor].size > 1;
            }) < 2)
          continue;
        int64_t heads = rule.getFactors()[*major].size;
        (heads % ways == 0 ? kept : lost)
            .push_back({reshape, unsigned(dim), ways, heads});
      }
    });
    if (!kept.empty() && !lost.empty()) {
      Cut cut = lost.front();
      auto type = cast<RankedTensorType>(cut.reshape.getInput().getType());
      cut.reshape.emitOpError("cuts dimension ")
          << cut.dim << " (" << type.getDimSize(cut.dim) << ", split "
          << cut.ways << " ways by " << axis << ") into " << cut.heads
          << " heads of " << type.getDimSize(cut.dim) / cut.heads << ", and "
          << axis << " = " << size << " does not divide " << cut.heads
          << " while it divides the " << kept.front().heads
          << " heads cut elsewhere (grouped-query attention): tensor "
             "parallelism needs it to divide the key/value heads";
      return failure();
    }
    if (sequenceParallel &&
        failed(pinSequence(module, func, meshName, size, forward)))
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
