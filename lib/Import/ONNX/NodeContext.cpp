//===- NodeContext.cpp - What an op converter sees of one node ------------===//

#include "NodeContext.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/STLExtras.h"
#include <charconv>
#include <cstdlib>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

FailureOr<DenseElementsAttr> NodeContext::getConstantInput(unsigned index,
                                                           StringRef what) {
  DenseElementsAttr value;
  if (!hasInput(index) || !matchPattern(getInput(index), m_Constant(&value)))
    return emitError() << what << " (input " << index << ", '"
                       << (hasInput(index) ? node.input(index) : "")
                       << "') must be a compile-time constant";
  return value;
}

FailureOr<SmallVector<int64_t>> NodeContext::getConstantInts(unsigned index,
                                                             StringRef what) {
  FailureOr<DenseElementsAttr> value = getConstantInput(index, what);
  if (failed(value))
    return failure();
  if (!value->getElementType().isInteger(64) &&
      !value->getElementType().isInteger(32))
    return emitError() << what << " must be integers, got " << value->getType();
  SmallVector<int64_t> ints;
  for (const APInt &element : value->getValues<APInt>())
    ints.push_back(element.getSExtValue());
  return ints;
}

const onnx::AttributeProto *NodeContext::findAttr(StringRef name) const {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeContext::getInt(StringRef name, int64_t defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->i() : defaultValue;
}

double onnx_import::widenFloat(float value) {
  // The shortest decimal that reads back as `value`: 1e-5f widens to 1e-5,
  // not to 9.99999974e-06.
  char buffer[32];
  std::to_chars_result end =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  *end.ptr = '\0';
  return std::strtod(buffer, nullptr);
}

double NodeContext::getFloat(StringRef name, double defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? widenFloat(attr->f()) : defaultValue;
}

std::string NodeContext::getString(StringRef name,
                                   StringRef defaultValue) const {
  const onnx::AttributeProto *attr = findAttr(name);
  return attr ? attr->s() : defaultValue.str();
}

std::optional<SmallVector<int64_t>> NodeContext::getInts(StringRef name) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0))
    return emitError() << what << " " << axis << " is out of range for rank "
                       << rank;
  return axis < 0 ? axis + rank : axis;
}

FailureOr<SmallVector<int64_t>>
NodeContext::normalizeAxes(ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> normalized;
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank)
      return emitError() << "axis " << axis << " is out of range for rank "
                         << rank;
    normalized.push_back(axis < 0 ? axis + rank : axis);
  }
  llvm::sort(normalized);
  if (std::adjacent_find(normalized.begin(), normalized.end()) !=
      normalized.end())
    return emitError() << "axes repeat a dimension";
  return normalized;
}

FailureOr<SmallVector<Value>>
NodeContext::createOp(StringRef name, ValueRange operands,
                      ArrayRef<NamedAttribute> attrs, TypeRange resultTypes,
                      unsigned numResults) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  bool infer = resultTypes.empty();
  if (infer)
    state.addTypes(SmallVector<Type>(numResults, builder.getNoneType()));
  else
    state.addTypes(resultTypes);
  Operation *op = builder.create(state);

  // Inferring first turns a shape error into the op's own diagnostic instead
  // of a builder assertion.
  if (infer) {
    auto inferrable = cast<InferTypeOpInterface>(op);
    SmallVector<Type> types;
    if (failed(inferrable.inferReturnTypes(
            getContext(), loc, op->getOperands(), op->getAttrDictionary(),
            op->getPropertiesStorage(), op->getRegions(), types))) {
      op->erase();
      return failure();
    }
    for (auto [result, type] : llvm::zip_equal(op->getResults(), types))
      result.setType(type);
  }
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  // An in-place fold (e.g. reshape of reshape) may enable another one.
  for (int attempt = 0; attempt < 4; ++attempt) {
    SmallVector<Value> results;
    if (failed(builder.tryFold(op, results)))
      break;
    if (!results.empty()) {
      op->erase();
      return results;
    }
  }
  return SmallVector<Value>(op->getResults());
}

Value NodeContext::createConstant(ElementsAttr value) {
  return builder.create<ConstantOp>(loc, value);
}

Value NodeContext::createScalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  if (isa<FloatType>(elementType))
    return createConstant(DenseElementsAttr::get(
        type, builder.getFloatAttr(elementType, value).getValue()));
  return createConstant(DenseElementsAttr::get(
      type, APInt(elementType.getIntOrFloatBitWidth(),
                  static_cast<int64_t>(value), /*isSigned=*/true)));
}

FailureOr<Value> NodeContext::reshape(Value input, ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  if (type.getShape() == shape)
    return input;
  return create<ReshapeOp>(input, {}, type.clone(shape));
}

void ConverterRegistry::add(StringRef opType, ArrayRef<int> sinceVersions,
                            ConvertFn fn) {
  for (int version : sinceVersions)
    converters[opType][version] = fn;
}

ConvertFn ConverterRegistry::lookup(StringRef opType, int sinceVersion) const {
  auto it = converters.find(opType);
  if (it == converters.end())
    return nullptr;
  return it->second.lookup(sinceVersion);
}

SmallVector<int> ConverterRegistry::getSinceVersions(StringRef opType) const {
  SmallVector<int> versions;
  auto it = converters.find(opType);
  if (it != converters.end())
    for (auto &entry : it->second)
      versions.push_back(entry.first);
  llvm::sort(versions);
  return versions;
}

//===----------------------------------------------------------------------===//
// OpChain
//===----------------------------------------------------------------------===//

Value OpChain::compare(CompareDirection direction, Value lhs, Value rhs) {
  return make<CompareOp>(
      {lhs, rhs},
      {ctx.namedAttr("direction",
                     CompareDirectionAttr::get(ctx.getContext(), direction))});
}

Value OpChain::select(Value condition, Value onTrue, Value onFalse) {
  return make<SelectOp>({condition, onTrue, onFalse});
}

Value OpChain::reshape(Value input, ArrayRef<int64_t> shape) {
  if (failedAny || !input)
    return fail();
  FailureOr<Value> result = ctx.reshape(input, shape);
  return ::mlir::failed(result) ? fail() : *result;
}

Value OpChain::transpose(Value input, ArrayRef<int64_t> permutation) {
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return input;
  return make<TransposeOp>(
      {input},
      {ctx.namedAttr("permutation",
                     ctx.getBuilder().getDenseI64ArrayAttr(permutation))});
}

Value OpChain::broadcast(Value input, ArrayRef<int64_t> shape) {
  if (!input)
    return fail();
  auto type = llvm::cast<RankedTensorType>(input.getType());
  if (type.getShape() == shape)
    return input;
  return make<BroadcastOp>({input}, {}, type.clone(shape));
}

Value OpChain::cast(Value input, Type element) {
  if (!input)
    return fail();
  auto type = llvm::cast<RankedTensorType>(input.getType());
  if (type.getElementType() == element)
    return input;
  return make<CastOp>({input}, {}, type.clone(element));
}

SmallVector<NamedAttribute> OpChain::reduceAttrs(ArrayRef<int64_t> axes,
                                                 bool keepdims) {
  Builder &b = ctx.getBuilder();
  SmallVector<NamedAttribute> attrs = {
      ctx.namedAttr("axes", b.getDenseI64ArrayAttr(axes))};
  if (keepdims)
    attrs.push_back(ctx.namedAttr("keepdims", b.getUnitAttr()));
  return attrs;
}

Value OpChain::indices(ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get(shape, ctx.getBuilder().getI64Type());
  return ctx.createConstant(DenseElementsAttr::get(type, values));
}

FailureOr<std::pair<int64_t, int64_t>>
onnx_import::flattenedAt(NodeContext &ctx, int64_t axis, bool allowRank) {
  ArrayRef<int64_t> shape = ctx.getInputType(0).getShape();
  int64_t rank = shape.size();
  if (axis < -rank ||
      axis > (allowRank ? rank : std::max<int64_t>(rank, 1) - 1))
    return ctx.emitError() << "axis " << axis << " is out of range for rank "
                           << rank;
  if (axis < 0)
    axis += rank;
  return std::make_pair(product(shape.take_front(axis)),
                        product(shape.drop_front(axis)));
}
