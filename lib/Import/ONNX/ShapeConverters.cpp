//===- ShapeConverters.cpp - Shape, layout and constant ONNX ops ----------===//
//
// Shape-computing subgraphs (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, as PyTorch exports views) fold while importing: Shape yields a
// constant, the loom ops in between fold on constants, and Reshape, Expand,
// Unsqueeze, ... read their shape operands as compile-time constants.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "Tensors.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Traits.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

static LogicalResult convertIdentity(NodeContext &ctx) {
  ctx.setOutput(0, ctx.getInput(0));
  return success();
}

/// Shape-15 adds `start` / `end`, clamped like Python slicing bounds.
static LogicalResult convertShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.getInputType(0).getShape();
  int64_t rank = shape.size();
  auto clamp = [&](int64_t bound) {
    if (bound < 0)
      bound += rank;
    return std::clamp<int64_t>(bound, 0, rank);
  };
  int64_t start = clamp(ctx.getInt("start", 0));
  int64_t end = clamp(ctx.getInt("end", rank));
  SmallVector<int64_t> dims;
  if (start < end)
    dims.assign(shape.begin() + start, shape.begin() + end);
  auto type = RankedTensorType::get({static_cast<int64_t>(dims.size())},
                                    ctx.getBuilder().getI64Type());
  ctx.setOutput(0, ctx.createConstant(
                       DenseElementsAttr::get(type, ArrayRef<int64_t>(dims))));
  return success();
}

static LogicalResult convertReshape(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> target =
      ctx.getConstantInts(1, "the target shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> inputShape = ctx.getInputType(0).getShape();
  bool allowZero = ctx.getInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [index, dim] : llvm::enumerate(*target)) {
    if (dim == 0 && !allowZero) {
      if (index >= inputShape.size())
        return ctx.emitError()
               << "target shape copies dimension " << index
               << " (0), but the input has rank " << inputShape.size();
      dim = inputShape[index];
    } else if (dim == -1) {
      if (inferred)
        return ctx.emitError() << "target shape has more than one -1";
      inferred = index;
      shape.push_back(1);
      continue;
    } else if (dim < 0) {
      return ctx.emitError() << "target shape has invalid dimension " << dim;
    }
    shape.push_back(dim);
    known *= dim;
  }
  int64_t elements = ctx.getInputType(0).getNumElements();
  if (inferred) {
    if (known == 0 || elements % known != 0)
      return ctx.emitError()
             << "cannot infer the -1 dimension: " << elements
             << " elements do not divide into parts of " << known;
    shape[*inferred] = elements / known;
  } else if (known != elements) {
    return ctx.emitError() << "cannot reshape " << ctx.getInputType(0) << " ("
                           << elements << " elements) to " << known
                           << " elements";
  }
  return ctx.setResult(ctx.reshape(ctx.getInput(0), shape));
}

static LogicalResult convertTranspose(NodeContext &ctx) {
  int64_t rank = ctx.getInputType(0).getRank();
  SmallVector<int64_t> permutation;
  if (std::optional<SmallVector<int64_t>> perm = ctx.getInts("perm"))
    permutation = *perm;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      permutation.push_back(i);
  return ctx.setResult(ctx.create<TransposeOp>(
      ctx.getInput(0),
      {ctx.namedAttr("permutation",
                     ctx.getBuilder().getDenseI64ArrayAttr(permutation))}));
}

static LogicalResult convertSlice(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> starts = ctx.getConstantInts(1, "starts");
  FailureOr<SmallVector<int64_t>> ends = ctx.getConstantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (ctx.hasInput(3)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstantInts(3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (ctx.hasInput(4)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstantInts(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return ctx.emitError() << "starts, ends, axes and steps differ in length";

  SmallVector<int64_t> lo(rank, 0), hi(type.getShape()), stride(rank, 1);
  SmallVector<int64_t> reversed;
  llvm::SmallBitVector seen(rank);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> axis = ctx.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen.test(*axis))
      return ctx.emitError() << "axis " << axes[i] << " is sliced twice";
    seen.set(*axis);
    if (steps[i] == 0)
      return ctx.emitError() << "step 0 on axis " << axes[i];
    int64_t size = type.getDimSize(*axis);
    if (steps[i] < 0) {
      // Walks the axis backwards: the same elements as a positive-step
      // slice of the axis reversed, from size-1-start to size-1-end, with
      // ONNX's bounds for negative steps (start in [0, size-1], end in
      // [-1, size-1]).
      auto clamp = [&](int64_t bound, int64_t low) {
        if (bound < 0)
          bound += size;
        return std::clamp<int64_t>(bound, low, size - 1);
      };
      int64_t start = clamp((*starts)[i], 0), end = clamp((*ends)[i], -1);
      reversed.push_back(*axis);
      lo[*axis] = size - 1 - start;
      hi[*axis] = std::max(size - 1 - end, lo[*axis]);
      stride[*axis] = -steps[i];
      if (size == 0)
        lo[*axis] = hi[*axis] = 0;
      continue;
    }
    // Python-style bounds: negative counts from the end, then clamp.
    auto clamp = [&](int64_t bound) {
      if (bound < 0)
        bound = bound < -size ? 0 : bound + size;
      return std::min(bound, size);
    };
    lo[*axis] = clamp((*starts)[i]);
    hi[*axis] = std::max(clamp((*ends)[i]), lo[*axis]);
    stride[*axis] = steps[i];
  }
  Builder &b = ctx.getBuilder();
  Value input = ctx.getInput(0);
  for (int64_t axis : reversed) {
    // Reversed by a gather of the positions size-1, ..., 0.
    int64_t size = type.getDimSize(axis);
    SmallVector<int64_t> backwards(size);
    for (int64_t k = 0; k < size; ++k)
      backwards[k] = size - 1 - k;
    auto indexType = RankedTensorType::get({size}, b.getI64Type());
    FailureOr<Value> flipped = ctx.create<GatherOp>(
        {input, ctx.createConstant(DenseElementsAttr::get(
                    indexType, ArrayRef<int64_t>(backwards)))},
        {ctx.namedAttr("axis", b.getI64IntegerAttr(axis))});
    if (failed(flipped))
      return failure();
    input = *flipped;
  }
  return ctx.setResult(ctx.create<SliceOp>(
      input, {ctx.namedAttr("starts", b.getDenseI64ArrayAttr(lo)),
              ctx.namedAttr("limits", b.getDenseI64ArrayAttr(hi)),
              ctx.namedAttr("strides", b.getDenseI64ArrayAttr(stride))}));
}

static LogicalResult convertGather(NodeContext &ctx) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), ctx.getInputType(0).getRank());
  if (failed(axis))
    return failure();
  return ctx.setResult(ctx.create<GatherOp>(
      {ctx.getInput(0), ctx.getInput(1)},
      {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(*axis))}));
}

static LogicalResult convertConcat(NodeContext &ctx) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), ctx.getInputType(0).getRank());
  if (failed(axis))
    return failure();
  SmallVector<Value> inputs;
  for (int i = 0, e = ctx.getNode().input_size(); i < e; ++i)
    if (ctx.hasInput(i))
      inputs.push_back(ctx.getInput(i));
  return ctx.setResult(ctx.create<ConcatOp>(
      inputs,
      {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(*axis))}));
}

static LogicalResult convertSplit(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t size = type.getDimSize(*axis);
  unsigned pieces = ctx.getNumOutputs();
  SmallVector<int64_t> sizes;
  std::optional<SmallVector<int64_t>> attribute = ctx.getInts("split");
  if (ctx.hasInput(1) || attribute) {
    // An attribute before Split-13.
    FailureOr<SmallVector<int64_t>> split =
        ctx.hasInput(1) ? ctx.getConstantInts(1, "split")
                        : FailureOr<SmallVector<int64_t>>(*attribute);
    if (failed(split))
      return failure();
    sizes = *split;
    if (sizes.size() != pieces)
      return ctx.emitError() << "split gives " << sizes.size() << " sizes for "
                             << pieces << " outputs";
  } else if (size % pieces == 0) {
    sizes.assign(pieces, size / pieces);
  } else if (ctx.getOpset() >= 18) {
    // Split-18 (`num_outputs`): parts of ceil(size / pieces), the last one
    // smaller.
    int64_t part = (size + pieces - 1) / pieces;
    int64_t last = size - part * (pieces - 1);
    if (last <= 0)
      return ctx.emitError()
             << "cannot split dimension " << *axis << " of size " << size
             << " into " << pieces << " parts of " << part;
    sizes.assign(pieces - 1, part);
    sizes.push_back(last);
  } else {
    return ctx.emitError() << "cannot split dimension " << *axis << " of size "
                           << size << " into " << pieces << " equal parts";
  }
  SmallVector<Type> types;
  for (int64_t piece : sizes) {
    if (piece < 0)
      return ctx.emitError() << "split size " << piece << " is negative";
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = piece;
    types.push_back(type.clone(shape));
  }
  FailureOr<SmallVector<Value>> results = ctx.createOp(
      SplitOp::getOperationName(), ctx.getInput(0),
      {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(*axis))}, types,
      pieces);
  if (failed(results))
    return failure();
  for (auto [index, value] : llvm::enumerate(*results))
    ctx.setOutput(index, value);
  return success();
}

/// SplitToSequence whose sequence is only read by SequenceAt at constant
/// positions, fused by the importer (OpsetAdapter.cpp) into one node whose
/// outputs are those pieces (`loom.positions`): `split` a scalar (pieces of
/// that size, the last smaller), sizes, or absent (pieces of 1, squeezed
/// unless keepdims).
static LogicalResult convertSplitToSequence(NodeContext &ctx) {
  std::optional<SmallVector<int64_t>> positions = ctx.getInts("loom.positions");
  if (!positions)
    return ctx.emitError() << "its sequence is read other than by SequenceAt "
                              "at constant positions; Loom has no sequences";
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t size = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (ctx.hasInput(1)) {
    FailureOr<DenseElementsAttr> split = ctx.getConstantInput(1, "split");
    if (failed(split))
      return failure();
    SmallVector<int64_t> values;
    for (const APInt &value : split->getValues<APInt>())
      values.push_back(value.getSExtValue());
    if (split->getType().getRank() == 0) {
      if (values[0] <= 0)
        return ctx.emitError()
               << "split size " << values[0] << " is not positive";
      for (int64_t at = 0; at < size; at += values[0])
        sizes.push_back(std::min(values[0], size - at));
    } else {
      sizes = values;
      int64_t total = 0;
      for (int64_t piece : sizes)
        total += piece;
      if (total != size || llvm::any_of(sizes, [](int64_t p) { return p < 0; }))
        return ctx.emitError() << "split sizes do not add up to dimension "
                               << *axis << " (" << size << ")";
    }
  } else {
    sizes.assign(size, 1);
    squeeze = ctx.getInt("keepdims", 1) == 0;
  }
  SmallVector<int64_t> offsets = {0};
  for (int64_t piece : sizes)
    offsets.push_back(offsets.back() + piece);
  Builder &b = ctx.getBuilder();
  int64_t count = sizes.size();
  for (auto [index, position] : llvm::enumerate(*positions)) {
    if (position < -count || position >= count)
      return ctx.emitError() << "SequenceAt reads position " << position
                             << " of a sequence of " << count;
    int64_t at = position < 0 ? position + count : position;
    SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape());
    SmallVector<int64_t> strides(type.getRank(), 1);
    starts[*axis] = offsets[at];
    limits[*axis] = offsets[at + 1];
    FailureOr<Value> piece = ctx.create<SliceOp>(
        ctx.getInput(0),
        {ctx.namedAttr("starts", b.getDenseI64ArrayAttr(starts)),
         ctx.namedAttr("limits", b.getDenseI64ArrayAttr(limits)),
         ctx.namedAttr("strides", b.getDenseI64ArrayAttr(strides))});
    if (failed(piece))
      return failure();
    if (squeeze) {
      SmallVector<int64_t> shape(type.getShape());
      shape.erase(shape.begin() + *axis);
      piece = ctx.reshape(*piece, shape);
      if (failed(piece))
        return failure();
    }
    ctx.setOutput(index, *piece);
  }
  return success();
}

static LogicalResult convertUnsqueeze(NodeContext &ctx) {
  // An attribute before Unsqueeze-13.
  std::optional<SmallVector<int64_t>> attribute = ctx.getInts("axes");
  FailureOr<SmallVector<int64_t>> axes =
      attribute && !ctx.hasInput(1)
          ? FailureOr<SmallVector<int64_t>>(*attribute)
          : ctx.getConstantInts(1, "axes");
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> inputShape = ctx.getInputType(0).getShape();
  int64_t rank = inputShape.size() + axes->size();
  FailureOr<SmallVector<int64_t>> normalized = ctx.normalizeAxes(*axes, rank);
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> shape;
  const int64_t *next = inputShape.begin();
  for (int64_t dim = 0; dim < rank; ++dim)
    shape.push_back(llvm::is_contained(*normalized, dim) ? 1 : *next++);
  return ctx.setResult(ctx.reshape(ctx.getInput(0), shape));
}

static LogicalResult convertSqueeze(NodeContext &ctx) {
  ArrayRef<int64_t> inputShape = ctx.getInputType(0).getShape();
  int64_t rank = inputShape.size();
  SmallVector<int64_t> axes;
  std::optional<SmallVector<int64_t>> attribute = ctx.getInts("axes");
  if (ctx.hasInput(1) || attribute) {
    // An attribute before Squeeze-13.
    FailureOr<SmallVector<int64_t>> given =
        ctx.hasInput(1) ? ctx.getConstantInts(1, "axes")
                        : FailureOr<SmallVector<int64_t>>(*attribute);
    if (failed(given))
      return failure();
    FailureOr<SmallVector<int64_t>> normalized =
        ctx.normalizeAxes(*given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
    for (int64_t axis : axes)
      if (inputShape[axis] != 1)
        return ctx.emitError() << "cannot squeeze dimension " << axis
                               << " of size " << inputShape[axis];
  } else {
    for (int64_t dim = 0; dim < rank; ++dim)
      if (inputShape[dim] == 1)
        axes.push_back(dim);
  }
  SmallVector<int64_t> shape;
  for (int64_t dim = 0; dim < rank; ++dim)
    if (!llvm::is_contained(axes, dim))
      shape.push_back(inputShape[dim]);
  return ctx.setResult(ctx.reshape(ctx.getInput(0), shape));
}

static LogicalResult convertExpand(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> target = ctx.getConstantInts(1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType type = ctx.getInputType(0);
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(type.getShape(), *target, shape) ||
      llvm::any_of(shape, [](int64_t dim) { return dim < 0; }))
    return ctx.emitError() << "cannot expand " << type << " to shape ["
                           << llvm::make_range(target->begin(), target->end())
                           << "]";
  if (shape == type.getShape()) {
    ctx.setOutput(0, ctx.getInput(0));
    return success();
  }
  return ctx.setResult(
      ctx.create<BroadcastOp>(ctx.getInput(0), {}, type.clone(shape)));
}

static LogicalResult convertFlatten(NodeContext &ctx) {
  FailureOr<std::pair<int64_t, int64_t>> sizes =
      flattenedAt(ctx, ctx.getInt("axis", 1), /*allowRank=*/true);
  if (failed(sizes))
    return failure();
  return ctx.setResult(
      ctx.reshape(ctx.getInput(0), {sizes->first, sizes->second}));
}

/// Tile: x of shape [d0, d1, ...] as [1, d0, 1, d1, ...] broadcast to
/// [r0, d0, r1, d1, ...] and reshaped to [r0 d0, r1 d1, ...] (the repeat
/// is the major part of each result dimension).
static LogicalResult convertTile(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> repeats = ctx.getConstantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> shape = ctx.getInputType(0).getShape();
  if (repeats->size() != shape.size())
    return ctx.emitError() << "repeats has " << repeats->size()
                           << " values for an input of rank " << shape.size();
  SmallVector<int64_t> spread, broadcast, result;
  for (auto [dim, repeat] : llvm::zip(shape, *repeats)) {
    if (repeat < 0)
      return ctx.emitError() << "repeat " << repeat << " is negative";
    spread.append({1, dim});
    broadcast.append({repeat, dim});
    result.push_back(repeat * dim);
  }
  if (result == shape) {
    ctx.setOutput(0, ctx.getInput(0));
    return success();
  }
  OpChain ops(ctx);
  Value tiled = ops.reshape(
      ops.broadcast(ops.reshape(ctx.getInput(0), spread), broadcast), result);
  return ops.setOutput(0, tiled);
}

/// Range(start, limit, delta) with constant scalars: a constant of
/// max(ceil((limit - start) / delta), 0) elements start + i delta (Loom
/// compiles static shapes, so the operands must be known).
static LogicalResult convertRange(NodeContext &ctx) {
  SmallVector<double> bounds;
  Type element;
  for (unsigned index = 0; index < 3; ++index) {
    static const char *const kNames[] = {"start", "limit", "delta"};
    FailureOr<DenseElementsAttr> value =
        ctx.getConstantInput(index, kNames[index]);
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1)
      return ctx.emitError() << kNames[index] << " must be a scalar";
    element = value->getElementType();
    bounds.push_back(
        isa<FloatType>(element)
            ? (*value->getValues<APFloat>().begin()).convertToDouble()
            : double((*value->getValues<APInt>().begin()).getSExtValue()));
  }
  double start = bounds[0], limit = bounds[1], delta = bounds[2];
  if (delta == 0)
    return ctx.emitError() << "delta is 0";
  double length = std::ceil((limit - start) / delta);
  // The result is a constant: a length nothing could hold is an error, not
  // an allocation.
  if (!(length < double(int64_t(1) << 28)))
    return ctx.emitError() << "Range of " << length
                           << " elements is too long for a constant";
  int64_t count = std::max<int64_t>(int64_t(length), 0);
  auto type = RankedTensorType::get({count}, element);
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> values;
    for (int64_t i = 0; i < count; ++i) {
      APFloat value(start + double(i) * delta);
      bool lossy;
      value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &lossy);
      values.push_back(value);
    }
    return ctx.setResult(
        ctx.createConstant(DenseElementsAttr::get(type, values)));
  }
  SmallVector<APInt> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(APInt(element.getIntOrFloatBitWidth(),
                           int64_t(start) + i * int64_t(delta),
                           /*isSigned=*/true));
  return ctx.setResult(
      ctx.createConstant(DenseElementsAttr::get(type, values)));
}

/// Trilu: x where column - row >= k (upper) or <= k (lower) in the last two
/// dimensions, zero elsewhere: a select with a constant mask, which folds
/// when x is a constant too.
static LogicalResult convertTrilu(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  if (type.getRank() < 2)
    return ctx.emitError() << "input has rank " << type.getRank()
                           << "; Trilu needs at least 2";
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstantInts(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return ctx.emitError() << "k must be a scalar";
    k = given->front();
  }
  bool upper = ctx.getInt("upper", 1) != 0;
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t cols = type.getDimSize(type.getRank() - 1);
  if (rows * cols > (int64_t(1) << 28))
    return ctx.emitError() << "a " << rows << " x " << cols
                           << " mask is too large for a constant";
  SmallVector<bool> keep;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < cols; ++col)
      keep.push_back(upper ? col - row >= k : col - row <= k);
  Builder &b = ctx.getBuilder();
  Value mask = ctx.createConstant(DenseElementsAttr::get(
      RankedTensorType::get({rows, cols}, b.getI1Type()), keep));
  return ctx.setResult(ctx.create<SelectOp>(
      {mask, ctx.getInput(0), ctx.createScalar(type.getElementType(), 0)}));
}

/// Integer constants stay dense literals so that shape subgraphs fold.
static FailureOr<Value> createTensorConstant(NodeContext &ctx,
                                             const onnx::TensorProto &proto) {
  onnx::TensorProto tensor = proto;
  if (tensor.name().empty())
    tensor.set_name(ctx.getNode().output(0));
  FailureOr<RankedTensorType> type =
      ctx.getTensors().getType(tensor, ctx.getLoc());
  if (failed(type))
    return failure();
  bool dense = !isa<FloatType>(type->getElementType());
  FailureOr<Attribute> value = ctx.getTensors().load(
      tensor, *type, ctx.getLoc(), /*mayReference=*/false, dense);
  if (failed(value))
    return failure();
  return ctx.createConstant(cast<ElementsAttr>(*value));
}

static LogicalResult convertConstant(NodeContext &ctx) {
  Builder &b = ctx.getBuilder();
  const onnx::AttributeProto *attr = nullptr;
  for (const onnx::AttributeProto &candidate : ctx.getNode().attribute())
    attr = &candidate;
  if (!attr || ctx.getNode().attribute_size() != 1)
    return ctx.emitError() << "needs exactly one value attribute";
  StringRef name = attr->name();
  if (name == "value")
    return ctx.setResult(createTensorConstant(ctx, attr->t()));
  if (name == "value_float")
    return ctx.setResult(ctx.createScalar(b.getF32Type(), attr->f()));
  if (name == "value_int")
    return ctx.setResult(ctx.createScalar(b.getI64Type(), attr->i()));
  if (name == "value_floats") {
    SmallVector<float> values(attr->floats().begin(), attr->floats().end());
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getF32Type());
    return ctx.setResult(ctx.createConstant(
        DenseElementsAttr::get(type, ArrayRef<float>(values))));
  }
  if (name == "value_ints") {
    SmallVector<int64_t> values(attr->ints().begin(), attr->ints().end());
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getI64Type());
    return ctx.setResult(ctx.createConstant(
        DenseElementsAttr::get(type, ArrayRef<int64_t>(values))));
  }
  return ctx.emitError() << "constant attribute '" << name
                         << "' is not supported (Loom has no sparse or "
                            "string tensors)";
}

static LogicalResult convertConstantOfShape(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> shape = ctx.getConstantInts(0, "shape");
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t dim) { return dim < 0; }))
    return ctx.emitError() << "shape has a negative dimension";
  DenseElementsAttr element;
  if (const onnx::AttributeProto *attr = ctx.findAttr("value")) {
    FailureOr<Value> value = createTensorConstant(ctx, attr->t());
    if (failed(value))
      return failure();
    auto cst = value->getDefiningOp<ConstantOp>();
    element = dyn_cast<DenseElementsAttr>(cst.getValue());
    cst.erase();
    if (!element || element.getNumElements() != 1)
      return ctx.emitError() << "value must hold exactly one element";
  } else {
    element = DenseElementsAttr::get(
        RankedTensorType::get({1}, ctx.getBuilder().getF32Type()), 0.0f);
  }
  auto type = RankedTensorType::get(*shape, element.getElementType());
  return ctx.setResult(ctx.createConstant(
      DenseElementsAttr::get(type, element.getSplatValue<Attribute>())));
}

void onnx_import::registerShapeConverters(ConverterRegistry &registry) {
  registry.add("Identity", {1, 13, 14, 16}, convertIdentity);
  registry.add("Shape", {1, 13, 15}, convertShape);
  registry.add("Reshape", {5, 13, 14}, convertReshape);
  registry.add("Transpose", {1, 13}, convertTranspose);
  registry.add("Slice", {11, 13}, convertSlice);
  registry.add("Gather", {11, 13}, convertGather);
  registry.add("Concat", {11, 13}, convertConcat);
  registry.add("Split", {11, 13, 18}, convertSplit);
  registry.add("SplitToSequence", {11}, convertSplitToSequence);
  registry.add("Unsqueeze", {11, 13}, convertUnsqueeze);
  registry.add("Squeeze", {11, 13}, convertSqueeze);
  registry.add("Expand", {8, 13}, convertExpand);
  registry.add("Flatten", {11, 13}, convertFlatten);
  registry.add("Constant", {11, 12, 13}, convertConstant);
  registry.add("ConstantOfShape", {9}, convertConstantOfShape);
  registry.add("Tile", {6, 13}, convertTile);
  registry.add("Range", {11}, convertRange);
  registry.add("Trilu", {14}, convertTrilu);
}
