//===- ImportONNX.h - ONNX models into the loom dialect ---------*- C++ -*-===//
//
// Entry point of the ONNX importer (lib/Import/ONNX). The header stays free
// of ONNX and protobuf headers so that tools including it build quickly.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_ONNX_IMPORTONNX_H
#define LOOM_IMPORT_ONNX_IMPORTONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
namespace loom {

/// What becomes of weights that an ONNX model keeps in external data files.
enum class ExternalWeights {
  /// Parameters refer to the bytes in place (`#loom.external_data`): nothing
  /// is read or copied, so models of any size import in constant memory.
  Reference,
  /// The files are memory-mapped into `dense_resource` blobs, which makes the
  /// module self-contained (best written as bytecode).
  Load,
};

struct ONNXImportOptions {
  /// Values for symbolic dimensions (`dim_param`), as given by `--dim`.
  llvm::StringMap<int64_t> dims;
  /// Concrete shapes of graph inputs, by name or (for inputs not named
  /// there) by position among the graph inputs; their sizes fix the
  /// symbolic dimensions `dims` leaves open, and must agree with fixed ones.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  llvm::SmallVector<llvm::SmallVector<int64_t>> positionalInputShapes;
  /// Without weights parameters carry no initial value (shapes-only mode).
  bool withWeights = true;
  ExternalWeights externalWeights = ExternalWeights::Reference;
  /// Initializers with more elements than this become `dense_resource`
  /// blobs instead of inline `dense<...>` literals.
  int64_t inlineElementLimit = 64;
  /// Name of the imported `func.func`.
  std::string functionName = "forward";
  /// Warn about initializers that PyTorch's eval-mode export merged because
  /// they held equal values (see docs/design/training.md): training the
  /// import would tie parameters that PyTorch trains separately.
  bool warnTiedInitializers = false;
};

/// Imports the ONNX model in `bytes` (a serialized ModelProto, or the ONNX
/// text syntax when `isText`) into a new module. `modelPath` names the model
/// in diagnostics and anchors relative external-data locations. On failure
/// the errors have been emitted through `context` and the result is null.
OwningOpRef<ModuleOp> importONNX(llvm::StringRef bytes,
                                 llvm::StringRef modelPath, bool isText,
                                 MLIRContext *context,
                                 const ONNXImportOptions &options);

/// Returns the serialized ONNX model `modelBytes` with the data of the
/// initializers named in `values` replaced (raw little-endian bytes of the
/// initializer's own type and shape; external data becomes inline). Names
/// that are not initializers (optimizer state) are skipped; `replacedCount`
/// receives how many were replaced. Fails, with the reason in `error`, on a
/// model that does not parse or a size that does not fit.
std::optional<std::string>
replaceInitializers(llvm::StringRef modelBytes,
                    const llvm::StringMap<llvm::StringRef> &values,
                    std::string &error, size_t *replacedCount = nullptr);

/// The rows a model was exported at: the fixed leading dimension that all
/// its graph inputs (initializers aside) declare, when none of them names
/// `dimName` as a symbolic dimension. 0 when an input's batch is symbolic
/// or unknown, the inputs disagree, or `modelBytes` is not a binary
/// ModelProto.
int64_t fixedLeadingDimension(llvm::StringRef modelBytes,
                              llvm::StringRef dimName);

} // namespace loom
} // namespace mlir

#endif // LOOM_IMPORT_ONNX_IMPORTONNX_H
