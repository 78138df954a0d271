//===- AttentionOps.cpp - Fused scaled dot-product attention --------------===//
//
// Type inference of loom.attention and loom.attention_grad, and of their
// packed forms. All check the same operands (q, k, v and the mask), so one
// function does it; a seq_major op's operands are checked in their
// head-major form, and a packed op's q, k and v are the three parts of its
// qkv.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

using namespace mlir;
using namespace mlir::loom;
using opimpl::emitInferError;
using opimpl::formatShape;

namespace {
/// The types an attention op's q, k, v and mask imply.
struct AttentionTypes {
  /// The attention output, `[..., Sq, Dv]`.
  RankedTensorType output;
  /// Per-row statistics (`[..., Sq]`, f32, or f64 for f64).
  RankedTensorType stats;
};
} // namespace

/// `type` with its sequence and head dimensions swapped: the head-major
/// form `[..., H, S, D]` of a seq-major operand `[..., S, H, D]`.
static RankedTensorType swapSequenceAndHeads(RankedTensorType type) {
  SmallVector<int64_t> shape(type.getShape());
  int64_t rank = type.getRank();
  std::swap(shape[rank - 3], shape[rank - 2]);
  return type.clone(shape);
}

/// Checks the q, k, v and mask of an attention op. With `seqMajor` the
/// operands are checked in their head-major form and the result types
/// given in the seq-major one.
template <typename OpTy>
static FailureOr<AttentionTypes>
checkAttentionOperands(std::optional<Location> loc, Type qType, Type kType,
                       Type vType, Value mask, bool seqMajor) {
  auto q = dyn_cast<RankedTensorType>(qType);
  auto k = dyn_cast<RankedTensorType>(kType);
  auto v = dyn_cast<RankedTensorType>(vType);
  if (!q || !k || !v)
    return emitInferError<OpTy>(loc, "q, k and v must be ranked tensors");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitInferError<OpTy>(
        loc, "q, k and v element types differ: ", q.getElementType(), ", ",
        k.getElementType(), ", ", v.getElementType());
  int64_t rank = q.getRank();
  int64_t minRank = seqMajor ? 3 : 2;
  if (rank < minRank || k.getRank() != rank || v.getRank() != rank)
    return emitInferError<OpTy>(
        loc, "q, k and v need the same rank >= ", minRank,
        seqMajor ? " ([..., S, H, D] with seq_major), got " : ", got ",
        formatShape(q.getShape()), ", ", formatShape(k.getShape()), ", ",
        formatShape(v.getShape()));
  if (seqMajor) {
    if (k.getDimSize(rank - 2) != q.getDimSize(rank - 2) ||
        v.getDimSize(rank - 2) != q.getDimSize(rank - 2))
      return emitInferError<OpTy>(
          loc, "q, k and v head counts (dimension ", rank - 2,
          " with seq_major) differ: ", formatShape(q.getShape()), ", ",
          formatShape(k.getShape()), ", ", formatShape(v.getShape()));
    q = swapSequenceAndHeads(q);
    k = swapSequenceAndHeads(k);
    v = swapSequenceAndHeads(v);
  }
  ArrayRef<int64_t> batch = q.getShape().drop_back(2);
  if (k.getShape().drop_back(2) != batch || v.getShape().drop_back(2) != batch)
    return emitInferError<OpTy>(
        loc, "q, k and v batch dimensions differ: ", formatShape(q.getShape()),
        ", ", formatShape(k.getShape()), ", ", formatShape(v.getShape()));
  int64_t sq = q.getDimSize(rank - 2), sk = k.getDimSize(rank - 2);
  if (k.getDimSize(rank - 1) != q.getDimSize(rank - 1))
    return emitInferError<OpTy>(loc, "q ", formatShape(q.getShape()), " and k ",
                                formatShape(k.getShape()),
                                " have different head dimensions");
  if (v.getDimSize(rank - 2) != sk)
    return emitInferError<OpTy>(loc, "v ", formatShape(v.getShape()),
                                " needs one row per key of k ",
                                formatShape(k.getShape()));
  if (mask) {
    auto maskType = dyn_cast<RankedTensorType>(mask.getType());
    ArrayRef<int64_t> shape = maskType.getShape();
    bool fits = maskType.getRank() == rank && shape[rank - 2] == sq &&
                shape[rank - 1] == sk;
    for (int64_t d = 0; fits && d < rank - 2; ++d)
      fits = shape[d] == 1 || shape[d] == batch[d];
    if (!fits)
      return emitInferError<OpTy>(
          loc, "mask ", formatShape(shape), " must be [..., ", sq, ", ", sk,
          "] with each leading dimension 1 or the batch size (",
          formatShape(batch), ")");
  }
  Type stats = getStatisticsType(q.getElementType());
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getShape().back();
  if (seqMajor)
    std::swap(shape[rank - 3], shape[rank - 2]);
  return AttentionTypes{
      q.clone(shape),
      RankedTensorType::get(ArrayRef<int64_t>(shape).drop_back(), stats)};
}

/// Checks that a gradient op's dout, output and logsumexp have the types
/// of the forward's results.
template <typename OpTy, typename Adaptor>
static LogicalResult checkForwardResults(std::optional<Location> loc,
                                         const AttentionTypes &types,
                                         Adaptor adaptor) {
  for (auto [name, value] : {std::pair{"dout", adaptor.getDout()},
                             std::pair{"output", adaptor.getOutput()}})
    if (value.getType() != types.output)
      return emitInferError<OpTy>(loc, name, " has type ", value.getType(),
                                  " but the attention output is ",
                                  types.output);
  if (adaptor.getLogsumexp().getType() != types.stats)
    return emitInferError<OpTy>(loc, "logsumexp has type ",
                                adaptor.getLogsumexp().getType(), ", expected ",
                                types.stats);
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<AttentionTypes> types = checkAttentionOperands<AttentionOp>(
      loc, adaptor.getQ().getType(), adaptor.getK().getType(),
      adaptor.getV().getType(), adaptor.getMask(), adaptor.getSeqMajor());
  if (failed(types))
    return failure();
  results.push_back(types->output);
  results.push_back(types->stats);
  return success();
}

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  FailureOr<AttentionTypes> types = checkAttentionOperands<AttentionGradOp>(
      loc, adaptor.getQ().getType(), adaptor.getK().getType(),
      adaptor.getV().getType(), adaptor.getMask(), adaptor.getSeqMajor());
  if (failed(types))
    return failure();
  if (failed(checkForwardResults<AttentionGradOp>(loc, *types, adaptor)))
    return failure();
  results.push_back(adaptor.getQ().getType());
  results.push_back(adaptor.getK().getType());
  results.push_back(adaptor.getV().getType());
  return success();
}

/// The type of q, k and v (`[..., S, H, D]`) packed in `qkv`
/// (`[..., S, 3, H, D]`).
template <typename OpTy>
static FailureOr<RankedTensorType> unpackedType(std::optional<Location> loc,
                                                Type qkvType) {
  auto qkv = dyn_cast<RankedTensorType>(qkvType);
  if (!qkv || qkv.getRank() < 4 || qkv.getDimSize(qkv.getRank() - 3) != 3)
    return emitInferError<OpTy>(loc, "qkv must be [..., S, 3, H, D], got ",
                                qkvType);
  SmallVector<int64_t> shape(qkv.getShape());
  shape.erase(shape.end() - 3);
  return qkv.clone(shape);
}

LogicalResult
PackedAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> part =
      unpackedType<PackedAttentionOp>(loc, adaptor.getQkv().getType());
  if (failed(part))
    return failure();
  FailureOr<AttentionTypes> types = checkAttentionOperands<PackedAttentionOp>(
      loc, *part, *part, *part, adaptor.getMask(), /*seqMajor=*/true);
  if (failed(types))
    return failure();
  results.push_back(types->output);
  results.push_back(types->stats);
  return success();
}

LogicalResult PackedAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> part =
      unpackedType<PackedAttentionGradOp>(loc, adaptor.getQkv().getType());
  if (failed(part))
    return failure();
  FailureOr<AttentionTypes> types =
      checkAttentionOperands<PackedAttentionGradOp>(
          loc, *part, *part, *part, adaptor.getMask(), /*seqMajor=*/true);
  if (failed(types))
    return failure();
  if (failed(checkForwardResults<PackedAttentionGradOp>(loc, *types, adaptor)))
    return failure();
  results.push_back(adaptor.getQkv().getType());
  return success();
}
