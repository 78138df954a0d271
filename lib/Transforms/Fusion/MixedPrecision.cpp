//===- MixedPrecision.cpp - bf16 GEMMs around an f32 model ----------------===//
//
// torch.autocast-style mixed precision: the GEMMs, where nearly all the
// FLOPs and most activation bytes are, run in bf16 (the kernels accumulate in
// f32); everything numerically delicate (reductions, softmax, norms, the
// loss, the optimizer and the master weights) stays f32. Run on the forward
// model before loom-autodiff: the gradient of a cast is a cast, so the
// backward GEMMs come out in bf16 and the weight gradients in f32, with no
// special case in the autodiff.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMIXEDPRECISION
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

Value castTo(OpBuilder &builder, Location loc, Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  return builder.create<CastOp>(loc, type.clone(element), value);
}

/// Rewrites an f32 `matmul` as cast -> bf16 matmul -> cast back, so that
/// its users still see f32.
void lowerPrecision(MatmulOp matmul, Type low) {
  OpBuilder builder(matmul);
  Location loc = matmul.getLoc();
  Value lhs = castTo(builder, loc, matmul.getLhs(), low);
  Value rhs = castTo(builder, loc, matmul.getRhs(), low);
  auto product = builder.create<MatmulOp>(
      loc, lhs, rhs, matmul.getTransposeLhs(), matmul.getTransposeRhs());
  // Keeps whatever else the op carried (e.g. importer attributes).
  for (NamedAttribute attr : matmul->getDiscardableAttrs())
    product->setAttr(attr.getName(), attr.getValue());
  Type wide = matmul.getType().getElementType();
  matmul.getResult().replaceAllUsesWith(
      castTo(builder, loc, product.getResult(), wide));
  matmul.erase();
}

/// The same for a fused attention: q, k and v in bf16, the output cast
/// back; the log-sum-exp is f32 either way.
void lowerPrecision(AttentionOp attention, Type low) {
  OpBuilder builder(attention);
  Location loc = attention.getLoc();
  auto lowered = builder.create<AttentionOp>(
      loc, castTo(builder, loc, attention.getQ(), low),
      castTo(builder, loc, attention.getK(), low),
      castTo(builder, loc, attention.getV(), low), attention.getMask(),
      attention.getScaleAttr(), attention.getMaskValueAttr(),
      attention.getSeqMajorAttr());
  for (NamedAttribute attr : attention->getDiscardableAttrs())
    lowered->setAttr(attr.getName(), attr.getValue());
  Type wide = attention.getOutput().getType().getElementType();
  attention.getOutput().replaceAllUsesWith(
      castTo(builder, loc, lowered.getOutput(), wide));
  attention.getLogsumexp().replaceAllUsesWith(lowered.getLogsumexp());
  attention.erase();
}

struct MixedPrecisionPass : impl::LoomMixedPrecisionBase<MixedPrecisionPass> {
  using LoomMixedPrecisionBase::LoomMixedPrecisionBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (precision == Precision::F32)
      return markAllAnalysesPreserved();
    Type low = BFloat16Type::get(&getContext());
    SmallVector<MatmulOp> matmuls;
    func.walk([&](MatmulOp matmul) {
      Type element = matmul.getType().getElementType();
      if (element.isF32()) {
        matmuls.push_back(matmul);
      } else if (!element.isBF16()) {
        // Like torch.autocast, which leaves f64 alone: a model computing in
        // f64 asked for it. Said as a remark so that it is not a surprise.
        matmul.emitRemark("stays in ")
            << element << ": precision=bf16 converts f32 matmuls only";
      }
    });
    for (MatmulOp matmul : matmuls)
      lowerPrecision(matmul, low);
    SmallVector<AttentionOp> attentions;
    func.walk([&](AttentionOp attention) {
      if (attention.getOutput().getType().getElementType().isF32())
        attentions.push_back(attention);
    });
    for (AttentionOp attention : attentions)
      lowerPrecision(attention, low);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
