//===- ModelCompiler.cpp - ONNX or .mlir to a runtime plan ----------------===//
//
// Imports (ONNX) or parses (.mlir) the model, lowers it with
// loom-lower-to-plan and builds the plan; every diagnostic is collected into
// the returned error so that loom-run reports it in one place.
//
//===----------------------------------------------------------------------===//

#include "../ModelCompiler.h"

#include "loom/Conversion/LoomToPlan/LoomToPlan.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Import/ONNX/ImportONNX.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
namespace rt = ::loom::runtime;

bool ::loom::haveModelCompiler() { return true; }

namespace {

/// "file:line:col" for source locations; the ONNX node for name locations.
std::string describeLocation(Location loc, const std::string &path,
                             const std::string &message) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0)
      return path;
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string node = name.getName().str();
    // Importer messages already start with the node; lowering ones do not.
    if (message.find("'" + node + "'") != std::string::npos)
      return path;
    return path + ": node '" + node + "'";
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      return describeLocation(fused.getLocations().front(), path, message);
  return path;
}

} // namespace

auto ::loom::compileModel(const std::string &path,
                          const ::loom::ModelCompileOptions &options)
    -> rt::StatusOr<rt::Plan> {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return rt::Status::error(path + ": " + file.getError().message());

  DialectRegistry registry;
  registry.insert<mlir::loom::LoomDialect, mlir::loom::plan::PlanDialect,
                  func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string message = diag.str();
    if (!errors.empty())
      errors += "\n";
    errors += describeLocation(diag.getLocation(), path, message) +
              ": error: " + message;
    for (Diagnostic &note : diag.getNotes())
      errors += "\n" + describeLocation(note.getLocation(), path, "") +
                ": note: " + note.str();
    return success();
  });
  auto failure = [&](const std::string &fallback) {
    return rt::Status::error(errors.empty() ? path + ": " + fallback : errors);
  };

  StringRef extension = llvm::StringRef(path).rsplit('.').second;
  OwningOpRef<ModuleOp> module;
  if (extension == "mlir") {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  } else if (extension == "onnx" || extension == "onnxtext") {
    mlir::loom::ONNXImportOptions importOptions;
    for (const auto &[name, size] : options.dims)
      importOptions.dims[name] = size;
    for (const auto &[name, shape] : options.inputShapes)
      importOptions.inputShapes[name] =
          llvm::SmallVector<int64_t>(shape.begin(), shape.end());
    for (const std::vector<int64_t> &shape : options.positionalInputShapes)
      importOptions.positionalInputShapes.emplace_back(shape.begin(),
                                                       shape.end());
    module = mlir::loom::importONNX((*file)->getBuffer(), path,
                                    extension == "onnxtext", &context,
                                    importOptions);
  } else {
    return rt::Status::error(
        path + ": unknown model format (expected .onnx, .onnxtext, .mlir "
               "or a plan file)");
  }
  if (!module)
    return failure("cannot read the model");
  FailureOr<rt::Plan> plan =
      mlir::loom::lowerToRuntimePlan(*module, options.functionName);
  if (mlir::failed(plan))
    return failure("lowering failed");
  return std::move(*plan);
}
