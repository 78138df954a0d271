//===- PackAttention.cpp - Attention on the fused QKV projection ----------===//
//
// GPT-style blocks project q, k and v with one GEMM and split its result;
// the backward concatenates the three gradients again. Both are copies of
// the whole projection that exist only to give the attention three dense
// operands. The attention kernels can instead read q, k and v where they lie
// in the projection (rows of 3 * H * D elements), so this pass replaces the
// split and the concat by reshapes of one packed [..., S, 3, H, D] tensor.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPACKATTENTION
#include "loom/Transforms/Fusion/Passes.h.inc"

namespace {

/// Where q, k and v of an attention come from: parts 0, 1 and 2 of `split`,
/// each reshaped.
struct PackedSource {
  SplitOp split;
  SmallVector<ReshapeOp, 3> reshapes;
};

/// The split that q, k and v (`[..., S, H, D]`) are the parts of, in
/// order, when its input is `[..., S, 3 * H * D]` split along the last
/// dimension into three equal parts.
std::optional<PackedSource> findPackedSource(Value q, Value k, Value v) {
  PackedSource source;
  Value parts[] = {q, k, v};
  for (auto [index, value] : llvm::enumerate(parts)) {
    auto reshape = value.getDefiningOp<ReshapeOp>();
    if (!reshape)
      return std::nullopt;
    auto part = dyn_cast<OpResult>(reshape.getInput());
    auto split = part ? dyn_cast<SplitOp>(part.getOwner()) : SplitOp();
    if (!split || part.getResultNumber() != index ||
        (source.split && split != source.split))
      return std::nullopt;
    source.split = split;
    source.reshapes.push_back(reshape);
  }
  auto input = cast<RankedTensorType>(source.split.getInput().getType());
  auto part = cast<RankedTensorType>(q.getType());
  int64_t rank = input.getRank();
  if (source.split.getNumResults() != 3 ||
      int64_t(source.split.getAxis()) != rank - 1 || part.getRank() != rank + 1)
    return std::nullopt;
  // The parts are equal (each [..., S, H * D]) and q's leading dims are
  // the input's: the reshapes only split the last dimension into H, D.
  for (Value result : source.split.getResults())
    if (result.getType() != source.split.getResult(0).getType())
      return std::nullopt;
  if (input.getShape().drop_back() != part.getShape().drop_back(2) ||
      input.getShape().back() !=
          3 * part.getDimSize(rank - 1) * part.getDimSize(rank))
    return std::nullopt;
  return source;
}

/// `[..., S, H, D]` with a 3 inserted before H: the packed type.
RankedTensorType packedType(RankedTensorType part) {
  SmallVector<int64_t> shape(part.getShape());
  shape.insert(shape.end() - 2, 3);
  return part.clone(shape);
}

/// The concat that the three gradients of `grad`, each reshaped and used
/// nowhere else, are the operands of (in order, along the last dimension,
/// giving the split's input type); null when there is none.
ConcatOp findGradientConcat(AttentionGradOp grad, Type concatType) {
  ConcatOp concat;
  for (auto [index, gradient] : llvm::enumerate(grad.getResults())) {
    if (!gradient.hasOneUse())
      return {};
    auto reshape = dyn_cast<ReshapeOp>(*gradient.getUsers().begin());
    if (!reshape || !reshape.getResult().hasOneUse())
      return {};
    auto user = dyn_cast<ConcatOp>(*reshape.getResult().getUsers().begin());
    if (!user || (concat && user != concat) || user.getInputs().size() != 3 ||
        user.getInputs()[index] != reshape.getResult())
      return {};
    concat = user;
  }
  auto type = cast<RankedTensorType>(concat.getType());
  if (type != concatType || int64_t(concat.getAxis()) != type.getRank() - 1)
    return {};
  return concat;
}

void eraseIfUnused(Operation *op) {
  if (op->use_empty())
    op->erase();
}

/// Packs `attention` and the gradients of the same operands; returns
/// whether it did.
bool pack(AttentionOp attention) {
  if (!attention.getSeqMajor())
    return false;
  std::optional<PackedSource> source =
      findPackedSource(attention.getQ(), attention.getK(), attention.getV());
  if (!source)
    return false;
  OpBuilder builder(attention);
  Value input = source->split.getInput();
  Value qkv = builder.create<ReshapeOp>(
      attention.getLoc(),
      packedType(cast<RankedTensorType>(attention.getQ().getType())), input);

  // The gradients first: they still name the forward's q, k and v.
  SmallVector<AttentionGradOp> grads;
  for (Operation *user : attention.getQ().getUsers())
    if (auto grad = dyn_cast<AttentionGradOp>(user))
      if (grad.getQ() == attention.getQ() && grad.getK() == attention.getK() &&
          grad.getV() == attention.getV() && grad.getSeqMajor() &&
          grad.getMask() == attention.getMask() &&
          grad.getScale() == attention.getScale() &&
          grad.getMaskValue() == attention.getMaskValue())
        grads.push_back(grad);
  for (AttentionGradOp grad : grads) {
    ConcatOp concat = findGradientConcat(grad, input.getType());
    if (!concat)
      continue;
    builder.setInsertionPoint(grad);
    Value dqkv = builder.create<PackedAttentionGradOp>(
        grad.getLoc(), qkv, grad.getDout(), grad.getLogsumexp(),
        grad.getOutput(), grad.getMask(), grad.getScaleAttr(),
        grad.getMaskValueAttr());
    builder.setInsertionPoint(concat);
    concat.getResult().replaceAllUsesWith(
        builder.create<ReshapeOp>(concat.getLoc(), concat.getType(), dqkv));
    SmallVector<Operation *> reshapes;
    for (Value gradient : grad.getResults())
      reshapes.push_back(*gradient.getUsers().begin());
    concat.erase();
    for (Operation *reshape : reshapes)
      reshape->erase();
    grad.erase();
  }

  builder.setInsertionPoint(attention);
  auto packed = builder.create<PackedAttentionOp>(
      attention.getLoc(), qkv, attention.getMask(), attention.getScaleAttr(),
      attention.getMaskValueAttr());
  attention.replaceAllUsesWith(packed.getResults());
  attention.erase();
  for (ReshapeOp reshape : source->reshapes)
    eraseIfUnused(reshape);
  eraseIfUnused(source->split);
  return true;
}

struct PackAttentionPass : impl::LoomPackAttentionBase<PackAttentionPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation().walk(
        [&](AttentionOp attention) { attentions.push_back(attention); });
    bool changed = false;
    for (AttentionOp attention : attentions)
      changed |= pack(attention);
    if (!changed)
      markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
