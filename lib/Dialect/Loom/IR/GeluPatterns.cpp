//===- GeluPatterns.cpp - The tanh GELU from its exported polynomial ------===//
//
// ONNX before opset 20 has no Gelu, so exporters spell the tanh GELU (GPT-2's
// activation) out as `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`,
// nine elementwise ops. As `loom.gelu approximate tanh` it is one op with a
// gradient rule that reads only x, a GEMM epilogue can apply it
// (loom-fuse-matmul-epilogue), and the backward does not keep the
// polynomial's intermediate values.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Whether `value` is a splat float constant within float rounding of
/// `expected` (exporters write the constants in the model's precision).
bool isScalar(Value value, double expected) {
  DenseElementsAttr attr;
  if (!value || !matchPattern(value, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  double actual = attr.getSplatValue<APFloat>().convertToDouble();
  return std::abs(actual - expected) <= 1e-6 * std::abs(expected);
}

/// For `op(a, b)` of type OpTy: the operand that is not `known`, where
/// `known` is a value or a splat of `constant`.
template <typename OpTy>
Value otherOperand(Value result, Value known, std::optional<double> constant) {
  auto op = result ? result.getDefiningOp<OpTy>() : OpTy();
  if (!op)
    return {};
  auto matches = [&](Value operand) {
    return constant ? isScalar(operand, *constant) : operand == known;
  };
  if (matches(op.getLhs()))
    return op.getRhs();
  if (matches(op.getRhs()))
    return op.getLhs();
  return {};
}

template <typename OpTy> Value withConstant(Value result, double constant) {
  return otherOperand<OpTy>(result, {}, constant);
}
template <typename OpTy> Value withValue(Value result, Value known) {
  return otherOperand<OpTy>(result, known, std::nullopt);
}

/// x^3 as x * (x * x) in any order, or pow(x, 3).
bool isCube(Value value, Value x) {
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isScalar(pow.getRhs(), 3.0);
  Value square = withValue<MulOp>(value, x);
  return square && withValue<MulOp>(square, x) == x;
}

/// Whether `onePlus` is `1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))`.
bool isTanhTerm(Value onePlus, Value x) {
  Value tanh = withConstant<AddOp>(onePlus, 1.0);
  auto tanhOp = tanh ? tanh.getDefiningOp<TanhOp>() : TanhOp();
  if (!tanhOp)
    return false;
  Value inner = withConstant<MulOp>(tanhOp.getInput(), std::sqrt(2 / M_PI));
  Value cubic = withValue<AddOp>(inner, x);
  Value cube = withConstant<MulOp>(cubic, 0.044715);
  return cube && isCube(cube, x);
}

/// `0.5 * (x * T)` or `(0.5 * x) * T` (any operand order), T the tanh term:
/// the GELU's x, else null.
Value matchTanhGelu(MulOp root) {
  auto tryPair = [](Value half, Value rest) -> Value {
    // (0.5 * x) * T
    if (Value x = withConstant<MulOp>(half, 0.5); x && isTanhTerm(rest, x))
      return x;
    // 0.5 * (x * T)
    if (!isScalar(half, 0.5))
      return {};
    auto product = rest.getDefiningOp<MulOp>();
    if (!product)
      return {};
    for (auto [x, term] : {std::pair{product.getLhs(), product.getRhs()},
                           std::pair{product.getRhs(), product.getLhs()}})
      if (isTanhTerm(term, x))
        return x;
    return {};
  };
  if (Value x = tryPair(root.getLhs(), root.getRhs()))
    return x;
  return tryPair(root.getRhs(), root.getLhs());
}

struct RecognizeTanhGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    Value x = matchTanhGelu(root);
    if (!x || x.getType() != root.getType() ||
        !isa<FloatType>(root.getType().getElementType()))
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(root, x, GeluApproximation::tanh);
    return success();
  }
};

} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<RecognizeTanhGelu>(context);
}
