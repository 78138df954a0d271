//===- ImportONNX.cpp - ONNX models into the loom dialect -----------------===//
//
// Parses and validates a model (opset, node schemas, symbolic dimensions),
// runs ONNX's own shape inference, then hands the graph to GraphImporter.
// Every check that ONNX can make is left to ONNX, reported with the node.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ONNX/ImportONNX.h"

#include "GraphImporter.h"
#include "OpsetAdapter.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "llvm/ADT/StringSet.h"
#include <climits>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {
/// One model import: holds the ModelProto while the module is built.
class ModelImport {
public:
  ModelImport(StringRef modelPath, MLIRContext *context,
              const ONNXImportOptions &options)
      : modelPath(modelPath), context(context), options(options),
        fileLoc(FileLineColLoc::get(context, modelPath, 0, 0)) {}

  OwningOpRef<ModuleOp> run(StringRef bytes, bool isText);

private:
  LogicalResult parse(StringRef bytes, bool isText);
  LogicalResult findOpset();
  LogicalResult bindInputShapes();
  LogicalResult fixDimensions();
  LogicalResult adaptNewerOpset();
  LogicalResult validateNodes();
  LogicalResult inferShapes();

  InFlightDiagnostic emitError() { return mlir::emitError(fileLoc); }

  std::string modelPath;
  MLIRContext *context;
  const ONNXImportOptions &options;
  Location fileLoc;
  onnx::ModelProto model;
  /// The model's default-domain opset, and the one libonnx's schemas are
  /// looked up at (17 for a model adapted from a newer opset).
  int64_t opset = 0, schemaOpset = 0;
  /// How a newer opset was adapted (empty for opsets libonnx knows).
  OpsetAdaptation adaptation;
  /// --dim values plus the sizes bound from concrete input shapes.
  llvm::StringMap<int64_t> dims;
};
} // namespace

LogicalResult ModelImport::parse(StringRef bytes, bool isText) {
  if (isText) {
    // The parser keeps pointing into the text.
    std::string text = bytes.str();
    onnx::OnnxParser parser(text.c_str());
    onnx::Common::Status status;
    // The parser also throws (std::stoi on malformed numbers).
    try {
      status = parser.Parse(model);
    } catch (const std::exception &error) {
      return emitError() << "cannot parse ONNX text: a malformed token made "
                            "the parser fail in '"
                         << error.what() << "'";
    }
    if (!status.IsOK())
      return emitError() << "cannot parse ONNX text: " << status.ErrorMessage();
    return success();
  }
  if (bytes.empty())
    return emitError() << "the file is empty, not an ONNX model";
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return emitError()
           << "the model is larger than 2 GiB, the protobuf limit; store "
              "the weights as ONNX external data";
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return emitError() << "not an ONNX model: protobuf parsing failed "
                          "(truncated file, or not ONNX)";
  if (!model.has_graph())
    return emitError() << "not an ONNX model: it has no graph";
  return success();
}

LogicalResult ModelImport::findOpset() {
  for (const onnx::OperatorSetIdProto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset <= 0)
    return emitError() << "the model imports no opset of the default ONNX "
                          "domain";
  int64_t newest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
                       .Map()
                       .at(onnx::ONNX_DOMAIN)
                       .second;
  if (opset > std::max<int64_t>(newest, kNewestOpset))
    return emitError() << "the model uses opset " << opset
                       << ", newer than Loom imports (" << kNewestOpset << ")";
  schemaOpset = std::min<int64_t>(opset, newest);
  return success();
}

/// Opsets newer than libonnx's (17): adapted node by node onto its schemas;
/// sequence idioms fused (OpsetAdapter.h).
LogicalResult ModelImport::adaptNewerOpset() {
  FailureOr<OpsetAdaptation> adapted =
      adaptModel(model, opset, schemaOpset, context);
  if (failed(adapted))
    return failure();
  adaptation = std::move(*adapted);
  if (opset > schemaOpset)
    schemaOpset = kAdaptedOpset;
  return success();
}

/// Reads the symbolic dimensions of graph inputs off the concrete shapes the
/// caller has for them (the files `loom-run` was given), checking that every
/// fixed dimension agrees.
LogicalResult ModelImport::bindInputShapes() {
  dims = options.dims;
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  size_t position = 0;
  for (onnx::ValueInfoProto &input : *graph.mutable_input()) {
    if (initializers.contains(input.name()))
      continue;
    size_t index = position++;
    ArrayRef<int64_t> shape;
    auto named = options.inputShapes.find(input.name());
    if (named != options.inputShapes.end())
      shape = named->second;
    else if (index < options.positionalInputShapes.size())
      shape = options.positionalInputShapes[index];
    else
      continue;
    if (!input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    auto &declared = *input.mutable_type()
                          ->mutable_tensor_type()
                          ->mutable_shape()
                          ->mutable_dim();
    auto mismatch = [&]() {
      InFlightDiagnostic diag = emitError();
      diag << "input '" << input.name() << "' has shape [";
      llvm::interleaveComma(shape, diag);
      diag << "] but the model declares [";
      llvm::interleaveComma(
          declared, diag, [&](const onnx::TensorShapeProto::Dimension &d) {
            if (d.has_dim_value())
              diag << d.dim_value();
            else
              diag << (d.dim_param().empty() ? std::string("?")
                                             : d.dim_param());
          });
      diag << "]";
      return diag;
    };
    if (int64_t(shape.size()) != declared.size())
      return mismatch();
    for (auto [dim, size] : llvm::zip(declared, shape)) {
      if (dim.has_dim_value()) {
        if (dim.dim_value() != size)
          return mismatch();
        continue;
      }
      if (!dim.has_dim_param()) {
        dim.set_dim_value(size);
        continue;
      }
      auto [it, inserted] = dims.try_emplace(dim.dim_param(), size);
      if (!inserted && it->second != size)
        return mismatch() << "; '" << dim.dim_param() << "' is already "
                          << it->second;
    }
  }
  return success();
}

/// Applies `--dim` values to every declared shape and rejects graph inputs
/// left with symbolic or unknown dimensions: Loom compiles static shapes.
LogicalResult ModelImport::fixDimensions() {
  onnx::GraphProto &graph = *model.mutable_graph();
  llvm::StringSet<> used;
  if (failed(bindInputShapes()))
    return failure();
  auto fix = [&](onnx::ValueInfoProto &info) {
    if (!info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      return;
    for (onnx::TensorShapeProto::Dimension &dim : *info.mutable_type()
                                                       ->mutable_tensor_type()
                                                       ->mutable_shape()
                                                       ->mutable_dim()) {
      if (!dim.has_dim_param())
        continue;
      auto it = dims.find(dim.dim_param());
      if (it == dims.end())
        continue;
      used.insert(dim.dim_param());
      dim.set_dim_value(it->second);
    }
  };
  for (onnx::ValueInfoProto &info : *graph.mutable_input())
    fix(info);
  for (onnx::ValueInfoProto &info : *graph.mutable_output())
    fix(info);
  for (onnx::ValueInfoProto &info : *graph.mutable_value_info())
    fix(info);

  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.contains(input.name()) || !input.type().has_tensor_type())
      continue;
    if (!input.type().tensor_type().has_shape())
      return mlir::emitError(
                 NameLoc::get(StringAttr::get(context, input.name())))
             << "graph input '" << input.name()
             << "' has no shape; Loom needs static shapes";
    for (auto [index, dim] :
         llvm::enumerate(input.type().tensor_type().shape().dim())) {
      if (dim.has_dim_value())
        continue;
      InFlightDiagnostic diag =
          mlir::emitError(NameLoc::get(StringAttr::get(context, input.name())));
      diag << "graph input '" << input.name() << "' has unresolved dimension "
           << index;
      if (dim.has_dim_param())
        return diag << " '" << dim.dim_param() << "'; fix it with --dim "
                    << dim.dim_param() << "=<size>";
      return diag << " (no size and no name)";
    }
  }
  for (const auto &entry : options.dims)
    if (!used.contains(entry.getKey()))
      return emitError() << "--dim " << entry.getKey()
                         << " names no symbolic dimension of the model";
  return success();
}

LogicalResult ModelImport::validateNodes() {
  ConverterRegistry converters;
  registerElementwiseConverters(converters);
  registerShapeConverters(converters);
  registerNNConverters(converters);
  registerIndexingConverters(converters);
  registerEinsumConverter(converters);
  registerConvConverter(converters);
  for (auto [index, node] : llvm::enumerate(model.graph().node())) {
    Location loc = getNodeLoc(context, node);
    auto prefix = [&]() {
      return mlir::emitError(loc)
             << "node '" << cast<NameLoc>(loc).getName().getValue() << "' ("
             << node.op_type() << ", opset " << opset << "): ";
    };
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return prefix() << "domain '" << node.domain()
                      << "' is not supported (only the default ONNX domain "
                         "and the model's local functions)";
    if (index < adaptation.nativeVersions.size() &&
        adaptation.nativeVersions[index] != 0) {
      // A newer op version with no opset-17 form: its converter checks it.
      int since = adaptation.nativeVersions[index];
      if (converters.lookup(node.op_type(), since))
        continue;
      return prefix() << node.op_type() << "-" << since
                      << " (the version at opset " << opset
                      << ") is not supported";
    }
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
        node.op_type(), static_cast<int>(schemaOpset), node.domain());
    if (!schema)
      return prefix() << "ONNX has no op '" << node.op_type() << "' at opset "
                      << opset;
    try {
      schema->Verify(node);
    } catch (const std::exception &error) {
      return prefix() << "invalid node: " << error.what();
    }
    int since = schema->since_version();
    if (converters.lookup(node.op_type(), since))
      continue;
    SmallVector<int> supported = converters.getSinceVersions(node.op_type());
    if (supported.empty())
      return prefix() << "op '" << node.op_type()
                      << "' is not supported by the Loom importer";
    InFlightDiagnostic diag = prefix();
    diag << node.op_type() << "-" << since << " (the version at opset " << opset
         << ") is not supported; Loom imports ";
    llvm::interleave(
        supported,
        [&](int version) { diag << node.op_type() << "-" << version; },
        [&] { diag << ", "; });
    return diag;
  }
  return success();
}

LogicalResult ModelImport::inferShapes() {
  // Strict mode: shape contradictions in the model are errors, reported by
  // ONNX with the offending node.
  // A model adapted from a newer opset may hold nodes libonnx cannot
  // infer (Gelu-20, an uneven Split-18): those are skipped, and Loom's own
  // type inference covers them.
  onnx::ShapeInferenceOptions inferenceOptions(
      /*check_type_val=*/true,
      /*strict_mode_val=*/adaptation.lenientInference ? 0 : 1,
      /*data_prop_val=*/false);
  // Nodes kept at a version libonnx does not know are hidden from it in a
  // domain of their own while it infers.
  onnx::GraphProto &graph = *model.mutable_graph();
  auto hideNative = [&](bool hide) {
    bool any = false;
    for (auto [index, version] : llvm::enumerate(adaptation.nativeVersions))
      if (version != 0) {
        graph.mutable_node(int(index))->set_domain(hide ? "loom.native" : "");
        any = true;
      }
    if (!any)
      return;
    if (hide) {
      onnx::OperatorSetIdProto *entry = model.add_opset_import();
      entry->set_domain("loom.native");
      entry->set_version(1);
    } else {
      model.mutable_opset_import()->RemoveLast();
    }
  };
  hideNative(true);
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inferenceOptions);
  } catch (const std::exception &error) {
    hideNative(false);
    return emitError() << "ONNX shape inference failed: " << error.what();
  }
  hideNative(false);
  return success();
}

OwningOpRef<ModuleOp> ModelImport::run(StringRef bytes, bool isText) {
  // libonnx reports some malformed input only by throwing; whatever escapes
  // the targeted handlers still ends as an error, never as a crash.
  try {
    if (failed(parse(bytes, isText)) || failed(findOpset()) ||
        failed(inlineLocalFunctions(model, context)) ||
        failed(fixDimensions()) || failed(adaptNewerOpset()) ||
        failed(validateNodes()) || failed(inferShapes()))
      return nullptr;
    return GraphImporter(context, model, opset, schemaOpset,
                         adaptation.nativeVersions, modelPath, options)
        .run();
  } catch (const std::exception &error) {
    emitError() << "ONNX library error: " << error.what();
    return nullptr;
  }
}

OwningOpRef<ModuleOp> mlir::loom::importONNX(StringRef bytes,
                                             StringRef modelPath, bool isText,
                                             MLIRContext *context,
                                             const ONNXImportOptions &options) {
  context->loadDialect<LoomDialect, func::FuncDialect>();
  return ModelImport(modelPath, context, options).run(bytes, isText);
}
