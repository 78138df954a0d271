//===- NodeContext.h - What an op converter sees of one node ----*- C++ -*-===//
//
// Converters turn one ONNX node into loom ops through a NodeContext: it
// resolves inputs, reads attributes, builds ops (inferring and verifying
// their types, folding compile-time constants) and records outputs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_NODECONTEXT_H
#define LOOM_LIB_IMPORT_ONNX_NODECONTEXT_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include <optional>

namespace mlir {
namespace loom {
namespace onnx_import {

class TensorLoader;

class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset, Location loc,
              OpBuilder &builder, llvm::StringMap<Value> &values,
              TensorLoader &tensors)
      : node(node), opset(opset), loc(loc), builder(builder), values(values),
        tensors(tensors) {}

  const onnx::NodeProto &getNode() const { return node; }
  int64_t getOpset() const { return opset; }
  Location getLoc() const { return loc; }
  OpBuilder &getBuilder() { return builder; }
  MLIRContext *getContext() { return builder.getContext(); }
  TensorLoader &getTensors() { return tensors; }

  /// Errors are prefixed with the node by the importer's handler.
  InFlightDiagnostic emitError() { return mlir::emitError(loc); }

  //===--------------------------------------------------------------------===//
  // Inputs
  //===--------------------------------------------------------------------===//

  /// Whether optional input #index is present.
  bool hasInput(unsigned index) const {
    return index < static_cast<unsigned>(node.input_size()) &&
           !node.input(index).empty();
  }
  /// Input #index, which must be present (the importer checked that every
  /// named input is defined).
  Value getInput(unsigned index) { return values.lookup(node.input(index)); }
  RankedTensorType getInputType(unsigned index) {
    return cast<RankedTensorType>(getInput(index).getType());
  }
  /// The value of input #index if it is a compile-time constant, else an
  /// error naming the input as `what`.
  FailureOr<DenseElementsAttr> getConstantInput(unsigned index, StringRef what);
  /// A compile-time constant integer input as int64 values.
  FailureOr<SmallVector<int64_t>> getConstantInts(unsigned index,
                                                  StringRef what);

  //===--------------------------------------------------------------------===//
  // Attributes (types were checked against the op schema)
  //===--------------------------------------------------------------------===//

  const onnx::AttributeProto *findAttr(StringRef name) const;
  int64_t getInt(StringRef name, int64_t defaultValue) const;
  /// A float attribute widened to the double its decimal form denotes.
  double getFloat(StringRef name, double defaultValue) const;
  std::string getString(StringRef name, StringRef defaultValue) const;
  std::optional<SmallVector<int64_t>> getInts(StringRef name) const;

  /// `axis` normalized into [0, rank), or an error naming `what`.
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                   StringRef what = "axis");
  /// Axes normalized, sorted and checked for duplicates.
  FailureOr<SmallVector<int64_t>> normalizeAxes(ArrayRef<int64_t> axes,
                                                int64_t rank);

  //===--------------------------------------------------------------------===//
  // Building
  //===--------------------------------------------------------------------===//

  /// Creates op `OpTy`. Without `resultTypes` they are inferred through
  /// InferTypeOpInterface. The op is verified (errors land at the node) and
  /// folded when its operands are constants.
  template <typename OpTy>
  FailureOr<Value> create(ValueRange operands,
                          ArrayRef<NamedAttribute> attrs = {},
                          TypeRange resultTypes = {}) {
    FailureOr<SmallVector<Value>> results =
        createOp(OpTy::getOperationName(), operands, attrs, resultTypes, 1);
    if (failed(results))
      return failure();
    return (*results)[0];
  }
  FailureOr<SmallVector<Value>> createOp(StringRef name, ValueRange operands,
                                         ArrayRef<NamedAttribute> attrs,
                                         TypeRange resultTypes,
                                         unsigned numResults);

  /// A `loom.constant` holding `value`.
  Value createConstant(ElementsAttr value);
  /// A rank-0 constant of `elementType` holding `value`.
  Value createScalar(Type elementType, double value);
  /// `input` reshaped to `shape` (no op when it already has it).
  FailureOr<Value> reshape(Value input, ArrayRef<int64_t> shape);

  NamedAttribute namedAttr(StringRef name, Attribute value) {
    return builder.getNamedAttr(name, value);
  }

  //===--------------------------------------------------------------------===//
  // Outputs
  //===--------------------------------------------------------------------===//

  unsigned getNumOutputs() const { return node.output_size(); }
  /// Whether optional output #index is requested.
  bool hasOutput(unsigned index) const {
    return index < static_cast<unsigned>(node.output_size()) &&
           !node.output(index).empty();
  }
  /// Records `result` as output #0 if it was built.
  LogicalResult setResult(FailureOr<Value> result) {
    if (failed(result))
      return failure();
    setOutput(0, *result);
    return success();
  }
  void setOutput(unsigned index, Value value) {
    if (hasOutput(index))
      values[node.output(index)] = value;
  }

private:
  const onnx::NodeProto &node;
  int64_t opset;
  Location loc;
  OpBuilder &builder;
  llvm::StringMap<Value> &values;
  TensorLoader &tensors;
};

/// Builds a chain of loom ops through a NodeContext and remembers the first
/// failure (already reported), so that a converter that composes many ops
/// checks once at the end: after a failure every builder returns a null
/// Value and builds nothing.
class OpChain {
public:
  explicit OpChain(NodeContext &ctx) : ctx(ctx) {}

  template <typename OpTy>
  Value make(ArrayRef<Value> operands, ArrayRef<NamedAttribute> attrs = {},
             TypeRange resultTypes = {}) {
    if (failedAny || llvm::any_of(operands, [](Value v) { return !v; }))
      return fail();
    FailureOr<Value> result = ctx.create<OpTy>(operands, attrs, resultTypes);
    return ::mlir::failed(result) ? fail() : *result;
  }
  Value compare(CompareDirection direction, Value lhs, Value rhs);
  Value select(Value condition, Value onTrue, Value onFalse);
  Value reshape(Value input, ArrayRef<int64_t> shape);
  Value transpose(Value input, ArrayRef<int64_t> permutation);
  Value broadcast(Value input, ArrayRef<int64_t> shape);
  Value cast(Value input, Type element);
  /// A loom.reduce_sum or loom.reduce_max (`OpTy`) over `axes`.
  template <typename OpTy>
  Value reduce(Value input, ArrayRef<int64_t> axes, bool keepdims) {
    return make<OpTy>({input}, reduceAttrs(axes, keepdims));
  }
  /// A rank-0 constant.
  Value scalar(Type element, double value) {
    return ctx.createScalar(element, value);
  }
  /// An i64 constant of `shape` holding `values`.
  Value indices(ArrayRef<int64_t> shape, ArrayRef<int64_t> values);

  bool hasFailed() const { return failedAny; }
  /// Records `value` as output #index; fails if anything failed.
  LogicalResult setOutput(unsigned index, Value value) {
    if (failedAny || !value)
      return failure();
    ctx.setOutput(index, value);
    return success();
  }

private:
  /// Records a failure (already reported) and gives the null Value.
  Value fail() {
    failedAny = true;
    return {};
  }
  SmallVector<NamedAttribute> reduceAttrs(ArrayRef<int64_t> axes,
                                          bool keepdims);

  NodeContext &ctx;
  bool failedAny = false;
};

/// The number of elements of a shape.
inline int64_t product(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

/// [outer, inner]: the sizes of the input's dimensions before and from
/// `axis` (negative counts from the end; `rank` itself only when
/// `allowRank`), as Flatten and the coercing Softmax-11 read them.
FailureOr<std::pair<int64_t, int64_t>>
flattenedAt(NodeContext &ctx, int64_t axis, bool allowRank);

/// `value` as the double nearest to its shortest decimal representation.
double widenFloat(float value);

/// Converts one node; errors are emitted through the context.
using ConvertFn = LogicalResult (*)(NodeContext &);

/// Registry of converters keyed by (op type, since-version of the schema).
class ConverterRegistry {
public:
  void add(StringRef opType, ArrayRef<int> sinceVersions, ConvertFn fn);
  ConvertFn lookup(StringRef opType, int sinceVersion) const;
  /// The since-versions supported for `opType` (empty if none).
  SmallVector<int> getSinceVersions(StringRef opType) const;

private:
  llvm::StringMap<llvm::SmallDenseMap<int, ConvertFn>> converters;
};

void registerElementwiseConverters(ConverterRegistry &registry);
void registerShapeConverters(ConverterRegistry &registry);
void registerNNConverters(ConverterRegistry &registry);
void registerIndexingConverters(ConverterRegistry &registry);
void registerEinsumConverter(ConverterRegistry &registry);
void registerConvConverter(ConverterRegistry &registry);

} // namespace onnx_import
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_IMPORT_ONNX_NODECONTEXT_H
