//===- FusionOp.cpp - loom.fusion and loom.yield --------------------------===//
//
// A fusion is a kernel boundary drawn around elementwise ops; its verifier
// guarantees what the `elementwise` kernel relies on: one iteration shape for
// all results, inputs that broadcast to it, and a body of fusible ops only.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::loom::opimpl;
using namespace mlir::loom;

void FusionOp::build(OpBuilder &builder, OperationState &state,
                     TypeRange resultTypes, ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), state.location);
}

bool FusionOp::isFusible(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op))
    return isa<SplatElementsAttr>(constant.getValue());
  return isa<SqrtOp, RsqrtOp, ExpOp, LogOp, NegOp, ErfOp, TanhOp, SigmoidOp,
             ReluOp, ReciprocalOp, AbsOp, SinOp, CosOp, GeluOp, CastOp, AddOp,
             SubOp, MulOp, DivOp, PowOp, FmodOp, MaximumOp, MinimumOp,
             CompareOp, SelectOp, BiasAddOp, BroadcastOp>(op);
}

LogicalResult FusionOp::verify() {
  if (getNumResults() == 0)
    return emitOpError("needs at least one result");
  ArrayRef<int64_t> shape = getIterationShape();
  for (Type type : getResultTypes())
    if (cast<RankedTensorType>(type).getShape() != shape)
      return emitOpError("results must share one shape, the iteration "
                         "space; got ")
             << getResult(0).getType() << " and " << type;
  for (auto [index, input] : llvm::enumerate(getInputs()))
    if (!isBroadcastableTo(cast<RankedTensorType>(input.getType()).getShape(),
                           shape))
      return emitOpError("input ")
             << index << " of type " << input.getType()
             << " does not broadcast to the iteration space "
             << formatShape(shape);
  return success();
}

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("body arguments must have the input types");
  for (Operation &op : body.without_terminator())
    if (!isFusible(&op))
      return op.emitOpError("is not elementwise and cannot be in a "
                            "'loom.fusion' body");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return yield.emitOpError("yields ")
           << yield.getValues().getTypes() << " but the fusion returns "
           << getResultTypes();
  return success();
}
