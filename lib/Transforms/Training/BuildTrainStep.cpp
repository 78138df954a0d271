//===- BuildTrainStep.cpp - One optimizer step as a function --------------===//
//
// The whole step, forward to parameter update, is one straight-line function:
// the gradient function is inlined once per microbatch, so memory planning
// sees every buffer's lifetime across the step, and the updates are ordinary
// (later expanded and fused) ops followed by loom.assign stores.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDTRAINSTEP
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// Marks the widening casts that a parameter's gradient `grad` is made of
/// (through the sums, reshapes and transposes that assemble it): the
/// backward of a bf16 GEMM's weight cast. A data-parallel partial sum
/// passes them and is reduced in f32, as PyTorch's DDP sums f32 `.grad`;
/// other widenings (activations and their gradients) are reduced before,
/// in bf16 (loom-partition).
void markParameterGradientWidenings(Value grad) {
  SmallVector<Value> worklist{grad};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto widen = dyn_cast<CastOp>(op)) {
      auto from = dyn_cast<FloatType>(getElementTypeOrSelf(widen.getInput()));
      auto to = dyn_cast<FloatType>(getElementTypeOrSelf(widen.getType()));
      if (from && to && to.getWidth() > from.getWidth())
        widen->setAttr(LoomDialect::kParameterGradientAttrName,
                       UnitAttr::get(op->getContext()));
      continue;
    }
    if (isa<AddOp, SubOp>(op)) {
      worklist.append(op->operand_begin(), op->operand_end());
      continue;
    }
    if (isa<ReshapeOp, TransposeOp, NegOp>(op))
      worklist.push_back(op->getOperand(0));
  }
}

/// A gradient result of the gradient function and its parameter.
struct Gradient {
  unsigned result;
  ParameterOp parameter;
};

struct BuildTrainStepPass : impl::LoomBuildTrainStepBase<BuildTrainStepPass> {
  using LoomBuildTrainStepBase::LoomBuildTrainStepBase;

  /// Where optimizer states go: before the module's first function.
  Operation *firstFunction = nullptr;
  /// The gradient function's parameter reads and constants, each cloned
  /// once into the step (inlineMicrobatch).
  llvm::DenseMap<Operation *, Operation *> sharedReads;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    firstFunction = nullptr;
    sharedReads.clear();
    if (failed(checkOptions(module)))
      return signalPassFailure();
    auto gradFunction = module.lookupSymbol<func::FuncOp>(function);
    if (!gradFunction || gradFunction.isExternal() ||
        !gradFunction.getBody().hasOneBlock()) {
      module.emitError("no gradient function '")
          << function << "' (run loom-autodiff first)";
      return signalPassFailure();
    }
    FailureOr<SmallVector<Gradient>> gradients = findGradients(gradFunction);
    if (failed(gradients))
      return signalPassFailure();
    if (failed(build(module, gradFunction, *gradients)))
      return signalPassFailure();
    // The step inlined the gradient function, which inlined the rest.
    if (eraseSources)
      for (auto func :
           llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
        if (func.getSymName() != stepName)
          func.erase();
  }

  /// The optimizer as torch.optim spells it in lower case.
  StringRef optimizerName() const {
    return optimizer == OptimizerKind::SGD ? "sgd" : "adamw";
  }

  LogicalResult checkOptions(ModuleOp module) {
    if (optimizer == OptimizerKind::SGD && lr < 0)
      return module.emitError(
          "the sgd optimizer needs a learning rate (lr), as torch.optim.SGD");
    if (gradAccum < 1)
      return module.emitError("grad-accum must be at least 1");
    if (clipGradNorm < 0)
      return module.emitError("clip-grad-norm must be >= 0 (0 turns it off)");
    if (microbatchCopies == 1 || microbatchCopies == 2)
      return module.emitError("microbatch-copies must be 0 (all) or at least "
                              "3, so that loom-unroll-microbatches can check "
                              "that the microbatches differ as it assumes");
    if (gradientPrecision != "f32" && gradientPrecision != "bf16")
      return module.emitError("gradient-precision must be f32 or bf16, not '")
             << gradientPrecision << "'";
    return success();
  }

  FailureOr<SmallVector<Gradient>> findGradients(func::FuncOp gradFunction) {
    SmallVector<Gradient> gradients;
    SymbolTable symbols(gradFunction->getParentOfType<ModuleOp>());
    for (unsigned i = 0; i < gradFunction.getNumResults(); ++i) {
      auto of = gradFunction.getResultAttrOfType<FlatSymbolRefAttr>(
          i, "loom.gradient_of");
      if (!of)
        continue;
      auto parameter = symbols.lookup<ParameterOp>(of.getAttr());
      if (!parameter)
        return gradFunction.emitOpError("result #")
               << i << " is the gradient of " << of
               << ", which is not a loom.parameter";
      gradients.push_back({i, parameter});
    }
    if (gradients.empty())
      return gradFunction.emitOpError(
          "returns no gradients: the model has no trainable parameter the "
          "loss depends on");
    auto loss = lossResult < gradFunction.getNumResults()
                    ? dyn_cast<RankedTensorType>(
                          gradFunction.getResultTypes()[lossResult])
                    : RankedTensorType();
    if (!loss || loss.getRank() != 0)
      return gradFunction.emitOpError("result #")
             << unsigned(lossResult) << " must be the scalar loss";
    return gradients;
  }

  LogicalResult build(ModuleOp module, func::FuncOp gradFunction,
                      ArrayRef<Gradient> gradients) {
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    Location loc = gradFunction.getLoc();

    // Arguments hold all microbatches, stacked along dimension 0.
    SmallVector<Type> argTypes;
    for (auto [index, type] :
         llvm::enumerate(gradFunction.getArgumentTypes())) {
      auto tensor = cast<RankedTensorType>(type);
      if (gradAccum > 1 && tensor.getRank() == 0)
        return gradFunction.emitOpError("argument #")
               << index << " is a scalar and cannot be split into "
               << unsigned(gradAccum) << " microbatches";
      SmallVector<int64_t> shape(tensor.getShape());
      if (gradAccum > 1)
        shape[0] *= gradAccum;
      argTypes.push_back(tensor.clone(shape));
    }
    Type lossType = gradFunction.getResultTypes()[lossResult];
    builder.setInsertionPointAfter(gradFunction);
    auto step = builder.create<func::FuncOp>(
        loc, stepName, builder.getFunctionType(argTypes, {lossType}));
    symbols.insert(step);
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0; i < gradFunction.getNumArguments(); ++i)
      argAttrs.push_back(gradFunction.getArgAttrDict(i));
    step.setAllArgAttrs(argAttrs);
    step.setResultAttr(0, "onnx.name", builder.getStringAttr("loss"));

    Block *body = step.addEntryBlock();
    builder.setInsertionPointToStart(body);
    // The update count, shared by every parameter (torch counts per
    // parameter, but every trained parameter is updated at every step). Read
    // first, so that the step-dependent scalars of the updates are ready
    // before the backward pass and an update can fuse with the kernel that
    // produces its gradient.
    auto f64Scalar = RankedTensorType::get({}, builder.getF64Type());
    ParameterOp counter =
        addState(module, symbols, "optimizer.step", f64Scalar, loc);
    Value count = builder.create<ParamOp>(loc, f64Scalar,
                                          FlatSymbolRefAttr::get(counter));
    Value stepNumber = builder.create<AddOp>(
        loc, count, constant(builder, loc, f64Scalar, 1.0));

    Value loss;
    SmallVector<Value> grads(gradients.size());
    bool pipelined = false;
    gradFunction.walk([&](Operation *op) {
      pipelined |= op->hasAttr(LoomDialect::kStageAttrName);
    });
    // A pipeline's step may leave its later microbatches to
    // loom-unroll-microbatches: propagation and partitioning cost the
    // microbatches they see, and all microbatches are alike.
    unsigned built = gradAccum;
    if (pipelined && microbatchCopies >= 3 && gradAccum > microbatchCopies) {
      built = microbatchCopies;
      step->setAttr(LoomDialect::kPendingMicrobatchesAttrName,
                    builder.getI64IntegerAttr(gradAccum));
    }
    for (unsigned k = 0; k < built; ++k) {
      SmallVector<Value> results = inlineMicrobatch(
          builder, gradFunction, body->getArguments(), k, stepNumber);
      auto accumulate = [&](Value &sum, Value value) -> AddOp {
        if (!sum) {
          sum = value;
          return AddOp();
        }
        auto add = builder.create<AddOp>(loc, sum, value);
        sum = add.getResult();
        return add;
      };
      accumulate(loss, results[lossResult]);
      for (auto [index, gradient] : llvm::enumerate(gradients)) {
        Value grad = results[gradient.result];
        // Each microbatch's gradient is summed where it is made, not after
        // the microbatch's whole backward pass, where every weight
        // gradient of the microbatch would be alive at once before the
        // sums free them; and the last microbatch's sums are done as the
        // backward goes, so that data parallelism's all-reduce of each
        // gradient overlaps the rest of it (Megatron's 7.5B row: 34.64
        // GiB and 3.85 s per step, were 34.75 GiB and 3.94 s). Pipelines
        // keep the sums after the backward pass: within it they would
        // delay the input gradient the previous stage waits for (the
        // sums of a stage of Megatron's 530B row take about 10 ms per
        // microbatch), which costs more than the memory it saves (2.6
        // GiB of a 43.4 GiB peak on a 530B-shaped stage, against 6% more
        // step time).
        OpBuilder::InsertionGuard guard(builder);
        if (Operation *def = grad.getDefiningOp(); def && !pipelined)
          builder.setInsertionPointAfter(def);
        markParameterGradientWidenings(grad);
        if (gradientPrecision == "bf16")
          grad = toBF16(builder, loc, grad);
        if (AddOp add = accumulate(grads[index], grad))
          add->setAttr(LoomDialect::kGradientAccumulationAttrName,
                       builder.getUnitAttr());
      }
    }
    // bf16 gradients meet the 1/K scaling (in f32, where 1/3 is not
    // rounded to bf16), clipping and the optimizer widened: the widening is
    // exact, and fusion folds it into the next kernel.
    // Gradients kept in bf16 are 2 bytes each (reports' grad_bytes; the
    // parallelization passes recount what they shard).
    if (gradientPrecision == "bf16") {
      int64_t bytes = 0;
      for (Value grad : grads)
        bytes += cast<RankedTensorType>(grad.getType()).getNumElements() * 2;
      step->setAttr(LoomDialect::kGradientBytesAttrName,
                    builder.getI64IntegerAttr(bytes));
    }
    for (auto [grad, gradient] : llvm::zip(grads, gradients)) {
      auto type = cast<RankedTensorType>(grad.getType());
      Type master =
          ParameterOp(gradient.parameter).getTensorType().getElementType();
      if (type.getElementType() != master) {
        grad = builder.create<CastOp>(loc, type.clone(master), grad);
        grad.getDefiningOp()->setAttr(LoomDialect::kKeptGradientAttrName,
                                      builder.getUnitAttr());
      }
    }
    if (gradAccum > 1) {
      loss = scale(builder, loc, loss, 1.0 / gradAccum);
      for (Value &grad : grads)
        grad = scale(builder, loc, grad, 1.0 / gradAccum);
    }
    if (clipGradNorm > 0)
      clip(builder, loc, grads);

    for (auto [gradient, grad] : llvm::zip(gradients, grads))
      update(module, symbols, builder, loc, gradient.parameter, grad,
             stepNumber);
    builder.create<AssignOp>(loc, counter.getSymName(), stepNumber);
    builder.create<func::ReturnOp>(loc, loss);
    return success();
  }

  /// Clones the gradient function's body for microbatch `k`; returns its
  /// results. Its dropouts draw the step's masks: keyed by the update
  /// count, and numbering their elements after the earlier microbatches'.
  SmallVector<Value> inlineMicrobatch(OpBuilder &builder,
                                      func::FuncOp gradFunction,
                                      ValueRange arguments, unsigned k,
                                      Value stepNumber) {
    IRMapping mapping;
    for (auto [param, argument] :
         llvm::zip(gradFunction.getArguments(), arguments)) {
      Value value = argument;
      if (gradAccum > 1) {
        auto type = cast<RankedTensorType>(param.getType());
        SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape()),
            strides(type.getRank(), 1);
        starts[0] = k * type.getDimSize(0);
        limits[0] = starts[0] + type.getDimSize(0);
        value = builder.create<SliceOp>(param.getLoc(), argument, starts,
                                        limits, strides);
      }
      mapping.map(param, value);
    }
    Block &source = gradFunction.getBody().front();
    for (Operation &op : source.without_terminator()) {
      // Parameters and constants are read once for all microbatches (before
      // the first), not once per microbatch: a pipeline of M microbatches
      // would otherwise carry M reads of every parameter through
      // unrolling, the split into ranks and lowering until CSE merged them.
      if (isa<ParamOp, ConstantOp>(op)) {
        auto [shared, isNew] = sharedReads.try_emplace(&op, nullptr);
        if (isNew)
          shared->second = builder.clone(op, mapping);
        mapping.map(op.getResults(), shared->second->getResults());
        continue;
      }
      Operation *clone = builder.clone(op, mapping);
      // Pipelines schedule each stage's work per microbatch.
      if (clone->hasAttr(LoomDialect::kStageAttrName))
        clone->setAttr(LoomDialect::kMicrobatchAttrName,
                       builder.getI64IntegerAttr(k));
      if (auto dropout = dyn_cast<DropoutOp>(clone)) {
        if (!dropout.getStep())
          dropout.getStepMutable().assign(stepNumber);
        int64_t elements = cast<RankedTensorType>(dropout.getInput().getType())
                               .getNumElements();
        dropout.setIndexBase(dropout.getIndexBase() + k * elements);
      }
    }
    SmallVector<Value> results;
    for (Value value : source.getTerminator()->getOperands())
      results.push_back(mapping.lookupOrDefault(value));
    return results;
  }

  /// A gradient kept in bf16: a bf16 GEMM's gradient as it is (it was only
  /// widened), any other f32 gradient rounded once.
  static Value toBF16(OpBuilder &builder, Location loc, Value grad) {
    auto type = cast<RankedTensorType>(grad.getType());
    if (!type.getElementType().isF32())
      return grad;
    if (auto widen = grad.getDefiningOp<CastOp>())
      if (getElementTypeOrSelf(widen.getInput()).isBF16())
        return widen.getInput();
    auto narrow =
        builder.create<CastOp>(loc, type.clone(builder.getBF16Type()), grad);
    narrow->setAttr(LoomDialect::kKeptGradientAttrName, builder.getUnitAttr());
    return narrow;
  }

  static Value constant(OpBuilder &builder, Location loc, Type type,
                        double value) {
    auto tensor = cast<RankedTensorType>(type);
    Type element = tensor.getElementType();
    return builder.create<ConstantOp>(
        loc, DenseElementsAttr::get(
                 tensor, builder.getFloatAttr(element, value).getValue()));
  }

  /// `value * factor`, the factor a scalar of `value`'s element type.
  static Value scale(OpBuilder &builder, Location loc, Value value,
                     double factor) {
    auto type = cast<RankedTensorType>(value.getType());
    Value scalar =
        constant(builder, loc, type.clone(ArrayRef<int64_t>{}), factor);
    return builder.create<MulOp>(loc, value, scalar);
  }

  /// torch.nn.utils.clip_grad_norm_: the 2-norm of all gradients together,
  /// then every gradient times min(1, max_norm / (norm + 1e-6)).
  void clip(OpBuilder &builder, Location loc, MutableArrayRef<Value> grads) {
    Value total;
    for (Value grad : grads) {
      auto type = cast<RankedTensorType>(grad.getType());
      SmallVector<int64_t> axes;
      for (int64_t axis = 0; axis < type.getRank(); ++axis)
        axes.push_back(axis);
      Value square = builder.create<MulOp>(loc, grad, grad);
      Value sum = type.getRank() ? builder
                                       .create<ReduceSumOp>(loc, square, axes,
                                                            /*keepdims=*/false)
                                       .getResult()
                                 : square;
      // Norms of mixed-precision parameters are summed in f32 or wider.
      auto sumType = cast<RankedTensorType>(sum.getType());
      if (sumType.getElementType() != builder.getF32Type() &&
          sumType.getElementType() != builder.getF64Type())
        sum = builder.create<CastOp>(loc, sumType.clone(builder.getF32Type()),
                                     sum);
      if (total && total.getType() != sum.getType())
        sum = builder.create<CastOp>(loc, total.getType(), sum);
      total = total ? builder.create<AddOp>(loc, total, sum).getResult() : sum;
    }
    Type scalarType = total.getType();
    Value norm = builder.create<SqrtOp>(loc, total);
    Value epsilon = constant(builder, loc, scalarType, 1e-6);
    Value guarded = builder.create<AddOp>(loc, norm, epsilon);
    Value maxNorm = constant(builder, loc, scalarType, clipGradNorm);
    Value coefficient = builder.create<DivOp>(loc, maxNorm, guarded);
    Value one = constant(builder, loc, scalarType, 1.0);
    Value below =
        builder.create<CompareOp>(loc, CompareDirection::lt, coefficient, one);
    Value clamped = builder.create<SelectOp>(loc, below, coefficient, one);
    for (Value &grad : grads) {
      auto type = cast<RankedTensorType>(grad.getType());
      Value factor = clamped;
      if (type.getElementType() !=
          cast<RankedTensorType>(scalarType).getElementType())
        factor = builder.create<CastOp>(
            loc,
            cast<RankedTensorType>(scalarType).clone(type.getElementType()),
            clamped);
      grad = builder.create<MulOp>(loc, grad, factor);
    }
  }

  /// A zero-initialized, non-trainable parameter holding optimizer state.
  ParameterOp addState(ModuleOp module, SymbolTable &symbols, StringRef name,
                       RankedTensorType type, Location loc) {
    // Next to the model's parameters, before the functions.
    OpBuilder moduleBuilder(module.getBodyRegion());
    // (Found once: a 96-layer model's states are thousands of ops, each
    // inserted before the first function, which stays the first.)
    if (!firstFunction) {
      auto functions = module.getOps<func::FuncOp>();
      firstFunction = functions.empty() ? nullptr : *functions.begin();
    }
    if (!firstFunction)
      moduleBuilder.setInsertionPointToEnd(module.getBody());
    else
      moduleBuilder.setInsertionPoint(firstFunction);
    auto zero = DenseElementsAttr::get(
        type,
        moduleBuilder.getFloatAttr(type.getElementType(), 0.0).getValue());
    auto state = moduleBuilder.create<ParameterOp>(
        loc, moduleBuilder.getStringAttr(name), TypeAttr::get(type),
        /*trainable=*/UnitAttr(), /*sharding=*/ShardingAttr(), zero);
    symbols.insert(state);
    return state;
  }

  /// The update of one parameter and the stores of its new value and state.
  void update(ModuleOp module, SymbolTable &symbols, OpBuilder &builder,
              Location stepLoc, ParameterOp parameter, Value grad,
              Value stepNumber) {
    // Reports name an update's kernel after its parameter.
    Location loc = NameLoc::get(
        builder.getStringAttr(
            (optimizerName() + " " + parameter.getSymName()).str()),
        stepLoc);
    RankedTensorType type = parameter.getTensorType();
    SmallVector<StringRef> stateNames;
    if (optimizer == OptimizerKind::SGD && momentum != 0)
      stateNames.push_back("momentum_buffer");
    if (optimizer == OptimizerKind::AdamW)
      stateNames = {"exp_avg", "exp_avg_sq"};
    SmallVector<ParameterOp> states;
    SmallVector<Value> stateValues;
    for (StringRef stateName : stateNames) {
      states.push_back(addState(
          module, symbols,
          ("optimizer." + parameter.getSymName() + "." + stateName).str(), type,
          parameter.getLoc()));
      stateValues.push_back(builder.create<ParamOp>(
          loc, type, FlatSymbolRefAttr::get(states.back())));
    }
    Value value = builder.create<ParamOp>(
        loc, type, FlatSymbolRefAttr::get(parameter.getSymNameAttr()));
    SmallVector<Type> resultTypes(1 + states.size(), type);
    SmallVector<Value> operands{value, grad, stepNumber};
    llvm::append_range(operands, stateValues);
    auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
    Operation *updateOp;
    if (optimizer == OptimizerKind::SGD) {
      SmallVector<NamedAttribute> attrs{
          builder.getNamedAttr("lr", f64(lr)),
          builder.getNamedAttr("momentum", f64(momentum)),
          builder.getNamedAttr("dampening", f64(dampening)),
          builder.getNamedAttr("weight_decay",
                               f64(weightDecay < 0 ? 0.0 : weightDecay))};
      if (nesterov)
        attrs.push_back(
            builder.getNamedAttr("nesterov", builder.getUnitAttr()));
      updateOp = builder.create<SGDUpdateOp>(loc, resultTypes, operands, attrs);
    } else {
      SmallVector<NamedAttribute> attrs{
          builder.getNamedAttr("lr", f64(lr < 0 ? 1e-3 : lr)),
          builder.getNamedAttr("beta1", f64(beta1)),
          builder.getNamedAttr("beta2", f64(beta2)),
          builder.getNamedAttr("eps", f64(eps)),
          builder.getNamedAttr("weight_decay",
                               f64(weightDecay < 0 ? 1e-2 : weightDecay))};
      updateOp =
          builder.create<AdamWUpdateOp>(loc, resultTypes, operands, attrs);
    }
    builder.create<AssignOp>(loc, parameter.getSymName(),
                             updateOp->getResult(0));
    for (auto [state, result] :
         llvm::zip(states, updateOp->getResults().drop_front()))
      builder.create<AssignOp>(loc, state.getSymName(), result);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
