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

/// ONNX Pow allows an exponent of another numeric type; loom.pow takes the
/// base's type for both.
static LogicalResult convertPow(NodeContext &ctx) {
  Value base = ctx.getInput(0), exponent = ctx.getInput(1);
  Type baseElement = ctx.getInputType(0).getElementType();
  RankedTensorType exponentType = ctx.getInputType(1);
  if (exponentType.getElementType() != baseElement) {
    FailureOr<Value> cast =
        ctx.create<CastOp>(exponent, {}, exponentType.clone(baseElement));
    if (failed(cast))
      return failure();
    exponent = *cast;
  }
  return ctx.setResult(ctx.create<PowOp>({base, exponent}));
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
  registry.add("Relu", {13, 14}, convertUnary<ReluOp>);
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
