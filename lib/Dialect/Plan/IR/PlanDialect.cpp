//===- PlanDialect.cpp - The plan dialect ---------------------------------===//

#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::plan;

#include "loom/Dialect/Plan/IR/PlanDialect.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Plan/IR/PlanOps.cpp.inc"
      >();
}

int64_t PlanDialect::getBufferBytes(MemRefType type) {
  int64_t width = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * std::max<int64_t>(1, width / 8);
}

LogicalResult WeightOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto parameter =
      symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!parameter)
    return emitOpError("'") << getName() << "' is not a loom.parameter";
  RankedTensorType tensor = parameter.getTensorType();
  MemRefType buffer = getBuffer().getType();
  auto matches = [&](RankedTensorType type) {
    return type && type.getShape() == buffer.getShape() &&
           type.getElementType() == buffer.getElementType();
  };
  // The whole parameter, or where it has a sharding, this rank's shard.
  if (matches(tensor))
    return success();
  if (std::optional<loom::ShardingAttr> sharding = parameter.getSharding();
      sharding &&
      matches(loom::getShardType(parameter, tensor, *sharding, symbolTable)))
    return success();
  return emitOpError("type ")
         << buffer << " does not match the parameter's " << tensor
         << (parameter.getSharding() ? " or its shard" : "");
}

LogicalResult ViewOp::verify() {
  MemRefType source = getSource().getType();
  MemRefType result = getResult().getType();
  if (source.getElementType() != result.getElementType() ||
      PlanDialect::getBufferBytes(source) < PlanDialect::getBufferBytes(result))
    return emitOpError("cannot view ")
           << source << " as " << result
           << ": element types must match and the view must fit";
  return success();
}

Value ViewOp::getRoot(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewOp>())
    buffer = view.getSource();
  return buffer;
}

LogicalResult KernelOp::verify() {
  for (NamedAttribute attr : getKernelAttrs()) {
    Attribute value = attr.getValue();
    if (isa<IntegerAttr, FloatAttr, StringAttr, DenseI64ArrayAttr>(value))
      continue;
    // Rank lists of a collective (groups, send/recv pairs).
    if (auto lists = dyn_cast<ArrayAttr>(value);
        lists && llvm::all_of(lists, llvm::IsaPred<DenseI64ArrayAttr>))
      continue;
    return emitOpError("attribute '")
           << attr.getName().getValue()
           << "' must be an integer, float, string, i64 array or a list of "
              "i64 arrays";
  }
  // A send is the one kernel that only reads.
  if (getOutputs().empty() && getKernel() != "send")
    return emitOpError("writes no outputs");
  if (getBody().empty())
    return getKernel() == "elementwise"
               ? emitOpError("'elementwise' needs a body")
               : success();
  if (getKernel() != "elementwise")
    return emitOpError("only 'elementwise' kernels have a body");
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " arguments for " << getInputs().size()
           << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs())) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    auto buffer = cast<MemRefType>(input.getType());
    if (!tensor || tensor.getShape() != buffer.getShape() ||
        tensor.getElementType() != buffer.getElementType())
      return emitOpError("body argument type ")
             << arg.getType() << " does not match its input " << buffer;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != getOutputs().size())
    return emitOpError("body must end in a loom.yield of one value per "
                       "output");
  for (auto [value, output] : llvm::zip(yield.getValues(), getOutputs())) {
    auto buffer = cast<MemRefType>(output.getType());
    if (cast<RankedTensorType>(value.getType()).getShape() !=
            buffer.getShape() ||
        getElementTypeOrSelf(value.getType()) != buffer.getElementType())
      return emitOpError("yielded ")
             << value.getType() << " does not match its output " << buffer;
  }
  return success();
}

#define GET_OP_CLASSES
#include "loom/Dialect/Plan/IR/PlanOps.cpp.inc"
