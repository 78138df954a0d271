//===- DecomposeGeluGrad.cpp - loom.gelu_grad as elementwise ops ----------===//
//
// Autodiff keeps the GELU's backward as one op so that the GEMM computing
// its gradient can apply it (loom-fuse-matmul-epilogue); whatever is left
// is spelled out here in the elementwise ops that loom-fuse-elementwise
// and the runtimes' elementwise kernels know, the derivative as
// torch.nn.GELU's backward writes it.
//
//===----------------------------------------------------------------------===//

#include "../ArithmeticBuilder.h"
#include "loom/Transforms/Fusion/Passes.h"

#include <cmath>

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDECOMPOSEGELUGRAD
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// gelu'(x), for the exact GELU or its tanh form. One op per statement, so
/// that the ops come in this order whatever the compiler's order of
/// evaluating arguments.
Value derivative(ArithmeticBuilder &e, Value x, GeluApproximation approximate) {
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
      ArithmeticBuilder e(builder, op.getLoc());
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
