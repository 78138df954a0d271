//===- Pipeline.cpp - The loom-training-pipeline --------------------------===//
//
// One definition of "a training step from a forward model", shared by
// loom-run (which only turns its flags into TrainingPipelineOptions) and
// loom-opt (`--loom-training-pipeline='optimizer=sgd lr=0.1'`), so that the
// two cannot drift apart.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Fusion/Passes.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::loom;

std::string mlir::loom::lossFunctionName(StringRef model) {
  return (model + "_loss").str();
}

std::string mlir::loom::gradientFunctionName(StringRef function) {
  return (function + "_grad").str();
}

void mlir::loom::buildTrainingPipeline(OpPassManager &pm,
                                       const TrainingPipelineOptions &options) {
  // What the user says about parameters, before anything is derived.
  LoomFreezeParametersOptions freeze;
  freeze.freeze = options.freeze;
  pm.addPass(createLoomFreezeParameters(freeze));
  // The pass copies the entries when it is created.
  SmallVector<std::string> paddingIdx(options.paddingIdx.begin(),
                                      options.paddingIdx.end());
  LoomMarkPaddingRowsOptions padding;
  padding.paddingIdx = paddingIdx;
  pm.addPass(createLoomMarkPaddingRows(padding));

  // Simplify first (e.g. fold Linear layers' weight transposes into their
  // GEMMs) so that the backward pass is built from the simpler graph.
  pm.addPass(createCanonicalizerPass());
  // Tensor parallelism splits fused projections by heads only once each
  // piece is a parameter of its own; autodiff and the optimizer then treat
  // the pieces like any parameter.
  if (options.tp > 1)
    pm.addPass(createLoomSplitFusedProjections());
  // Attention fusion and mixed precision rewrite the forward model only;
  // autodiff then derives the fused backward and bf16 GEMMs from it.
  buildForwardFusionPipeline(pm, options.fuseAttention, options.precision);

  // The loss, its gradients, the optimizer step.
  LoomAttachLossOptions loss;
  loss.function = options.function;
  loss.kind = options.loss;
  pm.addPass(createLoomAttachLoss(loss));
  // A vocabulary tensor parallelism does not divide is padded in the
  // parameters themselves, so that every rank holds an equal block (as
  // Megatron does); the loss ignores the padding.
  if (options.tp > 1) {
    LoomPadVocabularyOptions vocabulary;
    vocabulary.ways = options.tp;
    pm.addPass(createLoomPadVocabulary(vocabulary));
  }
  // Aligned rows for the logits' GEMMs (GPT-2's 50257 classes are not a
  // multiple of 8); the loss and gradients stay the same.
  pm.addNestedPass<func::FuncOp>(createLoomPadClasses());
  if (options.stopBeforeStageCuts)
    return;
  // Pipeline stages are cut on the forward model and its loss, where the
  // model's order puts the embedding first and the loss last; autodiff
  // gives each backward op its forward's stage.
  if (options.pp > 1) {
    // The pass copies the entries when it is created.
    SmallVector<std::string> cuts(options.stageCuts.begin(),
                                  options.stageCuts.end());
    LoomCutStagesOptions cut;
    cut.function = lossFunctionName(options.function);
    cut.stages =
        int64_t(options.pp) * std::max(1u, unsigned(options.virtualStages));
    cut.stageCuts = cuts;
    cut.memoryCapMB = options.stageMemoryCapMB;
    pm.addPass(createLoomCutStages(cut));
  }
  LoomAutodiffOptions autodiff;
  autodiff.function = lossFunctionName(options.function);
  autodiff.recompute = options.recompute;
  pm.addPass(createLoomAutodiff(autodiff));
  // Bias gradients sum the bf16 gradient the backward GEMMs read, as
  // torch.autocast does, instead of an f32 copy stored for them alone.
  if (options.precision != Precision::F32)
    pm.addNestedPass<func::FuncOp>(createLoomNarrowBiasGradients());
  LoomBuildTrainStepOptions step;
  step.function = gradientFunctionName(autodiff.function);
  step.eraseSources = true;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.momentum = options.momentum;
  step.dampening = options.dampening;
  step.nesterov = options.nesterov;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.eps = options.eps;
  step.weightDecay = options.weightDecay;
  step.clipGradNorm = options.clipGradNorm;
  step.gradAccum = options.gradAccum;
  step.gradientPrecision = options.gradPrecision;
  // A pipeline's later microbatches are made after partitioning, from the
  // last one built: propagation and partitioning of all of them were most
  // of its compile time (a 175B-shaped GPT at M = 64: 12 of 23 s).
  if (options.pp > 1)
    step.microbatchCopies = options.microbatchCopies;
  pm.addPass(createLoomBuildTrainStep(step));

  // Parallelization (lib/Transforms/Parallel, docs/design/passes.md), on
  // the whole step (forward, backward and optimizer), in this order:
  //   1. the mesh and the annotations: the user's, then the tactics' (--tp,
  //      --dp; the planner's choice to come);
  //   2. sharding propagation, ZeRO's sharding of the optimizer updates,
  //      gradients and parameters over dp (--zero) as its last priority,
  //      then SPMD partitioning (local shapes and collectives);
  //   3. the pipeline schedule and one program per pipeline rank (below;
  //      the stages were cut before autodiff).
  // loom-lower-to-plan then lowers each rank's program.
  buildParallelizationPipeline(pm, options);
  // 3. Pipeline parallelism: the schedule, proved, then one program per
  //    rank in its order.
  if (options.pp > 1) {
    LoomBuildScheduleOptions schedule;
    schedule.schedule = options.schedule;
    schedule.ranks = options.pp;
    schedule.microbatches = options.gradAccum;
    schedule.virtualStages = std::max(1u, unsigned(options.virtualStages));
    schedule.scheduleFile = options.scheduleFile;
    pm.addPass(createLoomBuildSchedule(schedule));
    LoomSplitStagesOptions split;
    split.sharedCores = options.sharedCores;
    pm.addPass(createLoomSplitStages(split));
  }
}

void mlir::loom::buildParallelizationPipeline(
    OpPassManager &pm, const TrainingPipelineOptions &options) {
  bool annotated = !options.shard.empty() || !options.shardingsFile.empty();
  if (options.tp <= 1 && options.dp <= 1 && !annotated) {
    if (options.pp > 1)
      pm.addPass(createLoomUnrollMicrobatches());
    return;
  }
  // The pass copies the entries when it is created; they must live until
  // then.
  SmallVector<std::string> shard(options.shard.begin(), options.shard.end());
  LoomAnnotateShardingsOptions annotate;
  // dp outside tp (Megatron's order): the tp ranks of one dp rank are
  // adjacent, so they share a node.
  annotate.meshSpec =
      "tp=" + std::to_string(std::max(1u, unsigned(options.tp)));
  // Hybrid sharding splits dp in two: ZeRO shards over the inner dp (the
  // K adjacent ranks of a group), the groups replicate over `replica`.
  unsigned group = options.zeroShardGroup;
  bool hybrid = options.dp > 1 && options.zero > 0 && group > 0 &&
                group < options.dp && options.dp % group == 0;
  if (hybrid)
    annotate.meshSpec = "replica=" + std::to_string(options.dp / group) +
                        ",dp=" + std::to_string(group) + "," +
                        annotate.meshSpec;
  else if (options.dp > 1)
    annotate.meshSpec =
        "dp=" + std::to_string(unsigned(options.dp)) + "," + annotate.meshSpec;
  annotate.shard = shard;
  annotate.shardingsFile = options.shardingsFile;
  pm.addPass(createLoomAnnotateShardings(annotate));
  if (options.tp > 1) {
    LoomTensorParallelOptions tactic;
    tactic.sequenceParallel = options.sequenceParallel;
    pm.addPass(createLoomTensorParallel(tactic));
  }
  if (options.dp > 1) {
    LoomDataParallelOptions data;
    data.axis = hybrid ? "replica,dp" : "dp";
    pm.addPass(createLoomDataParallel(data));
  }
  LoomPropagateShardingOptions propagate;
  propagate.zero = options.dp > 1 ? int64_t(options.zero) : 0;
  // Without ZeRO, data parallelism all-reduces each gradient where it is
  // produced, in buckets, so that the reductions overlap the backward pass.
  propagate.eagerGradients = options.dp > 1 && options.zero == 0;
  pm.addPass(createLoomPropagateSharding(propagate));
  pm.addPass(createLoomPartition());
  if (options.pp > 1)
    pm.addPass(createLoomUnrollMicrobatches());
  // ZeRO-3: each parameter gather posted one gather ahead of its use.
  if (propagate.zero >= 3)
    pm.addNestedPass<func::FuncOp>(createLoomPrefetchGathers());
  // (Buckets would merge gradients of different pipeline stages.)
  if (propagate.eagerGradients && options.bucketMB > 0 && options.pp <= 1) {
    LoomBucketAllReducesOptions buckets;
    buckets.bucketMB = options.bucketMB;
    pm.addNestedPass<func::FuncOp>(createLoomBucketAllReduces(buckets));
  }
}

void mlir::loom::registerTrainingPipeline() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "loom-training-pipeline",
      "Build the training step `train_step` of a forward model: freeze "
      "parameters, mark padding rows, canonicalize, fuse attention, mixed "
      "precision, attach the loss, differentiate, add the optimizer update; "
      "the options are loom-run's training flags",
      buildTrainingPipeline);
}
