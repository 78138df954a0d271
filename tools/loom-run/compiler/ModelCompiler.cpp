//===- ModelCompiler.cpp - ONNX or .mlir to a runtime plan ----------------===//
//
// Imports (ONNX) or parses (.mlir) the model, lowers it with
// loom-lower-to-plan and builds the plan; every diagnostic is collected into
// the returned error so that loom-run reports it in one place.
//
//===----------------------------------------------------------------------===//

#include "../ModelCompiler.h"

#include "loom/Analysis/RepeatedBlocks.h"
#include "loom/Analysis/StageCuts.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Import/ONNX/ImportONNX.h"
#include "loom/InitAllDialects.h"
#include "loom/Target/Plan/EmitPlan.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Threading.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

using namespace mlir;
using namespace mlir::loom;
namespace rt = loomrt;

bool ::loomrun::haveModelCompiler() { return true; }

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

/// loom-run's training flags as the training pipeline's options (the
/// flags were checked when they were parsed).
void setPipelineOptions(const ::loomrun::ModelCompileOptions &options,
                        TrainingPipelineOptions &pipeline) {
  const ::loomrun::TrainCompileOptions &train = options.train;
  pipeline.function =
      options.functionName.empty() ? "forward" : options.functionName;
  pipeline.loss = train.loss == "mse"    ? LossKind::MSE
                  : train.loss == "none" ? LossKind::None
                                         : LossKind::CrossEntropy;
  pipeline.precision =
      options.precision == "bf16" ? Precision::BF16 : Precision::F32;
  pipeline.fuseAttention = options.fuseAttention;
  pipeline.freeze = train.freeze;
  for (const auto &[pattern, row] : train.paddingIdx)
    pipeline.paddingIdx.push_back(pattern + "=" + std::to_string(row));
  pipeline.optimizer =
      train.optimizer == "sgd" ? OptimizerKind::SGD : OptimizerKind::AdamW;
  pipeline.lr = train.lr;
  pipeline.momentum = train.momentum;
  pipeline.dampening = train.dampening;
  pipeline.nesterov = train.nesterov;
  pipeline.beta1 = train.beta1;
  pipeline.beta2 = train.beta2;
  pipeline.eps = train.eps;
  pipeline.weightDecay = train.weightDecay;
  pipeline.clipGradNorm = train.clipGradNorm;
  pipeline.gradAccum = train.gradAccum;
  pipeline.gradPrecision = train.gradPrecision;
  pipeline.tp = unsigned(train.tp);
  pipeline.dp = unsigned(train.dp);
  pipeline.zero = unsigned(train.zero);
  pipeline.zeroShardGroup = unsigned(train.zeroShardGroup);
  pipeline.bucketMB = train.bucketMB;
  pipeline.sequenceParallel = train.sequenceParallel;
  pipeline.recompute = train.recompute;
  pipeline.pp = unsigned(train.pp);
  pipeline.schedule = train.schedule;
  pipeline.virtualStages = unsigned(train.virtualStages);
  pipeline.scheduleFile = train.scheduleFile;
  for (const std::string &cut : train.stageCuts)
    pipeline.stageCuts.push_back(cut);
  pipeline.stageMemoryCapMB = train.stageMemoryCapMB;
  pipeline.sharedCores = train.sharedCores;
  for (const std::string &annotation : train.shard)
    pipeline.shard.push_back(annotation);
  pipeline.shardingsFile = train.shardingsFile;
}

/// Writes `module` to `path` as loom-opt prints it.
LogicalResult writeModule(ModuleOp module, const std::string &path,
                          std::string &errors) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  if (error) {
    errors += "cannot write " + path + ": " + error.message();
    return failure();
  }
  module.print(os);
  os << "\n";
  return success();
}

} // namespace

auto ::loomrun::saveTrainedModel(
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
  if (rt::Status status = rt::writeFileAtomically(outPath, *model); !status)
    return status;
  return replaced;
}

namespace {

/// MLIR's text execution time report (as `loom-opt --mlir-timing` prints
/// it, wall times only) on `os`: MLIR 19 prints its own only to stderr.
class TextTimingOutput : public OutputStrategy {
public:
  using OutputStrategy::OutputStrategy;

  void printHeader(const TimeRecord &total) override {
    os << "===" << std::string(73, '-') << "===\n"
       << std::string(25, ' ') << "... Execution time report ...\n"
       << "===" << std::string(73, '-') << "===\n"
       << llvm::format("  Total Execution Time: %.4f seconds\n\n", total.wall)
       << "  ----Wall Time----  ----Name----\n";
  }
  void printFooter() override { os.flush(); }
  void printTime(const TimeRecord &time, const TimeRecord &total) override {
    os << llvm::format("  %8.4f (%5.1f%%)", time.wall,
                       total.wall > 0 ? 100.0 * time.wall / total.wall : 0.0);
  }
  void printListEntry(StringRef name, const TimeRecord &time,
                      const TimeRecord &total, bool) override {
    printTime(time, total);
    os << "  " << name << "\n";
  }
  void printTreeEntry(unsigned indent, StringRef name, const TimeRecord &time,
                      const TimeRecord &total) override {
    printTime(time, total);
    os.indent(indent + 2) << name << "\n";
  }
  void printTreeEntryEnd(unsigned, bool) override {}
};

/// Shapes-only compiles (the planner's: tens to hundreds of one model)
/// share one context per thread and the model's imports by options:
/// importing the
/// ONNX file again (its protobuf, shape inference and the IR) was three
/// quarters of a probe's compile, and a copy of the imported module costs
/// little. The context lives as long as its thread.
struct SharedImports {
  std::unique_ptr<MLIRContext> context;
  std::map<std::string, OwningOpRef<ModuleOp>> modules;
  /// The keys of `modules`, oldest first: a few are kept (the planner's
  /// probes ask for two row counts, a layout's folded compiles four times
  /// for one), not one per data-parallel size a search visits.
  std::deque<std::string> order;
  static constexpr size_t kKept = 8;

  void keep(const std::string &key, ModuleOp module) {
    if (modules.count(key))
      return;
    if (order.size() == kKept) {
      modules.erase(order.front());
      order.pop_front();
    }
    modules[key] = OwningOpRef<ModuleOp>(module.clone());
    order.push_back(key);
  }

  /// The calling thread's: the planner compiles on several threads at
  /// once, each in a context of its own (a context's diagnostic handlers
  /// are one stack, which compiles at once would mix up).
  static SharedImports &get() {
    thread_local SharedImports imports;
    return imports;
  }

  /// The imports of every thread, as MLIR bytecode: a thread that has not
  /// imported a model yet parses another's bytecode into its context,
  /// several times faster than importing the ONNX model again (protobuf,
  /// shape inference, every node).
  static std::optional<std::string> bytecode(const std::string &key) {
    std::lock_guard<std::mutex> lock(bytecodeMutex());
    auto it = bytecodes().find(key);
    if (it == bytecodes().end())
      return std::nullopt;
    return it->second;
  }
  static void keepBytecode(const std::string &key, ModuleOp module) {
    std::string bytes;
    llvm::raw_string_ostream os(bytes);
    if (failed(writeBytecodeToFile(module, os)))
      return;
    os.flush();
    std::lock_guard<std::mutex> lock(bytecodeMutex());
    if (bytecodes().size() >= kKept)
      bytecodes().clear();
    bytecodes()[key] = std::move(bytes);
  }

  /// What decides an import of `path`: its symbolic dimensions and input
  /// shapes.
  static std::string key(const std::string &path,
                         const ::loomrun::ModelCompileOptions &options) {
    std::string text = path;
    for (const auto &[name, size] : options.dims)
      text += "|" + name + "=" + std::to_string(size);
    auto shape = [&](const std::vector<int64_t> &dims) {
      for (int64_t dim : dims)
        text += "," + std::to_string(dim);
    };
    for (const auto &[name, dims] : options.inputShapes) {
      text += "|" + name + ":";
      shape(dims);
    }
    for (const std::vector<int64_t> &dims : options.positionalInputShapes) {
      text += "|#:";
      shape(dims);
    }
    return text + (options.train.enabled ? "|train" : "");
  }

private:
  static std::map<std::string, std::string> &bytecodes() {
    static std::map<std::string, std::string> all;
    return all;
  }
  static std::mutex &bytecodeMutex() {
    static std::mutex mutex;
    return mutex;
  }

  SharedImports() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
    context->printOpOnDiagnostic(false);
  }
};

/// Where loom-cut-stages cuts `loss` (the same rates and cap) into
/// `train`'s pp x virtual stages chunks, in its repeated blocks
/// (StageOutline); false, with `error` set, when it repeats none or
/// cannot be cut.
bool outlineCut(func::FuncOp loss, const ::loomrun::TrainCompileOptions &train,
                ::loomrun::StageOutline &out, std::string &error) {
  std::optional<RepeatedBlocks> blocks = findRepeatedBlocks(loss);
  if (!blocks) {
    error = "the model repeats no block";
    return false;
  }
  int chunks = std::max(1, train.pp) * std::max(1, train.virtualStages);
  std::optional<StagePlan> cut =
      cutIntoStages(loss, chunks, StageCostRates(), {},
                    train.stageMemoryCapMB * double(1 << 20), error);
  if (!cut)
    return false;
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> indexOf;
  // A user cut names a node and cuts after its last op.
  llvm::StringMap<int64_t> lastOf;
  for (Operation &op : loss.getBody().front().without_terminator()) {
    indexOf[&op] = int64_t(ops.size());
    if (std::string name = stageCutNodeName(op.getLoc()); !name.empty())
      lastOf[name] = int64_t(ops.size());
    ops.push_back(&op);
  }
  out.period = blocks->period;
  out.count = blocks->count;
  out.cutNames.assign(blocks->count * blocks->period, "");
  llvm::DenseMap<Operation *, int64_t> position;
  for (size_t b = 0; b < blocks->count; ++b)
    for (size_t o = 0; o < blocks->period; ++o) {
      Operation *op = blocks->op(b, o);
      size_t at = b * blocks->period + o;
      position[op] = int64_t(at);
      std::string name = stageCutNodeName(op->getLoc());
      auto last = lastOf.find(name);
      if (!name.empty() && last != lastOf.end() && last->second == indexOf[op])
        out.cutNames[at] = name;
    }
  for (const StageCutPoint &point : cut->cuts) {
    auto it = position.find(ops[point.afterOp]);
    out.cuts.push_back(it == position.end() ? -1 : it->second);
  }
  return true;
}

/// Frees `module` (a planner's candidate) with its functions' bodies
/// emptied in parallel: a pipeline's lowered step has a function per rank
/// and, at 64 microbatches, half a million ops (0.28 s on one thread).
void freeModule(OwningOpRef<ModuleOp> module) {
  SmallVector<Region *> bodies;
  for (auto func : module->getOps<func::FuncOp>())
    bodies.push_back(&func.getBody());
  // (Each body's ops use only its own values: functions are isolated.)
  parallelForEach(module->getContext(), bodies, [](Region *body) {
    body->dropAllReferences();
    body->getBlocks().clear();
  });
}

/// Stage outlines asked of compile(): per virtual stage count (the model
/// otherwise as its options say), the cut or its error.
struct StageOutlines {
  std::vector<int> virtualStages;
  std::vector<rt::StatusOr<::loomrun::StageOutline>> outlines;
};

/// The model at `path` compiled as `options` say; the plan unless
/// options.withWeights is false. With `timing`, every stage and pass is
/// timed in it and the verifier runs once, on the lowered module, instead
/// of after every pass (--compile-only).
///
/// With `outline`, nothing is compiled: the model is imported and
/// canonicalized, and outlined into it (its stageCounts' shares, asked
/// for in its map's keys, filled in where the model has the cut points).
rt::StatusOr<::loomrun::CompileOnlyResult>
compile(const std::string &path, const ::loomrun::ModelCompileOptions &options,
        TimingScope *timing, ::loomrun::ModelOutline *outline = nullptr,
        StageOutlines *stages = nullptr) {
  TimingScope none;
  TimingScope &root = timing ? *timing : none;
  TimingScope reading = root.nest("read the model");
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return rt::Status::error(path + ": " + file.getError().message());
  reading.stop();

  const bool shared = !options.withWeights;
  std::unique_ptr<MLIRContext> ownContext;
  if (!shared) {
    DialectRegistry registry;
    registerAllDialects(registry);
    ownContext = std::make_unique<MLIRContext>(registry);
    ownContext->loadAllAvailableDialects();
    // Users read these errors; the op dump is for pass developers
    // (loom-opt).
    ownContext->printOpOnDiagnostic(false);
  }
  MLIRContext &context = shared ? *SharedImports::get().context : *ownContext;
  std::string errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    std::string message = diag.str();
    if (options.quiet && diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    if (diag.getSeverity() == DiagnosticSeverity::Warning)
      std::fprintf(stderr, "%s: warning: %s\n",
                   describeLocation(diag.getLocation(), path, message).c_str(),
                   message.c_str());
    // The pipeline passes' remarks (where the stages were cut, the
    // schedule's predicted step, bubble and memory) are what a user sees
    // before any rank starts.
    if (diag.getSeverity() == DiagnosticSeverity::Remark &&
        StringRef(message).starts_with("pipeline "))
      std::printf("%s: remark: %s\n",
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
  TimingScope importing = root.nest(
      extension == "mlir" ? "parse the module" : "import the ONNX model");
  std::string importKey = shared ? SharedImports::key(path, options) : "";
  if (shared)
    if (auto it = SharedImports::get().modules.find(importKey);
        it != SharedImports::get().modules.end())
      module = OwningOpRef<ModuleOp>(it->second->clone());
  // (Imported from the ONNX model here, not taken from an import before.)
  bool imported = false;
  if (!module && shared)
    if (std::optional<std::string> bytes = SharedImports::bytecode(importKey)) {
      module = parseSourceString<ModuleOp>(*bytes, &context);
    }
  if (module) {
    // Imported before, in this process.
  } else if (extension == "mlir") {
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
    importOptions.withWeights = options.withWeights;
    imported = true;
    module = mlir::loom::importONNX((*file)->getBuffer(), path,
                                    extension == "onnxtext", &context,
                                    importOptions);
    // A model exported at a fixed batch trains in microbatches of exactly
    // those rows: when the import refuses a microbatch's shape, say so
    // rather than that one input's shape differs. (Only then: reading the
    // inputs parses the whole model again.)
    if (!module && options.train.enabled && extension == "onnx")
      if (int64_t fixed =
              mlir::loom::fixedLeadingDimension((*file)->getBuffer(), "batch"))
        for (const auto &[name, shape] : options.inputShapes)
          if (!shape.empty() && shape[0] != fixed)
            return rt::Status::error(
                path + ": its inputs are exported at a fixed batch of " +
                std::to_string(fixed) +
                " rows, so every microbatch (over all data-parallel ranks) "
                "has that many, but '" +
                name + "' would have " + std::to_string(shape[0]) +
                " (--batch-size over the microbatches): pass --batch-size " +
                std::to_string(fixed) +
                " times the microbatches, or export the model with a "
                "dynamic batch axis");
  } else {
    return rt::Status::error(
        path + ": unknown model format (expected .onnx, .onnxtext, .mlir "
               "or a plan file)");
  }
  importing.stop();
  if (!module)
    return failure("cannot read the model");
  if (shared) {
    SharedImports::get().keep(importKey, *module);
    if (imported)
      SharedImports::keepBytecode(importKey, *module);
  }
  std::string functionName = options.functionName;
  std::string forward =
      options.functionName.empty() ? "forward" : options.functionName;
  if (outline) {
    PassManager canonicalize(&context);
    canonicalize.addPass(createCanonicalizerPass());
    auto function = module->lookupSymbol<func::FuncOp>(forward);
    if (failed(canonicalize.run(*module)) || !function)
      return failure("cannot read the model");
    // Counted only if the model folds (to one block: then to any more),
    // which fails where something after the blocks reads an earlier one.
    std::optional<RepeatedBlocks> blocks = findRepeatedBlocks(function);
    std::string error;
    outline->repeatedBlocks =
        blocks && succeeded(foldRepeatedBlocks(*blocks, 1, error))
            ? int(blocks->count)
            : 0;
    // The stages' shares only where the planner's screen uses them: a
    // model without repeated blocks. (Where some were found but did not
    // fold, the function may have changed; the screen then splits the
    // model evenly.)
    std::map<int, double> shares;
    if (!blocks) {
      for (const auto &asked : outline->slowestStageShare) {
        int stages = asked.first;
        std::optional<StagePlan> cut = cutIntoStages(
            function, stages, StageCostRates(), /*userCuts=*/{}, 0, error);
        double total = 0, slowest = 0;
        for (double seconds : cut ? cut->seconds : std::vector<double>()) {
          total += seconds;
          slowest = std::max(slowest, seconds);
        }
        if (total > 0)
          shares[stages] = slowest / total;
      }
    }
    outline->slowestStageShare = std::move(shares);
    return ::loomrun::CompileOnlyResult();
  }
  if (stages) {
    // The training pipeline up to the cut, then the cut loom-cut-stages
    // makes (the same rates and cap).
    PassManager pm(&context);
    pm.enableVerifier(false);
    TrainingPipelineOptions pipeline;
    setPipelineOptions(options, pipeline);
    pipeline.stopBeforeStageCuts = true;
    buildTrainingPipeline(pm, pipeline);
    if (failed(pm.run(*module)))
      return failure("cannot build the training step");
    auto loss = module->lookupSymbol<func::FuncOp>(lossFunctionName(forward));
    if (!loss)
      return failure("no loss function to cut");
    // (The passes before the cut do not read the virtual stages: one
    // training pipeline serves every count's cut.)
    for (int virtualStages : stages->virtualStages) {
      ::loomrun::TrainCompileOptions train = options.train;
      train.virtualStages = virtualStages;
      ::loomrun::StageOutline cut;
      std::string error;
      if (outlineCut(loss, train, cut, error))
        stages->outlines.push_back(std::move(cut));
      else
        stages->outlines.push_back(rt::Status::error(path + ": " + error));
    }
    return ::loomrun::CompileOnlyResult();
  }
  PassManager pm(&context);
  TimingScope pipelineScope;
  // Shapes-only compiles (--compile-only, the planner's candidates) verify
  // once, on the lowered module, instead of after every pass: the planner
  // compiles tens of layouts, and the verifier was a third of each.
  if (timing || !options.withWeights)
    pm.enableVerifier(false);
  if (timing) {
    pipelineScope = root.nest(options.train.enabled ? "training pipeline"
                                                    : "forward rewrites");
    pm.enableTiming(pipelineScope);
  }
  if (options.keepRepeatedBlocks > 0) {
    // The planner's layer folding: canonicalized first, as the training
    // pipeline would, so that each block's constants are hoisted alike.
    pm.addPass(createCanonicalizerPass());
    LoomFoldRepeatedBlocksOptions fold;
    fold.function = forward;
    fold.keep = unsigned(options.keepRepeatedBlocks);
    pm.addPass(createLoomFoldRepeatedBlocks(fold));
  }
  if (options.train.enabled) {
    TrainingPipelineOptions pipeline;
    setPipelineOptions(options, pipeline);
    buildTrainingPipeline(pm, pipeline);
    // A pipeline runs one function per rank (loom.ranks).
    functionName = options.train.pp > 1 ? "" : "train_step";
  } else if (options.precision != "f32" || options.fuseAttention) {
    // Canonicalized first, as for training, so that transposes fold into
    // the GEMMs before casts stand between them.
    pm.addPass(createCanonicalizerPass());
    buildForwardFusionPipeline(pm, options.fuseAttention,
                               options.precision == "bf16" ? Precision::BF16
                                                           : Precision::F32);
  }
  if (failed(pm.run(*module)))
    return failure(options.train.enabled
                       ? "cannot build the training step"
                       : "cannot rewrite the model (--precision " +
                             options.precision + ")");
  pipelineScope.stop();
  if (!options.emitMLIR.empty()) {
    TimingScope writing = root.nest("write --emit-mlir");
    if (failed(writeModule(*module, options.emitMLIR, errors)))
      return failure("cannot write " + options.emitMLIR);
  }
  if (options.explain) {
    // The same pass as loom-opt's, on the module --emit-mlir writes.
    TimingScope explaining = root.nest("explain");
    PassManager explain(&context);
    LoomExplainShardingOptions report;
    report.linkGbps = options.linkGbps;
    report.linkLatencyUs = options.linkLatencyUs;
    explain.addPass(createLoomExplainSharding(report));
    std::fflush(stdout);
    if (failed(explain.run(*module)))
      return failure("cannot explain the module's collectives");
    llvm::outs().flush();
  }
  ::loomrun::CompileOnlyResult result;
  if (!timing && options.withWeights) {
    FailureOr<rt::Plan> plan =
        mlir::loom::lowerToRuntimePlan(*module, functionName);
    if (mlir::failed(plan))
      return failure("lowering failed");
    result.plan = std::move(*plan);
    return result;
  }
  // lowerToRuntimePlan's steps, each timed with --compile-only, with one
  // verification.
  if (!functionName.empty() &&
      !module->lookupSymbol<func::FuncOp>(functionName))
    return rt::Status::error(path + ": error: no function named '" +
                             functionName + "'");
  TimingScope lowering = root.nest("loom-lower-to-plan");
  PassManager lower(&context);
  lower.enableVerifier(false);
  lower.enableTiming(lowering);
  buildLowerToPlanPipeline(lower);
  if (failed(lower.run(*module)))
    return failure("lowering failed");
  lowering.stop();
  TimingScope verifying = root.nest("verify the lowered module");
  if (failed(mlir::verify(*module)))
    return failure("the lowered module is invalid");
  verifying.stop();
  result.ranks = LoomDialect::getWorldSize(*module);
  result.function = functionName;
  if (!options.withWeights) {
    // --compile-only --report-json, and the planner's candidates (untimed).
    if (options.planShapes || !timing) {
      TimingScope planning = root.nest("build the plan of shapes only");
      FailureOr<rt::Plan> shapes =
          options.representativeRanks
              ? mlir::loom::buildRepresentativePlan(*module, functionName)
              : mlir::loom::buildShapesOnlyPlan(*module, functionName);
      if (mlir::failed(shapes))
        return failure("building the plan failed");
      result.shapes = std::move(*shapes);
    }
    if (timing) {
      // loom-run --compile-only exits next: the system takes the memory
      // back at once, as clang's -disable-free leaves it to (freeing half a
      // million ops was 0.15 s of a 64-microbatch pipeline's compile).
      (void)module.release();
      return result;
    }
    freeModule(std::move(module));
    return result;
  }
  TimingScope planning = root.nest("build the plan (copies the weights)");
  FailureOr<rt::Plan> plan =
      mlir::loom::buildRuntimePlan(*module, functionName);
  if (mlir::failed(plan))
    return failure("building the plan failed");
  result.plan = std::move(*plan);
  return result;
}

} // namespace

auto ::loomrun::compileModel(const std::string &path,
                             const ::loomrun::ModelCompileOptions &options)
    -> rt::StatusOr<rt::Plan> {
  if (!options.withWeights)
    return rt::Status::error(path + ": a plan holds the weights' values, "
                                    "which --no-weights does not read");
  rt::StatusOr<CompileOnlyResult> compiled = compile(path, options, nullptr);
  if (!compiled)
    return compiled.status();
  return std::move(*compiled->plan);
}

/// `options` for a compile of shapes only, quiet (the planner's).
static ::loomrun::ModelCompileOptions
shapesOnlyOptions(const ::loomrun::ModelCompileOptions &options) {
  ::loomrun::ModelCompileOptions shapesOnly = options;
  shapesOnly.withWeights = false;
  shapesOnly.quiet = true;
  return shapesOnly;
}

auto ::loomrun::compileShapesOnly(const std::string &path,
                                  const ::loomrun::ModelCompileOptions &options)
    -> rt::StatusOr<rt::Plan> {
  ::loomrun::ModelCompileOptions shapesOnly = shapesOnlyOptions(options);
  rt::StatusOr<CompileOnlyResult> compiled = compile(path, shapesOnly, nullptr);
  if (!compiled)
    return compiled.status();
  return std::move(*compiled->shapes);
}

auto ::loomrun::outlineModel(const std::string &path,
                             const ::loomrun::ModelCompileOptions &options,
                             const std::vector<int> &stageCounts)
    -> rt::StatusOr<ModelOutline> {
  ::loomrun::ModelCompileOptions shapesOnly = shapesOnlyOptions(options);
  ModelOutline outline;
  for (int stages : stageCounts)
    if (stages > 1)
      outline.slowestStageShare[stages] = 0;
  rt::StatusOr<CompileOnlyResult> compiled =
      compile(path, shapesOnly, nullptr, &outline);
  if (!compiled)
    return compiled.status();
  return outline;
}

auto ::loomrun::outlineStagesEach(const std::string &path,
                                  const ::loomrun::ModelCompileOptions &options,
                                  const std::vector<int> &virtualStages)
    -> std::vector<rt::StatusOr<StageOutline>> {
  ::loomrun::ModelCompileOptions shapesOnly = shapesOnlyOptions(options);
  shapesOnly.keepRepeatedBlocks = 0;
  StageOutlines stages;
  stages.virtualStages = virtualStages;
  rt::StatusOr<CompileOnlyResult> compiled =
      compile(path, shapesOnly, nullptr, nullptr, &stages);
  if (!compiled)
    return std::vector<rt::StatusOr<StageOutline>>(virtualStages.size(),
                                                   compiled.status());
  return std::move(stages.outlines);
}

auto ::loomrun::compileOnly(const std::string &path,
                            const ::loomrun::ModelCompileOptions &options)
    -> rt::StatusOr<CompileOnlyResult> {
  DefaultTimingManager timing;
  timing.setEnabled(true);
  timing.setOutput(std::make_unique<TextTimingOutput>(llvm::outs()));
  rt::StatusOr<CompileOnlyResult> compiled = [&] {
    TimingScope root = timing.getRootScope();
    return compile(path, options, &root);
  }();
  std::fflush(stdout);
  timing.print();
  // Else its destructor prints an empty report.
  timing.setEnabled(false);
  llvm::outs().flush();
  return compiled;
}
