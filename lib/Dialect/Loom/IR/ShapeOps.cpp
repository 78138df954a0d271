//===- ShapeOps.cpp - Shape-manipulating loom ops -------------------------===//
//
// Verifiers, type inference and folders of reshape, transpose, slice,
// concat, split, broadcast and gather.
//
//===----------------------------------------------------------------------===//

#include "ConstantFold.h"
#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::loom;
using opimpl::delinearize;
using opimpl::emitInferError;
using opimpl::foldRearrange;
using opimpl::formatShape;
using opimpl::isValidAxis;
using opimpl::linearize;

/// The ranked tensor type of `value`, or a diagnostic if it is not one.
template <typename OpTy>
static FailureOr<RankedTensorType> getRankedType(std::optional<Location> loc,
                                                 Value value, StringRef name) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return emitInferError<OpTy>(loc, name, " must be a ranked tensor");
  return type;
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  int64_t from = getInput().getType().getNumElements();
  int64_t to = getType().getNumElements();
  if (from != to)
    return emitOpError() << "cannot reshape " << getInput().getType() << " ("
                         << from << " elements) to " << getType() << " (" << to
                         << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x): only the final shape matters.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  // Reshaping copies the buffer, so large constants stay as they are.
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    if (dense.isSplat() || dense.getNumElements() <= opimpl::kMaxFoldedElements)
      return dense.reshape(getType());
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = getRankedType<TransposeOp>(loc, adaptor.getInput(), "input");
  if (failed(type))
    return failure();
  ArrayRef<int64_t> permutation = adaptor.getPermutation();
  int64_t rank = type->getRank();
  if (static_cast<int64_t>(permutation.size()) != rank)
    return emitInferError<TransposeOp>(loc, "permutation has ",
                                       permutation.size(),
                                       " entries for an input of rank ", rank);
  SmallVector<bool> seen(rank, false);
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation) {
    if (!isValidAxis(dim, rank) || seen[dim])
      return emitInferError<TransposeOp>(
          loc, "[", llvm::make_range(permutation.begin(), permutation.end()),
          "] is not a permutation of 0..", rank - 1);
    seen[dim] = true;
    shape.push_back(type->getDimSize(dim));
  }
  results.push_back(RankedTensorType::get(shape, type->getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> permutation = getPermutation();
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return getInput();
  // transpose(transpose(x, inner), outer) -> transpose(x, inner o outer).
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> inner = producer.getPermutation();
    SmallVector<int64_t> composed = llvm::to_vector(
        llvm::map_range(permutation, [&](int64_t d) { return inner[d]; }));
    getInputMutable().assign(producer.getInput());
    setPermutation(composed);
    return getResult();
  }
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  ArrayRef<int64_t> resultShape = getType().getShape();
  return foldRearrange(adaptor.getInput(), getType(),
                       [&](int64_t linear) -> std::pair<unsigned, int64_t> {
                         SmallVector<int64_t> index =
                             delinearize(linear, resultShape);
                         SmallVector<int64_t> source(index.size());
                         for (auto [d, p] : llvm::enumerate(permutation))
                           source[p] = index[d];
                         return {0, linearize(source, inputShape)};
                       });
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto type = getRankedType<SliceOp>(loc, adaptor.getInput(), "input");
  if (failed(type))
    return failure();
  ArrayRef<int64_t> starts = adaptor.getStarts();
  ArrayRef<int64_t> limits = adaptor.getLimits();
  ArrayRef<int64_t> strides = adaptor.getStrides();
  int64_t rank = type->getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      limits.size() != starts.size() || strides.size() != starts.size())
    return emitInferError<SliceOp>(loc, "expected ", rank,
                                   " ranges (one per dimension), got ",
                                   starts.size(), " starts, ", limits.size(),
                                   " limits and ", strides.size(), " strides");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = type->getDimSize(d);
    if (strides[d] < 1)
      return emitInferError<SliceOp>(loc, "stride ", strides[d],
                                     " of dimension ", d, " must be positive");
    if (starts[d] < 0 || starts[d] > limits[d] || limits[d] > size)
      return emitInferError<SliceOp>(
          loc, "range ", starts[d], ":", limits[d], " of dimension ", d,
          " is not within 0:", size, " with start <= limit");
    shape.push_back(llvm::divideCeil(limits[d] - starts[d], strides[d]));
  }
  results.push_back(RankedTensorType::get(shape, type->getElementType()));
  return success();
}

bool SliceOp::isLeadingPrefix() {
  ArrayRef<int64_t> input = getInput().getType().getShape();
  ArrayRef<int64_t> result = getType().getShape();
  if (llvm::any_of(getStarts(), [](int64_t s) { return s != 0; }) ||
      llvm::any_of(getStrides(), [](int64_t s) { return s != 1; }))
    return false;
  size_t d = 0;
  while (d < input.size() && input[d] == 1)
    ++d;
  // Dimension d may be cut; every later one must be whole.
  for (size_t rest = d + 1; rest < input.size(); ++rest)
    if (result[rest] != input[rest])
      return false;
  return true;
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput(); // Same shape means every range is full.
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  ArrayRef<int64_t> resultShape = getType().getShape();
  return foldRearrange(adaptor.getInput(), getType(),
                       [&](int64_t linear) -> std::pair<unsigned, int64_t> {
                         SmallVector<int64_t> index =
                             delinearize(linear, resultShape);
                         for (size_t d = 0; d < index.size(); ++d)
                           index[d] = starts[d] + index[d] * strides[d];
                         return {0, linearize(index, inputShape)};
                       });
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitInferError<ConcatOp>(loc, "needs at least one input");
  auto first = getRankedType<ConcatOp>(loc, inputs.front(), "inputs");
  if (failed(first))
    return failure();
  int64_t axis = adaptor.getAxisAttr().getInt();
  if (!isValidAxis(axis, first->getRank()))
    return emitInferError<ConcatOp>(loc, "axis ", axis,
                                    " is out of range for inputs of rank ",
                                    first->getRank());
  SmallVector<int64_t> shape(first->getShape());
  for (auto [index, input] : llvm::enumerate(inputs.drop_front())) {
    auto type = getRankedType<ConcatOp>(loc, input, "inputs");
    if (failed(type))
      return failure();
    if (type->getElementType() != first->getElementType() ||
        type->getRank() != first->getRank())
      return emitInferError<ConcatOp>(
          loc, "input #", index + 1, " is ", *type, " but input #0 is ", *first,
          "; inputs need one rank and element type");
    for (int64_t d = 0; d < first->getRank(); ++d) {
      if (d == axis)
        continue;
      if (type->getDimSize(d) != first->getDimSize(d))
        return emitInferError<ConcatOp>(
            loc, "input #", index + 1, " has size ", type->getDimSize(d),
            " in dimension ", d, " but input #0 has ", first->getDimSize(d),
            "; only the axis dimension ", axis, " may differ");
    }
    if (llvm::AddOverflow(shape[axis], type->getDimSize(axis), shape[axis]))
      return emitInferError<ConcatOp>(loc, "concatenated size along axis ",
                                      axis, " does not fit in 64 bits");
  }
  results.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  int64_t axis = getAxis();
  ArrayRef<int64_t> resultShape = getType().getShape();
  return foldRearrange(
      adaptor.getInputs(), getType(),
      [&](int64_t linear) -> std::pair<unsigned, int64_t> {
        SmallVector<int64_t> index = delinearize(linear, resultShape);
        for (auto [i, input] : llvm::enumerate(getInputs())) {
          ArrayRef<int64_t> shape =
              cast<RankedTensorType>(input.getType()).getShape();
          if (index[axis] < shape[axis])
            return {i, linearize(index, shape)};
          index[axis] -= shape[axis];
        }
        llvm_unreachable("index beyond the concatenated inputs");
      });
}

//===----------------------------------------------------------------------===//
// SplitOp
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::verify() {
  RankedTensorType inputType = getInput().getType();
  int64_t axis = getAxisAttr().getInt();
  if (!isValidAxis(axis, inputType.getRank()))
    return emitOpError() << "axis " << axis
                         << " is out of range for an input of rank "
                         << inputType.getRank();
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  int64_t total = 0;
  for (auto [index, result] : llvm::enumerate(getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    if (type.getElementType() != inputType.getElementType() ||
        type.getRank() != inputType.getRank())
      return emitOpError() << "result #" << index << " is " << type
                           << " but the input is " << inputType
                           << "; pieces keep the rank and element type";
    for (int64_t d = 0; d < inputType.getRank(); ++d) {
      if (d != axis && type.getDimSize(d) != inputType.getDimSize(d))
        return emitOpError()
               << "result #" << index << " has size " << type.getDimSize(d)
               << " in dimension " << d << " but the input has "
               << inputType.getDimSize(d);
    }
    if (llvm::AddOverflow(total, type.getDimSize(axis), total))
      return emitOpError() << "result sizes along axis " << axis
                           << " add up to more than fits in 64 bits";
  }
  if (total != inputType.getDimSize(axis))
    return emitOpError() << "result sizes along axis " << axis << " add up to "
                         << total << " but the input has "
                         << inputType.getDimSize(axis);
  return success();
}

LogicalResult SplitOp::fold(FoldAdaptor adaptor,
                            SmallVectorImpl<OpFoldResult> &results) {
  if (getNumResults() == 1) {
    results.push_back(getInput());
    return success();
  }
  int64_t axis = getAxis();
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  int64_t offset = 0;
  for (Value result : getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    Attribute piece =
        foldRearrange(adaptor.getInput(), type,
                      [&](int64_t linear) -> std::pair<unsigned, int64_t> {
                        SmallVector<int64_t> index =
                            delinearize(linear, type.getShape());
                        index[axis] += offset;
                        return {0, linearize(index, inputShape)};
                      });
    if (!piece) {
      results.clear(); // A fold produces all results or none.
      return failure();
    }
    results.push_back(piece);
    offset += type.getDimSize(axis);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  if (!opimpl::isBroadcastableTo(from, to))
    return emitOpError() << "cannot broadcast " << formatShape(from) << " to "
                         << formatShape(to)
                         << ": input dimensions, aligned with the trailing "
                            "result dimensions, must equal them or be 1";
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // broadcast(broadcast(x)) -> broadcast(x): broadcasting composes.
  if (auto producer = getInput().getDefiningOp<BroadcastOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return opimpl::foldElementwise(
      adaptor.getInput(), getType(),
      [](ArrayRef<opimpl::Scalar> args) -> std::optional<opimpl::Scalar> {
        return args[0];
      });
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto input = getRankedType<GatherOp>(loc, adaptor.getInput(), "input");
  auto indices = getRankedType<GatherOp>(loc, adaptor.getIndices(), "indices");
  if (failed(input) || failed(indices))
    return failure();
  int64_t axis = adaptor.getAxisAttr().getInt();
  if (!isValidAxis(axis, input->getRank()))
    return emitInferError<GatherOp>(loc, "axis ", axis,
                                    " is out of range for an input of rank ",
                                    input->getRank());
  SmallVector<int64_t> shape(input->getShape().take_front(axis));
  llvm::append_range(shape, indices->getShape());
  llvm::append_range(shape, input->getShape().drop_front(axis + 1));
  results.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult GatherOp::verify() {
  std::optional<int64_t> padding = getPaddingIdx();
  if (!padding)
    return success();
  int64_t size = getInput().getType().getDimSize(getAxis());
  if (*padding < -size || *padding >= size)
    return emitOpError() << "padding_idx " << *padding << " is outside [-"
                         << size << ", " << size << ")";
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto indices = dyn_cast_or_null<DenseElementsAttr>(adaptor.getIndices());
  if (!indices || indices.getNumElements() > opimpl::kMaxFoldedElements)
    return {};
  int64_t axis = getAxis();
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  ArrayRef<int64_t> indicesShape = getIndices().getType().getShape();
  ArrayRef<int64_t> resultShape = getType().getShape();
  SmallVector<int64_t> rows;
  for (const APInt &value : indices.getValues<APInt>()) {
    int64_t row = value.getSExtValue();
    if (row < 0)
      row += inputShape[axis];
    // Out-of-range indices are a runtime error, not something to fold.
    if (row < 0 || row >= inputShape[axis])
      return {};
    rows.push_back(row);
  }
  int64_t indicesRank = indicesShape.size();
  return foldRearrange(
      adaptor.getInput(), getType(),
      [&](int64_t linear) -> std::pair<unsigned, int64_t> {
        // Result index = outer dims, indices dims, inner dims.
        SmallVector<int64_t> index = delinearize(linear, resultShape);
        ArrayRef<int64_t> all(index);
        SmallVector<int64_t> source(all.take_front(axis));
        source.push_back(
            rows[linearize(all.slice(axis, indicesRank), indicesShape)]);
        llvm::append_range(source, all.drop_front(axis + indicesRank));
        return {0, linearize(source, inputShape)};
      });
}

//===----------------------------------------------------------------------===//
// ScatterAddOp
//===----------------------------------------------------------------------===//

LogicalResult ScatterAddOp::verify() {
  auto updates = cast<RankedTensorType>(getUpdates().getType());
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (updates.getElementType() != result.getElementType())
    return emitOpError() << "updates " << updates << " and result " << result
                         << " differ in element type";
  if (result.getRank() < 1)
    return emitOpError("result must have rank >= 1");
  SmallVector<int64_t> expected(indices.getShape());
  llvm::append_range(expected, result.getShape().drop_front());
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "updates " << updates << " should have shape "
                         << opimpl::formatShape(expected) << " for indices "
                         << indices << " and result " << result;
  return success();
}
