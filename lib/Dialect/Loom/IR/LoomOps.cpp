//===- LoomOps.cpp - Loom op definitions and state ops --------------------===//
//
// Holds the generated op classes, the custom assembly directives they use,
// and the verifiers of the ops that declare or read module state (mesh,
// parameters, constants, sharding annotations). The other op families live
// in ElementwiseOps.cpp, ShapeOps.cpp and NNOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::loom;

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `T` when both operands and the result have type T, else `(L, R) -> T`.
static ParseResult parseElementwiseTypes(OpAsmParser &parser, Type &lhs,
                                         Type &rhs, Type &result) {
  SMLoc loc = parser.getCurrentLocation();
  Type type;
  if (parser.parseType(type))
    return failure();
  auto function = dyn_cast<FunctionType>(type);
  if (!function) {
    lhs = rhs = result = type;
    return success();
  }
  if (function.getNumInputs() != 2 || function.getNumResults() != 1)
    return parser.emitError(loc, "expected '(lhs type, rhs type) -> result "
                                 "type' or a single type");
  lhs = function.getInput(0);
  rhs = function.getInput(1);
  result = function.getResult(0);
  return success();
}

static void printElementwiseTypes(OpAsmPrinter &printer, Operation *, Type lhs,
                                  Type rhs, Type result) {
  if (lhs == rhs && rhs == result) {
    printer << lhs;
    return;
  }
  printer.printFunctionalType(TypeRange{lhs, rhs}, TypeRange{result});
}

/// `input, scale`, then `<keyword> other` only when `other` (layer_norm's
/// result, layer_norm_grad's dout) is not the input's type.
static ParseResult parseNormTypes(OpAsmParser &parser, Type &input, Type &scale,
                                  Type &other,
                                  function_ref<ParseResult()> keyword) {
  if (parser.parseType(input) || parser.parseComma() || parser.parseType(scale))
    return failure();
  if (succeeded(keyword()))
    return parser.parseType(other);
  other = input;
  return success();
}

static void printNormTypes(OpAsmPrinter &printer, Type input, Type scale,
                           Type other, StringRef keyword) {
  printer << input << ", " << scale;
  if (other != input)
    printer << " " << keyword << " " << other;
}

static ParseResult parseLayerNormTypes(OpAsmParser &parser, Type &input,
                                       Type &scale, Type &result) {
  return parseNormTypes(parser, input, scale, result,
                        [&] { return parser.parseOptionalArrow(); });
}

static void printLayerNormTypes(OpAsmPrinter &printer, Operation *, Type input,
                                Type scale, Type result) {
  printNormTypes(printer, input, scale, result, "->");
}

static ParseResult parseLayerNormGradTypes(OpAsmParser &parser, Type &input,
                                           Type &scale, Type &dout) {
  return parseNormTypes(parser, input, scale, dout,
                        [&] { return parser.parseOptionalKeyword("dout"); });
}

static void printLayerNormGradTypes(OpAsmPrinter &printer, Operation *,
                                    Type input, Type scale, Type dout) {
  printNormTypes(printer, input, scale, dout, "dout");
}

/// `step %n`, optional; the step is always an f64 scalar.
static ParseResult
parseDropoutStep(OpAsmParser &parser,
                 std::optional<OpAsmParser::UnresolvedOperand> &step,
                 Type &stepType) {
  if (failed(parser.parseOptionalKeyword("step")))
    return success();
  step.emplace();
  stepType = RankedTensorType::get({}, parser.getBuilder().getF64Type());
  return parser.parseOperand(*step);
}

static void printDropoutStep(OpAsmPrinter &printer, Operation *, Value step,
                             Type) {
  if (step)
    printer << " step " << step;
}

/// `at %offsets of [d0, d1, ...]`, optional: the block's offsets (one i64
/// per dimension) in a tensor of the listed global shape.
static ParseResult
parseDropoutBlock(OpAsmParser &parser,
                  std::optional<OpAsmParser::UnresolvedOperand> &offsets,
                  Type &offsetsType, DenseI64ArrayAttr &globalShape) {
  if (failed(parser.parseOptionalKeyword("at")))
    return success();
  offsets.emplace();
  SmallVector<int64_t> shape;
  if (parser.parseOperand(*offsets) || parser.parseKeyword("of") ||
      parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&] {
        return parser.parseInteger(shape.emplace_back());
      }))
    return failure();
  Builder &builder = parser.getBuilder();
  offsetsType =
      RankedTensorType::get({int64_t(shape.size())}, builder.getI64Type());
  globalShape = builder.getDenseI64ArrayAttr(shape);
  return success();
}

static void printDropoutBlock(OpAsmPrinter &printer, Operation *, Value offsets,
                              Type, DenseI64ArrayAttr globalShape) {
  if (!offsets)
    return;
  printer << " at " << offsets << " of [";
  llvm::interleaveComma(globalShape.asArrayRef(), printer);
  printer << "]";
}

/// `[start:limit, start:limit:stride, ...]`, one entry per dimension.
static ParseResult parseSliceRanges(OpAsmParser &parser,
                                    DenseI64ArrayAttr &starts,
                                    DenseI64ArrayAttr &limits,
                                    DenseI64ArrayAttr &strides) {
  SmallVector<int64_t> startValues, limitValues, strideValues;
  auto parseRange = [&]() -> ParseResult {
    int64_t start, limit, stride = 1;
    if (parser.parseInteger(start) || parser.parseColon() ||
        parser.parseInteger(limit))
      return failure();
    if (succeeded(parser.parseOptionalColon()) && parser.parseInteger(stride))
      return failure();
    startValues.push_back(start);
    limitValues.push_back(limit);
    strideValues.push_back(stride);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square,
                                     parseRange))
    return failure();
  Builder &builder = parser.getBuilder();
  starts = builder.getDenseI64ArrayAttr(startValues);
  limits = builder.getDenseI64ArrayAttr(limitValues);
  strides = builder.getDenseI64ArrayAttr(strideValues);
  return success();
}

static void printSliceRanges(OpAsmPrinter &printer, Operation *,
                             DenseI64ArrayAttr starts, DenseI64ArrayAttr limits,
                             DenseI64ArrayAttr strides) {
  printer << "[";
  for (size_t i = 0, e = starts.size(); i < e; ++i) {
    if (i)
      printer << ", ";
    printer << starts[i] << ":" << limits[i];
    if (static_cast<int64_t>(i) < strides.size() && strides[i] != 1)
      printer << ":" << strides[i];
  }
  printer << "]";
}

/// `[[0, 1], [2, 3]]`: lists of world ranks (collective groups, send/recv
/// pairs).
static ParseResult parseRankLists(OpAsmParser &parser, ArrayAttr &lists) {
  SmallVector<Attribute> result;
  auto parseList = [&]() -> ParseResult {
    SmallVector<int64_t> ranks;
    if (parser.parseCommaSeparatedList(
            OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
              return parser.parseInteger(ranks.emplace_back());
            }))
      return failure();
    result.push_back(parser.getBuilder().getDenseI64ArrayAttr(ranks));
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseList))
    return failure();
  lists = parser.getBuilder().getArrayAttr(result);
  return success();
}

static void printRankLists(OpAsmPrinter &printer, Operation *,
                           ArrayAttr lists) {
  printer << "[";
  llvm::interleaveComma(lists, printer, [&](Attribute list) {
    printer << "[";
    llvm::interleaveComma(cast<DenseI64ArrayAttr>(list).asArrayRef(), printer);
    printer << "]";
  });
  printer << "]";
}

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"

#include "loom/Dialect/Loom/IR/LoomInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// ParameterOp
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getShardingPriority() && !getSharding())
    return emitOpError("has a sharding priority but no sharding");
  RankedTensorType type = getTensorType();
  if (!hasRepresentableElementCount(type))
    return emitOpError() << "has type " << type
                         << ", which has more elements than fit in 64 bits";
  if (getTrainable() && !isa<FloatType>(type.getElementType()))
    return emitOpError() << "is trainable but has element type "
                         << type.getElementType()
                         << "; only floating-point parameters can be trained";
  std::optional<Attribute> value = getInitialValue();
  if (!value)
    return success();
  if (auto elements = dyn_cast<ElementsAttr>(*value)) {
    if (elements.getType() != type)
      return emitOpError() << "has initial value of type " << elements.getType()
                           << " but is declared as " << type;
    return success();
  }
  if (isa<CastOfAttr>(*value)) {
    // A copy follows its source; it is never trained itself.
    if (getTrainable())
      return emitOpError() << "is trainable but its value is a cast of "
                              "another parameter";
    if (!type.getElementType().isBF16())
      return emitOpError() << "is a cast of another parameter, which needs "
                              "a bf16 element type, not "
                           << type.getElementType();
    return success();
  }
  if (isa<SliceOfAttr>(*value))
    return success(); // checked against its source in verifySymbolUses
  // External data is raw little-endian bytes; i1 takes one byte.
  auto external = cast<ExternalDataAttr>(*value);
  int64_t elementBytes =
      llvm::divideCeil(type.getElementType().getIntOrFloatBitWidth(), 8);
  int64_t expected;
  if (llvm::MulOverflow(type.getNumElements(), elementBytes, expected) ||
      external.getLength() != expected)
    return emitOpError() << "has external data of " << external.getLength()
                         << " bytes but " << type << " takes "
                         << type.getNumElements() << " x " << elementBytes
                         << " bytes";
  return success();
}

LogicalResult
ParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  std::optional<Attribute> value = getInitialValue();
  if (auto castOf = dyn_cast_if_present<CastOfAttr>(value.value_or(nullptr))) {
    auto source = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
        getOperation(), castOf.getSource());
    if (!source)
      return emitOpError() << "is a cast of " << castOf.getSource()
                           << ", which is not a loom.parameter";
    RankedTensorType sourceType = source.getTensorType();
    Type sourceElement = sourceType.getElementType();
    if (sourceType.getShape() != getTensorType().getShape())
      return emitOpError() << "is a cast of " << castOf.getSource()
                           << " of type " << sourceType
                           << ", which has another shape";
    if (!sourceElement.isF32() && !sourceElement.isF64())
      return emitOpError() << "is a cast of " << castOf.getSource()
                           << " of type " << sourceType
                           << "; only f32 and f64 parameters have bf16 copies";
  }
  if (auto sliceOf =
          dyn_cast_if_present<SliceOfAttr>(value.value_or(nullptr))) {
    auto source = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
        getOperation(), sliceOf.getSource());
    if (!source)
      return emitOpError() << "is a slice of " << sliceOf.getSource()
                           << ", which is not a loom.parameter";
    if (isa_and_present<CastOfAttr, SliceOfAttr>(
            source.getInitialValue().value_or(nullptr)))
      return emitOpError() << "is a slice of " << sliceOf.getSource()
                           << ", which is itself a copy or a slice";
    RankedTensorType sourceType = source.getTensorType();
    RankedTensorType type = getTensorType();
    ArrayRef<int64_t> offsets = sliceOf.getOffsets();
    bool inside = sourceType.getRank() == type.getRank() &&
                  int64_t(offsets.size()) == type.getRank();
    // The block starts inside the source and may reach past its end: the
    // part beyond it is zeros (loom-pad-vocabulary's padded rows).
    for (int64_t dim = 0; inside && dim < type.getRank(); ++dim)
      inside = offsets[dim] >= 0 && offsets[dim] < sourceType.getDimSize(dim);
    if (!inside || sourceType.getElementType() != type.getElementType())
      return emitOpError() << "is the block of " << sliceOf.getSource()
                           << " of type " << sourceType << " at [" << offsets
                           << "], which does not fit a " << type;
  }
  std::optional<ShardingAttr> sharding = getSharding();
  if (!sharding)
    return success();
  return verifyShardingOf(*this, *sharding, getType(), "the parameter",
                          &symbolTable);
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *symbol =
      symbolTable.lookupNearestSymbolFrom(getOperation(), getNameAttr());
  if (!symbol)
    return emitOpError() << "reads " << getNameAttr()
                         << ", which is not defined";
  auto parameter = dyn_cast<ParameterOp>(symbol);
  if (!parameter)
    return emitOpError() << "reads " << getNameAttr()
                         << ", which is not a loom.parameter";
  // The whole parameter, or where it has a sharding, this rank's shard of
  // it (a partitioned function's local type).
  if (parameter.getType() == getType())
    return success();
  std::optional<ShardingAttr> sharding = parameter.getSharding();
  RankedTensorType shard =
      sharding ? getShardType(parameter, parameter.getTensorType(), *sharding,
                              symbolTable)
               : RankedTensorType();
  if (shard && shard == getType())
    return success();
  InFlightDiagnostic diag = emitOpError()
                            << "has type " << getType() << " but parameter "
                            << getNameAttr() << " is " << parameter.getType();
  if (shard)
    diag << " (a shard of it " << shard << ")";
  return diag;
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// ShardOp
//===----------------------------------------------------------------------===//

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShardingOf(*this, getSharding(), getType(), "the result",
                          &symbolTable);
}

LogicalResult ReshardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyShardingOf(*this, getSharding(), getType(), "the result",
                          &symbolTable);
}
