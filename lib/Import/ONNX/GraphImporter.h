//===- GraphImporter.h - One ONNX graph into one func.func ------*- C++ -*-===//

#ifndef LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "NodeContext.h"
#include "Tensors.h"

#include "loom/Import/ONNX/ImportONNX.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace loom {
namespace onnx_import {

/// Imports the graph of a validated, shape-inferred model: inputs become
/// function arguments, float initializers `loom.parameter`s, nodes loom ops
/// located at their node names, outputs the function results.
class GraphImporter {
public:
  /// `opset` is the model's (errors name it, converters read it);
  /// `schemaOpset` the one libonnx's schemas are looked up at, and
  /// `nativeVersions` the op version of each node that has none there
  /// (OpsetAdapter.h; 0: libonnx's).
  GraphImporter(MLIRContext *context, onnx::ModelProto &model, int64_t opset,
                int64_t schemaOpset, std::vector<int> nativeVersions,
                llvm::StringRef modelPath, const ONNXImportOptions &options);

  OwningOpRef<ModuleOp> run();

private:
  LogicalResult importInputs();
  LogicalResult importInitializers();
  LogicalResult importNode(const onnx::NodeProto &node, unsigned index);
  LogicalResult importOutputs();
  LogicalResult checkAgainstONNXType(Value value, llvm::StringRef name,
                                     Location loc);
  void eraseDeadCode();
  void markTrainableParameters();
  void warnAboutTiedInitializers();
  void warnAboutFoldedParameters();

  MLIRContext *context;
  onnx::ModelProto &model;
  int64_t opset, schemaOpset;
  std::vector<int> nativeVersions;
  std::string modelPath;
  const ONNXImportOptions &options;
  TensorLoader tensors;
  ConverterRegistry converters;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  func::FuncOp function;
  std::unique_ptr<SymbolTable> symbols;
  /// ONNX value name -> imported value.
  llvm::StringMap<Value> values;
  /// ONNX value name -> the node that declares it as an output, for values
  /// a converter leaves undefined (e.g. LayerNormalization's Mean).
  llvm::StringMap<const onnx::NodeProto *> producers;
  /// ONNX value name -> type ONNX shape inference or the model declares.
  llvm::StringMap<const onnx::TypeProto *> onnxTypes;
};

/// The location of `node`: its name, or its first output's when unnamed.
Location getNodeLoc(MLIRContext *context, const onnx::NodeProto &node);

/// The since-version of the schema `node` resolves to at `opset`, or 0 if
/// ONNX has no such op.
int getSinceVersion(const onnx::NodeProto &node, int64_t opset);

} // namespace onnx_import
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
