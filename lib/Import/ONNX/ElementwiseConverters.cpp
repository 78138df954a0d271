//===- ElementwiseConverters.cpp - Elementwise ONNX ops -------------------===//
//
// Unary math, binary arithmetic with numpy broadcasting, comparisons, Where
// and Cast. Broadcasting is the loom ops' own, so these map one to one.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "Tensors.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

template <typename OpTy> static LogicalResult convertUnary(NodeContext &ctx) {
  Value input = ctx.getInput(0);
  return ctx.setResult(ctx.create<OpTy>(input, {}, input.getType()));
}

template <typename OpTy> static LogicalResult convertBinary(NodeContext &ctx) {
  return ctx.setResult(ctx.create<OpTy>({ctx.getInput(0), ctx.getInput(1)}));
}

/// Converts `value` to element type `element` unless it has it already.
static FailureOr<Value> castTo(NodeContext &ctx, Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  return ctx.create<CastOp>(value, {}, type.clone(element));
}

/// ONNX Pow allows integer bases and an exponent of another numeric type,
/// computed as in numpy/C: `loom.pow` is float-only, so an integer base is
/// raised in f64 and the result converted back (a fractional exponent of an
/// integer base is not truncated first: 4 ^ 0.5 = 2); a float base takes the
/// exponent in its own type.
static LogicalResult convertPow(NodeContext &ctx) {
  Value base = ctx.getInput(0), exponent = ctx.getInput(1);
  Type baseElement = ctx.getInputType(0).getElementType();
  Type computeElement = isa<FloatType>(baseElement)
                            ? baseElement
                            : Type(Float64Type::get(ctx.getContext()));
  FailureOr<Value> lhs = castTo(ctx, base, computeElement);
  if (failed(lhs))
    return failure();
  FailureOr<Value> rhs = castTo(ctx, exponent, computeElement);
  if (failed(rhs))
    return failure();
  FailureOr<Value> power = ctx.create<PowOp>({*lhs, *rhs});
  if (failed(power))
    return failure();
  return ctx.setResult(castTo(ctx, *power, baseElement));
}

/// Relu-14 also takes integers, which `loom.relu` (float-only) does not:
/// `x > 0 ? x : 0`.
static LogicalResult convertRelu(NodeContext &ctx) {
  Value input = ctx.getInput(0);
  Type element = ctx.getInputType(0).getElementType();
  if (isa<FloatType>(element))
    return ctx.setResult(ctx.create<ReluOp>(input, {}, input.getType()));
  Value zero = ctx.createScalar(element, 0);
  FailureOr<Value> positive = ctx.create<CompareOp>(
      {input, zero}, {ctx.namedAttr("direction", CompareDirectionAttr::get(
                                                     ctx.getContext(),
                                                     CompareDirection::gt))});
  if (failed(positive))
    return failure();
  return ctx.setResult(ctx.create<SelectOp>({*positive, input, zero}));
}

template <CompareDirection direction>
static LogicalResult convertCompare(NodeContext &ctx) {
  return ctx.setResult(ctx.create<CompareOp>(
      {ctx.getInput(0), ctx.getInput(1)},
      {ctx.namedAttr("direction",
                     CompareDirectionAttr::get(ctx.getContext(), direction))}));
}

static LogicalResult convertWhere(NodeContext &ctx) {
  return ctx.setResult(ctx.create<SelectOp>(
      {ctx.getInput(0), ctx.getInput(1), ctx.getInput(2)}));
}

static LogicalResult convertCast(NodeContext &ctx) {
  int64_t to = ctx.getInt("to", 0);
  Type element = getElementType(ctx.getContext(), to);
  if (!element)
    return ctx.emitError() << "cast to " << getDataTypeName(to)
                           << ", which Loom does not support";
  RankedTensorType type = ctx.getInputType(0);
  if (type.getElementType() == element) {
    ctx.setOutput(0, ctx.getInput(0));
    return success();
  }
  return ctx.setResult(
      ctx.create<CastOp>(ctx.getInput(0), {}, type.clone(element)));
}

void onnx_import::registerElementwiseConverters(ConverterRegistry &registry) {
  registry.add("Sqrt", {13}, convertUnary<SqrtOp>);
  registry.add("Reciprocal", {13}, convertUnary<ReciprocalOp>);
  registry.add("Erf", {13}, convertUnary<ErfOp>);
  registry.add("Tanh", {13}, convertUnary<TanhOp>);
  registry.add("Sigmoid", {13}, convertUnary<SigmoidOp>);
  registry.add("Relu", {13, 14}, convertRelu);
  registry.add("Exp", {13}, convertUnary<ExpOp>);
  registry.add("Log", {13}, convertUnary<LogOp>);
  registry.add("Neg", {13}, convertUnary<NegOp>);

  registry.add("Add", {13, 14}, convertBinary<AddOp>);
  registry.add("Sub", {13, 14}, convertBinary<SubOp>);
  registry.add("Mul", {13, 14}, convertBinary<MulOp>);
  registry.add("Div", {13, 14}, convertBinary<DivOp>);
  registry.add("Pow", {13, 15}, convertPow);

  registry.add("Equal", {13}, convertCompare<CompareDirection::eq>);
  registry.add("Less", {13}, convertCompare<CompareDirection::lt>);
  registry.add("LessOrEqual", {16}, convertCompare<CompareDirection::le>);
  registry.add("Greater", {13}, convertCompare<CompareDirection::gt>);
  registry.add("GreaterOrEqual", {16}, convertCompare<CompareDirection::ge>);
  registry.add("Where", {9, 16}, convertWhere);
  registry.add("Cast", {13}, convertCast);
}
