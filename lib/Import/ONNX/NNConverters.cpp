//===- NNConverters.cpp - Matmul, normalization, reductions, losses -------===//

#include "NodeContext.h"
#include "Tensors.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/Dialect/Traits.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

/// `value` broadcast to `batch` leading dimensions followed by its own two
/// trailing (matrix) dimensions.
static FailureOr<Value> broadcastBatch(NodeContext &ctx, Value value,
                                       ArrayRef<int64_t> batch) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(batch);
  shape.append(type.getShape().end() - 2, type.getShape().end());
  if (shape == type.getShape())
    return value;
  return ctx.create<BroadcastOp>(value, {}, type.clone(shape));
}

/// ONNX MatMul is numpy.matmul: rank-1 operands gain and then lose a unit
/// dimension, and batch dimensions broadcast. loom.matmul broadcasts only a
/// missing batch, so size-1 batch dimensions are broadcast explicitly.
static LogicalResult convertMatMul(NodeContext &ctx) {
  Value lhs = ctx.getInput(0), rhs = ctx.getInput(1);
  RankedTensorType lhsType = ctx.getInputType(0), rhsType = ctx.getInputType(1);
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return ctx.emitError() << "operands must have rank 1 or more";
  bool vectorLhs = lhsType.getRank() == 1, vectorRhs = rhsType.getRank() == 1;
  if (vectorLhs) {
    FailureOr<Value> matrix = ctx.reshape(lhs, {1, lhsType.getDimSize(0)});
    if (failed(matrix))
      return failure();
    lhs = *matrix;
  }
  if (vectorRhs) {
    FailureOr<Value> matrix = ctx.reshape(rhs, {rhsType.getDimSize(0), 1});
    if (failed(matrix))
      return failure();
    rhs = *matrix;
  }
  ArrayRef<int64_t> lhsShape = cast<RankedTensorType>(lhs.getType()).getShape();
  ArrayRef<int64_t> rhsShape = cast<RankedTensorType>(rhs.getType()).getShape();
  ArrayRef<int64_t> lhsBatch = lhsShape.drop_back(2);
  ArrayRef<int64_t> rhsBatch = rhsShape.drop_back(2);
  size_t common = std::min(lhsBatch.size(), rhsBatch.size());
  if (lhsBatch.take_back(common) != rhsBatch.take_back(common)) {
    SmallVector<int64_t> batch;
    if (!OpTrait::util::getBroadcastedShape(lhsBatch, rhsBatch, batch))
      return ctx.emitError() << "batch dimensions of " << lhsType << " and "
                             << rhsType << " do not broadcast";
    FailureOr<Value> newLhs = broadcastBatch(ctx, lhs, batch);
    FailureOr<Value> newRhs = broadcastBatch(ctx, rhs, batch);
    if (failed(newLhs) || failed(newRhs))
      return failure();
    lhs = *newLhs;
    rhs = *newRhs;
  }
  FailureOr<Value> product = ctx.create<MatmulOp>({lhs, rhs});
  if (failed(product))
    return failure();
  if (!vectorLhs && !vectorRhs)
    return ctx.setResult(product);
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(product->getType()).getShape());
  if (vectorRhs)
    shape.pop_back();
  if (vectorLhs)
    shape.erase(shape.end() - (vectorRhs ? 1 : 2));
  return ctx.setResult(ctx.reshape(*product, shape));
}

/// Gemm: `alpha * A' B' + beta * C`; a rank-1 C of the output's width is a
/// bias_add, which sharding understands better than a broadcast add.
static LogicalResult convertGemm(NodeContext &ctx) {
  if (ctx.getInputType(0).getRank() != 2 || ctx.getInputType(1).getRank() != 2)
    return ctx.emitError() << "A and B must be matrices";
  Builder &b = ctx.getBuilder();
  SmallVector<NamedAttribute> attrs;
  if (ctx.getInt("transA", 0))
    attrs.push_back(ctx.namedAttr("transpose_lhs", b.getUnitAttr()));
  if (ctx.getInt("transB", 0))
    attrs.push_back(ctx.namedAttr("transpose_rhs", b.getUnitAttr()));
  FailureOr<Value> result =
      ctx.create<MatmulOp>({ctx.getInput(0), ctx.getInput(1)}, attrs);
  if (failed(result))
    return failure();
  Type element = ctx.getInputType(0).getElementType();
  double alpha = ctx.getFloat("alpha", 1.0), beta = ctx.getFloat("beta", 1.0);
  if (alpha != 1.0) {
    result = ctx.create<MulOp>({*result, ctx.createScalar(element, alpha)});
    if (failed(result))
      return failure();
  }
  if (!ctx.hasInput(2) || beta == 0.0)
    return ctx.setResult(result);
  Value c = ctx.getInput(2);
  if (beta != 1.0) {
    FailureOr<Value> scaled =
        ctx.create<MulOp>({c, ctx.createScalar(element, beta)});
    if (failed(scaled))
      return failure();
    c = *scaled;
  }
  auto resultType = cast<RankedTensorType>(result->getType());
  auto cType = cast<RankedTensorType>(c.getType());
  if (cType.getRank() == 1 && cType.getDimSize(0) == resultType.getDimSize(1) &&
      cType.getElementType() == resultType.getElementType())
    return ctx.setResult(ctx.create<BiasAddOp>({*result, c}, {}, resultType));
  return ctx.setResult(ctx.create<AddOp>({*result, c}));
}

template <typename OpTy> static LogicalResult convertSoftmax(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  return ctx.setResult(ctx.create<OpTy>(
      ctx.getInput(0),
      {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(*axis))},
      type));
}

static LogicalResult convertLayerNorm(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  auto normalizedType = type.clone(type.getShape().drop_front(*axis));
  // Scale and bias broadcast to the normalized shape in ONNX; loom takes
  // them at exactly that shape.
  auto fitNormalized = [&](Value value) -> FailureOr<Value> {
    auto valueType = cast<RankedTensorType>(value.getType());
    if (valueType == normalizedType)
      return value;
    if (valueType.getNumElements() == normalizedType.getNumElements())
      return ctx.reshape(value, normalizedType.getShape());
    return ctx.create<BroadcastOp>(value, {}, normalizedType);
  };
  FailureOr<Value> scale = fitNormalized(ctx.getInput(1));
  if (failed(scale))
    return failure();
  FailureOr<Value> bias =
      ctx.hasInput(2)
          ? fitNormalized(ctx.getInput(2))
          : FailureOr<Value>(ctx.createConstant(DenseElementsAttr::get(
                normalizedType,
                ctx.getBuilder().getFloatAttr(type.getElementType(), 0.0))));
  if (failed(bias))
    return failure();
  Builder &b = ctx.getBuilder();
  double epsilon = ctx.getFloat("epsilon", 1e-5);
  if (failed(ctx.setResult(ctx.create<LayerNormOp>(
          {ctx.getInput(0), *scale, *bias},
          {ctx.namedAttr("axis", b.getI64IntegerAttr(*axis)),
           ctx.namedAttr("epsilon", b.getF64FloatAttr(epsilon))},
          type))))
    return failure();
  if (!ctx.hasOutput(1) && !ctx.hasOutput(2))
    return success();
  // Mean and InvStdDev, over the normalized dimensions (kept as 1s), in
  // `stash_type` (f32 by default), from reductions of their own: the
  // layer_norm kernel keeps its statistics to itself.
  int64_t stash = ctx.getInt("stash_type", 1);
  Type stashType = getElementType(ctx.getContext(), stash);
  if (!stashType || !isa<FloatType>(stashType))
    return ctx.emitError() << "attribute 'stash_type' is "
                           << getDataTypeName(stash)
                           << "; expected a float type";
  OpChain ops(ctx);
  SmallVector<int64_t> axes;
  for (int64_t dim = *axis; dim < type.getRank(); ++dim)
    axes.push_back(dim);
  Value x = ops.cast(ctx.getInput(0), stashType);
  auto meanOf = [&](Value value) {
    Builder &builder = ctx.getBuilder();
    return ops.make<ReduceMeanOp>(
        {value}, {ctx.namedAttr("axes", builder.getDenseI64ArrayAttr(axes)),
                  ctx.namedAttr("keepdims", builder.getUnitAttr())});
  };
  Value mean = meanOf(x);
  Value centered = ops.make<SubOp>({x, mean});
  Value variance = meanOf(ops.make<MulOp>({centered, centered}));
  Value shifted = ops.make<AddOp>({variance, ops.scalar(stashType, epsilon)});
  Value invStdDev =
      ops.make<RsqrtOp>({shifted}, {}, shifted ? shifted.getType() : Type());
  if (failed(ops.setOutput(1, mean)) || failed(ops.setOutput(2, invStdDev)))
    return failure();
  return success();
}

/// Softmax-11 and LogSoftmax-11 (opsets before 13) normalize over every
/// dimension from `axis` (default 1) on, as if the input were flattened to
/// [outer, inner] there.
template <typename OpTy>
static LogicalResult convertCoercedSoftmax(NodeContext &ctx) {
  RankedTensorType type = ctx.getInputType(0);
  FailureOr<std::pair<int64_t, int64_t>> sizes =
      flattenedAt(ctx, ctx.getInt("axis", 1), /*allowRank=*/false);
  if (failed(sizes))
    return failure();
  OpChain ops(ctx);
  Value flat = ops.reshape(ctx.getInput(0), {sizes->first, sizes->second});
  Value normalized = ops.make<OpTy>(
      {flat}, {ctx.namedAttr("axis", ctx.getBuilder().getI64IntegerAttr(1))},
      flat ? flat.getType() : Type());
  return ops.setOutput(0, ops.reshape(normalized, type.getShape()));
}

/// Builds a reduction over `axes`; `std::nullopt` reduces every dimension.
template <typename OpTy>
static LogicalResult buildReduce(NodeContext &ctx,
                                 std::optional<SmallVector<int64_t>> axes) {
  int64_t rank = ctx.getInputType(0).getRank();
  SmallVector<int64_t> normalized;
  if (axes) {
    FailureOr<SmallVector<int64_t>> checked = ctx.normalizeAxes(*axes, rank);
    if (failed(checked))
      return failure();
    normalized = *checked;
  } else {
    for (int64_t dim = 0; dim < rank; ++dim)
      normalized.push_back(dim);
  }
  Builder &b = ctx.getBuilder();
  SmallVector<NamedAttribute> attrs = {
      ctx.namedAttr("axes", b.getDenseI64ArrayAttr(normalized))};
  if (ctx.getInt("keepdims", 1))
    attrs.push_back(ctx.namedAttr("keepdims", b.getUnitAttr()));
  return ctx.setResult(ctx.create<OpTy>(ctx.getInput(0), attrs));
}

/// ReduceMean-13 and ReduceMax-13 take `axes` as an attribute.
template <typename OpTy>
static LogicalResult convertReduceWithAttr(NodeContext &ctx) {
  return buildReduce<OpTy>(ctx, ctx.getInts("axes"));
}

/// ReduceSum-13, and the other reductions from version 18 on, take `axes`
/// as an optional input (a constant; computed from constants is fine).
template <typename OpTy>
static LogicalResult convertReduceWithInput(NodeContext &ctx) {
  // Before version 13 (ReduceSum) or 18 (the others) `axes` was an
  // attribute.
  std::optional<SmallVector<int64_t>> axes = ctx.getInts("axes");
  if (ctx.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstantInts(1, "axes");
    if (failed(given))
      return failure();
    if (!given->empty())
      axes = *given;
  }
  if (!axes && ctx.getInt("noop_with_empty_axes", 0)) {
    ctx.setOutput(0, ctx.getInput(0));
    return success();
  }
  return buildReduce<OpTy>(ctx, axes);
}

/// Dropout is the identity at inference (no `training_mode`, or false); in
/// training it is loom.dropout, whose mask is the optional second output.
static LogicalResult convertDropout(NodeContext &ctx) {
  bool training = false;
  if (ctx.hasInput(2)) {
    FailureOr<DenseElementsAttr> mode =
        ctx.getConstantInput(2, "training_mode");
    if (failed(mode))
      return failure();
    training = !mode->getValues<APInt>()[0].isZero();
  }
  double ratio = ctx.getFloat("ratio", 0.5); // an attribute before 12
  if (ctx.hasInput(1)) {
    FailureOr<DenseElementsAttr> value = ctx.getConstantInput(1, "ratio");
    if (failed(value))
      return failure();
    if (!isa<FloatType>(value->getElementType()) ||
        value->getNumElements() != 1)
      return ctx.emitError() << "ratio must be a floating-point scalar";
    APFloat element = *value->getValues<APFloat>().begin();
    ratio = &element.getSemantics() == &APFloat::IEEEsingle()
                ? widenFloat(element.convertToFloat())
                : element.convertToDouble();
  }
  RankedTensorType type = ctx.getInputType(0);
  Builder &b = ctx.getBuilder();
  if (!training) {
    ctx.setOutput(0, ctx.getInput(0));
    if (ctx.hasOutput(1))
      ctx.setOutput(1, ctx.createConstant(DenseElementsAttr::get(
                           type.clone(b.getI1Type()), true)));
    return success();
  }
  // Without a `seed` (exporters write none), each node draws its own
  // stream, keyed by its first output's name: one shared seed would give
  // every layer's dropout of the same shape the same mask.
  int64_t seed = ctx.findAttr("seed")
                     ? ctx.getInt("seed", 0)
                     : int64_t(llvm::xxh3_64bits(ctx.getNode().output(0)) >> 1);
  FailureOr<SmallVector<Value>> results =
      ctx.createOp(DropoutOp::getOperationName(), ctx.getInput(0),
                   {ctx.namedAttr("ratio", b.getF64FloatAttr(ratio)),
                    ctx.namedAttr("seed", b.getI64IntegerAttr(seed)),
                    ctx.namedAttr(DropoutOp::getOperandSegmentSizeAttr(),
                                  b.getDenseI32ArrayAttr({1, 0, 0}))},
                   {}, 2);
  if (failed(results))
    return failure();
  ctx.setOutput(0, (*results)[0]);
  ctx.setOutput(1, (*results)[1]);
  return success();
}

/// Scores are `[N, C, d1, ...]` in ONNX; loom.cross_entropy wants the classes
/// last, so C moves to the end.
/// SoftmaxCrossEntropyLoss with class weights (input 2), spelled out: the
/// log-softmax over C, each sample's -log p of its label picked by a
/// one-hot product, weighted by its class's weight (0 where the label is
/// ignore_index); `mean` divides by the summed weights, as ONNX and
/// torch.nn.CrossEntropyLoss(weight=...) do.
static LogicalResult convertWeightedCrossEntropy(NodeContext &ctx,
                                                 StringRef reduction) {
  RankedTensorType type = ctx.getInputType(0);
  if (type.getRank() < 2)
    return ctx.emitError() << "scores must have rank 2 or more, got " << type;
  Type element = type.getElementType();
  int64_t classes = type.getDimSize(1);
  if (ctx.getInputType(2).getShape() != ArrayRef<int64_t>{classes})
    return ctx.emitError() << "weights " << ctx.getInputType(2)
                           << " must have one value per class (" << classes
                           << ")";
  Builder &b = ctx.getBuilder();
  OpChain ops(ctx);
  Value logProb = ops.make<LogSoftmaxOp>(
      {ctx.getInput(0)}, {ctx.namedAttr("axis", b.getI64IntegerAttr(1))}, type);
  Type i64 = b.getI64Type();
  Value labels = ops.cast(ctx.getInput(1), i64);
  // [N, d...] -> [N, 1, d...] to meet the class axis.
  auto labelType = cast<RankedTensorType>(ctx.getInputType(1));
  SmallVector<int64_t> spread(labelType.getShape());
  spread.insert(spread.begin() + 1, 1);
  SmallVector<int64_t> iotaShape(type.getRank(), 1);
  iotaShape[1] = classes;
  SmallVector<int64_t> iota(classes);
  for (int64_t c = 0; c < classes; ++c)
    iota[c] = c;
  Value hit =
      ops.cast(ops.compare(CompareDirection::eq, ops.reshape(labels, spread),
                           ops.indices(iotaShape, iota)),
               element);
  // -log p[label] and the label's weight, per sample.
  Value picked = ops.reduce<ReduceSumOp>(ops.make<MulOp>({hit, logProb}), {1},
                                         /*keepdims=*/false);
  Value weights = ops.reduce<ReduceSumOp>(
      ops.make<MulOp>(
          {hit, ops.reshape(ctx.getInput(2), SmallVector<int64_t>(iotaShape))}),
      {1}, /*keepdims=*/false);
  if (const onnx::AttributeProto *ignore = ctx.findAttr("ignore_index")) {
    Value kept = ops.compare(CompareDirection::ne, labels,
                             ops.scalar(i64, double(ignore->i())));
    weights = ops.select(kept, weights, ops.scalar(element, 0));
  }
  Value losses = ops.make<NegOp>({ops.make<MulOp>({weights, picked})}, {},
                                 weights ? weights.getType() : Type());
  Value loss = losses;
  if (reduction != "none") {
    SmallVector<int64_t> all;
    for (int64_t dim = 0; dim < labelType.getRank(); ++dim)
      all.push_back(dim);
    loss = ops.reduce<ReduceSumOp>(losses, all, /*keepdims=*/false);
    if (reduction == "mean")
      loss = ops.make<DivOp>(
          {loss, ops.reduce<ReduceSumOp>(weights, all, /*keepdims=*/false)});
  }
  if (failed(ops.setOutput(0, loss)))
    return failure();
  if (ctx.hasOutput(1) && failed(ops.setOutput(1, logProb)))
    return failure();
  return success();
}

static LogicalResult convertSoftmaxCrossEntropy(NodeContext &ctx) {
  if (ctx.hasInput(2)) {
    std::string reduction = ctx.getString("reduction", "mean");
    if (reduction != "none" && reduction != "sum" && reduction != "mean")
      return ctx.emitError() << "unknown reduction '" << reduction << "'";
    return convertWeightedCrossEntropy(ctx, reduction);
  }
  Builder &b = ctx.getBuilder();
  std::string reductionName = ctx.getString("reduction", "mean");
  std::optional<LossReduction> reduction =
      symbolizeLossReduction(reductionName);
  if (!reduction)
    return ctx.emitError() << "unknown reduction '" << reductionName << "'";
  Value scores = ctx.getInput(0);
  RankedTensorType type = ctx.getInputType(0);
  if (type.getRank() < 2)
    return ctx.emitError() << "scores must have rank 2 or more, got " << type;
  Value logits = scores;
  if (type.getRank() > 2) {
    SmallVector<int64_t> permutation = {0};
    for (int64_t dim = 2; dim < type.getRank(); ++dim)
      permutation.push_back(dim);
    permutation.push_back(1);
    FailureOr<Value> moved = ctx.create<TransposeOp>(
        scores,
        {ctx.namedAttr("permutation", b.getDenseI64ArrayAttr(permutation))});
    if (failed(moved))
      return failure();
    logits = *moved;
  }
  SmallVector<NamedAttribute> attrs = {ctx.namedAttr(
      "reduction", LossReductionAttr::get(ctx.getContext(), *reduction))};
  if (const onnx::AttributeProto *ignore = ctx.findAttr("ignore_index"))
    attrs.push_back(
        ctx.namedAttr("ignore_index", b.getI64IntegerAttr(ignore->i())));
  FailureOr<Value> loss =
      ctx.create<CrossEntropyOp>({logits, ctx.getInput(1)}, attrs);
  if (failed(loss))
    return failure();
  // ONNX's loss has the scores' type; Loom's is f32 for f16/bf16 scores.
  auto lossType = cast<RankedTensorType>(loss->getType());
  if (lossType.getElementType() != type.getElementType())
    loss = ctx.create<CastOp>(*loss, {}, lossType.clone(type.getElementType()));
  if (failed(ctx.setResult(loss)))
    return failure();
  if (!ctx.hasOutput(1))
    return success();
  FailureOr<Value> logProb = ctx.create<LogSoftmaxOp>(
      scores, {ctx.namedAttr("axis", b.getI64IntegerAttr(1))}, type);
  if (failed(logProb))
    return failure();
  ctx.setOutput(1, *logProb);
  return success();
}

void onnx_import::registerNNConverters(ConverterRegistry &registry) {
  registry.add("MatMul", {9, 13}, convertMatMul);
  registry.add("Gemm", {11, 13}, convertGemm);
  registry.add("Softmax", {13}, convertSoftmax<SoftmaxOp>);
  registry.add("LogSoftmax", {13}, convertSoftmax<LogSoftmaxOp>);
  registry.add("Softmax", {11}, convertCoercedSoftmax<SoftmaxOp>);
  registry.add("LogSoftmax", {11}, convertCoercedSoftmax<LogSoftmaxOp>);
  registry.add("LayerNormalization", {17}, convertLayerNorm);
  registry.add("ReduceMean", {11, 13}, convertReduceWithAttr<ReduceMeanOp>);
  registry.add("ReduceMean", {18}, convertReduceWithInput<ReduceMeanOp>);
  registry.add("ReduceMax", {11, 12, 13}, convertReduceWithAttr<ReduceMaxOp>);
  registry.add("ReduceMax", {18, 20}, convertReduceWithInput<ReduceMaxOp>);
  registry.add("ReduceSum", {13}, convertReduceWithInput<ReduceSumOp>);
  registry.add("ReduceSum", {11}, convertReduceWithAttr<ReduceSumOp>);
  registry.add("Dropout", {10, 12, 13}, convertDropout);
  registry.add("SoftmaxCrossEntropyLoss", {12, 13}, convertSoftmaxCrossEntropy);
}
