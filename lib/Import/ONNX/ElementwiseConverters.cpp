//===- ElementwiseConverters.cpp - Elementwise ONNX ops -------------------===//
//
// Unary math, binary arithmetic with numpy broadcasting, comparisons, Where
// and Cast. Broadcasting is the loom ops' own, so these map one to one.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "Tensors.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <limits>

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

/// Max, Min, Sum and Mean take one or more inputs, broadcast together and
/// combined left to right (Mean divides the sum by their count).
template <typename OpTy>
static FailureOr<Value> combineInputs(NodeContext &ctx) {
  Value result = ctx.getInput(0);
  for (int i = 1, e = ctx.getNode().input_size(); i < e; ++i) {
    FailureOr<Value> next = ctx.create<OpTy>({result, ctx.getInput(i)});
    if (failed(next))
      return failure();
    result = *next;
  }
  return result;
}

template <typename OpTy>
static LogicalResult convertVariadic(NodeContext &ctx) {
  return ctx.setResult(combineInputs<OpTy>(ctx));
}

static LogicalResult convertMean(NodeContext &ctx) {
  FailureOr<Value> sum = combineInputs<AddOp>(ctx);
  if (failed(sum))
    return failure();
  Type element = getElementTypeOrSelf(sum->getType());
  return ctx.setResult(ctx.create<DivOp>(
      {*sum, ctx.createScalar(element, ctx.getNode().input_size())}));
}

/// Not, And, Or, Xor on booleans: `x == false`, min, max and `!=`.
static LogicalResult convertNot(NodeContext &ctx) {
  Value input = ctx.getInput(0);
  return ctx.setResult(ctx.create<CompareOp>(
      {input, ctx.createScalar(getElementTypeOrSelf(input.getType()), 0)},
      {ctx.namedAttr(
          "direction",
          CompareDirectionAttr::get(ctx.getContext(), CompareDirection::eq))}));
}

static LogicalResult convertIsNaN(NodeContext &ctx) {
  Value input = ctx.getInput(0);
  return ctx.setResult(ctx.create<CompareOp>(
      {input, input}, {ctx.namedAttr("direction", CompareDirectionAttr::get(
                                                      ctx.getContext(),
                                                      CompareDirection::ne))}));
}

/// IsInf: `x == +inf` or `x == -inf`, as `detect_positive` and
/// `detect_negative` ask.
static LogicalResult convertIsInf(NodeContext &ctx) {
  Value input = ctx.getInput(0);
  Type element = getElementTypeOrSelf(input.getType());
  auto equals = [&](double value) {
    return ctx.create<CompareOp>(
        {input, ctx.createScalar(element, value)},
        {ctx.namedAttr("direction",
                       CompareDirectionAttr::get(ctx.getContext(),
                                                 CompareDirection::eq))});
  };
  bool positive = ctx.getInt("detect_positive", 1) != 0;
  bool negative = ctx.getInt("detect_negative", 1) != 0;
  double inf = std::numeric_limits<double>::infinity();
  if (positive && negative) {
    FailureOr<Value> above = equals(inf), below = equals(-inf);
    if (failed(above) || failed(below))
      return failure();
    return ctx.setResult(ctx.create<MaximumOp>({*above, *below}));
  }
  if (positive || negative)
    return ctx.setResult(equals(positive ? inf : -inf));
  // Neither: all false (x != x is false only for non-NaN, so compare with a
  // value nothing equals instead).
  auto type = cast<RankedTensorType>(input.getType());
  return ctx.setResult(ctx.createConstant(
      DenseElementsAttr::get(type.clone(ctx.getBuilder().getI1Type()), false)));
}

/// Clip-11+: `min` and `max` are optional scalar inputs; the lower bound is
/// applied first, so min > max gives max (numpy and torch.clamp). Built
/// from compare and select so that the gradient reaches x wherever
/// min <= x <= max, bounds included, as torch.clamp's does, and NaN
/// passes through.
static LogicalResult convertClip(NodeContext &ctx) {
  Value result = ctx.getInput(0);
  auto clampTo = [&](unsigned index, CompareDirection beyond) -> LogicalResult {
    if (!ctx.hasInput(index))
      return success();
    Value bound = ctx.getInput(index);
    if (cast<RankedTensorType>(bound.getType()).getRank() != 0)
      return ctx.emitError()
             << (index == 1 ? "min" : "max")
             << " must be a scalar (rank 0), got " << bound.getType();
    FailureOr<Value> outside = ctx.create<CompareOp>(
        {result, bound},
        {ctx.namedAttr("direction",
                       CompareDirectionAttr::get(ctx.getContext(), beyond))});
    if (failed(outside))
      return failure();
    FailureOr<Value> clamped = ctx.create<SelectOp>({*outside, bound, result});
    if (failed(clamped))
      return failure();
    result = *clamped;
    return success();
  };
  if (failed(clampTo(1, CompareDirection::lt)) ||
      failed(clampTo(2, CompareDirection::gt)))
    return failure();
  ctx.setOutput(0, result);
  return success();
}

/// Mod on floats (`fmod=1`): `loom.fmod`. On integers: the remainder of
/// division rounded toward zero (the sign of the dividend, C's %) with
/// `fmod=1`; else Python's (the sign of the divisor): r + b where r is non-zero
/// and its sign differs from b's.
static LogicalResult convertMod(NodeContext &ctx) {
  Value a = ctx.getInput(0), b = ctx.getInput(1);
  Type element = getElementTypeOrSelf(a.getType());
  if (isa<FloatType>(element)) {
    // ONNX asks floats for fmod = 1 (numpy's float remainder is fmod's).
    if (ctx.getInt("fmod", 0) == 0)
      return ctx.emitError()
             << "Mod on " << element << " needs attribute 'fmod' = 1";
    return ctx.setResult(ctx.create<FmodOp>({a, b}));
  }
  auto direction = [&](CompareDirection d) {
    return ctx.namedAttr("direction",
                         CompareDirectionAttr::get(ctx.getContext(), d));
  };
  FailureOr<Value> quotient = ctx.create<DivOp>({a, b});
  if (failed(quotient))
    return failure();
  FailureOr<Value> product = ctx.create<MulOp>({b, *quotient});
  if (failed(product))
    return failure();
  FailureOr<Value> remainder = ctx.create<SubOp>({a, *product});
  if (failed(remainder) || ctx.getInt("fmod", 0) != 0)
    return ctx.setResult(remainder);
  Value zero = ctx.createScalar(element, 0);
  FailureOr<Value> nonzero = ctx.create<CompareOp>(
      {*remainder, zero}, {direction(CompareDirection::ne)});
  FailureOr<Value> remainderNegative = ctx.create<CompareOp>(
      {*remainder, zero}, {direction(CompareDirection::lt)});
  FailureOr<Value> divisorNegative =
      ctx.create<CompareOp>({b, zero}, {direction(CompareDirection::lt)});
  if (failed(nonzero) || failed(remainderNegative) || failed(divisorNegative))
    return failure();
  FailureOr<Value> signsDiffer =
      ctx.create<CompareOp>({*remainderNegative, *divisorNegative},
                            {direction(CompareDirection::ne)});
  if (failed(signsDiffer))
    return failure();
  FailureOr<Value> adjust = ctx.create<MinimumOp>({*nonzero, *signsDiffer});
  FailureOr<Value> shifted = ctx.create<AddOp>({*remainder, b});
  if (failed(adjust) || failed(shifted))
    return failure();
  return ctx.setResult(ctx.create<SelectOp>({*adjust, *shifted, *remainder}));
}

/// Gelu-20: `approximate` none or tanh, as `loom.gelu`.
static LogicalResult convertGelu(NodeContext &ctx) {
  std::string approximate = ctx.getString("approximate", "none");
  std::optional<GeluApproximation> kind =
      symbolizeGeluApproximation(approximate);
  if (!kind)
    return ctx.emitError() << "attribute 'approximate' is '" << approximate
                           << "'; expected 'none' or 'tanh'";
  Value input = ctx.getInput(0);
  return ctx.setResult(ctx.create<GeluOp>(
      input,
      {ctx.namedAttr("approximate",
                     GeluApproximationAttr::get(ctx.getContext(), *kind))},
      input.getType()));
}

/// Input 0 converted to `element` (itself when it has that type).
static LogicalResult castInputTo(NodeContext &ctx, Type element) {
  return ctx.setResult(castTo(ctx, ctx.getInput(0), element));
}

static LogicalResult convertCast(NodeContext &ctx) {
  int64_t to = ctx.getInt("to", 0);
  Type element = getElementType(ctx.getContext(), to);
  if (!element)
    return ctx.emitError() << "cast to " << getDataTypeName(to)
                           << ", which Loom does not support";
  return castInputTo(ctx, element);
}

/// CastLike: a Cast to the element type of the second input.
static LogicalResult convertCastLike(NodeContext &ctx) {
  return castInputTo(ctx, ctx.getInputType(1).getElementType());
}

void onnx_import::registerElementwiseConverters(ConverterRegistry &registry) {
  registry.add("Sqrt", {6, 13}, convertUnary<SqrtOp>);
  registry.add("Reciprocal", {6, 13}, convertUnary<ReciprocalOp>);
  registry.add("Erf", {9, 13}, convertUnary<ErfOp>);
  registry.add("Tanh", {6, 13}, convertUnary<TanhOp>);
  registry.add("Sigmoid", {6, 13}, convertUnary<SigmoidOp>);
  registry.add("Relu", {6, 13, 14}, convertRelu);
  registry.add("Exp", {6, 13}, convertUnary<ExpOp>);
  registry.add("Log", {6, 13}, convertUnary<LogOp>);
  registry.add("Neg", {6, 13}, convertUnary<NegOp>);
  registry.add("Abs", {6, 13}, convertUnary<AbsOp>);
  registry.add("Sin", {7}, convertUnary<SinOp>);
  registry.add("Cos", {7}, convertUnary<CosOp>);
  registry.add("Gelu", {20}, convertGelu);
  registry.add("IsNaN", {13}, convertIsNaN);
  registry.add("IsInf", {10}, convertIsInf);
  registry.add("Not", {1}, convertNot);
  registry.add("And", {7}, convertBinary<MinimumOp>);
  registry.add("Or", {7}, convertBinary<MaximumOp>);
  registry.add("Xor", {7}, convertCompare<CompareDirection::ne>);
  registry.add("Max", {8, 12, 13}, convertVariadic<MaximumOp>);
  registry.add("Min", {8, 12, 13}, convertVariadic<MinimumOp>);
  registry.add("Sum", {8, 13}, convertVariadic<AddOp>);
  registry.add("Mean", {8, 13}, convertMean);
  registry.add("Clip", {11, 12, 13}, convertClip);
  registry.add("Mod", {10, 13}, convertMod);

  registry.add("Add", {7, 13, 14}, convertBinary<AddOp>);
  registry.add("Sub", {7, 13, 14}, convertBinary<SubOp>);
  registry.add("Mul", {7, 13, 14}, convertBinary<MulOp>);
  registry.add("Div", {7, 13, 14}, convertBinary<DivOp>);
  registry.add("Pow", {7, 12, 13, 15}, convertPow);

  registry.add("Equal", {11, 13}, convertCompare<CompareDirection::eq>);
  registry.add("Less", {9, 13}, convertCompare<CompareDirection::lt>);
  registry.add("LessOrEqual", {12, 16}, convertCompare<CompareDirection::le>);
  registry.add("Greater", {9, 13}, convertCompare<CompareDirection::gt>);
  registry.add("GreaterOrEqual", {12, 16},
               convertCompare<CompareDirection::ge>);
  registry.add("Where", {9, 16}, convertWhere);
  registry.add("Cast", {9, 13}, convertCast);
  registry.add("CastLike", {15}, convertCastLike);
}
