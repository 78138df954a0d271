//===- ElementwiseOps.cpp - Elementwise loom ops --------------------------===//
//
// Type inference (numpy broadcasting) and folders of the unary, binary,
// compare, select and cast ops.
//
//===----------------------------------------------------------------------===//

#include "ConstantFold.h"
#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "llvm/ADT/APSInt.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using opimpl::emitInferError;
using opimpl::foldElementwise;
using opimpl::isSplatOf;
using opimpl::Scalar;

//===----------------------------------------------------------------------===//
// Type inference
//===----------------------------------------------------------------------===//

/// The broadcast type of `lhs` and `rhs`, with `elementType` (or theirs).
template <typename OpTy>
static LogicalResult inferBroadcast(std::optional<Location> loc, Type lhs,
                                    Type rhs, Type elementType,
                                    SmallVectorImpl<Type> &results) {
  auto lhsType = dyn_cast<RankedTensorType>(lhs);
  auto rhsType = dyn_cast<RankedTensorType>(rhs);
  if (!lhsType || !rhsType)
    return emitInferError<OpTy>(loc, "operands must be ranked tensors");
  if (lhsType.getElementType() != rhsType.getElementType())
    return emitInferError<OpTy>(
        loc, "operand element types differ: ", lhsType.getElementType(), " vs ",
        rhsType.getElementType());
  std::string error;
  FailureOr<SmallVector<int64_t>> shape =
      opimpl::broadcastShapes(lhsType.getShape(), rhsType.getShape(), error);
  if (failed(shape))
    return emitInferError<OpTy>(loc, error);
  results.push_back(RankedTensorType::get(
      *shape, elementType ? elementType : lhsType.getElementType()));
  return success();
}

#define LOOM_INFER_BINARY(OpTy)                                                \
  LogicalResult OpTy::inferReturnTypes(                                        \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &results) {                                        \
    return inferBroadcast<OpTy>(loc, adaptor.getLhs().getType(),               \
                                adaptor.getRhs().getType(), Type(), results);  \
  }
LOOM_INFER_BINARY(AddOp)
LOOM_INFER_BINARY(SubOp)
LOOM_INFER_BINARY(MulOp)
LOOM_INFER_BINARY(DivOp)
LOOM_INFER_BINARY(PowOp)
LOOM_INFER_BINARY(FmodOp)
LOOM_INFER_BINARY(MaximumOp)
LOOM_INFER_BINARY(MinimumOp)
#undef LOOM_INFER_BINARY

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferBroadcast<CompareOp>(loc, adaptor.getLhs().getType(),
                                   adaptor.getRhs().getType(),
                                   IntegerType::get(context, 1), results);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  // Broadcast the branches first (this checks their element types), then
  // the condition against them.
  SmallVector<Type, 1> branches;
  if (failed(inferBroadcast<SelectOp>(loc, adaptor.getOnTrue().getType(),
                                      adaptor.getOnFalse().getType(), Type(),
                                      branches)))
    return failure();
  auto branchType = cast<RankedTensorType>(branches.front());
  auto conditionType =
      dyn_cast<RankedTensorType>(adaptor.getCondition().getType());
  if (!conditionType)
    return emitInferError<SelectOp>(loc, "condition must be a ranked tensor");
  std::string error;
  FailureOr<SmallVector<int64_t>> shape = opimpl::broadcastShapes(
      conditionType.getShape(), branchType.getShape(), error);
  if (failed(shape))
    return emitInferError<SelectOp>(loc, "condition and branches: ", error);
  results.push_back(RankedTensorType::get(*shape, branchType.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Unary folders
//===----------------------------------------------------------------------===//

/// Folds a float unary op on a constant operand.
static OpFoldResult foldUnaryFloat(Attribute operand, Type resultType,
                                   double (*fn)(double)) {
  return foldElementwise(operand, cast<ShapedType>(resultType),
                         [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
                           return Scalar::ofFloat(fn(args[0].f));
                         });
}

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
static double relu(double x) { return x > 0.0 ? x : (std::isnan(x) ? x : 0.0); }
static double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static double reciprocal(double x) { return 1.0 / x; }
static double sqrtFn(double x) { return std::sqrt(x); }
static double expFn(double x) { return std::exp(x); }
static double logFn(double x) { return std::log(x); }
static double erfFn(double x) { return std::erf(x); }
static double tanhFn(double x) { return std::tanh(x); }
static double sinFn(double x) { return std::sin(x); }
static double cosFn(double x) { return std::cos(x); }

#define LOOM_FOLD_UNARY_FLOAT(OpTy, fn)                                        \
  OpFoldResult OpTy::fold(FoldAdaptor adaptor) {                               \
    return foldUnaryFloat(adaptor.getInput(), getType(), fn);                  \
  }
LOOM_FOLD_UNARY_FLOAT(SqrtOp, sqrtFn)
LOOM_FOLD_UNARY_FLOAT(RsqrtOp, rsqrt)
LOOM_FOLD_UNARY_FLOAT(ExpOp, expFn)
LOOM_FOLD_UNARY_FLOAT(LogOp, logFn)
LOOM_FOLD_UNARY_FLOAT(ErfOp, erfFn)
LOOM_FOLD_UNARY_FLOAT(TanhOp, tanhFn)
LOOM_FOLD_UNARY_FLOAT(SigmoidOp, sigmoid)
LOOM_FOLD_UNARY_FLOAT(ReluOp, relu)
LOOM_FOLD_UNARY_FLOAT(ReciprocalOp, reciprocal)
LOOM_FOLD_UNARY_FLOAT(SinOp, sinFn)
LOOM_FOLD_UNARY_FLOAT(CosOp, cosFn)
#undef LOOM_FOLD_UNARY_FLOAT

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  // abs(abs(x)) -> abs(x)
  if (getInput().getDefiningOp<AbsOp>())
    return getInput();
  bool isFloat = isa<FloatType>(getType().getElementType());
  return foldElementwise(
      adaptor.getInput(), getType(),
      [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
        if (isFloat)
          return Scalar::ofFloat(std::fabs(args[0].f));
        // Wraps like the runtime: the most negative value
        // of the element width stays (truncated when the
        // attribute is built).
        int64_t x = args[0].i;
        return Scalar::ofInt(
            x < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : x);
      });
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  // neg(neg(x)) -> x
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  bool isFloat = isa<FloatType>(getType().getElementType());
  return foldElementwise(adaptor.getInput(), getType(),
                         [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
                           if (isFloat)
                             return Scalar::ofFloat(-args[0].f);
                           // Wraps like the runtime (and avoids C++ UB).
                           return Scalar::ofInt(static_cast<int64_t>(
                               0 - static_cast<uint64_t>(args[0].i)));
                         });
}

OpFoldResult GeluOp::fold(FoldAdaptor adaptor) {
  bool useTanh = getApproximate() == GeluApproximation::tanh;
  return foldElementwise(
      adaptor.getInput(), getType(),
      [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
        double x = args[0].f;
        if (useTanh) {
          const double kAlpha = std::sqrt(2.0 / llvm::numbers::pi);
          return Scalar::ofFloat(
              0.5 * x * (1.0 + std::tanh(kAlpha * (x + 0.044715 * x * x * x))));
        }
        return Scalar::ofFloat(0.5 * x *
                               (1.0 + std::erf(x / llvm::numbers::sqrt2)));
      });
}

/// Folds an integer-to-float cast by converting each integer straight into
/// the target format: going through double would round twice for |x| > 2^53.
static Attribute foldIntToFloat(Attribute input, ShapedType resultType) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  if (!dense ||
      (!dense.isSplat() && dense.getNumElements() > opimpl::kMaxFoldedElements))
    return {};
  const llvm::fltSemantics &semantics =
      cast<FloatType>(resultType.getElementType()).getFloatSemantics();
  bool isSigned = !dense.getElementType().isInteger(1);
  auto convert = [&](const APInt &value) {
    APFloat result(semantics);
    result.convertFromAPInt(value, isSigned, APFloat::rmNearestTiesToEven);
    return result;
  };
  if (dense.isSplat())
    return DenseElementsAttr::get(resultType,
                                  convert(dense.getSplatValue<APInt>()));
  SmallVector<APFloat> values;
  for (const APInt &value : dense.getValues<APInt>())
    values.push_back(convert(value));
  return DenseElementsAttr::get(resultType, values);
}

/// Whether every value of element type `from` converts to `to` and back
/// unchanged: a float into a float with at least its precision and range
/// (bf16 or f16 into f32), an integer into a wider one, i1 into anything.
static bool isLosslessWidening(Type from, Type to) {
  if (from.isInteger(1))
    return true;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat) {
    const llvm::fltSemantics &a = fromFloat.getFloatSemantics();
    const llvm::fltSemantics &b = toFloat.getFloatSemantics();
    return APFloat::semanticsPrecision(b) >= APFloat::semanticsPrecision(a) &&
           APFloat::semanticsMaxExponent(b) >=
               APFloat::semanticsMaxExponent(a) &&
           APFloat::semanticsMinExponent(b) <= APFloat::semanticsMinExponent(a);
  }
  return from.isSignlessInteger() && to.isSignlessInteger() &&
         to.getIntOrFloatBitWidth() > from.getIntOrFloatBitWidth();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A round trip through a type that holds every value: bf16 -> f32 -> bf16.
  if (auto inner = getInput().getDefiningOp<CastOp>())
    if (inner.getInput().getType() == getType() &&
        isLosslessWidening(getType().getElementType(),
                           inner.getType().getElementType()))
      return inner.getInput();
  Type from = getInput().getType().getElementType();
  Type to = getType().getElementType();
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(to);
  if (!fromFloat && toFloat)
    return foldIntToFloat(adaptor.getInput(), getType());
  bool toBool = to.isInteger(1);
  unsigned width = to.getIntOrFloatBitWidth();
  return foldElementwise(
      adaptor.getInput(), getType(),
      [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
        const Scalar &x = args[0];
        if (toBool)
          return Scalar::ofInt(fromFloat ? x.f != 0.0 : x.i != 0);
        // A double holds every f16/bf16/f32/f64 value exactly, so float to
        // float rounds once, when the result is built.
        if (toFloat)
          return Scalar::ofFloat(x.f);
        // Integer to integer wraps to the target width when built.
        if (!fromFloat)
          return Scalar::ofInt(x.i);
        // Float to integer rounds toward zero. Values outside the target's
        // range, and NaN, have no defined result: leave them to the runtime.
        llvm::APSInt result(width, /*isUnsigned=*/false);
        bool isExact;
        if (APFloat(x.f).convertToInteger(result, APFloat::rmTowardZero,
                                          &isExact) == APFloat::opInvalidOp)
          return std::nullopt;
        return Scalar::ofInt(result.getSExtValue());
      });
}

//===----------------------------------------------------------------------===//
// Binary folders
//===----------------------------------------------------------------------===//

/// Folds an arithmetic binary op on constant operands.
template <typename FloatFn, typename IntFn>
static OpFoldResult foldArith(ArrayRef<Attribute> operands,
                              ShapedType resultType, FloatFn floatFn,
                              IntFn intFn) {
  bool isFloat = isa<FloatType>(resultType.getElementType());
  return foldElementwise(operands, resultType,
                         [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
                           if (isFloat)
                             return Scalar::ofFloat(
                                 floatFn(args[0].f, args[1].f));
                           return intFn(args[0].i, args[1].i);
                         });
}

/// `x op c -> x` when `c` is the identity and no broadcasting changes x.
static bool isIdentityOperand(Attribute constant, double identity, Value other,
                              Type resultType) {
  return isSplatOf(constant, identity) && other.getType() == resultType;
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  // x + 0 -> x. Loom does not distinguish -0.0 from +0.0 (see
  // docs/design/dialect.md), so this also applies to float x.
  if (isIdentityOperand(adaptor.getRhs(), 0.0, getLhs(), getType()))
    return getLhs();
  if (isIdentityOperand(adaptor.getLhs(), 0.0, getRhs(), getType()))
    return getRhs();
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return a + b; },
      [](int64_t a, int64_t b) -> std::optional<Scalar> {
        return Scalar::ofInt(static_cast<int64_t>(static_cast<uint64_t>(a) +
                                                  static_cast<uint64_t>(b)));
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isIdentityOperand(adaptor.getRhs(), 0.0, getLhs(), getType()))
    return getLhs();
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return a - b; },
      [](int64_t a, int64_t b) -> std::optional<Scalar> {
        return Scalar::ofInt(static_cast<int64_t>(static_cast<uint64_t>(a) -
                                                  static_cast<uint64_t>(b)));
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isIdentityOperand(adaptor.getRhs(), 1.0, getLhs(), getType()))
    return getLhs();
  if (isIdentityOperand(adaptor.getLhs(), 1.0, getRhs(), getType()))
    return getRhs();
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return a * b; },
      [](int64_t a, int64_t b) -> std::optional<Scalar> {
        return Scalar::ofInt(static_cast<int64_t>(static_cast<uint64_t>(a) *
                                                  static_cast<uint64_t>(b)));
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isIdentityOperand(adaptor.getRhs(), 1.0, getLhs(), getType()))
    return getLhs();
  unsigned width = getType().getElementType().getIntOrFloatBitWidth();
  int64_t minValue = llvm::minIntN(width);
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return a / b; },
      [&](int64_t a, int64_t b) -> std::optional<Scalar> {
        // Division by zero and MIN / -1 (which overflows at the element
        // width) are left to the runtime, never folded.
        if (b == 0 || (b == -1 && a == minValue))
          return std::nullopt;
        return Scalar::ofInt(a / b);
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  if (isIdentityOperand(adaptor.getRhs(), 1.0, getLhs(), getType()))
    return getLhs();
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return std::pow(a, b); },
      [](int64_t, int64_t) -> std::optional<Scalar> { return std::nullopt; });
}

OpFoldResult FmodOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](double a, double b) { return std::fmod(a, b); },
      [](int64_t, int64_t) -> std::optional<Scalar> { return std::nullopt; });
}

/// max/min of constants; NaN propagates from either operand, as at run
/// time (booleans are 0/1, so they give or/and).
static OpFoldResult foldExtremum(ArrayRef<Attribute> operands,
                                 ShapedType resultType, bool isMax) {
  return foldArith(
      operands, resultType,
      [&](double a, double b) {
        if (std::isnan(a) || std::isnan(b))
          return std::isnan(a) ? a : b;
        return isMax ? std::max(a, b) : std::min(a, b);
      },
      [&](int64_t a, int64_t b) -> std::optional<Scalar> {
        return Scalar::ofInt(isMax ? std::max(a, b) : std::min(a, b));
      });
}

OpFoldResult MaximumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return foldExtremum(adaptor.getOperands(), getType(), /*isMax=*/true);
}

OpFoldResult MinimumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return foldExtremum(adaptor.getOperands(), getType(), /*isMax=*/false);
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  bool isFloat = isa<FloatType>(getLhs().getType().getElementType());
  CompareDirection direction = getDirection();
  return foldElementwise(adaptor.getOperands(), getType(),
                         [&](ArrayRef<Scalar> args) -> std::optional<Scalar> {
                           auto compare = [&](auto a, auto b) -> bool {
                             switch (direction) {
                             case CompareDirection::eq:
                               return a == b;
                             case CompareDirection::ne:
                               return a != b;
                             case CompareDirection::lt:
                               return a < b;
                             case CompareDirection::le:
                               return a <= b;
                             case CompareDirection::gt:
                               return a > b;
                             case CompareDirection::ge:
                               return a >= b;
                             }
                             llvm_unreachable("unknown compare direction");
                           };
                           return Scalar::ofInt(
                               isFloat ? compare(args[0].f, args[1].f)
                                       : compare(args[0].i, args[1].i));
                         });
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  // A uniform condition picks one branch when it already has the result type.
  if (isSplatOf(adaptor.getCondition(), 1.0) &&
      getOnTrue().getType() == getType())
    return getOnTrue();
  if (isSplatOf(adaptor.getCondition(), 0.0) &&
      getOnFalse().getType() == getType())
    return getOnFalse();
  if (getOnTrue() == getOnFalse() && getOnTrue().getType() == getType())
    return getOnTrue();
  return foldElementwise(adaptor.getOperands(), getType(),
                         [](ArrayRef<Scalar> args) -> std::optional<Scalar> {
                           return args[0].i ? args[1] : args[2];
                         });
}
