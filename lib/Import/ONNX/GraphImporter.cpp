//===- GraphImporter.cpp - One ONNX graph into one func.func --------------===//

#include "GraphImporter.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "onnx/defs/schema.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

/// Largest integer initializer kept as a dense literal (foldable into shape
/// computations) regardless of the inline limit.
static constexpr int64_t kMaxDenseIntegerElements = 4096;

Location onnx_import::getNodeLoc(MLIRContext *context,
                                 const onnx::NodeProto &node) {
  StringRef name = node.name();
  if (name.empty() && node.output_size() > 0)
    name = node.output(0);
  return NameLoc::get(StringAttr::get(context, name));
}

int onnx_import::getSinceVersion(const onnx::NodeProto &node, int64_t opset) {
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(opset), node.domain());
  return schema ? schema->since_version() : 0;
}

GraphImporter::GraphImporter(MLIRContext *context, onnx::ModelProto &model,
                             int64_t opset, int64_t schemaOpset,
                             std::vector<int> nativeVersions,
                             StringRef modelPath,
                             const ONNXImportOptions &options)
    : context(context), model(model), opset(opset), schemaOpset(schemaOpset),
      nativeVersions(std::move(nativeVersions)), modelPath(modelPath),
      options(options), tensors(context, modelPath, options), builder(context) {
  registerElementwiseConverters(converters);
  registerShapeConverters(converters);
  registerNNConverters(converters);
  registerIndexingConverters(converters);
  registerEinsumConverter(converters);
  registerConvConverter(converters);
}

/// The static tensor type of an ONNX value type, or null if it has none.
static RankedTensorType getTensorType(MLIRContext *context,
                                      const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return {};
  Type element = getElementType(context, type.tensor_type().elem_type());
  if (!element)
    return {};
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim :
       type.tensor_type().shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0)
      return {};
    shape.push_back(dim.dim_value());
  }
  return RankedTensorType::get(shape, element);
}

LogicalResult GraphImporter::importInputs() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  SmallVector<Type> types;
  SmallVector<Location> locs;
  SmallVector<StringRef> names;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    // IR < 4 lists initializers among the inputs; they are weights.
    if (initializers.contains(input.name()))
      continue;
    Location loc = NameLoc::get(StringAttr::get(context, input.name()));
    RankedTensorType type = getTensorType(context, input.type());
    if (!type) {
      int32_t element = input.type().tensor_type().elem_type();
      if (input.type().has_tensor_type() && !getElementType(context, element))
        return emitError(loc)
               << "graph input '" << input.name() << "' has element type "
               << getDataTypeName(element) << ", which Loom does not support";
      return emitError(loc) << "graph input '" << input.name()
                            << "' is not a tensor of known shape";
    }
    types.push_back(type);
    locs.push_back(loc);
    names.push_back(input.name());
  }
  function = func::FuncOp::create(
      NameLoc::get(StringAttr::get(context, graph.name())),
      options.functionName, builder.getFunctionType(types, {}));
  symbols->insert(function);
  Block *entry = function.addEntryBlock();
  for (auto [index, name] : llvm::enumerate(names)) {
    BlockArgument arg = entry->getArgument(index);
    arg.setLoc(locs[index]);
    values[name] = arg;
    function.setArgAttr(index, "onnx.name", builder.getStringAttr(name));
  }
  builder.setInsertionPointToStart(entry);
  return success();
}

LogicalResult GraphImporter::importInitializers() {
  onnx::GraphProto &graph = *model.mutable_graph();
  OpBuilder moduleBuilder(context);
  moduleBuilder.setInsertionPoint(function);
  for (onnx::TensorProto &tensor : *graph.mutable_initializer()) {
    Location loc = NameLoc::get(StringAttr::get(context, tensor.name()));
    FailureOr<RankedTensorType> type = tensors.getType(tensor, loc);
    if (failed(type))
      return failure();
    // Weights are float tensors; integer tables and scalars are constants.
    bool isWeight =
        isa<FloatType>(type->getElementType()) && type->getRank() > 0;
    if (!isWeight) {
      bool dense = !isa<FloatType>(type->getElementType()) &&
                   type->getNumElements() <= kMaxDenseIntegerElements;
      FailureOr<Attribute> value =
          tensors.load(tensor, *type, loc, /*mayReference=*/false, dense);
      if (failed(value))
        return failure();
      values[tensor.name()] =
          builder.create<ConstantOp>(loc, cast<ElementsAttr>(*value));
      continue;
    }
    Attribute value;
    if (options.withWeights) {
      FailureOr<Attribute> loaded =
          tensors.load(tensor, *type, loc, /*mayReference=*/true);
      if (failed(loaded))
        return failure();
      value = *loaded;
    }
    auto parameter = moduleBuilder.create<ParameterOp>(
        loc, tensor.name(), *type, /*trainable=*/true, /*sharding=*/nullptr,
        /*sharding_priority=*/nullptr, value);
    StringAttr name = symbols->insert(parameter);
    values[tensor.name()] =
        builder.create<ParamOp>(loc, *type, FlatSymbolRefAttr::get(name));
  }
  return success();
}

LogicalResult GraphImporter::checkAgainstONNXType(Value value, StringRef name,
                                                  Location loc) {
  const onnx::TypeProto *declared = onnxTypes.lookup(name);
  if (!declared || !declared->has_tensor_type())
    return success();
  auto type = cast<RankedTensorType>(value.getType());
  const onnx::TypeProto_Tensor &tensor = declared->tensor_type();
  Type element = getElementType(context, tensor.elem_type());
  bool contradicts = element && element != type.getElementType();
  if (tensor.has_shape()) {
    if (tensor.shape().dim_size() != type.getRank()) {
      contradicts = true;
    } else {
      for (auto [index, dim] : llvm::enumerate(tensor.shape().dim()))
        if (dim.has_dim_value() && dim.dim_value() != type.getDimSize(index))
          contradicts = true;
    }
  }
  if (!contradicts)
    return success();
  std::string shape;
  llvm::raw_string_ostream os(shape);
  os << getDataTypeName(tensor.elem_type()) << "[";
  if (tensor.has_shape())
    llvm::interleaveComma(tensor.shape().dim(), os,
                          [&](const onnx::TensorShapeProto::Dimension &dim) {
                            if (dim.has_dim_value())
                              os << dim.dim_value();
                            else
                              os << (dim.dim_param().empty() ? "?"
                                                             : dim.dim_param());
                          });
  os << "]";
  return emitError(loc) << "value '" << name << "' is " << type
                        << " but the model declares it as " << shape;
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node,
                                        unsigned index) {
  Location loc = getNodeLoc(context, node);
  int since = index < nativeVersions.size() && nativeVersions[index] != 0
                  ? nativeVersions[index]
                  : getSinceVersion(node, schemaOpset);
  std::string prefix;
  {
    llvm::raw_string_ostream os(prefix);
    os << "node '" << cast<NameLoc>(loc).getName().getValue() << "' ("
       << node.op_type() << ", opset " << opset << "): ";
  }
  // Every error while converting the node names the node, its op type and
  // the opset, whichever code emits it (converter, op verifier).
  bool forwarding = false;
  ScopedDiagnosticHandler prefixer(context, [&](Diagnostic &diag) {
    if (forwarding || diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    forwarding = true;
    InFlightDiagnostic wrapped = mlir::emitError(diag.getLocation())
                                 << prefix << diag.str();
    for (Diagnostic &note : diag.getNotes())
      wrapped.attachNote(note.getLocation()) << note.str();
    wrapped.report();
    forwarding = false;
    return success();
  });

  for (const std::string &input : node.input()) {
    if (input.empty() || values.count(input))
      continue;
    if (const onnx::NodeProto *producer = producers.lookup(input))
      return emitError(loc)
             << "reads '" << input << "', an output of node '"
             << cast<NameLoc>(getNodeLoc(context, *producer))
                    .getName()
                    .getValue()
             << "' (" << producer->op_type() << ") that Loom does not support";
    return emitError(loc) << "input '" << input
                          << "' is not defined by a graph input, an "
                             "initializer or an earlier node";
  }
  ConvertFn convert = converters.lookup(node.op_type(), since);
  assert(convert && "checked when validating the model");
  NodeContext ctx(node, opset, loc, builder, values, tensors);
  if (failed(convert(ctx)))
    return failure();
  for (const std::string &output : node.output()) {
    if (output.empty())
      continue;
    if (!values.count(output)) {
      producers[output] = &node;
      continue;
    }
    if (failed(checkAgainstONNXType(values.lookup(output), output, loc)))
      return failure();
  }
  return success();
}

LogicalResult GraphImporter::importOutputs() {
  SmallVector<Value> results;
  SmallVector<Type> types;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    Location loc = NameLoc::get(StringAttr::get(context, output.name()));
    Value value = values.lookup(output.name());
    if (!value) {
      if (const onnx::NodeProto *producer = producers.lookup(output.name()))
        return emitError(loc)
               << "graph output '" << output.name() << "' comes from node '"
               << cast<NameLoc>(getNodeLoc(context, *producer))
                      .getName()
                      .getValue()
               << "' (" << producer->op_type()
               << "), an output Loom does not support";
      return emitError(loc) << "graph output '" << output.name()
                            << "' is not defined by the graph";
    }
    if (failed(checkAgainstONNXType(value, output.name(), loc)))
      return failure();
    results.push_back(value);
    types.push_back(value.getType());
  }
  builder.create<func::ReturnOp>(
      NameLoc::get(StringAttr::get(context, "graph outputs")), results);
  function.setFunctionType(
      builder.getFunctionType(function.getArgumentTypes(), types));
  for (auto [index, output] : llvm::enumerate(model.graph().output()))
    function.setResultAttr(index, "onnx.name",
                           builder.getStringAttr(output.name()));
  return success();
}

void GraphImporter::eraseDeadCode() {
  // Shape subgraphs fold away and leave their inputs unused; one backward
  // sweep removes whole dead chains.
  Block &body = function.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  // The parameters something refers to, from one walk of the module (a
  // symbolKnownUseEmpty per parameter walks it once for each: seconds for a
  // 96-layer GPT's ~1200 parameters and ~5k ops).
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(&module->getBodyRegion());
  if (!uses)
    return;
  llvm::DenseSet<StringAttr> used;
  for (const SymbolTable::SymbolUse &use : *uses)
    used.insert(use.getSymbolRef().getRootReference());
  for (ParameterOp parameter :
       llvm::make_early_inc_range(module->getOps<ParameterOp>()))
    if (!used.contains(parameter.getSymNameAttr()))
      parameter.erase();
}

void GraphImporter::markTrainableParameters() {
  // A parameter is trainable when a gradient can reach it: some float
  // result of the function depends on it through float values. Buffers seen
  // only through comparisons (causal masks) or as indices are frozen.
  llvm::DenseSet<Value> needsGradient;
  Block &body = function.getBody().front();
  auto isFloat = [](Value value) {
    return isa<FloatType>(getElementTypeOrSelf(value.getType()));
  };
  for (Operation &op : llvm::reverse(body)) {
    bool live = isa<func::ReturnOp>(op) ||
                llvm::any_of(op.getResults(), [&](Value result) {
                  return needsGradient.contains(result);
                });
    if (!live)
      continue;
    for (Value operand : op.getOperands())
      if (isFloat(operand))
        needsGradient.insert(operand);
  }
  llvm::StringSet<> trainable;
  for (ParamOp param : function.getOps<ParamOp>())
    if (needsGradient.contains(param.getResult()))
      trainable.insert(param.getName());
  for (ParameterOp parameter : module->getOps<ParameterOp>())
    parameter.setTrainable(trainable.contains(parameter.getSymName()));
}

void GraphImporter::warnAboutTiedInitializers() {
  // PyTorch's eval-mode export keeps one initializer per distinct value and
  // re-creates the other parameters as Identity nodes of it.
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> weights;
  for (const onnx::TensorProto &tensor : graph.initializer())
    weights.insert(tensor.name());
  llvm::MapVector<StringRef, SmallVector<StringRef>> aliases;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Identity" && node.input_size() == 1 &&
        node.output_size() == 1 && weights.contains(node.input(0)))
      aliases[node.input(0)].push_back(node.output(0));
  for (auto &[initializer, names] : aliases) {
    auto parameter = module->lookupSymbol<ParameterOp>(initializer);
    if (!parameter || !parameter.getTrainable())
      continue;
    emitWarning(NameLoc::get(StringAttr::get(context, initializer)))
        << "initializer '" << initializer << "' is re-exported through "
        << "Identity as '" << llvm::join(names, "', '")
        << "': training ties these parameters, which PyTorch trains "
           "separately; export with torch.onnx.export(..., "
           "training=torch.onnx.TrainingMode.TRAINING, "
           "do_constant_folding=False)";
  }
}

void GraphImporter::warnAboutFoldedParameters() {
  // PyTorch's torch.export-based exporter optimizes the graph by default:
  // it stores a Linear weight transposed, a lookup of constant positions
  // as its result, and equal initializers once, under names `val_N` (or
  // the op's), none of which trains like the parameter it came from.
  if (model.producer_name() != "pytorch")
    return;
  SmallVector<StringRef> folded;
  for (ParameterOp parameter : module->getOps<ParameterOp>()) {
    StringRef name = parameter.getSymName();
    if (parameter.getTrainable() && name.starts_with("val_") &&
        llvm::all_of(name.drop_front(4),
                     [](char c) { return llvm::isDigit(c); }))
      folded.push_back(name);
  }
  if (folded.empty())
    return;
  auto shown = ArrayRef<StringRef>(folded).take_front(3);
  emitWarning(NameLoc::get(StringAttr::get(context, folded.front())))
      << folded.size() << " trainable initializer(s) have no parameter name ('"
      << llvm::join(shown, "', '") << "'"
      << (folded.size() > shown.size() ? ", ..." : "")
      << "): PyTorch's optimized export folds parameters into new constants "
         "(Linear weights transposed, lookups of constant positions, equal "
         "initializers merged), which do not train like the model; export "
         "with torch.onnx.export(..., dynamo=True, optimize=False)";
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  module = ModuleOp::create(FileLineColLoc::get(context, modelPath, 0, 0));
  symbols = std::make_unique<SymbolTable>(*module);
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::ValueInfoProto &info : graph.value_info())
    onnxTypes[info.name()] = &info.type();
  for (const onnx::ValueInfoProto &info : graph.output())
    onnxTypes[info.name()] = &info.type();

  if (failed(importInputs()) || failed(importInitializers()))
    return nullptr;
  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index)))
      return nullptr;
  if (failed(importOutputs()))
    return nullptr;
  eraseDeadCode();
  markTrainableParameters();
  if (options.warnTiedInitializers) {
    warnAboutTiedInitializers();
    warnAboutFoldedParameters();
  }
  if (failed(mlir::verify(*module)))
    return nullptr;
  return std::move(module);
}
