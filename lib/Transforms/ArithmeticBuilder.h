//===- ArithmeticBuilder.h - Elementwise loom arithmetic -----*- C++ -*-===//
//
// The elementwise loom ops and rank-0 constants that rewrites spelling out
// math build (gradient rules, the GELU gradient's decomposition), at one
// builder position and location.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_ARITHMETICBUILDER_H
#define LOOM_LIB_TRANSFORMS_ARITHMETICBUILDER_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace mlir {
namespace loom {

class ArithmeticBuilder {
public:
  ArithmeticBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value exp(Value x) { return b.create<ExpOp>(loc, x); }
  Value log(Value x) { return b.create<LogOp>(loc, x); }
  Value erf(Value x) { return b.create<ErfOp>(loc, x); }
  Value tanh(Value x) { return b.create<TanhOp>(loc, x); }
  Value sin(Value x) { return b.create<SinOp>(loc, x); }
  Value cos(Value x) { return b.create<CosOp>(loc, x); }
  Value rsqrt(Value x) { return b.create<RsqrtOp>(loc, x); }
  Value pow(Value x, Value y) { return b.create<PowOp>(loc, x, y); }

  /// A rank-0 constant with the element type of `like`.
  Value scalar(Value like, double value) {
    Type element = getElementTypeOrSelf(like.getType());
    auto type = RankedTensorType::get({}, element);
    Attribute attr = isa<FloatType>(element)
                         ? Attribute(FloatAttr::get(element, value))
                         : Attribute(IntegerAttr::get(element, int64_t(value)));
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, attr));
  }
  Value scale(Value x, double factor) { return mul(x, scalar(x, factor)); }

  OpBuilder &b;
  Location loc;
};

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_ARITHMETICBUILDER_H
