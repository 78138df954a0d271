//===- ExpandOptimizers.cpp - Optimizer updates as elementwise ops --------===//
//
// Each update becomes the elementwise arithmetic of torch's implementation, in
// torch's order of operations, so that a step agrees with torch to rounding.
// Everything that depends only on the step count is scalar f64 math (torch
// does it in Python floats) cast to the parameter's type once, built right
// after the step count is defined: an update whose other operands are ready
// early (a weight's gradient, in the backward pass) can then fuse into the
// kernel that produces its gradient.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMEXPANDOPTIMIZERS
#include "loom/Transforms/Training/Passes.h.inc"

namespace {

/// Builds elementwise loom ops at one place for one parameter type.
class UpdateBuilder {
public:
  UpdateBuilder(Operation *op, Value param)
      : b(op), update(op), loc(op->getLoc()),
        scalarType(RankedTensorType::get(
            {}, cast<RankedTensorType>(param.getType()).getElementType())),
        f64Type(RankedTensorType::get({}, b.getF64Type())) {}

  /// Builds the step-dependent scalars right after `step` is defined, until
  /// atUpdate().
  void atStep(Value step) {
    if (Operation *def = step.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(step).getOwner());
  }
  /// Builds the update itself, at the optimizer op.
  void atUpdate() { b.setInsertionPoint(update); }

  /// A scalar of the parameter's type.
  Value scalar(double value) { return constant(scalarType, value); }
  Value f64(double value) { return constant(f64Type, value); }
  /// A step-dependent f64 scalar, cast to the parameter's type.
  Value toParamType(Value f64Value) {
    if (scalarType.getElementType().isF64())
      return f64Value;
    return b.create<CastOp>(loc, scalarType, f64Value);
  }

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value pow(Value x, Value y) { return b.create<PowOp>(loc, x, y); }
  Value sqrt(Value x) { return b.create<SqrtOp>(loc, x); }
  Value select(Value condition, Value onTrue, Value onFalse) {
    return b.create<SelectOp>(loc, condition, onTrue, onFalse);
  }
  Value equal(Value x, Value y) {
    return b.create<CompareOp>(loc, CompareDirection::eq, x, y);
  }

private:
  Value constant(RankedTensorType type, double value) {
    return b.create<ConstantOp>(
        loc,
        DenseElementsAttr::get(
            type, b.getFloatAttr(type.getElementType(), value).getValue()));
  }

  OpBuilder b;
  Operation *update;
  Location loc;
  RankedTensorType scalarType, f64Type;
};

// Operands are built in named steps throughout: C++ leaves the evaluation
// order of arguments open, and the order of the emitted ops should not
// depend on the compiler that built Loom.

/// torch.optim.SGD, one parameter (`_single_tensor_sgd`).
SmallVector<Value> expand(SGDUpdateOp op) {
  UpdateBuilder e(op, op.getParam());
  double momentum = op.getMomentum().convertToDouble(),
         dampening = op.getDampening().convertToDouble(),
         weightDecay = op.getWeightDecay().convertToDouble();
  // Step-dependent scalars first: the fused update needs them as inputs.
  Value dampened;
  if (momentum != 0 && dampening != 0) {
    e.atStep(op.getStep());
    Value one = e.f64(1.0);
    Value first = e.equal(op.getStep(), one);
    Value later = e.f64(1 - dampening);
    dampened = e.toParamType(e.select(first, one, later));
    e.atUpdate();
  }
  Value param = op.getParam();
  Value direction = op.getGrad();
  if (weightDecay != 0) {
    Value decay = e.mul(param, e.scalar(weightDecay));
    direction = e.add(direction, decay);
  }
  SmallVector<Value> results{Value()};
  if (momentum != 0) {
    // torch starts the buffer as a copy of the first direction; a zero
    // buffer times momentum plus the direction is exactly that, except
    // that dampening must not apply on the first step.
    Value buffer = e.mul(op.getStates()[0], e.scalar(momentum));
    Value added = dampened ? e.mul(direction, dampened) : direction;
    buffer = e.add(buffer, added);
    results.push_back(buffer);
    if (op.getNesterov()) {
      Value lookahead = e.mul(buffer, e.scalar(momentum));
      direction = e.add(direction, lookahead);
    } else {
      direction = buffer;
    }
  }
  Value update = e.mul(direction, e.scalar(op.getLr().convertToDouble()));
  results[0] = e.sub(param, update);
  return results;
}

/// torch.optim.AdamW, one parameter (`_single_tensor_adamw`, no amsgrad).
SmallVector<Value> expand(AdamWUpdateOp op) {
  UpdateBuilder e(op, op.getParam());
  double lr = op.getLr().convertToDouble(),
         beta1 = op.getBeta1().convertToDouble(),
         beta2 = op.getBeta2().convertToDouble(),
         eps = op.getEps().convertToDouble(),
         weightDecay = op.getWeightDecay().convertToDouble();
  // Step-dependent scalars first: the fused update needs them as inputs.
  Value step = op.getStep();
  e.atStep(step);
  Value beta1Power = e.pow(e.f64(beta1), step);
  Value correction1 = e.sub(e.f64(1.0), beta1Power);
  Value beta2Power = e.pow(e.f64(beta2), step);
  Value correction2 = e.sub(e.f64(1.0), beta2Power);
  Value stepSize = e.toParamType(e.div(e.f64(lr), correction1));
  Value correction2Sqrt = e.toParamType(e.sqrt(correction2));
  e.atUpdate();

  Value param = op.getParam(), grad = op.getGrad();
  if (weightDecay != 0)
    param = e.mul(param, e.scalar(1 - lr * weightDecay));
  Value keptMoment = e.mul(op.getStates()[0], e.scalar(beta1));
  Value newMoment = e.mul(grad, e.scalar(1 - beta1));
  Value firstMoment = e.add(keptMoment, newMoment);
  Value keptSquare = e.mul(op.getStates()[1], e.scalar(beta2));
  Value gradSquare = e.mul(grad, grad);
  Value newSquare = e.mul(gradSquare, e.scalar(1 - beta2));
  Value secondMoment = e.add(keptSquare, newSquare);
  Value root = e.div(e.sqrt(secondMoment), correction2Sqrt);
  Value denominator = e.add(root, e.scalar(eps));
  Value ratio = e.div(firstMoment, denominator);
  Value newParam = e.sub(param, e.mul(ratio, stepSize));
  return {newParam, firstMoment, secondMoment};
}

struct ExpandOptimizersPass
    : impl::LoomExpandOptimizersBase<ExpandOptimizersPass> {
  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      SmallVector<Value> replacements;
      if (auto sgd = dyn_cast<SGDUpdateOp>(op))
        replacements = expand(sgd);
      else if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
        replacements = expand(adamw);
      else
        return;
      op->replaceAllUsesWith(replacements);
      op->erase();
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
