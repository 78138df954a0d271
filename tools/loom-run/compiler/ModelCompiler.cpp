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
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Import/ONNX/ImportONNX.h"
#include "loom/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include "llvm/Support/SourceMgr.h"
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>

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

/// The forward model's rewrites, after canonicalization: the fused
/// attention, then loom-mixed-precision unless the model stays f32 (which
/// casts the fused attention as a whole).
void addForwardRewrites(PassManager &pm,
                        const ::loom::ModelCompileOptions &options) {
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomFuseAttention());
  if (options.precision == "f32")
    return;
  mlir::loom::LoomMixedPrecisionOptions mixed;
  mixed.precision = options.precision;
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomMixedPrecision(mixed));
}

/// --padding-idx: marks the embedding lookups (axis-0 gathers reading a
/// parameter) of the parameters each pattern matches; a pattern that
/// matches no such lookup is an error, since it would change nothing.
LogicalResult markPaddingRows(ModuleOp module,
                              const ::loom::TrainCompileOptions &train,
                              const std::string &path, std::string &errors) {
  for (const auto &[text, row] : train.paddingIdx) {
    std::regex pattern;
    try {
      pattern = std::regex(text, std::regex::ECMAScript);
    } catch (const std::regex_error &) {
      errors += path + ": error: --padding-idx '" + text +
                "' is not a valid regular expression";
      return failure();
    }
    int marked = 0;
    bool failedAny = false;
    module.walk([&](mlir::loom::GatherOp gather) {
      auto param = gather.getInput().getDefiningOp<mlir::loom::ParamOp>();
      if (!param || gather.getAxis() != 0 ||
          !std::regex_search(param.getName().str(), pattern))
        return;
      int64_t rows = gather.getInput().getType().getDimSize(0);
      if (row < -rows || row >= rows) {
        errors += path + ": error: --padding-idx " + text + "=" +
                  std::to_string(row) + ": parameter '" +
                  param.getName().str() + "' has " + std::to_string(rows) +
                  " rows";
        failedAny = true;
        return;
      }
      gather.setPaddingIdx(row);
      ++marked;
    });
    if (failedAny)
      return failure();
    if (marked == 0) {
      errors += path + ": error: --padding-idx '" + text +
                "' matches no parameter read by an embedding lookup";
      return failure();
    }
  }
  return success();
}

/// The rows of an f32 [rows, width] parameter value that are all zeros, or
/// nothing when the value is not at hand (shapes only, external data).
SmallVector<int64_t> zeroRows(mlir::loom::ParameterOp parameter) {
  auto type = dyn_cast<RankedTensorType>(parameter.getType());
  std::optional<Attribute> value = parameter.getInitialValue();
  if (!type || !value || type.getRank() != 2 || !type.getElementType().isF32())
    return {};
  ArrayRef<float> data;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(*value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return {};
    ArrayRef<char> raw = blob->getData();
    data = ArrayRef<float>(reinterpret_cast<const float *>(raw.data()),
                           raw.size() / sizeof(float));
  } else if (auto dense = dyn_cast<DenseElementsAttr>(*value)) {
    if (dense.isSplat())
      return {};
    ArrayRef<char> raw = dense.getRawData();
    data = ArrayRef<float>(reinterpret_cast<const float *>(raw.data()),
                           raw.size() / sizeof(float));
  }
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  if (int64_t(data.size()) != rows * width || width == 0)
    return {};
  SmallVector<int64_t> zeros;
  for (int64_t row = 0; row < rows; ++row)
    if (llvm::all_of(data.slice(row * width, width),
                     [](float x) { return x == 0.0f; }))
      zeros.push_back(row);
  return zeros;
}

/// Warns about embedding tables that look like nn.Embedding(padding_idx):
/// PyTorch zeroes that one row at initialization and never trains it, but
/// the ONNX export keeps only the lookup, so Loom would train the row.
void warnAboutPaddingRows(ModuleOp module) {
  llvm::StringSet<> warned;
  module.walk([&](mlir::loom::GatherOp gather) {
    auto param = gather.getInput().getDefiningOp<mlir::loom::ParamOp>();
    if (!param || gather.getAxis() != 0 || gather.getPaddingIdx() ||
        warned.contains(param.getName()))
      return;
    auto parameter = module.lookupSymbol<mlir::loom::ParameterOp>(
        param.getNameAttr().getAttr());
    if (!parameter || !parameter.getTrainable())
      return;
    SmallVector<int64_t> zeros = zeroRows(parameter);
    if (zeros.size() != 1 ||
        cast<RankedTensorType>(parameter.getType()).getDimSize(0) < 3)
      return;
    warned.insert(param.getName());
    std::string escaped;
    for (char c : param.getName()) {
      if (StringRef(".^$|()[]{}*+?\\").contains(c))
        escaped += '\\';
      escaped += c;
    }
    emitWarning(parameter.getLoc())
        << "embedding '" << param.getName() << "': row " << zeros.front()
        << " is all zeros, as nn.Embedding(padding_idx=" << zeros.front()
        << ") initializes it, and PyTorch never trains that row, which an "
           "ONNX export cannot say; pass --padding-idx '^"
        << escaped << "$=" << zeros.front() << "' to train as PyTorch does";
  });
}

/// Freezes the parameters --freeze matches, then adds the loss, its
/// gradients and the optimizer step; keeps only the step.
LogicalResult buildTrainingStep(ModuleOp module,
                                const ::loom::ModelCompileOptions &options,
                                const std::string &path, std::string &errors) {
  const ::loom::TrainCompileOptions &train = options.train;
  std::string model =
      options.functionName.empty() ? "forward" : options.functionName;
  if (!train.freeze.empty()) {
    std::regex pattern;
    try {
      pattern = std::regex(train.freeze, std::regex::ECMAScript);
    } catch (const std::regex_error &error) {
      errors += path + ": error: --freeze '" + train.freeze +
                "' is not a valid regular expression";
      return failure();
    }
    for (auto parameter : module.getOps<mlir::loom::ParameterOp>())
      if (std::regex_search(parameter.getSymName().str(), pattern))
        parameter.setTrainable(false);
  }
  if (failed(markPaddingRows(module, train, path, errors)))
    return failure();
  warnAboutPaddingRows(module);
  if (llvm::none_of(module.getOps<mlir::loom::ParameterOp>(),
                    [](auto parameter) { return parameter.getTrainable(); })) {
    errors += path +
              ": error: the model has no trainable parameters (float "
              "initializers" +
              (train.freeze.empty()
                   ? std::string(")")
                   : "; --freeze '" + train.freeze + "' matches them all)");
    return failure();
  }
  PassManager pm(module.getContext());
  // Simplify first (e.g. fold Linear layers' weight transposes into their
  // GEMMs) so that the backward pass is built from the simpler graph.
  pm.addPass(createCanonicalizerPass());
  // Attention fusion and mixed precision rewrite the forward model only;
  // autodiff then derives the fused backward and bf16 GEMMs from it.
  addForwardRewrites(pm, options);
  mlir::loom::LoomAttachLossOptions loss;
  loss.function = model;
  loss.kind = train.loss;
  pm.addPass(mlir::loom::createLoomAttachLoss(loss));
  // Aligned rows for the logits' GEMMs (GPT-2's 50257 classes are not a
  // multiple of 8); the loss and gradients stay the same.
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomPadClasses());
  mlir::loom::LoomAutodiffOptions autodiff;
  autodiff.function = model + "_loss";
  pm.addPass(mlir::loom::createLoomAutodiff(autodiff));
  // Bias gradients sum the bf16 gradient the backward GEMMs read, as
  // torch.autocast does, instead of an f32 copy stored for them alone.
  if (options.precision != "f32")
    pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomNarrowBiasGradients());
  mlir::loom::LoomBuildTrainStepOptions step;
  step.function = model + "_loss_grad";
  step.optimizer = train.optimizer;
  step.lr = train.lr;
  step.momentum = train.momentum;
  step.dampening = train.dampening;
  step.nesterov = train.nesterov;
  step.beta1 = train.beta1;
  step.beta2 = train.beta2;
  step.eps = train.eps;
  step.weightDecay = train.weightDecay;
  step.clipGradNorm = train.clipGradNorm;
  step.gradAccum = train.gradAccum;
  pm.addPass(mlir::loom::createLoomBuildTrainStep(step));
  if (failed(pm.run(module)))
    return failure();
  // The model, loss and gradient functions were inlined into the step.
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func.getSymName() != "train_step")
      func.erase();
  return success();
}

} // namespace

auto ::loom::saveTrainedModel(
    const std::string &modelPath, const std::string &outPath,
    const std::map<std::string, rt::HostTensor> &values)
    -> rt::StatusOr<size_t> {
  if (!llvm::StringRef(modelPath).ends_with(".onnx"))
    return rt::Status::error("--save writes ONNX models; " + modelPath +
                             " is not a binary .onnx model");
  rt::StatusOr<std::string> bytes = rt::readFile(modelPath);
  if (!bytes)
    return bytes.status();
  llvm::StringMap<llvm::StringRef> raw;
  for (const auto &[name, tensor] : values)
    raw[name] = llvm::StringRef(
        reinterpret_cast<const char *>(tensor.data.data()), tensor.data.size());
  std::string error;
  size_t replaced = 0;
  std::optional<std::string> model =
      mlir::loom::replaceInitializers(*bytes, raw, error, &replaced);
  if (!model)
    return rt::Status::error(modelPath + ": " + error);
  // Written next to the target and renamed: never a half-written model.
  std::string temporary = outPath + ".tmp";
  FILE *file = std::fopen(temporary.c_str(), "wb");
  bool written = file && std::fwrite(model->data(), 1, model->size(), file) ==
                             model->size();
  if (file && std::fclose(file) != 0)
    written = false;
  if (!written || std::rename(temporary.c_str(), outPath.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return rt::Status::error("cannot write " + outPath + ": " + reason);
  }
  return replaced;
}

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
  // Users read these errors; the op dump is for pass developers (loom-opt).
  context.printOpOnDiagnostic(false);
  std::string errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    std::string message = diag.str();
    if (diag.getSeverity() == DiagnosticSeverity::Warning)
      std::fprintf(stderr, "%s: warning: %s\n",
                   describeLocation(diag.getLocation(), path, message).c_str(),
                   message.c_str());
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
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
    importOptions.warnTiedInitializers = options.train.enabled;
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
  std::string functionName = options.functionName;
  if (options.train.enabled) {
    if (failed(buildTrainingStep(*module, options, path, errors)))
      return failure("cannot build the training step");
    functionName = "train_step";
  } else if (options.precision != "f32" || options.fuseAttention) {
    // Canonicalized first, as for training, so that transposes fold into
    // the GEMMs before casts stand between them.
    PassManager pm(&context);
    pm.addPass(createCanonicalizerPass());
    addForwardRewrites(pm, options);
    if (failed(pm.run(*module)))
      return failure("cannot rewrite the model (--precision " +
                     options.precision + ")");
  }
  FailureOr<rt::Plan> plan =
      mlir::loom::lowerToRuntimePlan(*module, functionName);
  if (mlir::failed(plan))
    return failure("lowering failed");
  return std::move(*plan);
}
