//===- FuseLayerNormGrad.cpp - Residual gradient into the LN backward -----===//
//
// A pre-norm block's layer norm reads the residual stream, so the stream's
// gradient is the layer norm's input gradient plus the one the residual
// branch brings, and (mixed precision) a bf16 copy of that sum feeds the
// GEMMs of the block below. Separately, the layer norm backward stores its
// f32 gradient only for an elementwise kernel to read it back; fused, the
// backward adds the addend to each element as it stores it and writes the
// bf16 copy alongside. Each element's sum is the same f32 addition of the
// same two rounded values, so no value changes.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSELAYERNORMGRAD
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// The add and (optionally) the cast to bf16 that a layer_norm_grad's
/// input gradient flows into.
struct Epilogue {
  AddOp add;
  Value addend;
  CastOp narrow;
};

std::optional<Epilogue> findEpilogue(LayerNormGradOp grad) {
  Value dinput = grad.getDinput();
  if (!dinput.hasOneUse())
    return std::nullopt;
  auto add = dyn_cast<AddOp>(*dinput.getUsers().begin());
  // The sum must be elementwise over dinput's own shape: a broadcasting add
  // (or one that changes the type) is not what the kernel computes.
  if (!add || add.getLhs() == add.getRhs() ||
      add.getLhs().getType() != add.getRhs().getType() ||
      add.getType() != dinput.getType())
    return std::nullopt;
  Epilogue epilogue;
  epilogue.add = add;
  epilogue.addend = add.getLhs() == dinput ? add.getRhs() : add.getLhs();
  auto type = cast<RankedTensorType>(dinput.getType());
  if (type.getElementType().isF32())
    for (Operation *user : add->getUsers())
      if (auto cast = dyn_cast<CastOp>(user);
          cast && cast.getType().getElementType().isBF16()) {
        epilogue.narrow = cast;
        break;
      }
  return epilogue;
}

/// Where the fused op can stand: at the layer_norm_grad when the addend is
/// defined by then (every use of each result follows it), else at the add if
/// no use of dscale or dbias comes before it; null if neither holds.
Operation *insertionPoint(LayerNormGradOp grad, const Epilogue &epilogue) {
  Operation *def = epilogue.addend.getDefiningOp();
  if (!def ||
      (def->getBlock() == grad->getBlock() && def->isBeforeInBlock(grad)))
    return grad;
  for (Value param : {grad.getDscale(), grad.getDbias()})
    for (Operation *user : param.getUsers())
      if (user->getBlock() != epilogue.add->getBlock() ||
          user->isBeforeInBlock(epilogue.add))
        return nullptr;
  return epilogue.add;
}

void fuse(LayerNormGradOp grad, Epilogue epilogue, Operation *anchor) {
  OpBuilder builder(anchor);
  SmallVector<Type, 4> resultTypes(grad->getResultTypes());
  if (epilogue.narrow)
    resultTypes.push_back(epilogue.narrow.getType());
  auto fused = builder.create<FusedLayerNormGradOp>(
      builder.getFusedLoc({grad.getLoc(), epilogue.add.getLoc()}), resultTypes,
      grad.getInput(), grad.getScale(), grad.getDout(), epilogue.addend,
      grad.getAxisAttr(), grad.getEpsilonAttr());
  epilogue.add.getResult().replaceAllUsesWith(fused.getDinput());
  epilogue.add.erase();
  grad.getDscale().replaceAllUsesWith(fused.getDscale());
  grad.getDbias().replaceAllUsesWith(fused.getDbias());
  grad.erase();
  if (epilogue.narrow) {
    epilogue.narrow.getResult().replaceAllUsesWith(fused.getDinputBf16());
    epilogue.narrow.erase();
  }
}

struct FuseLayerNormGradPass
    : impl::LoomFuseLayerNormGradBase<FuseLayerNormGradPass> {
  void runOnOperation() override {
    // Matched one at a time: an addend may be the sum an earlier rewrite
    // replaced (the residual stream's gradient chains layer to layer).
    SmallVector<LayerNormGradOp> grads;
    getOperation().walk([&](LayerNormGradOp grad) { grads.push_back(grad); });
    for (LayerNormGradOp grad : grads)
      if (std::optional<Epilogue> epilogue = findEpilogue(grad))
        if (Operation *anchor = insertionPoint(grad, *epilogue))
          fuse(grad, *epilogue, anchor);
  }
};

} // namespace
} // namespace loom
} // namespace mlir
