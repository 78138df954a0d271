//===- loom-translate.cpp - Models in and out of the loom dialect ---------===//
//
// Translates between external formats and the loom dialect:
//
//   loom-translate --import-onnx model.onnx [-o out.mlir] [--dim batch=8]
//   loom-translate --emit-plan lowered.mlir [-o model.plan]
//
// --emit-plan writes the runtime plan (docs/design/plan-format.md) of a
// module that went through `loom-opt --loom-lower-to-plan`.
//
// A `.onnxtext` input (or --onnx-text) is read in ONNX's textual syntax,
// which keeps lit tests readable.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Import/ONNX/ImportONNX.h"
#include "loom/Target/Plan/EmitPlan.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("loom-translate options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<input file>"),
                                          cl::init("-"), cl::cat(category));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("filename"),
                                           cl::init("-"), cl::cat(category));
static cl::opt<bool> importONNX("import-onnx", cl::desc("Import an ONNX model"),
                                cl::cat(category));
static cl::opt<bool> emitPlan("emit-plan",
                              cl::desc("Write the runtime plan of a lowered "
                                       "module"),
                              cl::cat(category));
static cl::opt<bool>
    onnxText("onnx-text",
             cl::desc("Read ONNX's text syntax (default for .onnxtext)"),
             cl::cat(category));
static cl::list<std::string>
    dims("dim", cl::desc("Size of a symbolic dimension, NAME=VALUE"),
         cl::value_desc("NAME=VALUE"), cl::cat(category));
static cl::opt<bool>
    noWeights("no-weights",
              cl::desc("Shapes only: declare parameters without values"),
              cl::cat(category));
static cl::opt<mlir::loom::ExternalWeights> externalWeights(
    "external-weights", cl::desc("What to do with ONNX external data"),
    cl::values(clEnumValN(mlir::loom::ExternalWeights::Reference, "reference",
                          "refer to the bytes in place (default)"),
               clEnumValN(mlir::loom::ExternalWeights::Load, "load",
                          "map them into dense_resource blobs")),
    cl::init(mlir::loom::ExternalWeights::Reference), cl::cat(category));
static cl::opt<int64_t> inlineLimit(
    "inline-limit",
    cl::desc("Largest initializer (in elements) printed as a dense literal"),
    cl::init(64), cl::cat(category));
static cl::opt<std::string> functionName("function-name",
                                         cl::desc("Name of the imported func"),
                                         cl::init("forward"),
                                         cl::cat(category));
static cl::opt<bool> forTraining(
    "for-training",
    cl::desc("Warn about initializers an eval-mode export merged (training "
             "would tie them)"),
    cl::cat(category));
static cl::opt<bool> emitBytecode("emit-bytecode",
                                  cl::desc("Write MLIR bytecode"),
                                  cl::cat(category));

/// Parses the --dim flags; reports and fails on a malformed one.
static LogicalResult parseDims(llvm::StringMap<int64_t> &result) {
  for (StringRef dim : dims) {
    auto [name, value] = dim.split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size < 0) {
      llvm::errs() << "loom-translate: --dim expects NAME=SIZE with SIZE >= "
                      "0, got '"
                   << dim << "'\n";
      return failure();
    }
    result[name] = size;
  }
  return success();
}

/// Writes the plan of the lowered module in `input` to `output`.
static int writePlanFile(std::unique_ptr<llvm::MemoryBuffer> input,
                         llvm::raw_ostream &output) {
  DialectRegistry registry;
  registry.insert<mlir::loom::LoomDialect, mlir::loom::plan::PlanDialect,
                  func::FuncDialect>();
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  FailureOr<::loomrt::Plan> plan = mlir::loom::buildRuntimePlan(
      *module,
      functionName.getNumOccurrences() ? StringRef(functionName) : StringRef());
  if (failed(plan))
    return 1;
  output << ::loomrt::writePlan(*plan);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&category, &cl::getGeneralCategory()});
  cl::ParseCommandLineOptions(argc, argv, "Loom translation tool\n");

  if (importONNX == emitPlan) {
    llvm::errs() << "loom-translate: choose one translation (--import-onnx "
                    "or --emit-plan)\n";
    return 1;
  }
  std::string error;
  if (emitPlan) {
    std::unique_ptr<llvm::MemoryBuffer> input =
        openInputFile(inputFilename, &error);
    std::unique_ptr<llvm::ToolOutputFile> output =
        input ? openOutputFile(outputFilename, &error) : nullptr;
    if (!output) {
      llvm::errs() << "loom-translate: " << error << "\n";
      return 1;
    }
    int status = writePlanFile(std::move(input), output->os());
    if (status == 0)
      output->keep();
    return status;
  }
  mlir::loom::ONNXImportOptions options;
  if (failed(parseDims(options.dims)))
    return 1;
  options.withWeights = !noWeights;
  options.externalWeights = externalWeights;
  options.inlineElementLimit = inlineLimit;
  options.functionName = functionName;
  options.warnTiedInitializers = forTraining;

  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "loom-translate: " << error << "\n";
    return 1;
  }

  MLIRContext context;
  // Imported locations are ONNX node names, not lines of the (binary) input,
  // and the messages name the node: print them against the model file.
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    auto print = [&](Diagnostic &d, StringRef severity) {
      llvm::errs() << inputFilename << ": " << severity << ": " << d.str()
                   << "\n";
    };
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      print(diag, "error");
      break;
    case DiagnosticSeverity::Warning:
      print(diag, "warning");
      break;
    default:
      print(diag, "note");
      break;
    }
    for (Diagnostic &note : diag.getNotes())
      print(note, "note");
    return success();
  });
  bool isText = onnxText || StringRef(inputFilename).ends_with(".onnxtext");
  OwningOpRef<ModuleOp> module = mlir::loom::importONNX(
      input->getBuffer(), inputFilename, isText, &context, options);
  if (!module)
    return 1;

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "loom-translate: " << error << "\n";
    return 1;
  }
  if (emitBytecode) {
    if (failed(writeBytecodeToFile(*module, output->os())))
      return 1;
  } else {
    module->print(output->os());
  }
  output->keep();
  return 0;
}
