//===- IndexingConverters.cpp - Index-driven ONNX ops ---------------------===//
//
// CumSum, GatherElements, ScatterElements, ArgMax and ArgMin. The element
// gathers and scatters address the flattened data: each index becomes a
// flat position (the index times the axis' stride plus the position's
// offset along the other axes, a constant), so `loom.gather` and
// `loom.scatter_add` on the flat tensor do the work and their gradient
// rules give the gradient. ArgMax and ArgMin are a max reduction, a
// comparison and a min reduction over an iota.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

#include <numeric>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

/// CumSum(x, axis): `axis` a constant scalar; `exclusive` and `reverse` as
/// loom.cumsum's.
static LogicalResult convertCumSum(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> axes = ctx.getConstantInts(1, "axis");
  if (failed(axes))
    return failure();
  if (axes->size() != 1)
    return ctx.emitError() << "axis must hold one value, got " << axes->size();
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(axes->front(), ctx.getInputType(0).getRank());
  if (failed(axis))
    return failure();
  Builder &b = ctx.getBuilder();
  SmallVector<NamedAttribute> attrs = {
      ctx.namedAttr("axis", b.getI64IntegerAttr(*axis))};
  if (ctx.getInt("exclusive", 0))
    attrs.push_back(ctx.namedAttr("exclusive", b.getUnitAttr()));
  if (ctx.getInt("reverse", 0))
    attrs.push_back(ctx.namedAttr("reverse", b.getUnitAttr()));
  Value input = ctx.getInput(0);
  return ctx.setResult(ctx.create<CumsumOp>(input, attrs, input.getType()));
}

namespace {
/// Element positions of GatherElements and ScatterElements: for indices of
/// shape `indexShape` into data of shape `dataShape` along `axis`, the flat
/// position of each index in the data.
struct FlatPositions {
  Value positions;  // i64, indexShape
  int64_t elements; // of the data
};
} // namespace

/// The flat data positions `indices` (input #1) address along `axis`.
/// Constant indices are checked here, each naming its position; others map
/// out-of-range indices to `elements`, which the gather or scatter on the
/// flat data reports at run time.
static FailureOr<FlatPositions> flatPositions(NodeContext &ctx, OpChain &ops,
                                              int64_t axis) {
  RankedTensorType dataType = ctx.getInputType(0);
  RankedTensorType indexType = ctx.getInputType(1);
  ArrayRef<int64_t> data = dataType.getShape(), index = indexType.getShape();
  if (index.size() != data.size())
    return ctx.emitError() << "indices have rank " << index.size()
                           << " but the data has rank " << data.size();
  for (int64_t dim = 0; dim < int64_t(data.size()); ++dim)
    if (dim != axis && index[dim] > data[dim])
      return ctx.emitError()
             << "indices dimension " << dim << " (" << index[dim]
             << ") is larger than the data's (" << data[dim] << ")";
  int64_t rank = data.size(), size = data[axis];
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t dim = rank - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * data[dim + 1];
  // Each index position's offset along the other axes.
  SmallVector<int64_t> offsets(product(index));
  for (int64_t flat = 0; flat < int64_t(offsets.size()); ++flat) {
    int64_t rest = flat, offset = 0;
    for (int64_t dim = rank - 1; dim >= 0; --dim) {
      int64_t coordinate = rest % index[dim];
      rest /= index[dim];
      if (dim != axis)
        offset += coordinate * strides[dim];
    }
    offsets[flat] = offset;
  }
  int64_t elements = product(data);
  Type i64 = ctx.getBuilder().getI64Type();
  Value indices = ops.cast(ctx.getInput(1), i64);
  DenseElementsAttr constant;
  if (indices && matchPattern(indices, m_Constant(&constant))) {
    SmallVector<int64_t> positions;
    for (auto [flat, value] : llvm::enumerate(constant.getValues<int64_t>())) {
      if (value < -size || value >= size)
        return ctx.emitError() << "index " << value << " at position " << flat
                               << " is outside [-" << size << ", " << size
                               << ") along axis " << axis;
      positions.push_back((value < 0 ? value + size : value) * strides[axis] +
                          offsets[flat]);
    }
    return FlatPositions{ops.indices(index, positions), elements};
  }
  Value zero = ops.scalar(i64, 0), extent = ops.scalar(i64, size);
  Value wrapped = ops.select(ops.compare(CompareDirection::lt, indices, zero),
                             ops.make<AddOp>({indices, extent}), indices);
  Value inRange =
      ops.make<MinimumOp>({ops.compare(CompareDirection::ge, wrapped, zero),
                           ops.compare(CompareDirection::lt, wrapped, extent)});
  Value positions = ops.make<AddOp>(
      {ops.make<MulOp>({wrapped, ops.scalar(i64, strides[axis])}),
       ops.indices(index, offsets)});
  positions = ops.select(inRange, positions, ops.scalar(i64, double(elements)));
  if (ops.hasFailed())
    return failure();
  return FlatPositions{positions, elements};
}

/// flatPositions along the node's `axis` attribute.
static FailureOr<FlatPositions> flatPositionsAtAxis(NodeContext &ctx,
                                                    OpChain &ops) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), ctx.getInputType(0).getRank());
  if (failed(axis))
    return failure();
  return flatPositions(ctx, ops, *axis);
}

/// GatherElements: a gather from the flattened data.
static LogicalResult convertGatherElements(NodeContext &ctx) {
  OpChain ops(ctx);
  FailureOr<FlatPositions> flat = flatPositionsAtAxis(ctx, ops);
  if (failed(flat))
    return failure();
  Value table = ops.reshape(ctx.getInput(0), {flat->elements});
  return ops.setOutput(0, ops.make<GatherOp>({table, flat->positions}));
}

/// ScatterElements: the updates summed into the flattened data's positions
/// (`loom.scatter_add`). `reduction=add` adds that to the data; `none`
/// replaces the addressed elements (ONNX leaves duplicate indices undefined;
/// here they add up).
static LogicalResult convertScatterElements(NodeContext &ctx) {
  RankedTensorType dataType = ctx.getInputType(0);
  std::string reduction = ctx.getString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return ctx.emitError() << "attribute 'reduction' is '" << reduction
                           << "'; Loom supports 'none' and 'add'";
  Type element = dataType.getElementType();
  if (!isa<FloatType>(element))
    return ctx.emitError() << "ScatterElements on " << element
                           << " data is not supported (float data only)";
  if (ctx.getInputType(2).getShape() != ctx.getInputType(1).getShape())
    return ctx.emitError() << "updates " << ctx.getInputType(2)
                           << " and indices " << ctx.getInputType(1)
                           << " differ in shape";
  OpChain ops(ctx);
  FailureOr<FlatPositions> flat = flatPositionsAtAxis(ctx, ops);
  if (failed(flat))
    return failure();
  int64_t count = product(ctx.getInputType(1).getShape());
  Value positions = ops.reshape(flat->positions, {count});
  auto flatType = RankedTensorType::get({flat->elements}, element);
  auto scatter = [&](Value updates) {
    return ops.reshape(
        ops.make<ScatterAddOp>({ops.reshape(updates, {count}), positions}, {},
                               flatType),
        dataType.getShape());
  };
  Value data = ctx.getInput(0);
  Value sums = scatter(ctx.getInput(2));
  if (reduction == "add")
    return ops.setOutput(0, ops.make<AddOp>({data, sums}));
  Value ones = ops.broadcast(ops.scalar(element, 1), {count});
  Value hit =
      ops.compare(CompareDirection::gt, scatter(ones), ops.scalar(element, 0));
  return ops.setOutput(0, ops.select(hit, sums, data));
}

/// GatherND: each index vector (the last dimension of `indices`) picks a
/// slice of the data below its `batch_dims` leading dimensions; as a
/// gather of rows of the data flattened to [batches x indexed, rest]: the
/// row is the batch's offset plus the index vector times the indexed
/// dimensions' strides (out-of-range vectors map past the end, which the
/// gather reports).
static LogicalResult convertGatherND(NodeContext &ctx) {
  RankedTensorType dataType = ctx.getInputType(0);
  RankedTensorType indexType = ctx.getInputType(1);
  ArrayRef<int64_t> data = dataType.getShape(), index = indexType.getShape();
  int64_t batchDims = ctx.getInt("batch_dims", 0);
  if (index.empty())
    return ctx.emitError() << "indices must have rank 1 or more";
  int64_t depth = index.back();
  if (batchDims < 0 || batchDims + depth > int64_t(data.size()) ||
      batchDims >= int64_t(index.size()))
    return ctx.emitError() << "batch_dims " << batchDims << " and index depth "
                           << depth << " do not fit data " << dataType
                           << " and indices " << indexType;
  for (int64_t dim = 0; dim < batchDims; ++dim)
    if (index[dim] != data[dim])
      return ctx.emitError()
             << "batch dimension " << dim << " differs: " << index[dim]
             << " vs " << data[dim];
  ArrayRef<int64_t> batch = data.take_front(batchDims);
  ArrayRef<int64_t> indexed = data.slice(batchDims, depth);
  ArrayRef<int64_t> rest = data.drop_front(batchDims + depth);
  int64_t batches = product(batch), cells = product(indexed);
  int64_t rows = batches * cells, width = product(rest);
  SmallVector<int64_t> strides(depth, 1);
  for (int64_t j = depth - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * indexed[j + 1];
  OpChain ops(ctx);
  Type i64 = ctx.getBuilder().getI64Type();
  Value indices = ops.cast(ctx.getInput(1), i64);
  Value sizes = ops.indices({depth}, indexed);
  Value zero = ops.scalar(i64, 0);
  Value wrapped = ops.select(ops.compare(CompareDirection::lt, indices, zero),
                             ops.make<AddOp>({indices, sizes}), indices);
  Value inRange =
      ops.make<MinimumOp>({ops.compare(CompareDirection::ge, wrapped, zero),
                           ops.compare(CompareDirection::lt, wrapped, sizes)});
  int64_t last = index.size() - 1;
  // A vector is valid when all `depth` of its indices are in range.
  Value valid =
      ops.compare(CompareDirection::eq,
                  ops.reduce<ReduceSumOp>(ops.cast(inRange, i64), {last},
                                          /*keepdims=*/false),
                  ops.scalar(i64, double(depth)));
  Value within = ops.reduce<ReduceSumOp>(
      ops.make<MulOp>({wrapped, ops.indices({depth}, strides)}), {last},
      /*keepdims=*/false);
  SmallVector<int64_t> vectors(index.drop_back());
  if (batchDims > 0) {
    // Each batch's first row: a constant over [batch, 1, ...].
    SmallVector<int64_t> offsetShape(batch);
    offsetShape.append(vectors.size() - batchDims, 1);
    SmallVector<int64_t> offsets(batches);
    for (int64_t k = 0; k < batches; ++k)
      offsets[k] = k * cells;
    within = ops.make<AddOp>({within, ops.indices(offsetShape, offsets)});
  }
  Value positions = ops.select(valid, within, ops.scalar(i64, double(rows)));
  Value table = ops.reshape(ctx.getInput(0), {rows, width});
  Value picked = ops.make<GatherOp>({table, positions});
  SmallVector<int64_t> shape(vectors);
  shape.append(rest.begin(), rest.end());
  return ops.setOutput(0, ops.reshape(picked, shape));
}

/// ArgMax and ArgMin: the first (or, with select_last_index, the last)
/// position along `axis` that holds the extreme value; NaN counts as the
/// extreme, as in torch.argmax. ArgMin maximizes -x (floats) or -1 - x
/// (integers, where it cannot overflow).
template <bool IsMax> static LogicalResult convertArgExtreme(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  bool keepdims = ctx.getInt("keepdims", 1) != 0;
  bool last = ctx.getInt("select_last_index", 0) != 0;
  Type element = type.getElementType();
  if (element.isInteger(1))
    return ctx.emitError() << "Arg" << (IsMax ? "Max" : "Min")
                           << " of booleans is not supported";
  OpChain ops(ctx);
  Value x = ctx.getInput(0);
  if (!IsMax)
    x = isa<FloatType>(element) ? ops.make<NegOp>({x}, {}, x.getType())
                                : ops.make<SubOp>({ops.scalar(element, -1), x});
  Value extreme = ops.reduce<ReduceMaxOp>(x, {*axis}, /*keepdims=*/true);
  Value hit =
      ops.make<MaximumOp>({ops.compare(CompareDirection::eq, x, extreme),
                           ops.compare(CompareDirection::ne, x, x)});
  int64_t size = type.getDimSize(*axis);
  SmallVector<int64_t> iotaShape(type.getRank(), 1);
  iotaShape[*axis] = size;
  SmallVector<int64_t> iota(size);
  std::iota(iota.begin(), iota.end(), 0);
  Type i64 = ctx.getBuilder().getI64Type();
  Value position;
  if (last) {
    position = ops.reduce<ReduceMaxOp>(
        ops.select(hit, ops.indices(iotaShape, iota), ops.scalar(i64, -1)),
        {*axis}, keepdims);
  } else {
    // The smallest hit: the largest of the negated positions.
    for (int64_t &value : iota)
      value = -value;
    Value largest =
        ops.reduce<ReduceMaxOp>(ops.select(hit, ops.indices(iotaShape, iota),
                                           ops.scalar(i64, -double(size))),
                                {*axis}, keepdims);
    position =
        ops.make<NegOp>({largest}, {}, largest ? largest.getType() : Type());
  }
  return ops.setOutput(0, position);
}

void onnx_import::registerIndexingConverters(ConverterRegistry &registry) {
  registry.add("CumSum", {11, 14}, convertCumSum);
  registry.add("GatherElements", {11, 13}, convertGatherElements);
  registry.add("GatherND", {11, 12, 13}, convertGatherND);
  registry.add("ScatterElements", {11, 13, 16}, convertScatterElements);
  registry.add("ArgMax", {11, 12, 13}, convertArgExtreme<true>);
  registry.add("ArgMin", {11, 12, 13}, convertArgExtreme<false>);
}
