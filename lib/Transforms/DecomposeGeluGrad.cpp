//===- DecomposeGeluGrad.cpp - loom.gelu_grad as elementwise ops ----------===//
//
// Autodiff keeps the GELU's backward as one op so that the GEMM computing
// its gradient can apply it (loom-fuse-matmul-epilogue); whatever is left
// is spelled out here in the elementwise ops that loom-fuse-elementwise
// and the runtimes' elementwise kernels know, the derivative as
// torch.nn.GELU's backward writes it.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDECOMPOSEGELUGRAD
#include "loom/Transforms/Passes.h.inc"

namespace {

/// Builds elementwise loom ops at one location.
class Builder {
public:
  Builder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value exp(Value x) { return b.create<ExpOp>(loc, x); }
  Value erf(Value x) { return b.create<ErfOp>(loc, x); }
  Value tanh(Value x) { return b.create<TanhOp>(loc, x); }
  /// A rank-0 constant of `like`'s element type.
  Value scalar(Value like, double value) {
    Type element = getElementTypeOrSelf(like.getType());
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, FloatAttr::get(element, value)));
  }
  Value scale(Value x, double factor) { return mul(x, scalar(x, factor)); }

private:
  OpBuilder &b;
  Location loc;
};

/// gelu'(x), for the exact GELU or its tanh form. One op per statement, so
/// that the ops come in this order whatever the compiler's order of
/// evaluating arguments.
Value derivative(Builder &e, Value x, GeluApproximation approximate) {
  Value one = e.scalar(x, 1);
  Value x2 = e.mul(x, x);
  if (approximate == GeluApproximation::none) {
    // Phi(x) + x phi(x).
    Value erf = e.erf(e.scale(x, M_SQRT1_2));
    Value cdf = e.scale(e.add(erf, one), 0.5);
    Value pdf = e.scale(e.exp(e.scale(x2, -0.5)), 1 / std::sqrt(2 * M_PI));
    Value xPdf = e.mul(x, pdf);
    return e.add(cdf, xPdf);
  }
  // y = 0.5 x (1 + tanh u), u = k (x + 0.044715 x^3).
  const double k = std::sqrt(2 / M_PI);
  Value x3 = e.scale(e.mul(x2, x), 0.044715);
  Value t = e.tanh(e.scale(e.add(x, x3), k));
  Value du = e.scale(e.add(one, e.scale(x2, 3 * 0.044715)), k);
  Value halfX = e.scale(x, 0.5);
  Value sech2 = e.sub(one, e.mul(t, t));
  Value outer = e.scale(e.add(one, t), 0.5);
  Value inner = e.mul(halfX, e.mul(sech2, du));
  return e.add(outer, inner);
}

struct LoomDecomposeGeluGradPass
    : impl::LoomDecomposeGeluGradBase<LoomDecomposeGeluGradPass> {
  void runOnOperation() override {
    getOperation().walk([](GeluGradOp op) {
      OpBuilder builder(op);
      Builder e(builder, op.getLoc());
      Value slope = derivative(e, op.getInput(), op.getApproximate());
      Value dx = e.mul(op.getGrad(), slope);
      op.replaceAllUsesWith(dx);
      op.erase();
    });
  }
};

} // namespace
} // namespace loom
} // namespace mlir
