//===- VocabParallel.cpp - Losses and lookups over a split vocabulary -----===//
//
// Megatron's vocabulary-parallel cross-entropy and embedding, as loom ops
// on each rank's block of the classes (or table rows). The logits are
// never gathered: the ranks combine a maximum, an exp-sum and the target
// logit per sample (three all-reduces of one value per sample), and the
// gradient is each rank's block of softmax minus one-hot. A lookup of a
// split table reads the rows the rank holds and zeroes the others; the
// partial sums are combined where the result is needed whole.
//
//===----------------------------------------------------------------------===//

#include "VocabParallel.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include <limits>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Builds the loss ops on one rank.
struct LossBuilder {
  OpBuilder &builder;
  Location loc;
  ArrayAttr groups;

  RankedTensorType typeOf(Value value) {
    return cast<RankedTensorType>(value.getType());
  }

  Value constant(RankedTensorType type, Attribute element) {
    return builder.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, ArrayRef<Attribute>{element}));
  }
  Value scalar(Type element, double value) {
    auto type = RankedTensorType::get({}, element);
    return builder.create<ConstantOp>(
        loc,
        DenseElementsAttr::get(type, builder.getFloatAttr(element, value)));
  }
  Value indexScalar(Type element, int64_t value) {
    auto type = RankedTensorType::get({}, element);
    return builder.create<ConstantOp>(
        loc,
        DenseElementsAttr::get(type, builder.getIntegerAttr(element, value)));
  }
  Value castTo(Value value, Type element) {
    RankedTensorType type = typeOf(value);
    if (type.getElementType() == element)
      return value;
    return builder.create<CastOp>(loc, type.clone(element), value);
  }
  Value reduce(Value value, int64_t axis, bool max, bool keep) {
    RankedTensorType type = typeOf(value);
    SmallVector<int64_t> shape(type.getShape());
    if (keep)
      shape[axis] = 1;
    else
      shape.erase(shape.begin() + axis);
    auto result = type.clone(shape);
    auto axes = builder.getDenseI64ArrayAttr({axis});
    UnitAttr keepdims = keep ? builder.getUnitAttr() : UnitAttr();
    if (max)
      return builder.create<ReduceMaxOp>(loc, result, value, axes, keepdims);
    return builder.create<ReduceSumOp>(loc, result, value, axes, keepdims);
  }
  Value reduceAll(Value value) {
    while (typeOf(value).getRank() > 0)
      value = reduce(value, 0, /*max=*/false, /*keep=*/false);
    return value;
  }
  Value allReduce(Value value, CollectiveReduction reduction,
                  DictionaryAttr info) {
    auto op = builder.create<AllReduceOp>(loc, value.getType(), reduction,
                                          value, groups);
    op->setAttr(LoomDialect::kReshardingAttrName, info);
    return op;
  }
  Value reshape(Value value, ArrayRef<int64_t> shape) {
    return builder.create<ReshapeOp>(loc, typeOf(value).clone(shape), value);
  }
  /// `[..., 1]` of a per-sample value.
  Value column(Value value) {
    SmallVector<int64_t> shape(typeOf(value).getShape());
    shape.push_back(1);
    return reshape(value, shape);
  }
};

/// What both directions share: the rank's masked logits in the loss type,
/// the row maximum and exp-sum over all ranks, and the one-hot of the
/// labels in the rank's block.
struct SharedTerms {
  Value masked;  // [..., Cl] logits, -inf outside the real classes
  Value maximum; // [..., 1]
  Value expSum;  // [..., 1]
  Value oneHot;  // [..., Cl] i1
  Value counted; // [...] i1: the label is not ignore_index (null: all)
  Type lossType;
};

SharedTerms sharedTerms(LossBuilder &b, Value logits, Value labels,
                        Value offset, std::optional<int64_t> classes,
                        std::optional<int64_t> ignoreIndex,
                        DictionaryAttr info) {
  OpBuilder &builder = b.builder;
  RankedTensorType type = b.typeOf(logits);
  Type element = type.getElementType();
  SharedTerms terms;
  terms.lossType = element.isF64() ? element : builder.getF32Type();
  Value wide = b.castTo(logits, terms.lossType);
  int64_t block = type.getShape().back();
  int64_t last = type.getRank() - 1;

  // The global class of each of the rank's columns.
  Type indexType = b.typeOf(labels).getElementType();
  auto iotaType = RankedTensorType::get({block}, indexType);
  // (As raw integers: an attribute per class was a fifth of partitioning
  // at a 51200-word vocabulary.)
  SmallVector<APInt> iota;
  iota.reserve(block);
  unsigned width = isa<IndexType>(indexType)
                       ? IndexType::kInternalStorageBitWidth
                       : indexType.getIntOrFloatBitWidth();
  for (int64_t i = 0; i < block; ++i)
    iota.emplace_back(width, uint64_t(i));
  Value columns =
      builder.create<ConstantOp>(b.loc, DenseElementsAttr::get(iotaType, iota));
  Value globalColumns =
      builder.create<AddOp>(b.loc, columns, b.castTo(offset, indexType));
  Value masked = wide;
  if (classes) {
    Value real =
        builder.create<CompareOp>(b.loc, CompareDirection::lt, globalColumns,
                                  b.indexScalar(indexType, *classes));
    auto negInf =
        b.scalar(terms.lossType, -std::numeric_limits<double>::infinity());
    masked = builder.create<SelectOp>(b.loc, real, wide, negInf);
  }
  terms.masked = masked;
  terms.maximum = b.allReduce(b.reduce(masked, last, /*max=*/true, true),
                              CollectiveReduction::max, info);
  Value shifted = builder.create<SubOp>(b.loc, masked, terms.maximum);
  Value exps = builder.create<ExpOp>(b.loc, shifted);
  terms.expSum = b.allReduce(b.reduce(exps, last, /*max=*/false, true),
                             CollectiveReduction::sum, info);
  terms.oneHot = builder.create<CompareOp>(b.loc, CompareDirection::eq,
                                           globalColumns, b.column(labels));
  if (ignoreIndex)
    terms.counted =
        builder.create<CompareOp>(b.loc, CompareDirection::ne, labels,
                                  b.indexScalar(indexType, *ignoreIndex));
  return terms;
}

} // namespace

Value mlir::loom::buildVocabParallelCrossEntropy(OpBuilder &builder,
                                                 CrossEntropyOp op,
                                                 Value logits, Value labels,
                                                 Value offset, ArrayAttr groups,
                                                 DictionaryAttr info) {
  LossBuilder b{builder, op.getLoc(), groups};
  SharedTerms terms = sharedTerms(b, logits, labels, offset, op.getClasses(),
                                  op.getIgnoreIndex(), info);
  int64_t last = b.typeOf(logits).getRank() - 1;
  // The target logit: the rank that holds the label's column has it.
  Value zero = b.scalar(terms.lossType, 0.0);
  Value picked =
      builder.create<SelectOp>(b.loc, terms.oneHot, terms.masked, zero);
  Value target = b.allReduce(b.reduce(picked, last, false, false),
                             CollectiveReduction::sum, info);
  // logsumexp - target, per sample.
  Value logSum = builder.create<AddOp>(
      b.loc, builder.create<LogOp>(b.loc, terms.expSum), terms.maximum);
  SmallVector<int64_t> samples(b.typeOf(labels).getShape());
  Value perSample =
      builder.create<SubOp>(b.loc, b.reshape(logSum, samples), target);
  if (terms.counted)
    perSample = builder.create<SelectOp>(b.loc, terms.counted, perSample, zero);
  Value result = perSample;
  if (op.getReduction() != LossReduction::none) {
    result = b.reduceAll(perSample);
    if (op.getReduction() == LossReduction::mean) {
      Value count;
      if (terms.counted)
        count = b.reduceAll(b.castTo(terms.counted, terms.lossType));
      else
        count =
            b.scalar(terms.lossType, double(b.typeOf(labels).getNumElements()));
      result = builder.create<DivOp>(b.loc, result, count);
    }
  }
  return b.castTo(result, op.getType().getElementType());
}

Value mlir::loom::buildVocabParallelCrossEntropyGrad(
    OpBuilder &builder, CrossEntropyGradOp op, Value logits, Value labels,
    Value scale, Value offset, ArrayAttr groups, DictionaryAttr info) {
  LossBuilder b{builder, op.getLoc(), groups};
  SharedTerms terms = sharedTerms(b, logits, labels, offset, op.getClasses(),
                                  op.getIgnoreIndex(), info);
  // (softmax - one-hot) * scale on the rank's block.
  Value shifted = builder.create<SubOp>(b.loc, terms.masked, terms.maximum);
  Value probabilities = builder.create<DivOp>(
      b.loc, builder.create<ExpOp>(b.loc, shifted), terms.expSum);
  Value one = b.scalar(terms.lossType, 1.0);
  Value zero = b.scalar(terms.lossType, 0.0);
  Value hot = builder.create<SelectOp>(b.loc, terms.oneHot, one, zero);
  Value gradient = builder.create<SubOp>(b.loc, probabilities, hot);
  Value factor = b.castTo(scale, terms.lossType);
  if (b.typeOf(factor).getRank() > 0)
    factor = b.column(factor);
  gradient = builder.create<MulOp>(b.loc, gradient, factor);
  if (terms.counted)
    gradient = builder.create<SelectOp>(b.loc, b.column(terms.counted),
                                        gradient, zero);
  return b.castTo(gradient, op.getType().getElementType());
}

/// Negative indices counted from the end of `rows`, as the ops define them.
static Value normalizeIndices(LossBuilder &b, Value indices, int64_t rows) {
  Type indexType = b.typeOf(indices).getElementType();
  Value negative = b.builder.create<CompareOp>(
      b.loc, CompareDirection::lt, indices, b.indexScalar(indexType, 0));
  Value wrapped =
      b.builder.create<AddOp>(b.loc, indices, b.indexScalar(indexType, rows));
  return b.builder.create<SelectOp>(b.loc, negative, wrapped, indices);
}

/// Whether each index falls in the rank's `rows` rows from `offset`, and
/// the index relative to them (0 where it does not).
static std::pair<Value, Value> localIndices(LossBuilder &b, Value indices,
                                            Value offset, int64_t rows,
                                            int64_t globalRows) {
  OpBuilder &builder = b.builder;
  Type indexType = b.typeOf(indices).getElementType();
  Value local =
      builder.create<SubOp>(b.loc, normalizeIndices(b, indices, globalRows),
                            b.castTo(offset, indexType));
  Value zeroIndex = b.indexScalar(indexType, 0);
  Value above =
      builder.create<CompareOp>(b.loc, CompareDirection::ge, local, zeroIndex);
  Value below = builder.create<CompareOp>(b.loc, CompareDirection::lt, local,
                                          b.indexScalar(indexType, rows));
  Value no = builder.create<ConstantOp>(
      b.loc, DenseElementsAttr::get(
                 RankedTensorType::get({}, builder.getI1Type()), false));
  Value mine = builder.create<SelectOp>(b.loc, above, below, no);
  Value clamped = builder.create<SelectOp>(b.loc, mine, local, zeroIndex);
  return {mine, clamped};
}

Value mlir::loom::buildVocabParallelScatterAdd(OpBuilder &builder,
                                               ScatterAddOp op, Value updates,
                                               Value indices, Value offset,
                                               int64_t rows,
                                               int64_t globalRows) {
  LossBuilder b{builder, op.getLoc(), ArrayAttr()};
  auto [mine, clamped] = localIndices(b, indices, offset, rows, globalRows);
  // Updates of other ranks' rows add zero to row 0.
  RankedTensorType updatesType = b.typeOf(updates);
  SmallVector<int64_t> maskShape(b.typeOf(indices).getShape());
  maskShape.append(updatesType.getRank() - maskShape.size(), 1);
  Value mask = b.reshape(mine, maskShape);
  Value zero = b.scalar(updatesType.getElementType(), 0.0);
  Value kept = builder.create<SelectOp>(b.loc, mask, updates, zero);
  SmallVector<int64_t> shape(op.getType().getShape());
  shape[0] = rows;
  return builder.create<ScatterAddOp>(b.loc, op.getType().clone(shape), kept,
                                      clamped);
}

Value mlir::loom::buildVocabParallelLookup(OpBuilder &builder, GatherOp op,
                                           Value table, Value indices,
                                           Value offset, int64_t globalRows) {
  LossBuilder b{builder, op.getLoc(), ArrayAttr()};
  int64_t rows = b.typeOf(table).getDimSize(op.getAxis());
  auto [mine, clamped] = localIndices(b, indices, offset, rows, globalRows);
  Value looked = builder.create<GatherOp>(b.loc, table, clamped,
                                          op.getAxisAttr(), IntegerAttr());
  // Broadcast the per-index mask over the looked-up rows' other dims.
  RankedTensorType result = b.typeOf(looked);
  SmallVector<int64_t> maskShape(result.getRank(), 1);
  int64_t axis = op.getAxis();
  for (int64_t d = 0; d < b.typeOf(indices).getRank(); ++d)
    maskShape[axis + d] = b.typeOf(indices).getDimSize(d);
  Value mask = b.reshape(mine, maskShape);
  Value zero = b.scalar(result.getElementType(), 0.0);
  return builder.create<SelectOp>(b.loc, mask, looked, zero);
}
