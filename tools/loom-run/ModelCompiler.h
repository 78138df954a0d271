//===- ModelCompiler.h - loom-run's bridge to the compiler ------*- C++ -*-===//
//
// Plain C++ interface between loom-run (which also builds without MLIR, and
// then only runs plans) and the compiler: ONNX or .mlir in, runtime plan out.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H
#define LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loomrun {

/// What `loom-run --train` compiles: the model, a loss, its gradients and
/// one optimizer step, by loom-training-pipeline, whose options these are
/// (plain C++: loom-run parses them without MLIR). Negative
/// hyper-parameters take torch's defaults.
struct TrainCompileOptions {
  bool enabled = false;
  std::string loss = "cross_entropy";
  std::string optimizer = "adamw";
  double lr = -1, momentum = 0, dampening = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = -1;
  double clipGradNorm = 0;
  int gradAccum = 1;
  /// f32, or bf16 (with --precision bf16): gradients kept and reduced in
  /// bf16 (--grad-precision).
  std::string gradPrecision = "f32";
  /// Parameters whose name this ECMAScript regex matches (search) stay
  /// frozen; empty freezes none.
  std::string freeze;
  /// --padding-idx REGEX=ROW, in order: the embedding lookups (axis-0
  /// gathers) of parameters whose name REGEX matches pass no gradient to
  /// ROW, as torch.nn.Embedding(padding_idx=ROW), which ONNX cannot say.
  std::vector<std::pair<std::string, int64_t>> paddingIdx;
  /// --tp N: Megatron tensor parallelism over N ranks (1: off).
  int tp = 1;
  /// --dp N: data parallelism over N ranks, the batch split (1: off).
  int dp = 1;
  /// --zero K: ZeRO stage over dp (0: off).
  int zero = 0;
  /// --zero-shard-group K: ZeRO shards within groups of K dp ranks and
  /// replicates across the groups (0: one group of all dp ranks).
  int zeroShardGroup = 0;
  /// --bucket-mb MB: data parallelism's gradient buckets (0: none).
  double bucketMB = 25.0;
  /// --recompute: activation recompute, none, selective or full.
  std::string recompute = "none";
  /// --sequence-parallel: with --tp, Megatron's sequence parallelism.
  bool sequenceParallel = false;
  /// --pp P: pipeline parallelism over P ranks (1: off); --microbatches
  /// (0: unset; then it is the gradient accumulation count), --schedule,
  /// --virtual-stages, --schedule-file, --stage-cuts.
  int pp = 1;
  int microbatches = 0;
  std::string schedule = "1f1b";
  int virtualStages = 1;
  std::string scheduleFile;
  std::vector<std::string> stageCuts;
  /// --stage-memory-cap-mb: each stage's memory cap for the cuts (0: none).
  double stageMemoryCapMB = 0;
  /// With pp: the processors the ranks share (0: one each), for the
  /// predicted schedule.
  int sharedCores = 0;
  /// --shard REGEX=SHARDING[:PRIORITY], in order, and --shardings FILE.
  std::vector<std::string> shard;
  std::string shardingsFile;
};

struct ModelCompileOptions {
  /// --dim NAME=SIZE values for symbolic ONNX dimensions.
  std::map<std::string, int64_t> dims;
  /// Shapes of the inputs the user gave, by graph input name, and for bare
  /// files by position; they fix the symbolic dimensions --dim leaves open.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  std::vector<std::vector<int64_t>> positionalInputShapes;
  /// The function of a .mlir module to run (default: its only one).
  std::string functionName;
  /// f32, or bf16: GEMMs in bf16, the rest f32 (loom-mixed-precision, run
  /// before the training step is built).
  std::string precision = "f32";
  /// Replace the unfused attention pattern by loom.attention
  /// (loom-fuse-attention), so its [..., Sq, Sk] tensors are never stored.
  bool fuseAttention = true;
  /// When enabled, the plan is one training step named `train_step`: the
  /// model's inputs and `labels` (unless the loss is `none`) in, `loss` out;
  /// trained parameters and optimizer state are the plan's state weights.
  TrainCompileOptions train;
  /// When set, the module after the training pipeline (or the forward
  /// rewrites) and before lowering is written here (--emit-mlir), as
  /// loom-opt prints it.
  std::string emitMLIR;
  /// --explain: print loom-explain-sharding's report of that module (every
  /// collective, where it comes from and what it costs on a link of
  /// linkGbps GB/s and linkLatencyUs per step) on stdout.
  bool explain = false;
  double linkGbps = 100;
  double linkLatencyUs = 5;
  /// --no-weights: the ONNX initializers become parameters without values
  /// (shapes only, as `loom-translate --no-weights`): no weight byte is
  /// read. A plan holds every weight's bytes, so only compileOnly takes
  /// it, and it stops at the lowered module.
  bool withWeights = true;
  /// With withWeights false: build the plan of shapes only
  /// (mlir::loom::buildShapesOnlyPlan) for a report of what each rank
  /// holds (CompileOnlyResult::shapes).
  bool planShapes = false;
  /// compileShapesOnly: build the programs of the first rank of each
  /// function only (mlir::loom::buildRepresentativePlan); the other ranks
  /// run the same programs on their own blocks.
  bool representativeRanks = false;
  /// Print no warning or remark (the planner compiles many layouts of one
  /// model); errors are returned as always.
  bool quiet = false;
  /// The planner's layer folding: compile the model with only the first
  /// this many of its repeated blocks (loom-fold-repeated-blocks; 0: all).
  int keepRepeatedBlocks = 0;
};

/// What compileOnly did.
struct CompileOnlyResult {
  /// The plan, when the weights were imported (withWeights).
  std::optional<loomrt::Plan> plan;
  /// The plan of shapes only (no weight values), when planShapes asked.
  std::optional<loomrt::Plan> shapes;
  /// The ranks of the lowered step and its function's name.
  int64_t ranks = 0;
  std::string function;
};

/// True when this loom-run can compile models (it was built with MLIR).
bool haveModelCompiler();

/// Compiles the .onnx, .onnxtext or .mlir model at `path` to a plan.
/// Diagnostics are in the returned error, one per line, prefixed with the
/// file and the ONNX node name or line.
loomrt::StatusOr<loomrt::Plan> compileModel(const std::string &path,
                                            const ModelCompileOptions &options);

/// --compile-only: compiles the model as compileModel does (import, the
/// training pipeline or forward rewrites, loom-lower-to-plan, then the plan
/// unless options.withWeights is false), timing every stage and pass, and
/// prints MLIR's execution time report on stdout. The verifier runs once,
/// on the lowered module, instead of after every pass.
loomrt::StatusOr<CompileOnlyResult>
compileOnly(const std::string &path, const ModelCompileOptions &options);

/// Compiles the model as compileOnly does, without printing anything, to
/// the plan of shapes only (mlir::loom::buildShapesOnlyPlan): what each rank
/// runs and holds, without the weights' values (which are not read). The
/// planner compiles its candidates with it.
loomrt::StatusOr<loomrt::Plan>
compileShapesOnly(const std::string &path, const ModelCompileOptions &options);

/// What the planner knows of a model before compiling it.
struct ModelOutline {
  /// How many times the model repeats its block (a transformer's layer;
  /// lib/Analysis/RepeatedBlocks.h), after canonicalization; 0 when it
  /// repeats none three times or more.
  int repeatedBlocks = 0;
  /// Per stage count asked for, the share of a microbatch's forward and
  /// backward work the slowest stage gets where loom-cut-stages would cut
  /// the forward function (the same cost model, no memory cap); absent
  /// where it has too few cut points.
  std::map<int, double> slowestStageShare;
};

/// The model's outline, after canonicalization, with the slowest stage's
/// share for each of `stageCounts`. Nothing is compiled.
loomrt::StatusOr<ModelOutline>
outlineModel(const std::string &path, const ModelCompileOptions &options,
             const std::vector<int> &stageCounts);

/// Where loom-cut-stages cuts a model into pipeline chunks, in its
/// repeated blocks (the planner writes a deep pipeline's stages out from a
/// compile of fewer: docs/design/planner.md, "Writing stages out").
struct StageOutline {
  /// The loss function's repeated blocks: ops per block, and blocks.
  size_t period = 0, count = 0;
  /// Per cut (chunks - 1 of them): the position in the blocks of the op
  /// it comes after (block x period + offset), or -1 outside them.
  std::vector<int64_t> cuts;
  /// Per position in the blocks: the ONNX node whose last op sits there
  /// (a name --stage-cuts cuts after), or "" (not the last op of its
  /// node).
  std::vector<std::string> cutNames;
};

/// Where the compiler cuts the model into options.train.pp x V chunks,
/// for each V of `virtualStages` (options.train.virtualStages aside): the
/// training pipeline up to loom-cut-stages once (nothing before the cut
/// reads the virtual stages), then each count's cut. Nothing past it is
/// compiled.
std::vector<loomrt::StatusOr<StageOutline>>
outlineStagesEach(const std::string &path, const ModelCompileOptions &options,
                  const std::vector<int> &virtualStages);

/// Writes the ONNX model at `modelPath` to `outPath` with the initializers
/// named in `values` replaced by them (same names, types and shapes; names
/// that are not initializers are skipped). Returns how many were replaced.
loomrt::StatusOr<size_t>
saveTrainedModel(const std::string &modelPath, const std::string &outPath,
                 const std::map<std::string, loomrt::HostTensor> &values);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H
