//===- Autodiff.cpp - Reverse-mode differentiation of a loss --------------===//
//
// Clones the function, marks the values that depend on a trainable
// parameter (a forward sweep), then walks the forward ops backwards
// accumulating adjoints, each op's rule coming from its GradientOpInterface
// (the external models of GradientRules.cpp). The backward ops are appended
// after the forward ones, so forward values stay available to the rules;
// memory planning frees them after their last use.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"
#include "Recompute.h"

#include "loom/Analysis/StageCuts.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/MapVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMAUTODIFF
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

bool isFloatTensor(Value value) {
  return isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

class Differentiator {
public:
  Differentiator(func::FuncOp func, OpBuilder &builder)
      : func(func), builder(builder),
        symbols(func->getParentOfType<ModuleOp>()) {}

  LogicalResult run(unsigned lossIndex) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (lossIndex >= ret.getNumOperands())
      return func.emitOpError("has no result #") << lossIndex << " to use as "
                                                 << "the loss";
    Value loss = ret.getOperand(lossIndex);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getNumElements() != 1 || !isFloatTensor(loss))
      return func.emitOpError("result #")
             << lossIndex << " is the loss and must be a float scalar, got "
             << lossType;

    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator()) {
      forward.push_back(&op);
      markActive(&op);
    }
    if (!active.contains(loss))
      return func.emitOpError("result #")
             << lossIndex
             << " (the loss) depends on no trainable loom.parameter";

    builder.setInsertionPoint(ret);
    Location loc = ret.getLoc();
    auto one = DenseElementsAttr::get(
        lossType, FloatAttr::get(lossType.getElementType(), 1.0));
    adjoints[loss] = builder.create<ConstantOp>(loc, one);

    // Named: GradientContext holds function_refs, which must not outlive
    // the callables.
    auto isActive = [&](Value value) { return active.contains(value); };
    auto add = [&](Value value, Value gradient) {
      accumulate(value, gradient);
    };
    GradientContext context{builder, isActive, add};
    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> gradients;
      bool any = false;
      for (Value result : op->getResults()) {
        gradients.push_back(adjoints.lookup(result));
        any |= bool(gradients.back());
      }
      if (!any)
        continue;
      if (auto param = dyn_cast<ParamOp>(op)) {
        Value &sum = parameterGradients[param.getNameAttr().getAttr()];
        sum = sum ? builder.create<AddOp>(loc, sum, gradients[0]).getResult()
                  : gradients[0];
        continue;
      }
      if (isa<ConstantOp>(op))
        continue;
      // Rules read the gradient of the first result; give it zeros when only
      // another result (a split piece) has one.
      if (!gradients[0] && !isa<SplitOp, AttentionOp>(op))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitOpError("has no gradient rule");
      Operation *last = ret->getPrevNode();
      if (failed(rule.backpropagate(gradients, context)))
        return failure();
      markBackward(op, last, ret);
    }
    return finish(ret);
  }

private:
  /// A pipeline stage's backward pass runs on the forward's rank: the ops
  /// the rule of a staged op made (after `last`, before `ret`) get its
  /// stage and are marked backward (loom-split-stages schedules them).
  void markBackward(Operation *op, Operation *last, Operation *ret) {
    auto stage = op->getAttrOfType<IntegerAttr>(LoomDialect::kStageAttrName);
    if (!stage)
      return;
    Operation *first = last ? last->getNextNode() : &ret->getBlock()->front();
    for (Operation *made = first; made != ret; made = made->getNextNode()) {
      made->setAttr(LoomDialect::kStageAttrName, stage);
      made->setAttr(LoomDialect::kBackwardAttrName,
                    UnitAttr::get(op->getContext()));
    }
  }

  /// Float results of trainable parameters, and of ops reading active values.
  void markActive(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      auto parameter =
          symbols.lookup<ParameterOp>(param.getNameAttr().getAttr());
      if (parameter && parameter.getTrainable() && isFloatTensor(param))
        active.insert(param.getResult());
      return;
    }
    if (llvm::none_of(op->getOperands(),
                      [&](Value v) { return active.contains(v); }))
      return;
    for (Value result : op->getResults())
      if (isFloatTensor(result))
        active.insert(result);
  }

  void accumulate(Value value, Value gradient) {
    Value &sum = adjoints[value];
    sum = sum ? builder.create<AddOp>(gradient.getLoc(), sum, gradient)
                    .getResult()
              : gradient;
  }

  /// Returns the forward results followed by one gradient per trainable
  /// parameter the loss depends on, in declaration order.
  LogicalResult finish(func::ReturnOp ret) {
    auto module = func->getParentOfType<ModuleOp>();
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      resultAttrs.push_back(func.getResultAttrDict(i));
    for (auto parameter : module.getOps<ParameterOp>()) {
      Value gradient = parameterGradients.lookup(parameter.getSymNameAttr());
      if (!gradient)
        continue;
      results.push_back(gradient);
      NamedAttribute attrs[] = {
          builder.getNamedAttr(
              LoomDialect::kGradientOfAttrName,
              FlatSymbolRefAttr::get(parameter.getSymNameAttr())),
          builder.getNamedAttr(
              "onnx.name",
              builder.getStringAttr("grad." + parameter.getSymName()))};
      resultAttrs.push_back(builder.getDictionaryAttr(attrs));
    }
    builder.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
    return success();
  }

  func::FuncOp func;
  OpBuilder &builder;
  /// The module's symbols (a lookup without a table walks every parameter).
  SymbolTable symbols;
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, Value> adjoints;
  llvm::DenseMap<Attribute, Value> parameterGradients;
};

struct AutodiffPass : impl::LoomAutodiffBase<AutodiffPass> {
  using LoomAutodiffBase::LoomAutodiffBase;

  /// The gradient rules are external models: adding them to the registry the
  /// pass manager appends to the context before the pipeline runs makes the
  /// pass work in any context, whether or not its tool registered them.
  void getDependentDialects(DialectRegistry &registry) const override {
    LoomAutodiffBase::getDependentDialects(registry);
    registerGradientExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError("no function '") << function << "' to differentiate";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("must have a single block to be differentiated");
      return signalPassFailure();
    }
    if (recompute != "none" && recompute != "full" &&
        recompute != "selective") {
      module.emitError("loom-autodiff: recompute=")
          << recompute
          << " is not a recompute mode (none, selective: the attention "
             "cores that are not fused, full: every segment between the cut "
             "points but the last)";
      return signalPassFailure();
    }
    auto gradient = cast<func::FuncOp>(func->clone());
    gradient.setSymName(gradientFunctionName(function));
    SymbolTable(module).insert(gradient, std::next(func->getIterator()));
    // The clone's first ops are the forward's, in order; autodiff appends
    // the backward after them.
    unsigned forwardOps = func.getBody().front().getOperations().size() - 1;
    OpBuilder builder(&getContext());
    if (failed(Differentiator(gradient, builder).run(lossResult))) {
      gradient.erase();
      return signalPassFailure();
    }
    if (recompute != "none") {
      SmallVector<Operation *> forward;
      for (Operation &op : gradient.getBody().front()) {
        if (forward.size() == forwardOps)
          break;
        forward.push_back(&op);
      }
      // (A fused attention never stores its scores: its backward recomputes
      // them from q, k and the log-sum-exp.)
      if (recompute == "selective") {
        recomputeAttentionCores(gradient, forward);
        return;
      }
      SmallVector<unsigned> ends;
      for (const StageCutPoint &point : findStageCutPoints(func))
        ends.push_back(point.afterOp);
      recomputeSegments(gradient, forward, ends);
    }
  }
};

} // namespace
} // namespace loom
} // namespace mlir
