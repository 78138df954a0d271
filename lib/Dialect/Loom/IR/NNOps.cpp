//===- NNOps.cpp - Linear algebra, reductions and layers ------------------===//
//
// Verifiers, type inference, folders and canonicalizations of matmul,
// bias_add, the reductions, softmax, layer_norm and its gradient, dropout
// and cross_entropy and its gradient.
//
//===----------------------------------------------------------------------===//

#include "ConstantFold.h"
#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::loom;
using opimpl::emitInferError;
using opimpl::formatShape;
using opimpl::isValidAxis;

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

/// The result type of `op(lhs) x op(rhs)`; errors name `OpTy`.
template <typename OpTy>
static FailureOr<RankedTensorType> inferProductType(std::optional<Location> loc,
                                                    Type lhsType, Type rhsType,
                                                    bool tl, bool tr) {
  auto lhs = dyn_cast<RankedTensorType>(lhsType);
  auto rhs = dyn_cast<RankedTensorType>(rhsType);
  if (!lhs || !rhs)
    return emitInferError<OpTy>(loc, "operands must be ranked tensors");
  if (lhs.getElementType() != rhs.getElementType())
    return emitInferError<OpTy>(
        loc, "operand element types differ: ", lhs.getElementType(), " vs ",
        rhs.getElementType());
  for (auto [name, type] : {std::pair{"lhs", lhs}, std::pair{"rhs", rhs}})
    if (type.getRank() < 2)
      return emitInferError<OpTy>(loc, name, " has rank ", type.getRank(),
                                  "; matmul needs rank >= 2 (reshape "
                                  "vectors to matrices)");

  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  int64_t lr = l.size(), rr = r.size();
  int64_t m = tl ? l[lr - 1] : l[lr - 2];
  int64_t lhsK = tl ? l[lr - 2] : l[lr - 1];
  int64_t rhsK = tr ? r[rr - 1] : r[rr - 2];
  int64_t n = tr ? r[rr - 2] : r[rr - 1];
  if (lhsK != rhsK)
    return emitInferError<OpTy>(loc, "contracting dimensions differ: lhs ",
                                formatShape(l), " has K = ", lhsK, ", rhs ",
                                formatShape(r), " has K = ", rhsK);

  // Batch dimensions align from the right; the longer list supplies the
  // rest.
  ArrayRef<int64_t> lhsBatch = l.drop_back(2), rhsBatch = r.drop_back(2);
  ArrayRef<int64_t> longer =
      lhsBatch.size() >= rhsBatch.size() ? lhsBatch : rhsBatch;
  size_t common = std::min(lhsBatch.size(), rhsBatch.size());
  for (size_t i = 0; i < common; ++i) {
    int64_t a = lhsBatch[lhsBatch.size() - 1 - i];
    int64_t b = rhsBatch[rhsBatch.size() - 1 - i];
    if (a != b)
      return emitInferError<OpTy>(
          loc, "batch dimensions differ: lhs ", formatShape(l), " vs rhs ",
          formatShape(r), " (", a, " vs ", b,
          "); broadcast them explicitly with loom.broadcast");
  }
  SmallVector<int64_t> shape(longer);
  shape.push_back(m);
  shape.push_back(n);
  return RankedTensorType::get(shape, lhs.getElementType());
}

/// The type of `op`'s product (a fused matmul form's lhs and rhs with its
/// transposes); errors at the op.
template <typename OpTy>
static FailureOr<RankedTensorType> productTypeOf(OpTy op) {
  return inferProductType<OpTy>(op.getLoc(), op.getLhs().getType(),
                                op.getRhs().getType(), op.getTransposeLhs(),
                                op.getTransposeRhs());
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type = inferProductType<MatmulOp>(
      loc, adaptor.getLhs().getType(), adaptor.getRhs().getType(),
      adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

namespace {
/// matmul(transpose(x)) with x's two trailing dims swapped is matmul(x)
/// with the transpose flag flipped: the GEMM reads x transposed in place.
/// PyTorch exports every Linear layer this way (MatMul of Transpose(W)).
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto swapsTrailing = [](Value value) -> Value {
      auto transpose = value.getDefiningOp<TransposeOp>();
      if (!transpose)
        return {};
      ArrayRef<int64_t> perm = transpose.getPermutation();
      int64_t rank = perm.size();
      if (rank < 2)
        return {};
      for (int64_t d = 0; d < rank - 2; ++d)
        if (perm[d] != d)
          return {};
      if (perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
        return {};
      return transpose.getInput();
    };
    Value lhs = swapsTrailing(op.getLhs()), rhs = swapsTrailing(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (lhs) {
        op.getLhsMutable().assign(lhs);
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (rhs) {
        op.getRhsMutable().assign(rhs);
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

//===----------------------------------------------------------------------===//
// FusedMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult FusedMatmulOp::verify() {
  FailureOr<RankedTensorType> product = productTypeOf(*this);
  if (failed(product))
    return failure();
  RankedTensorType result = getResult().getType();
  // bf16 operands may give an f32 result (rounded once, from f32 sums).
  bool widened = product->getElementType().isBF16() &&
                 result.getElementType().isF32() &&
                 result.getShape() == product->getShape();
  if (result != *product && !widened)
    return emitOpError() << "result " << result << " is not the product's type "
                         << *product << " (or f32 for bf16 operands)";
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    int64_t n = result.getShape().back();
    if (type.getRank() != 1 || type.getDimSize(0) != n ||
        type.getElementType() != result.getElementType())
      return emitOpError() << "bias " << type << " must be a vector of the "
                           << n << " " << result.getElementType()
                           << " columns of the result";
  }
  if (Value addend = getAddend()) {
    if (addend.getType() != result)
      return emitOpError() << "addend " << addend.getType()
                           << " must have the result's type " << result;
    if (result.getElementType().isBF16())
      return emitOpError("adds an addend to a bf16 result; it needs an f32 "
                         "or f64 one");
    if (getActivation() != MatmulActivation::none)
      return emitOpError("adds an addend after an activation, which a GEMM "
                         "epilogue does not do");
  }
  if (Value preactivation = getPreactivation()) {
    if (getActivation() == MatmulActivation::none)
      return emitOpError("has a preactivation result but no activation");
    if (preactivation.getType() != result)
      return emitOpError() << "preactivation " << preactivation.getType()
                           << " must have the result's type " << result;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulBiasGradOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulBiasGradOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return emitOpError() << "operands " << lhs << " and " << rhs
                         << " must be matrices [K, M] and [K, N]";
  if (lhs.getDimSize(0) != rhs.getDimSize(0))
    return emitOpError() << "operands " << lhs << " and " << rhs
                         << " must have the same K rows";
  Type element = lhs.getElementType();
  if (rhs.getElementType() != element)
    return emitOpError() << "operands " << lhs << " and " << rhs
                         << " must have one element type";
  auto product =
      RankedTensorType::get({lhs.getDimSize(1), rhs.getDimSize(1)}, element);
  if (getResult().getType() != product)
    return emitOpError() << "result " << getResult().getType()
                         << " is not the product's type " << product;
  RankedTensorType summed = getSummed() == MatmulOperand::lhs ? lhs : rhs;
  auto sum = RankedTensorType::get({summed.getDimSize(1)}, element);
  if (getBiasGrad().getType() != sum)
    return emitOpError() << "bias_grad " << getBiasGrad().getType()
                         << " must be " << sum << ", the sum of the "
                         << stringifyMatmulOperand(getSummed()) << "'s rows";
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulGeluGradOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulGeluGradOp::verify() {
  FailureOr<RankedTensorType> product = productTypeOf(*this);
  if (failed(product))
    return failure();
  if (getResult().getType() != *product)
    return emitOpError() << "result " << getResult().getType()
                         << " is not the product's type " << *product;
  if (getInput().getType() != *product)
    return emitOpError() << "input " << getInput().getType()
                         << " must have the product's type " << *product;
  return success();
}

//===----------------------------------------------------------------------===//
// BiasAddOp
//===----------------------------------------------------------------------===//

LogicalResult BiasAddOp::verify() {
  RankedTensorType input = getInput().getType(), bias = getBias().getType();
  if (bias.getRank() != 1)
    return emitOpError() << "bias must have rank 1, got " << bias;
  if (input.getRank() < 1 ||
      input.getDimSize(input.getRank() - 1) != bias.getDimSize(0))
    return emitOpError() << "bias has " << bias.getDimSize(0)
                         << " elements but the last dimension of " << input
                         << " must match it";
  return success();
}

OpFoldResult BiasAddOp::fold(FoldAdaptor adaptor) {
  if (opimpl::isSplatOf(adaptor.getBias(), 0.0))
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The f16/bf16 tensor that `value`, a lossless float widening to f32,
/// read; null for anything else. Ops whose kernels read narrow values in f32
/// themselves (reduce_sum, layer_norm_grad's dout, cross-entropy) fold such
/// a cast: it changes nothing but the bytes read.
static Value narrowSourceOfWidening(Value value) {
  auto widen = value.getDefiningOp<CastOp>();
  if (!widen)
    return {};
  Type from = widen.getInput().getType().getElementType();
  Type to = widen.getType().getElementType();
  if (!to.isF32() || !(from.isBF16() || from.isF16()))
    return {};
  return widen.getInput();
}

template <typename OpTy>
static LogicalResult inferReduce(std::optional<Location> loc, Type inputType,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 SmallVectorImpl<Type> &results) {
  auto input = dyn_cast<RankedTensorType>(inputType);
  if (!input)
    return emitInferError<OpTy>(loc, "input must be a ranked tensor");
  int64_t rank = input.getRank();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!isValidAxis(axes[i], rank) || (i > 0 && axes[i] <= axes[i - 1]))
      return emitInferError<OpTy>(
          loc, "axes [", llvm::make_range(axes.begin(), axes.end()),
          "] must be sorted, unique and within [0, ", rank, ")");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(input.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

#define LOOM_REDUCE_OP(OpTy)                                                   \
  LogicalResult OpTy::inferReturnTypes(                                        \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &results) {                                        \
    return inferReduce<OpTy>(loc, adaptor.getInput().getType(),                \
                             adaptor.getAxes(), adaptor.getKeepdims(),         \
                             results);                                         \
  }                                                                            \
  OpFoldResult OpTy::fold(FoldAdaptor) {                                       \
    /* Reducing over no axes is the identity. */                               \
    if (getAxes().empty() && getInput().getType() == getType())                \
      return getInput();                                                       \
    return {};                                                                 \
  }
LOOM_REDUCE_OP(ReduceSumOp)

/// The inferred type, or its f32 form for a bf16/f16 input (the sum
/// accumulated and returned in f32).
bool ReduceSumOp::isCompatibleReturnTypes(TypeRange inferred,
                                          TypeRange actual) {
  if (inferred == actual)
    return true;
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  auto expected = dyn_cast<RankedTensorType>(inferred.front());
  auto result = dyn_cast<RankedTensorType>(actual.front());
  if (!expected || !result || expected.getShape() != result.getShape())
    return false;
  Type from = expected.getElementType();
  return (from.isBF16() || from.isF16()) && result.getElementType().isF32();
}

namespace {
/// reduce_sum(cast_widen(x)) -> reduce_sum(x) with the same f32 result: the
/// kernel widens as it reads, so the wide copy is never stored.
struct SumReadsNarrow : OpRewritePattern<ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceSumOp op,
                                PatternRewriter &rewriter) const override {
    Value narrow = narrowSourceOfWidening(op.getInput());
    if (!narrow || op.getType().getElementType() !=
                       op.getInput().getType().getElementType())
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getInputMutable().assign(narrow); });
    return success();
  }
};
} // namespace

void ReduceSumOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<SumReadsNarrow>(context);
}
LOOM_REDUCE_OP(ReduceMeanOp)
LOOM_REDUCE_OP(ReduceMaxOp)
#undef LOOM_REDUCE_OP

//===----------------------------------------------------------------------===//
// Softmax, log-softmax, layer norm
//===----------------------------------------------------------------------===//

static LogicalResult verifyAxis(Operation *op, int64_t axis,
                                RankedTensorType type) {
  if (isValidAxis(axis, type.getRank()))
    return success();
  return op->emitOpError() << "axis " << axis << " is out of range for "
                           << type;
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxisAttr().getInt(), getType());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxisAttr().getInt(), getType());
}

LogicalResult CumsumOp::verify() {
  return verifyAxis(*this, getAxisAttr().getInt(), getType());
}

OpFoldResult CumsumOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  RankedTensorType type = getType();
  if (!input || type.getNumElements() > opimpl::kMaxFoldedElements)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  int64_t axis = getAxis(), n = shape[axis];
  int64_t inner = 1;
  for (int64_t dim : shape.drop_front(axis + 1))
    inner *= dim;
  int64_t outer = n * inner == 0 ? 0 : type.getNumElements() / (n * inner);
  bool exclusive = getExclusive(), reverse = getReverse();
  // Sums in the element type, one addition after the other, as the kernels
  // do (floats round at every step, integers wrap).
  auto scan = [&](auto values, auto zero) {
    using Element = decltype(zero);
    SmallVector<Element> out(values.begin(), values.end());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        Element sum = zero;
        for (int64_t k = 0; k < n; ++k) {
          int64_t j = reverse ? n - 1 - k : k;
          int64_t at = (o * n + j) * inner + i;
          Element value = out[at];
          if (exclusive) {
            out[at] = sum;
            sum = sum + value;
          } else {
            sum = sum + value;
            out[at] = sum;
          }
        }
      }
    return out;
  };
  if (auto floatType = dyn_cast<FloatType>(type.getElementType())) {
    SmallVector<APFloat> values =
        scan(input.getValues<APFloat>(),
             APFloat::getZero(floatType.getFloatSemantics()));
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> values = scan(input.getValues<APInt>(), APInt(width, 0));
  return DenseElementsAttr::get(type, values);
}

/// Checks what loom.layer_norm and loom.layer_norm_grad share: the axis,
/// the scale's shape and epsilon.
static LogicalResult verifyLayerNorm(Operation *op, RankedTensorType input,
                                     RankedTensorType scale, int64_t axis,
                                     double epsilon) {
  if (failed(verifyAxis(op, axis, input)))
    return failure();
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  if (scale.getShape() != normalized)
    return op->emitOpError()
           << "scale and bias have shape " << formatShape(scale.getShape())
           << " but the normalized dimensions " << axis << ".."
           << input.getRank() - 1 << " of the input have shape "
           << formatShape(normalized);
  if (!(epsilon >= 0.0))
    return op->emitOpError() << "epsilon must be non-negative, got " << epsilon;
  return success();
}

/// Whether `other` may stand for `input` in a layer norm: the same type, or
/// bf16 where the input is f32 (mixed precision's narrow activations).
static bool isInputOrBF16Of(RankedTensorType input, RankedTensorType other) {
  return other == input ||
         (other.getShape() == input.getShape() &&
          input.getElementType().isF32() && other.getElementType().isBF16());
}

LogicalResult LayerNormOp::verify() {
  if (!isInputOrBF16Of(getInput().getType(), getType()))
    return emitOpError() << "result " << getType()
                         << " must have the input's type "
                         << getInput().getType()
                         << " or be its bf16 form for an f32 input";
  return verifyLayerNorm(*this, getInput().getType(), getScale().getType(),
                         getAxisAttr().getInt(),
                         getEpsilon().convertToDouble());
}

namespace {
/// cast_narrow(layer_norm(x)) -> layer_norm(x) with a bf16 result: the
/// kernel rounds its f32 result once, as the cast did.
struct LayerNormWritesNarrow : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    if (!op->hasOneUse())
      return failure();
    auto narrow = dyn_cast<CastOp>(*op->user_begin());
    if (!narrow || op.getType() != op.getInput().getType() ||
        !isInputOrBF16Of(op.getType(), narrow.getType()) ||
        narrow.getType() == op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        narrow, narrow.getType(), op.getInput(), op.getScale(), op.getBias(),
        op.getAxisAttr(), op.getEpsilonAttr());
    return success();
  }
};
} // namespace

void LayerNormOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<LayerNormWritesNarrow>(context);
}

/// The operands layer_norm_grad and fused_layer_norm_grad share: a scale
/// of the input's element type, a dout of the input's type (or bf16 of an
/// f32 input), and layer_norm's axis, shape and epsilon rules.
template <typename GradOp> static LogicalResult verifyLayerNormGrad(GradOp op) {
  RankedTensorType input = op.getInput().getType();
  RankedTensorType scale = op.getScale().getType();
  if (scale.getElementType() != input.getElementType())
    return op.emitOpError()
           << "scale " << scale << " must have the input's element type "
           << input.getElementType();
  if (!isInputOrBF16Of(input, op.getDout().getType()))
    return op.emitOpError() << "dout " << op.getDout().getType()
                            << " must have the input's type " << input
                            << " or be its bf16 form for an f32 input";
  return verifyLayerNorm(op, input, scale, op.getAxisAttr().getInt(),
                         op.getEpsilon().convertToDouble());
}

LogicalResult LayerNormGradOp::verify() { return verifyLayerNormGrad(*this); }

namespace {
/// layer_norm_grad(x, g, cast_widen(dy)) -> layer_norm_grad(x, g, dy): the
/// kernel widens bf16 dout exactly as it reads it.
struct LayerNormGradReadsNarrow : OpRewritePattern<LayerNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &rewriter) const override {
    Value narrow = narrowSourceOfWidening(op.getDout());
    if (!narrow || op.getDout().getType() != op.getInput().getType() ||
        !isInputOrBF16Of(op.getInput().getType(),
                         cast<RankedTensorType>(narrow.getType())))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getDoutMutable().assign(narrow); });
    return success();
  }
};
} // namespace

void LayerNormGradOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                                  MLIRContext *context) {
  patterns.add<LayerNormGradReadsNarrow>(context);
}

//===----------------------------------------------------------------------===//
// FusedLayerNormGradOp
//===----------------------------------------------------------------------===//

LogicalResult FusedLayerNormGradOp::verify() {
  if (failed(verifyLayerNormGrad(*this)))
    return failure();
  RankedTensorType input = getInput().getType();
  RankedTensorType scale = getScale().getType();
  for (auto [value, name] :
       {std::pair{getAddend(), "addend"}, std::pair{getDinput(), "dinput"}})
    if (value.getType() != input)
      return emitOpError() << name << " " << value.getType()
                           << " must have the input's type " << input;
  for (auto [value, name] :
       {std::pair{getDscale(), "dscale"}, std::pair{getDbias(), "dbias"}})
    if (value.getType() != scale)
      return emitOpError() << name << " " << value.getType()
                           << " must have the scale's type " << scale;
  if (Value narrow = getDinputBf16()) {
    auto type = cast<RankedTensorType>(narrow.getType());
    if (!input.getElementType().isF32() || !type.getElementType().isBF16() ||
        type.getShape() != input.getShape())
      return emitOpError() << "dinput_bf16 " << type
                           << " must be the bf16 form of an f32 input "
                           << input;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto input = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!input)
    return emitInferError<DropoutOp>(loc, "input must be a ranked tensor");
  results.push_back(input);
  results.push_back(input.clone(IntegerType::get(context, 1)));
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError() << "ratio " << ratio << " must be in [0, 1)";
  if (getIndexBaseAttr().getInt() < 0)
    return emitOpError() << "index_base " << getIndexBaseAttr().getInt()
                         << " must not be negative";
  int64_t chunk = getIndexChunkAttr().getInt(),
          chunkStride = getIndexChunkStrideAttr().getInt();
  if (chunk < 0 || (chunk > 0 && chunkStride < chunk))
    return emitOpError() << "index_chunk " << chunk
                         << " needs a stride of at least itself (has "
                         << chunkStride << ")";
  if (bool(getOffsets()) != bool(getGlobalShapeAttr()))
    return emitOpError("takes offsets and a global shape together");
  if (!getOffsets())
    return success();
  auto type = cast<RankedTensorType>(getInput().getType());
  ArrayRef<int64_t> global = *getGlobalShape();
  // The runtime's kernels index blocks of up to 8 dimensions.
  if (type.getRank() > 8)
    return emitOpError() << "block of a " << type.getRank()
                         << "-d tensor: at most 8 dimensions";
  if (int64_t(global.size()) != type.getRank() ||
      cast<RankedTensorType>(getOffsets().getType()).getDimSize(0) !=
          type.getRank())
    return emitOpError() << "needs one offset and one global size per "
                         << "dimension of its " << type.getRank() << "-d input";
  for (auto [dim, size] : llvm::enumerate(type.getShape()))
    if (global[dim] < size)
      return emitOpError() << "global size " << global[dim] << " of dimension "
                           << dim << " is smaller than the block's " << size;
  return success();
}

namespace {
/// dropout with ratio 0 keeps everything: the input, and an all-true mask.
struct EraseZeroDropout : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getRatio().isZero())
      return failure();
    auto maskType = cast<RankedTensorType>(op.getMask().getType());
    Value mask = rewriter.create<ConstantOp>(
        op.getLoc(), maskType, DenseElementsAttr::get(maskType, true));
    rewriter.replaceOp(op, {op.getInput(), mask});
    return success();
  }
};
} // namespace

void DropoutOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<EraseZeroDropout>(context);
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

/// Checks that `labels` index the samples of `logits` ([..., C] with the
/// classes last); errors name `OpTy`.
template <typename OpTy>
static LogicalResult checkCrossEntropyOperands(std::optional<Location> loc,
                                               Type logitsType,
                                               Type labelsType) {
  auto logits = dyn_cast<RankedTensorType>(logitsType);
  auto labels = dyn_cast<RankedTensorType>(labelsType);
  if (!logits || !labels)
    return emitInferError<OpTy>(loc, "operands must be ranked tensors");
  if (logits.getRank() < 1)
    return emitInferError<OpTy>(loc,
                                "logits need a class dimension (rank >= 1)");
  ArrayRef<int64_t> samples = logits.getShape().drop_back();
  if (labels.getShape() != samples)
    return emitInferError<OpTy>(
        loc, "labels have shape ", formatShape(labels.getShape()),
        " but logits ", formatShape(logits.getShape()),
        " (classes last) need labels of shape ", formatShape(samples));
  return success();
}

/// The loss of cross-entropy over `logits` with `reduction`: a scalar, or
/// one per sample for `none`, of the statistics type.
static RankedTensorType getLossType(RankedTensorType logits,
                                    LossReduction reduction) {
  Type loss = getStatisticsType(logits.getElementType());
  if (reduction == LossReduction::none)
    return RankedTensorType::get(logits.getShape().drop_back(), loss);
  return RankedTensorType::get({}, loss);
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  if (failed(checkCrossEntropyOperands<CrossEntropyOp>(
          loc, adaptor.getLogits().getType(), adaptor.getLabels().getType())))
    return failure();
  results.push_back(
      getLossType(cast<RankedTensorType>(adaptor.getLogits().getType()),
                  adaptor.getReduction()));
  return success();
}

/// Checks `classes N` (0 < N <= the logits' last dimension) of a
/// cross-entropy op.
template <typename OpTy> static LogicalResult verifyClasses(OpTy op) {
  IntegerAttr classes = op.getClassesAttr();
  int64_t width = op.getLogits().getType().getShape().back();
  if (classes && classes.getInt() > width)
    return op.emitOpError()
           << "has classes " << classes.getInt() << " but its logits have only "
           << width << " entries in the last dimension";
  return success();
}

LogicalResult CrossEntropyOp::verify() { return verifyClasses(*this); }

namespace {
/// op(cast_widen(x), ...) -> op(x, ...) for cross_entropy and its gradient:
/// the same f32 result, the kernel widening as it reads.
template <typename OpTy> struct ReadNarrowLogits : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value narrow = narrowSourceOfWidening(op.getLogits());
    if (!narrow)
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getLogitsMutable().assign(narrow); });
    return success();
  }
};

/// `classes N` where N is the whole last dimension says nothing: drop it.
template <typename OpTy> struct DropWholeClasses : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> classes = op.getClasses();
    if (!classes || *classes != op.getLogits().getType().getShape().back())
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.removeClassesAttr(); });
    return success();
  }
};
} // namespace

void CrossEntropyOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                                 MLIRContext *context) {
  patterns
      .add<ReadNarrowLogits<CrossEntropyOp>, DropWholeClasses<CrossEntropyOp>>(
          context);
}

//===----------------------------------------------------------------------===//
// CrossEntropyGradOp
//===----------------------------------------------------------------------===//

/// Checks the operands, the scale and the gradient of a cross-entropy
/// gradient op (loom.cross_entropy_grad, loom.cross_entropy_with_grad).
template <typename OpTy> static LogicalResult verifyGradient(OpTy op) {
  if (failed(checkCrossEntropyOperands<OpTy>(
          op.getLoc(), op.getLogits().getType(), op.getLabels().getType())))
    return failure();
  RankedTensorType logits = op.getLogits().getType();
  RankedTensorType scale = op.getScale().getType();
  ArrayRef<int64_t> samples = logits.getShape().drop_back();
  if (scale.getRank() != 0 && scale.getShape() != samples)
    return op.emitOpError()
           << "scale has shape " << formatShape(scale.getShape())
           << "; it must be a scalar or have the samples' shape "
           << formatShape(samples);
  Type statistics = getStatisticsType(logits.getElementType());
  if (scale.getElementType() != statistics)
    return op.emitOpError() << "scale must be " << statistics << " for "
                            << logits.getElementType() << " logits, got "
                            << scale.getElementType();
  if (op.getDlogits().getType().getShape() != logits.getShape())
    return op.emitOpError() << "dlogits have shape "
                            << formatShape(op.getDlogits().getType().getShape())
                            << " but logits " << formatShape(logits.getShape());
  return verifyClasses(op);
}

LogicalResult CrossEntropyGradOp::verify() { return verifyGradient(*this); }

namespace {
/// cast_narrow(cross_entropy_grad(...)) -> cross_entropy_grad(...) with the
/// narrow result type, when the cast is the only use and the gradient was
/// computed in its own type (f32 -> bf16, f64 -> f32): rounding once from
/// the computed value is what the cast did.
struct GradWriteNarrowResult : OpRewritePattern<CrossEntropyGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!op->hasOneUse())
      return failure();
    auto narrow = dyn_cast<CastOp>(*op->user_begin());
    if (!narrow)
      return failure();
    Type computed =
        getStatisticsType(op.getLogits().getType().getElementType());
    Type from = op.getType().getElementType();
    Type to = narrow.getType().getElementType();
    bool narrows =
        (from.isF32() && to.isBF16()) || (from.isF64() && to.isF32());
    if (from != computed || !narrows)
      return failure();
    rewriter.replaceOpWithNewOp<CrossEntropyGradOp>(
        narrow, narrow.getType(), op.getLogits(), op.getLabels(), op.getScale(),
        op.getIgnoreIndexAttr(), op.getClassesAttr());
    return success();
  }
};
} // namespace

void CrossEntropyGradOp::getCanonicalizationPatterns(
    RewritePatternSet &patterns, MLIRContext *context) {
  patterns.add<ReadNarrowLogits<CrossEntropyGradOp>, GradWriteNarrowResult,
               DropWholeClasses<CrossEntropyGradOp>>(context);
}

//===----------------------------------------------------------------------===//
// CrossEntropyWithGradOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyWithGradOp::verify() {
  if (failed(verifyGradient(*this)))
    return failure();
  RankedTensorType loss = getLossType(getLogits().getType(), getReduction());
  if (getLoss().getType() != loss)
    return emitOpError() << "loss " << getLoss().getType() << " must be "
                         << loss << " for reduction "
                         << stringifyLossReduction(getReduction());
  return success();
}
