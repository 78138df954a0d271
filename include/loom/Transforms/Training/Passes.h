//===- Passes.h - Loom training passes and pipeline -------------*- C++ -*-===//
//
// The passes that turn a forward model into one training step, and
// `loom-training-pipeline`, which strings them together for loom-run and
// loom-opt alike.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_TRAINING_PASSES_H
#define LOOM_TRANSFORMS_TRAINING_PASSES_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/PassOptions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Training/Passes.h.inc"

/// Attaches GradientOpInterface, the gradient rules, to the differentiable
/// loom ops (GradientRules.cpp); loom-autodiff also adds it to the context
/// itself, through its dependent-dialect registry.
void registerGradientExternalModels(DialectRegistry &registry);

/// The function loom-attach-loss adds for `model` (`<model>_loss`), and the
/// one loom-autodiff adds for `function` (`<function>_grad`): the names
/// through which the training passes hand their results on.
std::string lossFunctionName(StringRef model);
std::string gradientFunctionName(StringRef function);

/// What `loom-training-pipeline` builds. The option names are loom-run's
/// training flags without their `--`; negative hyper-parameters take
/// torch's defaults.
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> function{*this, "function",
                               llvm::cl::desc("The model function"),
                               llvm::cl::init("forward")};
  Option<LossKind> loss{
      *this, "loss", llvm::cl::desc("The loss on the model's first result"),
      llvm::cl::init(LossKind::CrossEntropy),
      llvm::cl::values(
          clEnumValN(LossKind::CrossEntropy, "cross_entropy",
                     "mean cross-entropy of logits and class labels"),
          clEnumValN(LossKind::MSE, "mse", "mean squared error"),
          clEnumValN(LossKind::None, "none",
                     "the model's scalar result is the loss"))};
  Option<Precision> precision{
      *this, "precision",
      llvm::cl::desc("f32, or bf16 GEMMs and attention with f32 elsewhere"),
      llvm::cl::init(Precision::F32),
      llvm::cl::values(
          clEnumValN(Precision::F32, "f32", "all f32"),
          clEnumValN(Precision::BF16, "bf16", "GEMMs and attention in bf16"))};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Replace the unfused attention pattern by loom.attention"),
      llvm::cl::init(true)};
  Option<std::string> freeze{
      *this, "freeze",
      llvm::cl::desc("Parameters whose name this ECMAScript regex matches "
                     "(search) stay frozen"),
      llvm::cl::init("")};
  ListOption<std::string> paddingIdx{
      *this, "padding-idx",
      llvm::cl::desc("REGEX=ROW: the embedding lookups of the parameters "
                     "REGEX matches pass no gradient to ROW")};
  Option<OptimizerKind> optimizer{
      *this, "optimizer", llvm::cl::desc("The optimizer"),
      llvm::cl::init(OptimizerKind::AdamW),
      llvm::cl::values(
          clEnumValN(OptimizerKind::SGD, "sgd", "torch.optim.SGD"),
          clEnumValN(OptimizerKind::AdamW, "adamw", "torch.optim.AdamW"))};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(-1)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0)};
  Option<double> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(-1)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip the gradients' global L2 norm (0: off)"),
      llvm::cl::init(0)};
  Option<unsigned> gradAccum{*this, "grad-accum",
                             llvm::cl::desc("Microbatches per step"),
                             llvm::cl::init(1)};
  Option<std::string> gradPrecision{
      *this, "grad-precision",
      llvm::cl::desc("f32, or bf16 (with precision=bf16): gradients kept "
                     "and reduced in bf16"),
      llvm::cl::init("f32")};
  // Parallelization (lib/Transforms/Parallel).
  Option<unsigned> tp{
      *this, "tp",
      llvm::cl::desc("Tensor-parallel ranks: the mesh <tp = N> and "
                     "Megatron's tactic (loom-tensor-parallel); 1: off"),
      llvm::cl::init(1)};
  Option<unsigned> dp{
      *this, "dp",
      llvm::cl::desc("Data-parallel ranks: the batch split over a mesh axis "
                     "dp, outside tp (loom-data-parallel); 1: off"),
      llvm::cl::init(1)};
  Option<unsigned> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage over dp (0: off; 1: optimizer states "
                     "sharded; 2: and gradients; 3: and parameters)"),
      llvm::cl::init(0)};
  Option<double> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("With dp and no ZeRO: the largest gradient bucket "
                     "all-reduced at once, in MiB (PyTorch DDP's "
                     "bucket_cap_mb; 0: one all-reduce per gradient)"),
      llvm::cl::init(25.0)};
  Option<unsigned> zeroShardGroup{
      *this, "zero-shard-group",
      llvm::cl::desc("With zero: shard within groups of K dp ranks and "
                     "replicate across the groups (hybrid sharding: the "
                     "mesh <replica = dp/K, dp = K>); 0: one group"),
      llvm::cl::init(0)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("With tp: Megatron's sequence parallelism"),
      llvm::cl::init(false)};
  Option<unsigned> pp{
      *this, "pp",
      llvm::cl::desc("Pipeline ranks: the step cut into pp stages "
                     "(loom-cut-stages), one program per rank in schedule "
                     "order (loom-split-stages); 1: off"),
      llvm::cl::init(1)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("With pp: gpipe, 1f1b, interleaved or zb-h1"),
      llvm::cl::init("1f1b")};
  Option<unsigned> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("With pp: stages per rank (interleaved)"),
      llvm::cl::init(1)};
  Option<std::string> scheduleFile{
      *this, "schedule-file",
      llvm::cl::desc("With pp: a user's schedule, one line per rank")};
  ListOption<std::string> stageCuts{
      *this, "stage-cuts",
      llvm::cl::desc("With pp: cut after these ONNX nodes instead of where "
                     "the cost model says")};
  Option<int> sharedCores{
      *this, "shared-cores",
      llvm::cl::desc("With pp: the processors the ranks share, for the "
                     "predicted schedule (0: one each)"),
      llvm::cl::init(0)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recompute: none or full (loom-autodiff)"),
      llvm::cl::init("none")};
  Option<double> stageMemoryCapMB{
      *this, "stage-memory-cap-mb",
      llvm::cl::desc("With pp: each stage's memory cap in MiB (0: none)"),
      llvm::cl::init(0.0)};
  Option<unsigned> microbatchCopies{
      *this, "microbatch-copies",
      llvm::cl::desc("With pp: the microbatches propagation and partitioning "
                     "see; loom-unroll-microbatches makes the others (0: "
                     "all)"),
      llvm::cl::init(3)};
  ListOption<std::string> shard{
      *this, "shard",
      llvm::cl::desc("Sharding annotations REGEX=SHARDING[:PRIORITY] "
                     "(loom-annotate-shardings)")};
  Option<std::string> shardingsFile{
      *this, "shardings",
      llvm::cl::desc("A JSON file of sharding annotations")};
  /// Ends the pipeline where loom-cut-stages would run, on the loss
  /// function it would cut (the planner asks where the compiler cuts a
  /// model; not a command-line option).
  bool stopBeforeStageCuts = false;
};

/// Adds the passes from a forward model to its training step `train_step`:
/// freezing and padding rows, canonicalization, the forward rewrites
/// (attention fusion, mixed precision), the loss, autodiff, and the
/// optimizer step; the model's own functions are erased. The places where
/// the parallelization passes go are named in the pipeline's definition.
void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Adds the parallelization of a training step, from the options' `tp`,
/// `shard` and `shardings`: the mesh and annotations, the tensor-parallel
/// tactic, sharding propagation and SPMD partitioning; with `pp`, the
/// microbatches loom-build-train-step left (loom-unroll-microbatches).
void buildParallelizationPipeline(OpPassManager &pm,
                                  const TrainingPipelineOptions &options);

/// Registers `loom-training-pipeline`.
void registerTrainingPipeline();

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Training/Passes.h.inc"

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_TRAINING_PASSES_H
