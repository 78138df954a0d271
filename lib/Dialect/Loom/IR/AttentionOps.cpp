//===- AttentionOps.cpp - Fused scaled dot-product attention --------------===//
//
// Type inference of loom.attention and loom.attention_grad. Both check the
// same operands (q, k, v and the mask), so one function does it.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

using namespace mlir;
using namespace mlir::loom;
using opimpl::emitInferError;
using opimpl::formatShape;

/// Checks the q, k, v and mask of an attention op and returns the type of
/// its per-row statistics (`[..., Sq]`, f32 or f64 for f64).
template <typename OpTy>
static FailureOr<RankedTensorType>
checkAttentionOperands(std::optional<Location> loc, Type qType, Type kType,
                       Type vType, Value mask) {
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
  if (rank < 2 || k.getRank() != rank || v.getRank() != rank)
    return emitInferError<OpTy>(loc, "q, k and v need the same rank >= 2, got ",
                                formatShape(q.getShape()), ", ",
                                formatShape(k.getShape()), ", ",
                                formatShape(v.getShape()));
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
  Type stats = q.getElementType().isF64() ? q.getElementType()
                                          : Float32Type::get(q.getContext());
  SmallVector<int64_t> rows(q.getShape().drop_back());
  return RankedTensorType::get(rows, stats);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> stats = checkAttentionOperands<AttentionOp>(
      loc, adaptor.getQ().getType(), adaptor.getK().getType(),
      adaptor.getV().getType(), adaptor.getMask());
  if (failed(stats))
    return failure();
  auto q = cast<RankedTensorType>(adaptor.getQ().getType());
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getShape().back();
  results.push_back(q.clone(shape));
  results.push_back(*stats);
  return success();
}

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> stats = checkAttentionOperands<AttentionGradOp>(
      loc, adaptor.getQ().getType(), adaptor.getK().getType(),
      adaptor.getV().getType(), adaptor.getMask());
  if (failed(stats))
    return failure();
  auto q = cast<RankedTensorType>(adaptor.getQ().getType());
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  SmallVector<int64_t> outShape(q.getShape());
  outShape.back() = v.getShape().back();
  if (adaptor.getDout().getType() != q.clone(outShape))
    return emitInferError<AttentionGradOp>(
        loc, "dout has type ", adaptor.getDout().getType(),
        " but the attention output is ", q.clone(outShape));
  for (auto [name, value] : {std::pair{"logsumexp", adaptor.getLogsumexp()},
                             std::pair{"delta", adaptor.getDelta()}})
    if (value.getType() != *stats)
      return emitInferError<AttentionGradOp>(
          loc, name, " has type ", value.getType(), ", expected ", *stats);
  results.push_back(q);
  results.push_back(adaptor.getK().getType());
  results.push_back(v);
  return success();
}
