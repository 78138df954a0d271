//===- FactorRules.cpp - Factor rules of every loom op --------------------===//

#include "loom/Dialect/Loom/IR/FactorRule.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Support/ReshapeFactorization.h"
#include "mlir/IR/AffineExpr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

//===----------------------------------------------------------------------===//
// FactorRule
//===----------------------------------------------------------------------===//

StringRef mlir::loom::stringifyFactorKind(FactorKind kind) {
  switch (kind) {
  case FactorKind::Parallel:
    return "parallel";
  case FactorKind::Contracting:
    return "contracting";
  case FactorKind::ReductionSum:
    return "reduction_sum";
  case FactorKind::ReductionMax:
    return "reduction_max";
  case FactorKind::NeedReplication:
    return "need_replication";
  }
  llvm_unreachable("unknown factor kind");
}

unsigned FactorRule::addFactor(int64_t size, FactorKind kind) {
  factors.push_back({size, kind});
  return factors.size() - 1;
}

SmallVector<AffineMap> FactorRule::getIndexingMaps(MLIRContext *context) const {
  SmallVector<AffineMap> maps;
  auto toMap = [&](const TensorFactors &tensor) {
    SmallVector<AffineExpr> exprs;
    for (const SmallVector<unsigned, 2> &dim : tensor) {
      if (dim.empty()) {
        exprs.push_back(getAffineConstantExpr(0, context));
        continue;
      }
      // Row-major linearization of the dimension's factors.
      AffineExpr expr = getAffineDimExpr(dim.front(), context);
      for (unsigned factor : ArrayRef(dim).drop_front())
        expr = expr * factors[factor].size + getAffineDimExpr(factor, context);
      exprs.push_back(expr);
    }
    maps.push_back(AffineMap::get(factors.size(), 0, exprs, context));
  };
  llvm::for_each(operands, toMap);
  llvm::for_each(results, toMap);
  return maps;
}

LogicalResult FactorRule::verify(Operation *op) const {
  if (operands.size() != op->getNumOperands() ||
      results.size() != op->getNumResults())
    return op->emitOpError()
           << "factor rule describes " << operands.size() << " operand(s) and "
           << results.size() << " result(s), the op has "
           << op->getNumOperands() << " and " << op->getNumResults();
  SmallVector<bool> used(factors.size(), false);
  auto check = [&](const TensorFactors &tensor, Type type, StringRef what,
                   unsigned index) -> LogicalResult {
    auto tensorType = cast<RankedTensorType>(type);
    if (tensor.size() != static_cast<size_t>(tensorType.getRank()))
      return op->emitOpError()
             << "factor rule gives " << tensor.size() << " dimension(s) for "
             << what << " #" << index << " of type " << type;
    for (auto [d, dim] : llvm::enumerate(tensor)) {
      int64_t product = 1;
      for (unsigned factor : dim) {
        if (factor >= factors.size())
          return op->emitOpError()
                 << "factor rule uses unknown factor d" << factor;
        used[factor] = true;
        product *= factors[factor].size;
      }
      if (product != tensorType.getDimSize(d))
        return op->emitOpError()
               << "factor rule maps dimension " << d << " of " << what << " #"
               << index << " (size " << tensorType.getDimSize(d)
               << ") to factors of total size " << product;
    }
    return success();
  };
  for (auto [index, tensor] : llvm::enumerate(operands))
    if (failed(
            check(tensor, op->getOperand(index).getType(), "operand", index)))
      return failure();
  for (auto [index, tensor] : llvm::enumerate(results))
    if (failed(check(tensor, op->getResult(index).getType(), "result", index)))
      return failure();
  for (auto [factor, isUsed] : llvm::enumerate(used))
    if (!isUsed)
      return op->emitOpError() << "factor rule has unused factor d" << factor;
  return success();
}

void FactorRule::print(raw_ostream &os, MLIRContext *context) const {
  os << "iterators = [";
  llvm::interleaveComma(factors, os, [&](const Factor &factor) {
    os << stringifyFactorKind(factor.kind);
  });
  os << "], sizes = [";
  llvm::interleaveComma(factors, os,
                        [&](const Factor &factor) { os << factor.size; });
  os << "], maps = [";
  llvm::interleaveComma(getIndexingMaps(context), os,
                        [&](AffineMap map) { map.print(os); });
  os << "]";
}

//===----------------------------------------------------------------------===//
// Shared rules
//===----------------------------------------------------------------------===//

static RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Maps a tensor that numpy-broadcasts to a rank-`rank` iteration space
/// whose dimension `d` is factor `d`.
static TensorFactors broadcastFactors(RankedTensorType type,
                                      ArrayRef<Factor> factors) {
  TensorFactors dims;
  size_t offset = factors.size() - type.getRank();
  for (int64_t d = 0; d < type.getRank(); ++d) {
    unsigned factor = offset + d;
    if (type.getDimSize(d) == factors[factor].size)
      dims.push_back({factor});
    else
      dims.push_back({}); // A broadcast size-1 dimension.
  }
  return dims;
}

FactorRule mlir::loom::getElementwiseFactorRule(Operation *op) {
  FactorRule rule;
  for (int64_t size : tensorTypeOf(op->getResult(0)).getShape())
    rule.addFactor(size, FactorKind::Parallel);
  for (Value operand : op->getOperands())
    rule.addOperand(broadcastFactors(tensorTypeOf(operand), rule.getFactors()));
  for (Value result : op->getResults())
    rule.addResult(broadcastFactors(tensorTypeOf(result), rule.getFactors()));
  return rule;
}

/// Identity dims `{first}, {first + 1}, ...` for `count` dimensions.
static void appendIdentity(TensorFactors &dims, unsigned first,
                           unsigned count) {
  for (unsigned d = 0; d < count; ++d)
    dims.push_back({first + d});
}

/// One factor per dimension of `type`, `kind` for dimensions in `special`
/// and parallel for the others; `type`'s dimension d becomes factor d.
static FactorRule perDimensionRule(RankedTensorType type,
                                   ArrayRef<int64_t> special, FactorKind kind) {
  FactorRule rule;
  for (int64_t d = 0; d < type.getRank(); ++d)
    rule.addFactor(type.getDimSize(d), llvm::is_contained(special, d)
                                           ? kind
                                           : FactorKind::Parallel);
  return rule;
}

//===----------------------------------------------------------------------===//
// Per-op rules
//===----------------------------------------------------------------------===//

FactorRule ParamOp::getFactorRule() { return getElementwiseFactorRule(*this); }

FactorRule ConstantOp::getFactorRule() {
  return getElementwiseFactorRule(*this);
}

FactorRule ShardOp::getFactorRule() { return getElementwiseFactorRule(*this); }

FactorRule ReshardOp::getFactorRule() {
  return getElementwiseFactorRule(*this);
}

FactorRule BiasAddOp::getFactorRule() {
  return getElementwiseFactorRule(*this);
}

FactorRule BroadcastOp::getFactorRule() {
  return getElementwiseFactorRule(*this);
}

FactorRule DropoutOp::getFactorRule() {
  // Elementwise in the input; the step is a scalar and a block's offsets
  // are read whole by every rank.
  RankedTensorType type = tensorTypeOf(getInput());
  FactorRule rule = perDimensionRule(type, {}, FactorKind::Parallel);
  TensorFactors identity;
  appendIdentity(identity, 0, type.getRank());
  rule.addOperand(identity);
  if (getStep())
    rule.addOperand({});
  if (getOffsets()) {
    unsigned offsets =
        rule.addFactor(type.getRank(), FactorKind::NeedReplication);
    rule.addOperand({{offsets}});
  }
  rule.addResult(identity);
  rule.addResult(identity);
  return rule;
}

FactorRule MatmulOp::getFactorRule() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  RankedTensorType result = getType();
  int64_t batch = result.getRank() - 2;
  FactorRule rule;
  for (int64_t d = 0; d < batch; ++d)
    rule.addFactor(result.getDimSize(d), FactorKind::Parallel);
  unsigned m = rule.addFactor(result.getDimSize(batch), FactorKind::Parallel);
  unsigned n =
      rule.addFactor(result.getDimSize(batch + 1), FactorKind::Parallel);
  int64_t kSize = getTransposeLhs() ? lhs.getDimSize(lhs.getRank() - 2)
                                    : lhs.getDimSize(lhs.getRank() - 1);
  unsigned k = rule.addFactor(kSize, FactorKind::Contracting);

  // Operand batch dimensions align with the trailing result batch factors.
  auto operandDims = [&](RankedTensorType type, unsigned rows, unsigned cols,
                         bool transposed) {
    TensorFactors dims;
    int64_t operandBatch = type.getRank() - 2;
    appendIdentity(dims, batch - operandBatch, operandBatch);
    dims.push_back({transposed ? cols : rows});
    dims.push_back({transposed ? rows : cols});
    return dims;
  };
  rule.addOperand(operandDims(lhs, m, k, getTransposeLhs()));
  rule.addOperand(operandDims(rhs, k, n, getTransposeRhs()));
  TensorFactors resultDims;
  appendIdentity(resultDims, 0, batch);
  resultDims.push_back({m});
  resultDims.push_back({n});
  rule.addResult(std::move(resultDims));
  return rule;
}

FactorRule ReshapeOp::getFactorRule() {
  ReshapeFactorization factorization =
      factorizeReshape(getInput().getType().getShape(), getType().getShape());
  FactorRule rule;
  for (const ReshapeFactor &factor : factorization.factors)
    rule.addFactor(factor.size, factor.splittable
                                    ? FactorKind::Parallel
                                    : FactorKind::NeedReplication);
  auto toTensor = [](ArrayRef<SmallVector<unsigned, 2>> dims) {
    return TensorFactors(dims.begin(), dims.end());
  };
  rule.addOperand(toTensor(factorization.inputDims));
  rule.addResult(toTensor(factorization.outputDims));
  return rule;
}

FactorRule TransposeOp::getFactorRule() {
  FactorRule rule =
      perDimensionRule(getInput().getType(), {}, FactorKind::Parallel);
  TensorFactors input, result;
  appendIdentity(input, 0, getInput().getType().getRank());
  for (int64_t source : getPermutation())
    result.push_back({static_cast<unsigned>(source)});
  rule.addOperand(std::move(input));
  rule.addResult(std::move(result));
  return rule;
}

/// One input and one result that share a parallel factor along every
/// dimension `shared` accepts; along each other dimension each has a
/// need_replication factor of its own (a sliced, gathered, scattered or
/// exchanged dimension: which elements a rank holds there depends on the
/// whole of it).
static FactorRule
sharedOrReplicatedRule(RankedTensorType input, RankedTensorType result,
                       llvm::function_ref<bool(int64_t)> shared) {
  FactorRule rule;
  TensorFactors inputDims, resultDims;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (shared(d)) {
      unsigned factor =
          rule.addFactor(input.getDimSize(d), FactorKind::Parallel);
      inputDims.push_back({factor});
      resultDims.push_back({factor});
      continue;
    }
    inputDims.push_back(
        {rule.addFactor(input.getDimSize(d), FactorKind::NeedReplication)});
    resultDims.push_back(
        {rule.addFactor(result.getDimSize(d), FactorKind::NeedReplication)});
  }
  rule.addOperand(std::move(inputDims));
  rule.addResult(std::move(resultDims));
  return rule;
}

/// The collectives along `axis`: every other dimension is shared.
static FactorRule axisRule(RankedTensorType input, RankedTensorType result,
                           int64_t axis) {
  return sharedOrReplicatedRule(input, result,
                                [&](int64_t d) { return d != axis; });
}

FactorRule SliceOp::getFactorRule() {
  // A dimension taken whole is parallel; a sliced one needs the whole input
  // dimension, so input and result get separate unsplittable factors.
  RankedTensorType input = getInput().getType(), result = getType();
  return sharedOrReplicatedRule(input, result, [&](int64_t d) {
    return input.getDimSize(d) == result.getDimSize(d);
  });
}

/// Concat and split: every dimension but `axis` is a shared parallel factor;
/// along `axis` each of `pieces` and `whole` has a factor of its own.
static FactorRule pieceRule(int64_t axis, ArrayRef<Value> pieces, Value whole,
                            bool piecesAreOperands) {
  RankedTensorType wholeType = tensorTypeOf(whole);
  FactorRule rule;
  SmallVector<unsigned> shared; // Unused at `axis`.
  for (int64_t d = 0; d < wholeType.getRank(); ++d)
    shared.push_back(d == axis ? 0
                               : rule.addFactor(wholeType.getDimSize(d),
                                                FactorKind::Parallel));
  auto dimsOf = [&](RankedTensorType type) {
    TensorFactors dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      dims.push_back({d == axis ? rule.addFactor(type.getDimSize(d),
                                                 FactorKind::NeedReplication)
                                : shared[d]});
    return dims;
  };
  SmallVector<TensorFactors> pieceDims;
  for (Value piece : pieces)
    pieceDims.push_back(dimsOf(tensorTypeOf(piece)));
  TensorFactors wholeDims = dimsOf(wholeType);
  if (piecesAreOperands) {
    for (TensorFactors &dims : pieceDims)
      rule.addOperand(std::move(dims));
    rule.addResult(std::move(wholeDims));
  } else {
    rule.addOperand(std::move(wholeDims));
    for (TensorFactors &dims : pieceDims)
      rule.addResult(std::move(dims));
  }
  return rule;
}

FactorRule ConcatOp::getFactorRule() {
  SmallVector<Value> inputs(getInputs());
  return pieceRule(getAxis(), inputs, getResult(), /*piecesAreOperands=*/true);
}

FactorRule SplitOp::getFactorRule() {
  SmallVector<Value> results(getResults());
  return pieceRule(getAxis(), results, getInput(),
                   /*piecesAreOperands=*/false);
}

FactorRule GatherOp::getFactorRule() {
  // result = input[:axis] ++ indices ++ input[axis+1:]. Picking rows is a
  // product with a one-hot matrix, so the gathered dimension contracts:
  // sharding it (vocab-parallel embedding) leaves partial sums.
  RankedTensorType input = getInput().getType();
  RankedTensorType indices = getIndices().getType();
  int64_t axis = getAxis();
  FactorRule rule;
  TensorFactors inputDims, indicesDims, resultDims;
  for (int64_t d = 0; d < axis; ++d)
    resultDims.push_back(
        {rule.addFactor(input.getDimSize(d), FactorKind::Parallel)});
  for (int64_t d = 0; d < indices.getRank(); ++d)
    resultDims.push_back(
        {rule.addFactor(indices.getDimSize(d), FactorKind::Parallel)});
  unsigned gathered =
      rule.addFactor(input.getDimSize(axis), FactorKind::Contracting);
  for (int64_t d = axis + 1; d < input.getRank(); ++d)
    resultDims.push_back(
        {rule.addFactor(input.getDimSize(d), FactorKind::Parallel)});
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (d < axis)
      inputDims.push_back(resultDims[d]);
    else if (d == axis)
      inputDims.push_back({gathered});
    else
      inputDims.push_back(resultDims[d - 1 + indices.getRank()]);
  }
  for (int64_t d = 0; d < indices.getRank(); ++d)
    indicesDims.push_back(resultDims[axis + d]);
  rule.addOperand(std::move(inputDims));
  rule.addOperand(std::move(indicesDims));
  rule.addResult(std::move(resultDims));
  return rule;
}

FactorRule ScatterAddOp::getFactorRule() {
  // The adjoint of gather: the index dimensions are summed over, the rows
  // appear in the result only, the slice dimensions pass through.
  RankedTensorType updates = getUpdates().getType();
  RankedTensorType indices = getIndices().getType();
  RankedTensorType result = getResult().getType();
  FactorRule rule;
  TensorFactors updatesDims, indicesDims, resultDims;
  for (int64_t d = 0; d < indices.getRank(); ++d) {
    unsigned factor =
        rule.addFactor(indices.getDimSize(d), FactorKind::Contracting);
    updatesDims.push_back({factor});
    indicesDims.push_back({factor});
  }
  resultDims.push_back(
      {rule.addFactor(result.getDimSize(0), FactorKind::Parallel)});
  for (int64_t d = 1; d < result.getRank(); ++d) {
    unsigned factor =
        rule.addFactor(result.getDimSize(d), FactorKind::Parallel);
    updatesDims.push_back({factor});
    resultDims.push_back({factor});
  }
  (void)updates;
  rule.addOperand(std::move(updatesDims));
  rule.addOperand(std::move(indicesDims));
  rule.addResult(std::move(resultDims));
  return rule;
}

/// Reductions: input dimension d is factor d; reduced ones have `kind`.
static FactorRule reduceRule(RankedTensorType input, ArrayRef<int64_t> axes,
                             bool keepdims, FactorKind kind) {
  FactorRule rule = perDimensionRule(input, axes, kind);
  TensorFactors inputDims, resultDims;
  appendIdentity(inputDims, 0, input.getRank());
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      resultDims.push_back({static_cast<unsigned>(d)});
    else if (keepdims)
      resultDims.push_back({});
  }
  rule.addOperand(std::move(inputDims));
  rule.addResult(std::move(resultDims));
  return rule;
}

FactorRule ReduceSumOp::getFactorRule() {
  return reduceRule(getInput().getType(), getAxes(), getKeepdims(),
                    FactorKind::ReductionSum);
}

FactorRule ReduceMeanOp::getFactorRule() {
  return reduceRule(getInput().getType(), getAxes(), getKeepdims(),
                    FactorKind::ReductionSum);
}

FactorRule ReduceMaxOp::getFactorRule() {
  return reduceRule(getInput().getType(), getAxes(), getKeepdims(),
                    FactorKind::ReductionMax);
}

/// Ops whose operands and results all have the input's layout, with the
/// dimensions in `whole` needed whole.
static FactorRule sameLayoutRule(RankedTensorType input,
                                 ArrayRef<int64_t> whole) {
  FactorRule rule = perDimensionRule(input, whole, FactorKind::NeedReplication);
  TensorFactors dims;
  appendIdentity(dims, 0, input.getRank());
  rule.addOperand(dims);
  rule.addResult(dims);
  return rule;
}

FactorRule SoftmaxOp::getFactorRule() {
  return sameLayoutRule(getType(), {static_cast<int64_t>(getAxis())});
}

FactorRule LogSoftmaxOp::getFactorRule() {
  return sameLayoutRule(getType(), {static_cast<int64_t>(getAxis())});
}

FactorRule CumsumOp::getFactorRule() {
  return sameLayoutRule(getType(), {static_cast<int64_t>(getAxis())});
}

FactorRule LayerNormOp::getFactorRule() {
  RankedTensorType input = getInput().getType();
  int64_t axis = getAxis();
  SmallVector<int64_t> normalized =
      llvm::to_vector(llvm::seq<int64_t>(axis, input.getRank()));
  FactorRule rule =
      perDimensionRule(input, normalized, FactorKind::NeedReplication);
  TensorFactors dims, affineDims;
  appendIdentity(dims, 0, input.getRank());
  appendIdentity(affineDims, axis, input.getRank() - axis);
  rule.addOperand(dims);
  rule.addOperand(affineDims);
  rule.addOperand(affineDims);
  rule.addResult(dims);
  return rule;
}

FactorRule LayerNormGradOp::getFactorRule() {
  // The leading (row) dims index dinput and are summed away from dscale and
  // dbias: splitting them splits dinput and leaves the other two partial
  // sums. The normalized dims need every element of a row.
  RankedTensorType input = getInput().getType();
  int64_t axis = getAxis();
  FactorRule rule;
  TensorFactors dims, affineDims;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    FactorKind kind =
        d < axis ? FactorKind::ReductionSum : FactorKind::NeedReplication;
    dims.push_back({rule.addFactor(input.getDimSize(d), kind)});
  }
  appendIdentity(affineDims, axis, input.getRank() - axis);
  rule.addOperand(dims);
  rule.addOperand(affineDims);
  rule.addOperand(dims);
  rule.addResult(dims);
  rule.addResult(affineDims);
  rule.addResult(affineDims);
  return rule;
}

/// The factors of an attention op's iteration space: the batch dimensions
/// of the head-major form, heads last (parallel: heads and samples are
/// independent), then Sq, Sk, D and Dv with the given kinds; fills in q, k,
/// v and the mask operands.
namespace {
struct AttentionFactors {
  unsigned sq, sk, d, dv;
  int64_t batch;
  /// Operands are [..., S, H, D]: the last batch factor (H) follows the
  /// rows.
  bool seqMajor;
};
} // namespace

static AttentionFactors
addAttentionFactors(FactorRule &rule, RankedTensorType q, RankedTensorType v,
                    FactorKind sqKind, FactorKind dvKind, bool seqMajor) {
  AttentionFactors f;
  f.seqMajor = seqMajor;
  int64_t rank = q.getRank();
  f.batch = rank - 2;
  // Dimension positions of the head-major form in the operands' layout.
  auto at = [&](int64_t d) {
    if (!seqMajor || d < rank - 3)
      return d;
    return d == rank - 3 ? rank - 2 : d == rank - 2 ? rank - 3 : d;
  };
  for (int64_t d = 0; d < f.batch; ++d)
    rule.addFactor(q.getDimSize(at(d)), FactorKind::Parallel);
  f.sq = rule.addFactor(q.getDimSize(at(f.batch)), sqKind);
  f.sk = rule.addFactor(v.getDimSize(at(f.batch)), FactorKind::NeedReplication);
  f.d = rule.addFactor(q.getDimSize(rank - 1), FactorKind::NeedReplication);
  f.dv = rule.addFactor(v.getDimSize(rank - 1), dvKind);
  return f;
}

/// `[batch..., rows, cols]` of an attention operand, `[..., rows, H, cols]`
/// when seq-major.
static TensorFactors attentionDims(const AttentionFactors &f, unsigned rows,
                                   std::optional<unsigned> cols) {
  TensorFactors dims;
  if (f.seqMajor) {
    unsigned heads = static_cast<unsigned>(f.batch - 1);
    appendIdentity(dims, 0, f.batch - 1);
    dims.push_back({rows});
    dims.push_back({heads});
  } else {
    appendIdentity(dims, 0, f.batch);
    dims.push_back({rows});
  }
  if (cols)
    dims.push_back({*cols});
  return dims;
}

/// The mask: a broadcast (size-1) batch dimension maps to no factor.
static TensorFactors attentionMaskDims(const AttentionFactors &f,
                                       const FactorRule &rule, Value mask) {
  TensorFactors dims;
  RankedTensorType type = tensorTypeOf(mask);
  for (int64_t d = 0; d < f.batch; ++d) {
    if (type.getDimSize(d) == rule.getFactors()[d].size)
      dims.push_back({static_cast<unsigned>(d)});
    else
      dims.push_back({});
  }
  dims.push_back({f.sq});
  dims.push_back({f.sk});
  return dims;
}

FactorRule AttentionOp::getFactorRule() {
  // Query rows and value columns are independent; the keys and the head
  // dimension feed a softmax, which needs them whole.
  FactorRule rule;
  AttentionFactors f = addAttentionFactors(
      rule, getQ().getType(), getV().getType(), FactorKind::Parallel,
      FactorKind::Parallel, getSeqMajor());
  rule.addOperand(attentionDims(f, f.sq, f.d));
  rule.addOperand(attentionDims(f, f.sk, f.d));
  rule.addOperand(attentionDims(f, f.sk, f.dv));
  if (getMask())
    rule.addOperand(attentionMaskDims(f, rule, getMask()));
  rule.addResult(attentionDims(f, f.sq, f.dv));
  rule.addResult(attentionDims(f, f.sq, std::nullopt));
  return rule;
}

FactorRule AttentionGradOp::getFactorRule() {
  // dk and dv sum over the query rows and dq over the keys, through the
  // softmax's Jacobian: only the batch dimensions split without
  // communication.
  FactorRule rule;
  AttentionFactors f = addAttentionFactors(
      rule, getQ().getType(), getV().getType(), FactorKind::NeedReplication,
      FactorKind::NeedReplication, getSeqMajor());
  rule.addOperand(attentionDims(f, f.sq, f.d));
  rule.addOperand(attentionDims(f, f.sk, f.d));
  rule.addOperand(attentionDims(f, f.sk, f.dv));
  rule.addOperand(attentionDims(f, f.sq, f.dv));
  rule.addOperand(attentionDims(f, f.sq, std::nullopt));
  rule.addOperand(attentionDims(f, f.sq, f.dv));
  if (getMask())
    rule.addOperand(attentionMaskDims(f, rule, getMask()));
  rule.addResult(attentionDims(f, f.sq, f.d));
  rule.addResult(attentionDims(f, f.sk, f.d));
  rule.addResult(attentionDims(f, f.sk, f.dv));
  return rule;
}

FactorRule CrossEntropyOp::getFactorRule() {
  // Samples are parallel for `none`, summed for `sum`/`mean` (a mean divides
  // a sum by the global count). Classes are needed whole: the log-sum-exp is
  // not a plain partial sum.
  RankedTensorType logits = getLogits().getType();
  int64_t classes = logits.getRank() - 1;
  FactorKind sampleKind = getReduction() == LossReduction::none
                              ? FactorKind::Parallel
                              : FactorKind::ReductionSum;
  FactorRule rule;
  for (int64_t d = 0; d < classes; ++d)
    rule.addFactor(logits.getDimSize(d), sampleKind);
  rule.addFactor(logits.getDimSize(classes), FactorKind::NeedReplication);
  TensorFactors logitsDims, sampleDims;
  appendIdentity(logitsDims, 0, logits.getRank());
  appendIdentity(sampleDims, 0, classes);
  rule.addOperand(std::move(logitsDims));
  rule.addOperand(sampleDims);
  rule.addResult(getReduction() == LossReduction::none ? sampleDims
                                                       : TensorFactors());
  return rule;
}

FactorRule CrossEntropyGradOp::getFactorRule() {
  // Each sample's gradient needs only its own row, label and scale: samples
  // are parallel (a mean's global count is already in `scale`). Classes are
  // needed whole, for the row's softmax.
  RankedTensorType logits = getLogits().getType();
  int64_t classes = logits.getRank() - 1;
  FactorRule rule;
  for (int64_t d = 0; d < classes; ++d)
    rule.addFactor(logits.getDimSize(d), FactorKind::Parallel);
  rule.addFactor(logits.getDimSize(classes), FactorKind::NeedReplication);
  TensorFactors logitsDims, sampleDims;
  appendIdentity(logitsDims, 0, logits.getRank());
  appendIdentity(sampleDims, 0, classes);
  rule.addOperand(logitsDims);
  rule.addOperand(sampleDims);
  rule.addOperand(getScale().getType().getRank() == 0 ? TensorFactors()
                                                      : sampleDims);
  rule.addResult(std::move(logitsDims));
  return rule;
}

//===----------------------------------------------------------------------===//
// Parameter updates and communication
//===----------------------------------------------------------------------===//

/// Every operand and result has `type`'s shape and each element depends on
/// the same element of the others: one parallel factor per dimension.
static FactorRule identityRule(Operation *op, RankedTensorType type) {
  FactorRule rule = perDimensionRule(type, {}, FactorKind::Parallel);
  TensorFactors dims;
  appendIdentity(dims, 0, type.getRank());
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    rule.addOperand(dims);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.addResult(dims);
  return rule;
}

FactorRule AssignOp::getFactorRule() {
  // Each part of the value is stored into the same part of the parameter.
  return identityRule(*this, getValue().getType());
}

FactorRule AllReduceOp::getFactorRule() {
  // Elementwise across the ranks: an element is combined with the same
  // element of the other ranks only.
  return identityRule(*this, getType());
}

FactorRule AllGatherOp::getFactorRule() {
  return axisRule(getInput().getType(), getResult().getType(), getAxis());
}

FactorRule ReduceScatterOp::getFactorRule() {
  return axisRule(getInput().getType(), getResult().getType(), getAxis());
}

FactorRule CollectiveBroadcastOp::getFactorRule() {
  return identityRule(*this, getType());
}

FactorRule AllToAllOp::getFactorRule() {
  // The pieces are exchanged along dim 0.
  return axisRule(getInput().getType(), getResult().getType(), /*axis=*/0);
}

FactorRule SendOp::getFactorRule() {
  return identityRule(*this, getInput().getType());
}

FactorRule RecvOp::getFactorRule() { return identityRule(*this, getType()); }
