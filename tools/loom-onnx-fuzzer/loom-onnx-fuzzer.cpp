//===- loom-onnx-fuzzer.cpp - libFuzzer target for the ONNX importer ------===//
//
// Feeds arbitrary bytes to the importer: a serialized ModelProto, or ONNX
// text when the input starts with '<'. Any crash, sanitizer report or hang
// is a bug; errors are expected and discarded. scripts/fuzz.sh builds and
// runs it.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ONNX/ImportONNX.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler discard(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::loom::ONNXImportOptions options;
  // Keep weights in place: fuzzed external-data paths must not be read.
  options.externalWeights = mlir::loom::ExternalWeights::Reference;
  options.dims["batch"] = 2;
  bool isText = bytes.starts_with("<");
  (void)mlir::loom::importONNX(bytes, "fuzz/model.onnx", isText, &context,
                               options);
  return 0;
}
