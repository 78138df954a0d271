//===- GradientRules.cpp - Reverse-mode rules of the loom ops -------------===//
//
// Each rule maps the adjoint of an op's results to adjoints of its operands,
// using only loom ops. Broadcasting forward ops sum their gradients back to
// the operand's shape (unbroadcast); rules recompute cheap intermediates
// (softmax, layer-norm statistics) rather than keeping extra results alive.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"
#include "../ArithmeticBuilder.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::loom;

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Builds loom ops at one location: the arithmetic, and the shape and
/// reduction ops gradients need.
class Emitter : public ArithmeticBuilder {
public:
  using ArithmeticBuilder::ArithmeticBuilder;

  Value compare(CompareDirection direction, Value x, Value y) {
    return b.create<CompareOp>(loc, direction, x, y);
  }
  Value select(Value condition, Value onTrue, Value onFalse) {
    return b.create<SelectOp>(loc, condition, onTrue, onFalse);
  }
  Value cast(Value x, Type element) {
    RankedTensorType type = tensorType(x);
    if (type.getElementType() == element)
      return x;
    return b.create<CastOp>(loc, type.clone(element), x);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    RankedTensorType type = tensorType(x);
    if (type.getShape() == shape)
      return x;
    return b.create<ReshapeOp>(loc, type.clone(shape), x);
  }
  Value broadcast(Value x, ArrayRef<int64_t> shape) {
    RankedTensorType type = tensorType(x);
    if (type.getShape() == shape)
      return x;
    return b.create<BroadcastOp>(loc, type.clone(shape), x);
  }
  Value transpose(Value x, ArrayRef<int64_t> permutation) {
    return b.create<TransposeOp>(loc, x, permutation);
  }
  Value matmul(Value x, Value y, bool transposeX, bool transposeY) {
    return b.create<MatmulOp>(loc, x, y, transposeX, transposeY);
  }
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    if (axes.empty())
      return x;
    return b.create<ReduceSumOp>(loc, x, axes, keepdims);
  }
  Value reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    return b.create<ReduceMeanOp>(loc, x, axes, keepdims);
  }
  Value zeros(RankedTensorType type) {
    Type element = type.getElementType();
    Attribute zero = isa<FloatType>(element)
                         ? Attribute(FloatAttr::get(element, 0.0))
                         : Attribute(IntegerAttr::get(element, 0));
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, zero));
  }

  /// Sums a gradient of a broadcast result back to `target`'s shape: over
  /// the leading dimensions `target` lacks and where it has size 1.
  Value unbroadcast(Value gradient, Type target) {
    ArrayRef<int64_t> from = tensorType(gradient).getShape();
    ArrayRef<int64_t> to = llvm::cast<RankedTensorType>(target).getShape();
    if (from == to)
      return gradient;
    int64_t lead = int64_t(from.size()) - int64_t(to.size());
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < int64_t(from.size()); ++i)
      if (i < lead || (to[i - lead] == 1 && from[i] != 1))
        axes.push_back(i);
    return reshape(reduceSum(gradient, axes, /*keepdims=*/true), to);
  }

  /// `gradient` of a reduction over `axes` spread back over `input`.
  Value unreduce(Value gradient, ArrayRef<int64_t> axes,
                 RankedTensorType input) {
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t axis : axes)
      kept[axis] = 1;
    return broadcast(reshape(gradient, kept), input.getShape());
  }
};

int64_t product(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

SmallVector<int64_t> range(int64_t begin, int64_t end) {
  SmallVector<int64_t> values;
  for (int64_t i = begin; i < end; ++i)
    values.push_back(i);
  return values;
}

class Rules {
public:
  Rules(Operation *op, ArrayRef<Value> gradients, GradientContext &context)
      : op(op), gradients(gradients), ctx(context),
        e(context.builder, op->getLoc()) {}

  // One rule per differentiable op; GradientModel<OpTy> calls rule(OpTy),
  // and registerGradientExternalModels lists the ops.

  LogicalResult rule(AddOp add) {
    give(add.getLhs(),
         [&] { return e.unbroadcast(g(), add.getLhs().getType()); });
    give(add.getRhs(),
         [&] { return e.unbroadcast(g(), add.getRhs().getType()); });
    return success();
  }

  LogicalResult rule(SubOp sub) {
    give(sub.getLhs(),
         [&] { return e.unbroadcast(g(), sub.getLhs().getType()); });
    give(sub.getRhs(),
         [&] { return e.unbroadcast(e.neg(g()), sub.getRhs().getType()); });
    return success();
  }

  LogicalResult rule(MulOp mul) {
    give(mul.getLhs(), [&] {
      return e.unbroadcast(e.mul(g(), mul.getRhs()), mul.getLhs().getType());
    });
    give(mul.getRhs(), [&] {
      return e.unbroadcast(e.mul(g(), mul.getLhs()), mul.getRhs().getType());
    });
    return success();
  }

  LogicalResult rule(DivOp div) {
    give(div.getLhs(), [&] {
      return e.unbroadcast(e.div(g(), div.getRhs()), div.getLhs().getType());
    });
    // d(x/y)/dy = -(x/y)/y.
    give(div.getRhs(), [&] {
      return e.unbroadcast(
          e.neg(e.div(e.mul(g(), div.getResult()), div.getRhs())),
          div.getRhs().getType());
    });
    return success();
  }

  LogicalResult rule(PowOp pow) {
    Value x = pow.getLhs(), y = pow.getRhs();
    give(x, [&] {
      Value dx = e.mul(y, e.pow(x, e.sub(y, e.scalar(y, 1))));
      return e.unbroadcast(e.mul(g(), dx), x.getType());
    });
    give(y, [&] {
      return e.unbroadcast(e.mul(g(), e.mul(pow.getResult(), e.log(x))),
                           y.getType());
    });
    return success();
  }

  LogicalResult rule(NegOp neg) { return unary(neg.getInput(), e.neg(g())); }

  LogicalResult rule(ExpOp exp) {
    return unary(exp.getInput(), e.mul(g(), exp.getResult()));
  }

  LogicalResult rule(LogOp log) {
    return unary(log.getInput(), e.div(g(), log.getInput()));
  }

  LogicalResult rule(SqrtOp sqrt) {
    return unary(sqrt.getInput(), e.div(e.scale(g(), 0.5), sqrt.getResult()));
  }

  LogicalResult rule(RsqrtOp rsqrt) {
    Value y = rsqrt.getResult();
    return unary(rsqrt.getInput(),
                 e.scale(e.mul(g(), e.mul(y, e.mul(y, y))), -0.5));
  }

  LogicalResult rule(ReciprocalOp reciprocal) {
    Value y = reciprocal.getResult();
    return unary(reciprocal.getInput(), e.neg(e.mul(g(), e.mul(y, y))));
  }

  LogicalResult rule(TanhOp tanh) {
    Value y = tanh.getResult();
    return unary(tanh.getInput(),
                 e.mul(g(), e.sub(e.scalar(y, 1), e.mul(y, y))));
  }

  LogicalResult rule(SigmoidOp sigmoid) {
    Value y = sigmoid.getResult();
    return unary(sigmoid.getInput(),
                 e.mul(g(), e.mul(y, e.sub(e.scalar(y, 1), y))));
  }

  LogicalResult rule(ReluOp relu) {
    Value x = relu.getInput();
    Value positive = e.compare(CompareDirection::gt, x, e.scalar(x, 0));
    return unary(x, e.select(positive, g(), e.scalar(x, 0)));
  }

  LogicalResult rule(ErfOp erf) {
    Value x = erf.getInput();
    Value dx = e.scale(e.exp(e.neg(e.mul(x, x))), 2 / std::sqrt(M_PI));
    return unary(x, e.mul(g(), dx));
  }

  LogicalResult rule(SinOp sin) {
    return unary(sin.getInput(), e.mul(g(), e.cos(sin.getInput())));
  }

  LogicalResult rule(CosOp cos) {
    return unary(cos.getInput(), e.neg(e.mul(g(), e.sin(cos.getInput()))));
  }

  LogicalResult rule(AbsOp abs) {
    // torch's sgn(x): 0 at x = 0.
    Value x = abs.getInput(), zero = e.scalar(x, 0);
    Value negative =
        e.select(e.compare(CompareDirection::lt, x, zero), e.neg(g()), zero);
    return unary(
        x, e.select(e.compare(CompareDirection::gt, x, zero), g(), negative));
  }

  LogicalResult rule(FmodOp fmod) {
    // torch.fmod: d/da = 1, d/db = -trunc(a / b) = -(a - fmod) / b.
    Value a = fmod.getLhs(), b = fmod.getRhs();
    give(a, [&] { return e.unbroadcast(g(), a.getType()); });
    give(b, [&] {
      Value quotient = e.div(e.sub(a, fmod.getResult()), b);
      return e.unbroadcast(e.neg(e.mul(g(), quotient)), b.getType());
    });
    return success();
  }

  LogicalResult rule(MaximumOp max) { return extremumRule(max, true); }

  LogicalResult rule(MinimumOp min) { return extremumRule(min, false); }

  LogicalResult rule(GeluOp gelu) { return geluRule(gelu); }

  LogicalResult rule(CastOp cast) {
    Value x = cast.getInput();
    if (!isa<FloatType>(getElementTypeOrSelf(x.getType())))
      return success();
    return unary(x, e.cast(g(), getElementTypeOrSelf(x.getType())));
  }

  LogicalResult rule(SelectOp select) {
    Value zero = e.scalar(g(), 0);
    give(select.getOnTrue(), [&] {
      return e.unbroadcast(e.select(select.getCondition(), g(), zero),
                           select.getOnTrue().getType());
    });
    give(select.getOnFalse(), [&] {
      return e.unbroadcast(e.select(select.getCondition(), zero, g()),
                           select.getOnFalse().getType());
    });
    return success();
  }

  LogicalResult rule(BiasAddOp biasAdd) {
    give(biasAdd.getInput(), [&] { return g(); });
    give(biasAdd.getBias(),
         [&] { return e.unbroadcast(g(), biasAdd.getBias().getType()); });
    return success();
  }

  LogicalResult rule(MatmulOp matmul) { return matmulRule(matmul); }

  LogicalResult rule(ReshapeOp reshape) {
    return unary(reshape.getInput(),
                 e.reshape(g(), tensorType(reshape.getInput()).getShape()));
  }

  LogicalResult rule(TransposeOp transpose) {
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    SmallVector<int64_t> inverse(permutation.size());
    for (auto [i, p] : llvm::enumerate(permutation))
      inverse[p] = i;
    return unary(transpose.getInput(), e.transpose(g(), inverse));
  }

  LogicalResult rule(BroadcastOp broadcast) {
    return unary(broadcast.getInput(),
                 e.unbroadcast(g(), broadcast.getInput().getType()));
  }

  LogicalResult rule(ShardOp shard) { return unary(shard.getInput(), g()); }

  LogicalResult rule(ReduceSumOp reduce) {
    RankedTensorType input = tensorType(reduce.getInput());
    Value grad = e.unreduce(g(), reduce.getAxes(), input);
    // An f32 sum of bf16 values passes a bf16 gradient back.
    if (tensorType(grad).getElementType() != input.getElementType())
      grad = e.cast(grad, input.getElementType());
    return unary(reduce.getInput(), grad);
  }

  LogicalResult rule(ReduceMeanOp reduce) {
    RankedTensorType input = tensorType(reduce.getInput());
    int64_t count = 1;
    for (int64_t axis : reduce.getAxes())
      count *= input.getDimSize(axis);
    return unary(
        reduce.getInput(),
        e.unreduce(e.scale(g(), 1.0 / double(count)), reduce.getAxes(), input));
  }

  LogicalResult rule(ReduceMaxOp reduce) { return reduceMaxRule(reduce); }

  LogicalResult rule(CumsumOp cumsum) {
    // Each input element reaches the results after it (before it,
    // reversed): the gradient sums the other way.
    return unary(cumsum.getInput(),
                 e.b.create<CumsumOp>(e.loc, g(), cumsum.getAxis(),
                                      cumsum.getExclusive(),
                                      !cumsum.getReverse()));
  }

  LogicalResult rule(SoftmaxOp softmax) {
    Value y = softmax.getResult();
    Value dot = e.reduceSum(e.mul(g(), y), {int64_t(softmax.getAxis())}, true);
    return unary(softmax.getInput(), e.mul(y, e.sub(g(), dot)));
  }

  LogicalResult rule(LogSoftmaxOp softmax) {
    Value y = softmax.getResult();
    Value total = e.reduceSum(g(), {int64_t(softmax.getAxis())}, true);
    return unary(softmax.getInput(), e.sub(g(), e.mul(e.exp(y), total)));
  }

  LogicalResult rule(LayerNormOp norm) { return layerNormRule(norm); }

  LogicalResult rule(AttentionOp attention) { return attentionRule(attention); }

  LogicalResult rule(CrossEntropyOp loss) { return crossEntropyRule(loss); }

  LogicalResult rule(GatherOp gather) { return gatherRule(gather); }

  LogicalResult rule(SliceOp slice) { return sliceRule(slice); }

  LogicalResult rule(ConcatOp concat) { return concatRule(concat); }

  LogicalResult rule(SplitOp split) { return splitRule(split); }

  LogicalResult rule(DropoutOp dropout) {
    Value keep = e.cast(dropout.getMask(),
                        getElementTypeOrSelf(dropout.getInput().getType()));
    double scale = 1.0 / (1.0 - dropout.getRatio().convertToDouble());
    return unary(dropout.getInput(), e.scale(e.mul(g(), keep), scale));
  }

  /// A mask: nothing flows back through it.
  LogicalResult rule(CompareOp) { return success(); }

private:
  /// The adjoint of result 0.
  Value g() { return gradients[0]; }

  /// Accumulates the gradient `make()` builds into `operand`, if it needs one.
  void give(Value operand, llvm::function_ref<Value()> make) {
    if (ctx.isActive(operand))
      ctx.accumulate(operand, make());
  }
  LogicalResult unary(Value operand, Value gradient) {
    if (ctx.isActive(operand))
      ctx.accumulate(operand, gradient);
    return success();
  }

  LogicalResult geluRule(GeluOp gelu) {
    Value x = gelu.getInput();
    if (!ctx.isActive(x))
      return success();
    // One op, so that lowering can fold it into the GEMM producing g()
    // (loom-fuse-matmul-epilogue) or else spell it out
    // (loom-decompose-gelu-grad).
    ctx.accumulate(
        x, e.b.create<GeluGradOp>(e.loc, g(), x, gelu.getApproximate()));
    return success();
  }

  /// C = op(A) op(B) with op a transpose of the trailing two dims or not:
  /// dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, transposed back where the
  /// operand was read transposed; shared operands sum over the batch dims.
  LogicalResult matmulRule(MatmulOp matmul) {
    Value a = matmul.getLhs(), b = matmul.getRhs();
    bool ta = matmul.getTransposeLhs(), tb = matmul.getTransposeRhs();
    give(a, [&] {
      Value da = ta ? e.matmul(b, g(), tb, true) : e.matmul(g(), b, false, !tb);
      return e.unbroadcast(da, a.getType());
    });
    give(b, [&] {
      RankedTensorType aType = tensorType(a), gType = tensorType(g());
      if (tensorType(b).getRank() == 2 && aType.getRank() > 2 && !ta) {
        // A weight shared by every batch (a linear layer): fold the batch
        // into the rows and make one GEMM over all of them, rather than a
        // product per batch and a sum of those (a batch-sized temporary).
        int64_t rows = product(aType.getShape().drop_back());
        Value flatA = e.reshape(a, {rows, aType.getShape().back()});
        Value flatG = e.reshape(g(), {rows, gType.getShape().back()});
        return tb ? e.matmul(flatG, flatA, true, false)
                  : e.matmul(flatA, flatG, true, false);
      }
      Value db = tb ? e.matmul(g(), a, true, ta) : e.matmul(a, g(), !ta, false);
      return e.unbroadcast(db, b.getType());
    });
    return success();
  }

  /// torch.maximum/minimum: the gradient goes to the operand that won, and
  /// half to each on a tie (both get all of it where one is NaN, as in
  /// torch).
  template <typename OpTy> LogicalResult extremumRule(OpTy op, bool isMax) {
    Value a = op.getLhs(), b = op.getRhs();
    Value zero = e.scalar(g(), 0);
    Value shared =
        e.select(e.compare(CompareDirection::eq, a, b), e.scale(g(), 0.5), g());
    CompareDirection aLoses =
        isMax ? CompareDirection::lt : CompareDirection::gt;
    CompareDirection bLoses =
        isMax ? CompareDirection::gt : CompareDirection::lt;
    give(a, [&] {
      return e.unbroadcast(e.select(e.compare(aLoses, a, b), zero, shared),
                           a.getType());
    });
    give(b, [&] {
      return e.unbroadcast(e.select(e.compare(bLoses, a, b), zero, shared),
                           b.getType());
    });
    return success();
  }

  /// Evenly shared among the maxima, as torch.amax.
  LogicalResult reduceMaxRule(ReduceMaxOp reduce) {
    Value x = reduce.getInput();
    if (!ctx.isActive(x))
      return success();
    RankedTensorType input = tensorType(x);
    Value max = e.unreduce(reduce.getResult(), reduce.getAxes(), input);
    Value hit =
        e.cast(e.compare(CompareDirection::eq, x, max), input.getElementType());
    Value count = e.unreduce(e.reduceSum(hit, reduce.getAxes(), false),
                             reduce.getAxes(), input);
    Value spread = e.unreduce(g(), reduce.getAxes(), input);
    ctx.accumulate(x, e.div(e.mul(spread, hit), count));
    return success();
  }

  /// The fused backward, which reads the output for the row sums
  /// delta = sum(dout * output) itself.
  LogicalResult attentionRule(AttentionOp attention) {
    if (gradients[1])
      return attention.emitOpError(
          "has no gradient rule for its logsumexp result");
    Value q = attention.getQ(), k = attention.getK(), v = attention.getV();
    SmallVector<Value, 3> operands = {q, k, v};
    if (!g() || !llvm::any_of(operands, ctx.isActive))
      return success();
    auto grad = e.b.create<AttentionGradOp>(
        e.loc, q, k, v, g(), attention.getLogsumexp(), attention.getOutput(),
        attention.getMask(), attention.getScaleAttr(),
        attention.getMaskValueAttr(), attention.getSeqMajorAttr());
    for (auto [operand, gradient] : llvm::zip(operands, grad.getResults()))
      if (ctx.isActive(operand))
        ctx.accumulate(operand, gradient);
    return success();
  }

  /// One loom.layer_norm_grad, which recomputes the row statistics from the
  /// input: the backward reads the input and the gradient once instead of
  /// materializing the normalized input and four row reductions.
  LogicalResult layerNormRule(LayerNormOp norm) {
    Value x = norm.getInput(), scale = norm.getScale(), bias = norm.getBias();
    SmallVector<Value, 3> operands = {x, scale, bias};
    if (!g() || !llvm::any_of(operands, ctx.isActive))
      return success();
    auto grad = e.b.create<LayerNormGradOp>(
        e.loc, x, scale, g(), norm.getAxisAttr(), norm.getEpsilonAttr());
    for (auto [operand, gradient] : llvm::zip(operands, grad.getResults()))
      if (ctx.isActive(operand))
        ctx.accumulate(operand, gradient);
    return success();
  }

  /// d loss / d logits = (softmax(logits) - onehot(label)) scaled by the
  /// loss gradient, zero for ignored samples, over the counted ones for mean:
  /// one loom.cross_entropy_grad, whose scale carries the reduction.
  LogicalResult crossEntropyRule(CrossEntropyOp loss) {
    Value logits = loss.getLogits(), labels = loss.getLabels();
    if (!ctx.isActive(logits))
      return success();
    Value scale = g();
    std::optional<int64_t> ignore = loss.getIgnoreIndex();
    if (loss.getReduction() == LossReduction::mean) {
      RankedTensorType samples = tensorType(labels);
      if (ignore) {
        Value kept = e.compare(CompareDirection::ne, labels,
                               e.scalar(labels, double(*ignore)));
        Value counted =
            e.reduceSum(e.cast(kept, tensorType(scale).getElementType()),
                        range(0, samples.getRank()), false);
        scale = e.div(scale, counted);
      } else {
        scale = e.scale(scale, 1.0 / double(samples.getNumElements()));
      }
    }
    IntegerAttr ignoreAttr =
        ignore ? e.b.getI64IntegerAttr(*ignore) : IntegerAttr();
    ctx.accumulate(logits, e.b.create<CrossEntropyGradOp>(
                               e.loc, logits.getType(), logits, labels, scale,
                               ignoreAttr, loss.getClassesAttr()));
    return success();
  }

  /// The gradient of a table lookup along axis 0: onehot(indices)^T @ dY,
  /// which sums the rows of repeated indices.
  LogicalResult gatherRule(GatherOp gather) {
    Value table = gather.getInput(), indices = gather.getIndices();
    if (!ctx.isActive(table))
      return success();
    RankedTensorType tableType = tensorType(table);
    int64_t axis = gather.getAxis();
    Value gradient = g();
    if (std::optional<int64_t> padding = gather.getPaddingIdx()) {
      // The positions that read the padding row pass no gradient to it (its
      // index either way round counts).
      int64_t size = tableType.getDimSize(axis);
      int64_t row = *padding < 0 ? *padding + size : *padding;
      Value isPadding = e.compare(CompareDirection::eq, indices,
                                  e.scalar(indices, double(row)));
      Value wrapped = e.compare(CompareDirection::eq, indices,
                                e.scalar(indices, double(row - size)));
      Value skip = e.b.create<MaximumOp>(e.loc, isPadding, wrapped);
      // [indices] -> [1 x axis, indices, 1 x trailing], as the gradient.
      SmallVector<int64_t> shape(axis, 1);
      llvm::append_range(shape, tensorType(indices).getShape());
      shape.append(tableType.getRank() - axis - 1, 1);
      gradient = e.select(e.reshape(skip, shape), e.scalar(g(), 0), g());
    }
    if (axis == 0) {
      // The table's rows collect the slices of the output's gradient that
      // read them (the kernel wraps negative indices as gather does).
      ctx.accumulate(
          table, e.b.create<ScatterAddOp>(e.loc, tableType, gradient, indices));
      return success();
    }
    // Along another axis: the same with that axis moved to the front of the
    // table, and the index dimensions to the front of the gradient.
    int64_t rank = tableType.getRank();
    int64_t indexRank = tensorType(indices).getRank();
    SmallVector<int64_t> toFront = {axis};
    for (int64_t dim = 0; dim < rank; ++dim)
      if (dim != axis)
        toFront.push_back(dim);
    SmallVector<int64_t> gradientOrder;
    for (int64_t dim = 0; dim < indexRank; ++dim)
      gradientOrder.push_back(axis + dim);
    for (int64_t dim = 0; dim < axis; ++dim)
      gradientOrder.push_back(dim);
    for (int64_t dim = axis + indexRank; dim < tensorType(g()).getRank(); ++dim)
      gradientOrder.push_back(dim);
    SmallVector<int64_t> frontShape;
    for (int64_t dim : toFront)
      frontShape.push_back(tableType.getDimSize(dim));
    Value sums =
        e.b.create<ScatterAddOp>(e.loc, tableType.clone(frontShape),
                                 e.transpose(gradient, gradientOrder), indices);
    SmallVector<int64_t> back(rank);
    for (int64_t position = 0; position < rank; ++position)
      back[toFront[position]] = position;
    ctx.accumulate(table, e.transpose(sums, back));
    return success();
  }

  /// Zero everywhere but the window: the gradient padded with zeros along
  /// each sliced dimension; with a stride s, each gradient element is first
  /// followed by s - 1 zeros (interleaved along a new minor dimension).
  LogicalResult sliceRule(SliceOp slice) {
    Value x = slice.getInput();
    if (!ctx.isActive(x))
      return success();
    RankedTensorType input = tensorType(x);
    Value grad = g();
    for (int64_t dim = 0; dim < input.getRank(); ++dim) {
      int64_t start = slice.getStarts()[dim], limit = slice.getLimits()[dim];
      int64_t stride = slice.getStrides()[dim];
      int64_t size = input.getDimSize(dim);
      auto zerosOf = [&](int64_t length) {
        SmallVector<int64_t> shape(tensorType(grad).getShape());
        shape[dim] = length;
        return e.zeros(tensorType(grad).clone(shape));
      };
      if (stride != 1) {
        // [.., n, ..] -> [.., n, 1, ..] ++ zeros [.., n, s-1, ..] ->
        // [.., n s, ..], cut to the window's length limit - start.
        RankedTensorType type = tensorType(grad);
        int64_t count = type.getDimSize(dim);
        SmallVector<int64_t> split(type.getShape());
        split.insert(split.begin() + dim + 1, 1);
        Value column = e.reshape(grad, split);
        SmallVector<int64_t> zeroShape(split);
        zeroShape[dim + 1] = stride - 1;
        Value spread = e.b.create<ConcatOp>(
            e.loc, ValueRange{column, e.zeros(type.clone(zeroShape))}, dim + 1);
        SmallVector<int64_t> merged(type.getShape());
        merged[dim] = count * stride;
        grad = e.reshape(spread, merged);
        int64_t window = limit - start;
        if (count * stride != window) {
          SmallVector<int64_t> starts(merged.size(), 0), limits(merged);
          SmallVector<int64_t> strides(merged.size(), 1);
          limits[dim] = window;
          grad = e.b.create<SliceOp>(e.loc, grad, starts, limits, strides);
        }
      }
      if (start == 0 && limit == size)
        continue;
      SmallVector<Value> pieces;
      if (start > 0)
        pieces.push_back(zerosOf(start));
      pieces.push_back(grad);
      if (limit < size)
        pieces.push_back(zerosOf(size - limit));
      grad = e.b.create<ConcatOp>(e.loc, pieces, dim);
    }
    ctx.accumulate(x, grad);
    return success();
  }

  LogicalResult concatRule(ConcatOp concat) {
    int64_t axis = concat.getAxis(), offset = 0;
    RankedTensorType result = tensorType(concat.getResult());
    for (Value input : concat.getInputs()) {
      int64_t length = tensorType(input).getDimSize(axis);
      give(input, [&] {
        SmallVector<int64_t> starts(result.getRank(), 0);
        SmallVector<int64_t> limits(result.getShape());
        SmallVector<int64_t> strides(result.getRank(), 1);
        starts[axis] = offset;
        limits[axis] = offset + length;
        return e.b.create<SliceOp>(e.loc, g(), starts, limits, strides)
            .getResult();
      });
      offset += length;
    }
    return success();
  }

  LogicalResult splitRule(SplitOp split) {
    if (!ctx.isActive(split.getInput()))
      return success();
    SmallVector<Value> pieces;
    for (auto [result, gradient] : llvm::zip(split.getResults(), gradients))
      pieces.push_back(gradient ? gradient : e.zeros(tensorType(result)));
    ctx.accumulate(split.getInput(),
                   e.b.create<ConcatOp>(e.loc, pieces, split.getAxis()));
    return success();
  }

  Operation *op;
  ArrayRef<Value> gradients;
  GradientContext &ctx;
  Emitter e;
};

/// The gradient rule of `OpTy` as its GradientOpInterface: Rules::rule.
template <typename OpTy>
struct GradientModel
    : public GradientOpInterface::ExternalModel<GradientModel<OpTy>, OpTy> {
  LogicalResult backpropagate(Operation *op, ArrayRef<Value> resultGradients,
                              GradientContext &context) const {
    return Rules(op, resultGradients, context).rule(cast<OpTy>(op));
  }
};

template <typename... OpTys> void attachGradientModels(MLIRContext *context) {
  (OpTys::template attachInterface<GradientModel<OpTys>>(*context), ...);
}

/// Attaches the models once the loom dialect is loaded. A tool's registry
/// and loom-autodiff's dependent dialects may both add it; attaching a model
/// an op already has is a no-op.
struct GradientModelsExtension
    : public DialectExtension<GradientModelsExtension, LoomDialect> {
  void apply(MLIRContext *context, LoomDialect *) const final {
    attachGradientModels<
        AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
        ReciprocalOp, TanhOp, SigmoidOp, ReluOp, ErfOp, SinOp, CosOp, AbsOp,
        FmodOp, MaximumOp, MinimumOp, GeluOp, CastOp, SelectOp, BiasAddOp,
        MatmulOp, ReshapeOp, TransposeOp, BroadcastOp, ShardOp, ReduceSumOp,
        ReduceMeanOp, ReduceMaxOp, CumsumOp, SoftmaxOp, LogSoftmaxOp,
        LayerNormOp, AttentionOp, CrossEntropyOp, GatherOp, SliceOp, ConcatOp,
        SplitOp, DropoutOp, CompareOp>(context);
  }
};

} // namespace

void mlir::loom::registerGradientExternalModels(DialectRegistry &registry) {
  registry.addExtensions<GradientModelsExtension>();
}
