//===- CastPatterns.cpp - Casts move to where they move fewer bytes -------===//
//
// Mixed precision puts casts around every GEMM, and the layout ops between
// GEMMs (the head split and merge of attention: reshape + transpose; the
// split of a fused QKV projection and, in the backward, the concat of the
// three gradients) then move f32 copies of values that were bf16 a moment
// before and will be bf16 again after. Casts commute exactly with layout
// ops, so:
//  - a narrowing cast of a layout op's result moves before the layout op,
//    and a widening cast feeding a layout op moves after it, so the layout
//    op copies the narrow type (a split moves when every result is
//    narrowed alike; a concat when every input was widened alike);
//  - a cast back to the type a lossless widening came from folds away
//    (CastOp::fold), which removes the bf16 -> f32 -> bf16 round trips this
//    exposes.
// The patterns are rooted at the cast and at the layout ops; they are all
// registered with CastOp.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::loom;

namespace {

unsigned elementBytes(Type type) {
  return (cast<RankedTensorType>(type).getElementTypeBitWidth() + 7) / 8;
}

/// `value` with element type `elementType`, for rebuilding a layout op over
/// a cast value.
RankedTensorType withElementType(Type type, Type elementType) {
  return cast<RankedTensorType>(type).clone(elementType);
}

/// cast_narrow(layout(y)) -> layout(cast_narrow(y)) when the layout op has
/// no other use.
template <typename LayoutOp>
struct NarrowBeforeLayout : OpRewritePattern<CastOp> {
  using OpRewritePattern<CastOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp castOp,
                                PatternRewriter &rewriter) const override {
    auto layout = castOp.getInput().template getDefiningOp<LayoutOp>();
    if (!layout || !layout->hasOneUse() ||
        elementBytes(castOp.getType()) >=
            elementBytes(castOp.getInput().getType()))
      return failure();
    Type to = castOp.getType().getElementType();
    Value input = layout->getOperand(0);
    Value narrowed = rewriter.create<CastOp>(
        castOp.getLoc(), withElementType(input.getType(), to), input);
    Operation *moved =
        rewriter.create<LayoutOp>(layout.getLoc(), TypeRange{castOp.getType()},
                                  ValueRange{narrowed}, layout->getAttrs());
    rewriter.replaceOp(castOp, moved->getResults());
    return success();
  }
};

/// layout(cast_widen(x)) -> cast_widen(layout(x)) when the cast has no
/// other use.
template <typename LayoutOp>
struct WidenAfterLayout : OpRewritePattern<LayoutOp> {
  using OpRewritePattern<LayoutOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(LayoutOp layout,
                                PatternRewriter &rewriter) const override {
    auto castOp = layout->getOperand(0).template getDefiningOp<CastOp>();
    if (!castOp || !castOp->hasOneUse() ||
        elementBytes(castOp.getType()) <=
            elementBytes(castOp.getInput().getType()))
      return failure();
    Value input = castOp.getInput();
    Type from = cast<RankedTensorType>(input.getType()).getElementType();
    Operation *moved = rewriter.create<LayoutOp>(
        layout.getLoc(),
        TypeRange{withElementType(layout->getResult(0).getType(), from)},
        ValueRange{input}, layout->getAttrs());
    rewriter.replaceOpWithNewOp<CastOp>(layout, layout->getResult(0).getType(),
                                        moved->getResult(0));
    return success();
  }
};

/// The narrowing casts that are the only uses of every result of `split`,
/// all to the same element type; empty when there are none such.
SmallVector<CastOp> uniformNarrowingUses(SplitOp split) {
  SmallVector<CastOp> casts;
  for (Value result : split.getResults()) {
    if (!result.hasOneUse())
      return {};
    auto castOp = dyn_cast<CastOp>(*result.getUsers().begin());
    if (!castOp ||
        elementBytes(castOp.getType()) >= elementBytes(result.getType()) ||
        (!casts.empty() && castOp.getType().getElementType() !=
                               casts.front().getType().getElementType()))
      return {};
    casts.push_back(castOp);
  }
  return casts;
}

/// cast_narrow(split(y))#i for every i -> split(cast_narrow(y)).
struct NarrowBeforeSplit : OpRewritePattern<SplitOp> {
  using OpRewritePattern<SplitOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp split,
                                PatternRewriter &rewriter) const override {
    SmallVector<CastOp> casts = uniformNarrowingUses(split);
    if (casts.empty())
      return failure();
    Type to = casts.front().getType().getElementType();
    Value input = split.getInput();
    Value narrowed = rewriter.create<CastOp>(
        casts.front().getLoc(), withElementType(input.getType(), to), input);
    SmallVector<Type> types;
    for (CastOp castOp : casts)
      types.push_back(castOp.getType());
    auto moved = rewriter.create<SplitOp>(split.getLoc(), types, narrowed,
                                          split.getAxisAttr());
    for (auto [castOp, result] : llvm::zip(casts, moved.getResults()))
      rewriter.replaceOp(castOp, result);
    rewriter.eraseOp(split);
    return success();
  }
};

/// concat(cast_widen(x0), ..., cast_widen(xn)) -> cast_widen(concat(x0..xn))
/// when every input is a widening cast from the same element type with no
/// other use.
struct WidenAfterConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern<ConcatOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> narrow;
    for (Value input : concat.getInputs()) {
      auto castOp = input.getDefiningOp<CastOp>();
      if (!castOp || !castOp->hasOneUse() ||
          elementBytes(castOp.getType()) <=
              elementBytes(castOp.getInput().getType()) ||
          (!narrow.empty() &&
           getElementTypeOrSelf(castOp.getInput().getType()) !=
               getElementTypeOrSelf(narrow.front().getType())))
        return failure();
      narrow.push_back(castOp.getInput());
    }
    if (narrow.empty())
      return failure();
    Type from = getElementTypeOrSelf(narrow.front().getType());
    auto moved = rewriter.create<ConcatOp>(
        concat.getLoc(), withElementType(concat.getType(), from), narrow,
        concat.getAxisAttr());
    rewriter.replaceOpWithNewOp<CastOp>(concat, concat.getType(), moved);
    return success();
  }
};

} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<NarrowBeforeLayout<ReshapeOp>, NarrowBeforeLayout<TransposeOp>,
              WidenAfterLayout<ReshapeOp>, WidenAfterLayout<TransposeOp>,
              NarrowBeforeSplit, WidenAfterConcat>(context);
}
