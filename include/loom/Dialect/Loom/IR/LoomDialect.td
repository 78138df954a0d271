//===- LoomDialect.td - The loom dialect -------------------*- tablegen -*-===//
//
// Loom's tensor-level dialect: the ops of MLP and transformer training graphs,
// each describing itself through factor rules (see LoomInterfaces.td) so that
// sharding propagation, partitioning and cost estimation share one registry.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::mlir::loom";
  let summary = "Tensor-level ops for neural-network training graphs";
  let description = [{
    The `loom` dialect holds the forward and training graphs of neural
    networks at the tensor level: matmuls, elementwise math with numpy
    broadcasting, shape manipulation, reductions and the fused layers of
    transformer models (softmax, layer norm, cross-entropy, ...).

    Conventions shared by every op:

    * Tensors are ranked with **static shapes**. Symbolic dimensions are
      resolved when a model is imported; the planner and the partitioner
      reason about exact sizes (divisibility of splits, memory).
    * Axis attributes are **non-negative** (the importer normalizes ONNX's
      negative axes), so passes never re-normalize.
    * Every graph op implements `FactorRuleOpInterface`: its iteration
      space as factors (parallel, contracting, reduction or needing
      replication) and the indexing map of every operand and result into
      it. The kernel ops, made when a plan is lowered, need none.
    * Model state lives in `loom.parameter` symbols, read with `loom.param`;
      the device layout is a `loom.mesh` symbol that `#loom.sharding`
      attributes refer to.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the discardable attribute that carries the sharding of an op's
    /// results, of a function argument or of a function result.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "loom.sharding";
    /// Name of the discardable attribute that says where each sharding of
    /// `loom.sharding` comes from (a string, an array for several results,
    /// on a function argument, or on a `loom.parameter`); set by
    /// `loom-propagate-sharding` for tools that explain its decisions.
    static constexpr ::llvm::StringLiteral kShardingOriginAttrName =
        "loom.sharding_origin";
    /// Name of the attribute in which `loom-propagate-sharding` records,
    /// per factor of an op's rule, the mesh axes it decided split it (an
    /// array of arrays of axis names), so that `loom-partition` carries
    /// out exactly that decision.
    static constexpr ::llvm::StringLiteral kFactorShardingAttrName =
        "loom.factor_sharding";
    /// Name of the dictionary `loom-partition` puts on each collective it
    /// inserts: the global type and sharding of the value it moves
    /// (`type`, `from`, `to`) and where that sharding came from (`origin`),
    /// read by `loom-explain-sharding`.
    static constexpr ::llvm::StringLiteral kReshardingAttrName =
        "loom.resharding";
    /// Name of the function-result attribute that marks the result as the
    /// gradient of a `loom.parameter` (a flat symbol reference); set by
    /// `loom-autodiff`.
    static constexpr ::llvm::StringLiteral kGradientOfAttrName =
        "loom.gradient_of";
    /// Name of the unit attribute on the `loom.add`s with which
    /// `loom-build-train-step` sums the microbatches' gradients
    /// (`--grad-accum`), so that ZeRO stage 2 finds each microbatch's
    /// gradient to reduce and scatter as soon as it is produced.
    static constexpr ::llvm::StringLiteral kGradientAccumulationAttrName =
        "loom.gradient_accumulation";
    /// Name of the function attribute (an integer) that gives the bytes of
    /// the gradients each rank running the function holds once the backward
    /// pass has produced them: their shards under ZeRO stage 2 and 3; set
    /// by `loom-propagate-sharding`, carried into the plan's rank line for
    /// `--report-json`'s `grad_bytes`.
    static constexpr ::llvm::StringLiteral kGradientBytesAttrName =
        "loom.gradient_bytes";
    /// Name of the unit attribute that marks the `loom.cast`s of a gradient
    /// kept in bf16 (loom-build-train-step's `gradient-precision=bf16`):
    /// the rounding of an f32 gradient to bf16, which a partial sum passes
    /// (each rank rounds its share), and the widening for the update, before
    /// which data parallelism reduces the gradient, in bf16.
    static constexpr ::llvm::StringLiteral kKeptGradientAttrName =
        "loom.kept_gradient";
    /// Name of the unit attribute that marks the `loom.cast`s widening a
    /// parameter's gradient (the backward of a bf16 GEMM's weight cast),
    /// which loom-build-train-step finds from the gradients it returns: a
    /// partial sum passes them and is reduced in f32, as PyTorch's DDP sums
    /// f32 `.grad`. Any other widening (an activation or its gradient) takes
    /// a partial sum reduced first, in the narrow type, as Megatron reduces
    /// tensor parallelism's activations in bf16.
    static constexpr ::llvm::StringLiteral kParameterGradientAttrName =
        "loom.parameter_gradient";
    /// Name of the attribute that gives an op its pipeline stage (an
    /// integer; loom-cut-stages).
    static constexpr ::llvm::StringLiteral kStageAttrName = "loom.stage";
    /// Name of the unit attribute that marks the ops `loom-autodiff` made
    /// for the backward pass of a staged op (it also copies the stage).
    static constexpr ::llvm::StringLiteral kBackwardAttrName =
        "loom.backward";
    /// Name of the unit attribute that marks the clones `loom-autodiff
    /// recompute=full` makes of forward ops, which must stay distinct ops
    /// (CSE would otherwise fold them back into the forward's).
    static constexpr ::llvm::StringLiteral kRecomputedAttrName =
        "loom.recomputed";
    /// Name of the attribute that gives a staged op of the training step
    /// its microbatch (an integer; loom-build-train-step).
    static constexpr ::llvm::StringLiteral kMicrobatchAttrName =
        "loom.microbatch";
    /// Name of the function attribute (an integer) on a pipelined training
    /// step of which loom-build-train-step built only the first microbatches
    /// (`microbatch-copies`): the step's microbatch count, which
    /// loom-unroll-microbatches completes once the step is partitioned.
    static constexpr ::llvm::StringLiteral kPendingMicrobatchesAttrName =
        "loom.microbatches";
    /// Name of the module attribute holding the pipeline schedule that
    /// `loom-build-schedule` proved (a dictionary: `kind`, `ranks`,
    /// `stages`, `microbatches`, `actions`, one string per rank).
    static constexpr ::llvm::StringLiteral kPipelineScheduleAttrName =
        "loom.pipeline_schedule";
    /// Name of the module attribute that gives the number of ranks its
    /// functions run on (1 when absent).
    static constexpr ::llvm::StringLiteral kWorldSizeAttrName =
        "loom.world_size";
    /// Name of the function attribute that lists the world ranks running the
    /// function (every rank when absent).
    static constexpr ::llvm::StringLiteral kRanksAttrName = "loom.ranks";

    /// The module's `loom.world_size` around `op`, 1 when it has none.
    static int64_t getWorldSize(::mlir::Operation *op);
    /// The world ranks that run `func`: its `loom.ranks`, else all of them.
    static ::llvm::SmallVector<int64_t> getRanksOf(::mlir::Operation *func);

    /// Registers the attributes of LoomAttrs.td (defined in LoomAttrs.cpp).
    void registerAttributes();
  }];
}

def Loom_ValidTensorSizes : NativeOpTrait<"ValidTensorSizes"> {
  let cppNamespace = "::mlir::loom";
}

def Loom_GraphOpDocGroup : OpDocGroup {
  let summary = "Graph ops";
  let description = [{
    The ops of forward and training graphs: what the importer, autodiff,
    sharding propagation and the SPMD partitioner work on. Every one has a
    factor rule (`FactorRuleOpInterface`) but the `loom.mesh` and
    `loom.parameter` symbols, which compute nothing (`NoFactorRule`).
  }];
}

// Tensor sizes are checked first, so later verifiers can multiply
// dimensions without overflow.
class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, !listconcat([Loom_ValidTensorSizes], traits)> {
  let opDocGroup = Loom_GraphOpDocGroup;
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD
