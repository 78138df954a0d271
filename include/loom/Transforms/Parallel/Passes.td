//===- Passes.td - Loom parallel passes --------------------*- tablegen -*-===//
//
// The parallelization passes: sharding propagation, SPMD partitioning,
// ZeRO, pipeline stages and schedules slot in here (see
// docs/design/passes.md). lib/Transforms/Parallel holds one file per pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PARALLEL_PASSES_TD
#define LOOM_TRANSFORMS_PARALLEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomDecomposeCollectives : Pass<"loom-decompose-collectives",
                                    "::mlir::func::FuncOp"> {
  let summary = "Make every all_gather and reduce_scatter move whole blocks";
  let description = [{
    A runtime all-gather concatenates each rank's contiguous bytes, and a
    reduce-scatter hands out contiguous pieces: both work along the
    outermost dim only. An op along another `axis` (a tensor-parallel
    all-gather of the hidden dim) is rewritten as a transpose that brings
    `axis` to the front, the op along dim 0, and the inverse transpose.
    Ops whose dims before `axis` are all 1 already move whole blocks and are
    left alone.

    Input:
    ```mlir
    %y = loom.all_gather %x axis 1 groups [[0, 1]]
        : tensor<4x8xf32> -> tensor<4x16xf32>
    ```
    Output:
    ```mlir
    %t = loom.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    %g = loom.all_gather %t axis 0 groups [[0, 1]]
        : tensor<8x4xf32> -> tensor<16x4xf32>
    %y = loom.transpose %g [1, 0] : tensor<16x4xf32> -> tensor<4x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomBucketAllReduces : Pass<"loom-bucket-all-reduces",
                                "::mlir::func::FuncOp"> {
  let summary = "Coalesce all-reduces whose results wait into buckets";
  let description = [{
    Data parallelism's gradient buckets (PyTorch DDP's `bucket_cap_mb`), on
    the partitioned program: consecutive `loom.all_reduce`s with the same
    groups, reduction and element type whose results nothing reads until
    after the last of them are merged, up to `bucket-mb` MiB per bucket,
    into one all-reduce of their operands flattened and concatenated, at
    the place of the last one, its result split and reshaped back. A
    bucket is posted as soon as the backward pass has produced its last
    gradient (with `loom-propagate-sharding`'s `eager-gradients`), so its
    communication overlaps the rest of the backward pass, while one
    collective per bucket instead of per tensor saves the per-call latency.
    An all-reduce whose result is read before the next one (a tensor-
    parallel activation) stays alone.

    Input:
    ```mlir
    %a = loom.all_reduce sum %ga groups [[0, 1]] : tensor<4x4xf32>
    %b = loom.all_reduce sum %gb groups [[0, 1]] : tensor<4xf32>
    ```
    Output:
    ```mlir
    %fa = loom.reshape %ga : tensor<4x4xf32> -> tensor<16xf32>
    %c = loom.concat %fa, %gb axis 0 : (tensor<16xf32>, tensor<4xf32>) -> tensor<20xf32>
    %r = loom.all_reduce sum %c groups [[0, 1]] : tensor<20xf32>
    %pa, %b = loom.split %r axis 0 : tensor<20xf32> -> tensor<16xf32>, tensor<4xf32>
    %a = loom.reshape %pa : tensor<16xf32> -> tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"bucketMB", "bucket-mb", "double", /*default=*/"25.0",
           "The largest bucket, in MiB (0: no buckets)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPrefetchGathers : Pass<"loom-prefetch-gathers",
                               "::mlir::func::FuncOp"> {
  let summary = "Post ZeRO-3's parameter gathers ahead of their use";
  let description = [{
    ZeRO-3 keeps each parameter as its shard and gathers it right before
    the op that reads it, which leaves the gather nothing to overlap. On
    the partitioned program, every `loom.all_gather` of a `loom.param` read
    (a parameter's shards) moves, with the read, to just before the op that
    reads the gather `distance` places earlier in the block, so that with
    asynchronous collectives the next layer's weights travel while this
    layer computes (FSDP's prefetch), at the cost of `distance` more
    gathered parameters alive at a time. Gathers stay in the same order, so
    every rank still posts them alike.

    Input:
    ```mlir
    %r1 = loom.param @w1 : tensor<2x4xf32>
    %g1 = loom.all_gather %r1 axis 0 groups [[0, 1]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %y1 = loom.matmul %x, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %r2 = loom.param @w2 : tensor<2x4xf32>
    %g2 = loom.all_gather %r2 axis 0 groups [[0, 1]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %y2 = loom.matmul %y1, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    ```
    Output: `%r2` and `%g2` move before the first matmul.
  }];
  let options = [
    Option<"distance", "distance", "int64_t", /*default=*/"1",
           "How many parameter gathers ahead to post (0: none)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPropagateSharding : Pass<"loom-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Give every value a sharding, from the annotations, by factor rules";
  let description = [{
    Sharding propagation in the model of OpenXLA Shardy, driven only by the
    ops' factor rules (`FactorRuleOpInterface`). Seeds are the annotations:
    a `loom.parameter`'s `sharding` (with its optional `priority`), a
    `loom.shard` (with its `priority`), a function argument's
    `loom.sharding`; all must name one mesh. Priorities run in order, 0
    first: a round plants its seeds, then sweeps the function forward and
    backward until nothing changes, first through the ops whose factors are
    all parallel (elementwise, reshape, transpose), then through every op.

    At an op, each sharded operand and result proposes axes for the factors
    its dimensions are made of (a dimension `[H, Dh]` split over `tp` puts
    `tp` on `H`); per factor the better priority wins, and at equal
    priority the more split proposal if it extends the other. A factor the
    op needs whole (`need_replication`) takes no axis, and each mesh axis
    splits one factor at most. The merged factors are moved back onto every
    tensor, which gains axes only on its open dimensions: a sharding once
    set is refined, never changed, and a closed annotation (a dimension
    without `?`) is never split further. A parameter's reads and stores
    share its sharding.

    Where two shardings still disagree at an op once the sweeps settle (two
    annotations, neither extending the other), the loser is made explicit:
    a `loom.reshard` before the op (or after it, for a result) whose
    `because` says which sharding won, from where, and by which priority.

    The outcome is written onto the IR: `loom.sharding` on every op with a
    sharded result (an array for several results) and on function
    arguments; the parameters' `sharding`; and next to each,
    `loom.sharding_origin`: the annotation it comes from and the last op it
    came through. Values no annotation reaches stay replicated and get no
    attribute. A module without annotations is left as it is.

    Input:
    ```mlir
    loom.mesh @mesh = <tp = 2>
}] # "    loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>\n" # [{
    loom.parameter @w2 trainable : tensor<4x8xf32>
    func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
      %w1 = loom.param @w1 : tensor<8x4xf32>
      %w2 = loom.param @w2 : tensor<4x8xf32>
      %h = loom.matmul %x, %w1 transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
      %y = loom.matmul %h, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
      return %y : tensor<2x4xf32>
    }
    ```
    Output: `%h` is split on its columns and `@w2` on its columns (the
    row-split second GEMM emerges):
    ```mlir
}] # "    loom.parameter @w2 trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>\n" #
     "        {loom.sharding_origin = \"@w1 annotated [{tp}, {}] (priority 0), via loom.matmul\"}\n" #
     "    %h = loom.matmul %x, %w1 transpose_rhs {loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>, ...}\n" # [{
    ```

    With `zero=1` (ZeRO stage 1 over `zero-axis`), every
    `loom.adamw_update` and `loom.sgd_update` is first isolated behind
    `loom.reshard` boundaries (its parameter operand, its gradient where the
    backward pass delivers it, before the step's scaling and clipping, and
    its result); once the annotations have propagated, the update runs on
    its parameter's shard refined by the axis on the first dimension whose
    block it divides (minor to any tensor-parallel split), with its states
    and gradient sharded alike, and the updated parameter stays whole over
    the axis. Partitioned: the gradient (a partial sum over the axis) is
    reduced and scattered after the whole backward pass (stage 1) or as
    soon as each microbatch's is produced (`zero=2`), clipping works on the
    shards, and the updated shard is gathered into the parameter. With
    `zero=3` the parameter itself lives as its shard and is gathered just
    before each op that reads it; an op reading it through a narrowing cast
    (mixed precision's bf16 copy) casts its own shard and gathers the bf16
    shard. With `zero=1` and `zero=2`, a parameter that the step reads only
    through casts to bf16 (a GEMM weight under mixed precision) gets a
    whole bf16 copy `@NAME.bf16` (`#loom.cast_of`, what
    loom-cache-parameter-casts makes on one rank) that those reads take,
    while its f32 master lives as its shard, read by its update alone,
    which casts the updated shard and gathers the copy in bf16 (ZeRO's
    mixed-precision layout: 2 bytes of whole parameter per element, the
    master's 4 and the moments' 8 divided by the ranks). The step
    function's `loom.gradient_bytes` gives the gradient bytes each rank
    holds (without ZeRO or data parallelism, the pass drops a whole
    count that sharding would make wrong).

    With `eager-gradients` and `zero=0` (data parallelism without ZeRO,
    the default of `--dp`), each gradient gets the same boundary right
    after the backward pass has produced it (after the microbatches' sum),
    with its parameter's sharding: partitioned, it is all-reduced there,
    not where the optimizer first reads it, so that the reductions can
    overlap the rest of the backward pass (`loom-bucket-all-reduces` then
    groups them into buckets).
  }];
  let options = [
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage (0: off; 1: optimizer states sharded; 2: and "
           "gradients; 3: and parameters)">,
    Option<"zeroAxis", "zero-axis", "std::string", /*default=*/"\"dp\"",
           "The mesh axis ZeRO shards over">,
    Option<"eagerGradients", "eager-gradients", "bool", /*default=*/"false",
           "With zero=0: reduce each gradient over zero-axis where it is "
           "produced (data parallelism's buckets)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPartition : Pass<"loom-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrite the sharded program as one SPMD program with local shapes";
  let description = [{
    SPMD partitioning of the shardings that `loom-propagate-sharding`
    wrote. Every function becomes the program each rank of the mesh runs
    (`loom.ranks` all of them, the module's `loom.world_size` the mesh's
    device count), on each rank's shard of every value; the parameters keep
    their global types and shardings while their reads and stores become
    local.

    At each op the factors' axes come from the propagated shardings (the
    results' for the factors they have, the operands' for the contracted and
    reduced ones), and each operand is brought to what the factors ask of it:
    - a `partial<sum>` (or `max`) value becomes whole by a `loom.all_reduce`
      over its partial axes;
    - a dimension split over more axes than wanted is gathered
      (`loom.all_gather`, minor axis first);
    - a dimension split over fewer axes is sliced locally, with no
      communication: a gather of the rank's block at its mesh coordinate
      (the local shard of a `loom.mesh_coordinate.<axis>` iota parameter);
    - an axis that moves from the minor split of one dimension to the minor
      split of another (nothing else changing) is one `loom.all_to_all`
      between a reshape and transposes.
    A split `loom.dropout` gets its block's offsets (the local shard of a
    `loom.block_offsets.*` table parameter, one row per block) and the
    global shape, so it draws its part of the whole tensor's mask.
    A value stays partial through ops that are linear in it (reshape,
    transpose, neg, slice, reduce_sum; add and sub of two partial sums; mul,
    matmul, or div by a whole value), so no collective comes earlier than a
    consumer that needs the whole value; a result whose split contracted or
    summed factor it lacks (a row-split GEMM) becomes partial. Function
    results and stored parameters are brought to their final sharding.
    `loom.shard` and `loom.reshard` become the data movement they stand for.

    Every collective it inserts carries `loom.resharding = {type, from, to,
    origin}`: the value's global type, its sharding before and after, and
    the annotation the sharding comes from, for `loom-explain-sharding`.

    Input (after `loom-propagate-sharding`):
    ```mlir
    %y = loom.matmul %h, %w2 transpose_rhs {loom.sharding = ...}
        : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
    ```
    Output (`%h` and `@w2` split over tp = 2 on their columns):
    ```mlir
    %y = loom.matmul %h, %w2 transpose_rhs
        : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %sum = loom.all_reduce sum %y groups [[0, 1]] {loom.resharding = ...}
        : tensor<2x4xf32>
    return %sum : tensor<2x4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomSplitFusedProjections : Pass<"loom-split-fused-projections",
                                     "::mlir::ModuleOp"> {
  let summary = "One GEMM and parameter per piece of a fused projection";
  let description = [{
    Prepares a forward model for tensor parallelism (the training pipeline
    runs it before autodiff when `tp` > 1). A fused projection, a GEMM by a
    parameter whose biased output is split into equal pieces along its
    output features (GPT-2's `c_attn`: query, key and value), cannot be
    split by heads as one tensor: rank r needs rows r of each piece, which
    no block of the weight is. Each piece gets its own GEMM, bias add and
    parameters, named `NAME#i`, whose values are `#loom.slice_of` the fused
    ones; the pieces are then trained, split by heads and checkpointed like
    any parameter, while the plan names their weights after the fused
    parameter, with their place in it, so `--save` writes it whole. The
    fused parameters stay as the pieces' sources, no longer trained.

    Only a weight and bias read once, unannotated, both with an initial
    value or both without (a model imported shapes-only, whose plan must be
    the one its weighted import runs), are split; anything else is left as
    it is.

    Input:
    ```mlir
    %y = loom.matmul %x, %w transpose_rhs : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
    %z = loom.add %b, %y : (tensor<96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
    %q, %k, %v = loom.split %z axis 1 : tensor<4x96xf32> -> tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
    ```
    Output (and likewise `@w#1`, `@w#2`, `@b#i`):
    ```mlir
    loom.parameter @w#0 trainable : tensor<32x32xf32> = #loom.slice_of<@w, [0, 0]>
    %w0 = loom.param @w#0 : tensor<32x32xf32>
    %b0 = loom.param @b#0 : tensor<32xf32>
    %q0 = loom.matmul %x, %w0 transpose_rhs : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %q = loom.add %b0, %q0 : (tensor<32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAnnotateShardings : Pass<"loom-annotate-shardings", "::mlir::ModuleOp"> {
  let summary = "Declare the mesh and annotate parameters by name";
  let description = [{
    The command line's sharding annotations (`loom-run --tp`, `--shard`,
    `--shardings`) as IR: declares `loom.mesh @mesh` with the axes of `mesh`
    (`tp=4` or `dp=2,tp=4`; an existing mesh must be the same) and sets the
    `sharding` (and `priority`) of every parameter whose whole name matches
    an annotation's regular expression.

    An annotation is `REGEX=SHARDING` or `REGEX=SHARDING:PRIORITY`, where
    SHARDING lists the dimensions as in `#loom.sharding`, and the regex
    must match the whole parameter name:
}] # "    h\\..*\\.mlp\\.c_fc\\.weight=[{tp}, {}]\n" #
     "    .*\\.weight=[{?}, {tp}]:1\n" # [{
    `shardings-file` names a JSON file of the same:
}] # "    {\"shardings\": [{\"parameter\": \"h\\\\..*\\\\.mlp\\\\.c_fc\\\\.weight\",\n" #
     "                   \"sharding\": \"[{tp}, {}]\", \"priority\": 0}]}\n" # [{
    Errors, before anything is annotated: a malformed annotation or file, an
    annotation that names no parameter, one that names a parameter another
    annotation names too, an axis the mesh lacks, a split that does not
    divide the dimension (with the parameter, the dimension and the axes).

    Example:
}] # "    --loom-annotate-shardings='mesh=tp=2 shard=w1=[{tp},{}]'\n" # [{
    turns `loom.parameter @w1 trainable : tensor<8x4xf32>` into
    ```mlir
    loom.mesh @mesh = <tp = 2>
}] # "    loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>\n" # [{
    ```
  }];
  let options = [
    Option<"meshSpec", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh axes, `name=size` separated by commas (`dp=2,tp=4`)">,
    ListOption<"shard", "shard", "std::string",
               "Annotations `REGEX=SHARDING[:PRIORITY]`">,
    Option<"shardingsFile", "shardings-file", "std::string",
           /*default=*/"\"\"", "A JSON file of annotations">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomTensorParallel : Pass<"loom-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron's tactic: annotate the first GEMM of each pair";
  let description = [{
    The `--tp N` tactic. It annotates the minimum and leaves the rest to
    `loom-propagate-sharding`, by a rule about the graph, never about
    parameter names:

    The forward GEMMs with a trainable matrix operand (a `loom.param`,
    perhaps through casts) and the forward embedding lookups (a
    `loom.gather` on axis 0 of one) are taken in program order (the forward
    part of the step is what the returned loss depends on). Each one whose weight
    is not yet split, given the user's annotations and those made so far,
    gets its weight split over `axis` on its output features (priority 1,
    so a user's priority-0 annotation always wins), and propagation runs on
    from it. The GEMM that consumes its output is thereby found row-split,
    and is not annotated; the one after the next layer norm is not reached,
    so it starts the next pair. A model's LM head, the last such GEMM, is
    split on its vocabulary, and an embedding table on its rows; a GEMM
    whose logits feed a loss with no more classes than input features (a
    classifier's head) stays whole. A vocabulary tp does not divide is
    padded before autodiff (`loom-pad-vocabulary`).

    With `sequence-parallel` (Megatron SP, arXiv 2205.05198), the input of
    every forward normalization over the last dimension of a `[..., S, H]`
    tensor is pinned split on S (`loom.shard`, priority 2, after the GEMMs'
    annotations): a `loom.layer_norm`, or one built from primitive ops,
    found at its `loom.reduce_mean` over the last dimension (of `x^2` or
    `x*x` for an RMSNorm: `x` is pinned; else of its input, the mean of a
    decomposed layer norm). Propagation spreads the split through the
    residual adds, biases and dropouts around it, and partitioning turns
    each row-split GEMM's all-reduce into a reduce-scatter onto the
    sequence and gathers the sequence before each column-split GEMM; the
    layer norms' parameter gradients become partial sums over the
    sequence, all-reduced before their update.

    A split `axis` does not divide is an error naming the parameter, its
    dimension and the axis size; so is attention whose key/value heads the
    axis does not divide while it divides the query heads (at
    `loom.attention`, or at the `loom.reshape` that cuts the keys or values
    into heads).

    Input: the two-layer MLP of `loom-propagate-sharding`'s example, with
    `loom.mesh @mesh = <tp = 2>` and no annotation. Output:
    ```mlir
}] # "    loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]> priority 1\n" # [{
    loom.parameter @w2 trainable : tensor<4x8xf32>
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "The mesh axis to split over">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Megatron's sequence parallelism: the layer norms' regions split "
           "on the sequence">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomDataParallel : Pass<"loom-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Data parallelism: split the batch over a mesh axis";
  let description = [{
    The `--dp N` tactic. Every argument of every function is a batch of
    the step's data (inputs and labels, batch dimension first), and this
    pass pins dimension 0 of each split over `axis` (a `loom.shard`,
    priority 0: the data decides it, like a user's annotation). Propagation
    then splits every activation on the batch, and the parameters, which no
    annotation splits over `axis`, stay replicated; their gradients, GEMMs
    and sums over the split batch, become partial sums over `axis`, which
    `loom-partition` all-reduces before the optimizer reads them, and the
    mean loss over the batch is each rank's share of it. `loom-partition`
    gives a pinned argument its local type and `loom.batch_offsets`, so each
    rank reads only its own rows of the global batch.

    With gradient accumulation (arguments sliced into microbatches of rows)
    microbatch k becomes the k-th block of each rank's contiguous rows, and
    the dropouts of each microbatch (`index_base` k times their size) get
    `index_chunk`/`index_chunk_stride` that number those rows where they
    sit in the batch, so the masks stay the one-rank run's.

    A batch `axis` does not divide is an error naming the argument.

    Input (`loom.mesh @mesh = <dp = 2>`):
    ```mlir
    func.func @train_step(%x: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32>
    ```
    Output:
    ```mlir
    func.func @train_step(%x: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32> {
}] # "      %0 = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<8x4xf32>\n" # [{
}] # "      %1 = loom.shard %y to <@mesh, [{dp}]> : tensor<8xi64>\n" # [{
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"dp\"",
           "The mesh axis to split the batch over, or several, major "
           "first, separated by commas (hybrid sharding's replica,dp)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomExplainSharding : Pass<"loom-explain-sharding", "::mlir::ModuleOp"> {
  let summary = "Report every collective of a partitioned step, its cause and cost";
  let description = [{
    Answers "where did this all-gather come from?" for a module that
    `loom-partition` has partitioned, without changing it. For every
    function, in program order, it prints each collective: its kind, the
    ONNX node (the op's name location) it sits at, the value's global type
    and its sharding before and after, and the annotation the sharding
    comes from, all read off the `loom.resharding = {type, from, to,
    origin}` that `loom-partition` puts on each collective it inserts
    (collectives without it are listed with their local type); then the
    bytes each rank sends and the estimated time on a link of `link-gbps`
    GB/s and `link-latency-us` per step; then totals per collective kind
    and for the whole function (one step).

    The bytes are counted as a ring sends them, with S the full buffer (the
    gathered result of an all_gather, the unscattered input of a
    reduce_scatter, the buffer of the others) and n the group size:
    all_reduce 2(n-1)/n S; all_gather, reduce_scatter, all_to_all and
    broadcast (n-1)/n S; send S; recv nothing (its bytes are its
    sender's). The time is latency * steps + bytes / bandwidth, with
    2(n-1) steps for all_reduce, n-1 for the other collectives and 1 for
    send and recv (a recv waits for S bytes). The formula is
    `include/loom/Analysis/LinkModel.h`, which the runtime's
    `loom-run --report-json` counts with too.

    A module that is not partitioned is an error: one that still carries
    shardings (`loom.sharding` on an op or an argument, `loom.shard`,
    `loom.reshard`), or has a mesh but no `loom.world_size`. A module
    without a mesh runs on one rank and reports no collectives. The report
    goes to stdout, or to `report-file`.

    Example: the two-layer MLP of `loom-partition`'s example, its ops
    named by ONNX nodes and its column-split hidden value also returned
    (test/Transforms/Parallel/explain-sharding.mlir), after
    `--loom-propagate-sharding --loom-partition --loom-explain-sharding`:
    ```
    loom-explain-sharding: @mlp on 2 ranks; link 100 GB/s, 5 us per step
      #1 all_reduce sum over 2 ranks at '/fc2/Add'
}] # "         value: tensor<2x4xf32> [{}, {}] partial<sum> {tp} -> [{}, {}]" # [{
}] # "         origin: summed over a split from @w1 annotated [{tp}, {}] (priority 0), via loom.relu at '/act/Relu'" # [{
         sends 32 bytes per rank (2(n-1)/n of 32) in 2 steps: 10.00 us
      #2 all_gather along dim 1 over 2 ranks at '/output'
}] # "         value: tensor<2x8xf32> [{}, {tp}] -> [{}, {}]" # [{
}] # "         origin: @w1 annotated [{tp}, {}] (priority 0), via loom.relu at '/act/Relu'" # [{
         sends 32 bytes per rank ((n-1)/n of 64) in 1 step: 5.00 us
      totals for @mlp (one step):
         all_reduce       1 op            32 bytes per rank        10.00 us
         all_gather       1 op            32 bytes per rank         5.00 us
         all kinds        2 ops           64 bytes per rank        15.00 us
    ```
  }];
  let options = [
    Option<"linkGbps", "link-gbps", "double", /*default=*/"100.0",
           "Link (bus) bandwidth in GB/s (10^9 bytes per second)">,
    Option<"linkLatencyUs", "link-latency-us", "double", /*default=*/"5.0",
           "Link latency per step, in microseconds">,
    Option<"reportFile", "report-file", "std::string", /*default=*/"\"\"",
           "Write the report to this file instead of stdout">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFoldRepeatedBlocks : Pass<"loom-fold-repeated-blocks",
                                  "::mlir::ModuleOp"> {
  let summary = "Keep only the first few of a model's repeated blocks";
  let description = [{
    The planner's layer folding (docs/design/planner.md): a transformer's
    cost, memory and communication grow by the same amount with each of its
    repeated layers, so the planner compiles a layout with one and with two
    layers per pipeline stage and extrapolates, instead of compiling all of
    them. This pass makes those models: it finds the longest run of at
    least three repeated blocks in `function` (lib/Analysis/RepeatedBlocks:
    the same operations, attributes and types, each block reading the one
    before it where the one before reads its own predecessor, and the same
    other values; constants' values and dropout seeds may differ: they do
    not change the costs) and deletes all but the first
    `keep`. What read the last block reads block `keep` - 1 instead; the
    parameters and constants only the deleted blocks read are deleted. A
    remark at the first block's first operation says how many blocks of
    how many operations there were.

    No repeated block, and `keep` more than the blocks, are errors.

    Input (three blocks `%x -> add(%x, matmul(%x, %w_i))`):
    ```mlir
    %m0 = loom.matmul %x, %w0 ...   %a0 = loom.add %x, %m0 ...
    %m1 = loom.matmul %a0, %w1 ...  %a1 = loom.add %a0, %m1 ...
    %m2 = loom.matmul %a1, %w2 ...  %a2 = loom.add %a1, %m2 ...
    return %a2
    ```
    Output with `keep=1`:
    ```mlir
    %m0 = loom.matmul %x, %w0 ...   %a0 = loom.add %x, %m0 ...
    return %a0
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "The function whose blocks to fold">,
    Option<"keep", "keep", "unsigned", /*default=*/"1",
           "How many of the repeated blocks to keep">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomCutStages : Pass<"loom-cut-stages", "::mlir::ModuleOp"> {
  let summary = "Cut a model's forward function into pipeline stages";
  let description = [{
    Assigns every op of `function` a pipeline stage (`loom.stage`), cutting
    where the model is narrowest: after an op where the fewest activation
    bytes are alive (the residual stream between transformer layers), since
    those cross to the next rank for every microbatch, both ways. Among
    those cut points the cost model (lib/Analysis/StageCuts.h: GEMM FLOPs
    and other ops' bytes at per-kind rates, the backward as twice the
    forward) picks the ones that make the slowest stage fastest, keeping
    each stage's weights, gradients, AdamW moments and 1F1B's in-flight
    activations under `memory-cap-mb` (0: no cap). The embedding is on the
    first stage and the head on the last, by the function's order;
    parameter reads and constants go with their first reader.
    `stage-cuts` (ONNX node names) cuts after those nodes instead. Each cut
    is reported as a remark at the op that ends its stage.

    More stages than cut points, a node that names no op, cuts out of order
    and caps no cut meets are errors.

    ```mlir
    // loom-opt --loom-cut-stages=stages=2
    %h = loom.add %x, %y : tensor<8x64xf32>  // remark: pipeline stage 0 ends here
    %z = loom.matmul %h, %w ... {loom.stage = 1 : i64}
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "The function to cut">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Pipeline stages">,
    ListOption<"stageCuts", "stage-cuts", "std::string",
               "Cut after these ONNX nodes instead (stages - 1 of them)">,
    Option<"memoryCapMB", "memory-cap-mb", "double", /*default=*/"0",
           "Each stage's memory cap in MiB (0: none)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomBuildSchedule : Pass<"loom-build-schedule", "::mlir::ModuleOp"> {
  let summary = "Generate and prove a pipeline schedule; keep it in the module";
  let description = [{
    A pipeline schedule is data: for every rank the ordered list of what it
    does (docs/design/pipeline.md). Actions are `F<stage>.<mb>` (forward),
    `B` (backward; input gradient only when the schedule has `W`), `W`
    (weight gradient), and the point-to-point moves between neighbouring
    stages on different ranks: `SF`/`RF` (activation sent by stage s,
    received by stage s + 1) and `SB`/`RB` (gradient sent by stage s,
    received by stage s - 1). Stage s runs on rank s % ranks.

    `schedule` picks a generator: `gpipe`, `1f1b` (the default),
    `interleaved` (Megatron's, with `virtual-stages` V >= 2 stages per
    rank; microbatches a multiple of the ranks) or `zb-h1` (2401.10241's
    zero-bubble schedule, backward split into B and W); `schedule-file`
    reads a user's list instead (`rank R: ACTION ...` per line; sends and
    receives are added unless it gives them). Before the schedule is
    stored the pass proves it: every stage's F, B (and W) of every
    microbatch once on the stage's rank, in that order, after its input
    arrived; every send meets one receive; and a replay of all ranks with
    blocking receives completes (for the given microbatch count; the
    generators are proved for every count in the unit tests, M < P
    included). Messages are matched by what they carry (kind, stage,
    microbatch), and sends do not wait for their receive: the lowering
    posts them asynchronously with tags, as the runtime's communicators
    already do. A schedule that fails is an error naming the ranks and
    actions that wait on each other. The result is the module's
    `loom.pipeline_schedule`.

    ```mlir
    // loom-opt --loom-build-schedule="ranks=2 microbatches=2"
    module attributes {loom.pipeline_schedule = {actions = [
        "F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1",
        "RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1"],
      kind = "1f1b", microbatches = 2 : i64, ranks = 2 : i64, stages = 2 : i64}}
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"2",
           "Pipeline ranks (stages per virtual stage)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches per step">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Stages per rank (interleaved)">,
    Option<"scheduleFile", "schedule-file", "std::string", /*default=*/"",
           "A user's schedule instead of a generator's">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomUnrollMicrobatches : Pass<"loom-unroll-microbatches",
                                   "::mlir::ModuleOp"> {
  let summary = "Make a pipelined step's microbatches that were left unbuilt";
  let description = [{
    `loom-build-train-step microbatch-copies=N` builds a pipelined step
    with its first N of K microbatches (`loom.microbatches = K` on the
    function), so that sharding propagation and partitioning work on N
    copies of the forward and backward instead of K: at K = 64 they were
    most of the compile time (docs/design/pipeline.md). This pass, after
    partitioning, makes microbatches N to K - 1 from the last one built,
    as if all had been built and partitioned:

    * an op is in microbatch k when it carries `loom.microbatch = k`, or
      reads values of microbatch k and of no other microbatch (what
      partitioning added: a tensor-parallel all-reduce, ZeRO-2's
      reduce-scatter), or makes values that only microbatch k reads (its
      slice of the arguments and what partitioning made of it, its
      parameter reads);
    * microbatches 0 to N - 1 must be alike: the same ops in the same order
      on the same types, reading the same shared values and each other's
      values at the same places, with equal attributes except integers
      that lie on a line over k (the microbatch, the argument slices'
      bounds, the dropouts' `index_base`), which the clones continue;
    * what reads a microbatch's values outside it must be a sum over the
      microbatches (`%s1 = add %v0, %v1`, `%s2 = add %s1, %v2`, ...): each
      gets one term per new microbatch, and what read the last sum reads
      the new last sum.

    The new microbatches go before the last built one, whose ops and sums
    become microbatch K - 1's: the order building all K gives. A step
    whose built microbatches differ otherwise, fewer than three built, ops
    with regions, a value of a microbatch read elsewhere than by a sum, and
    a gradient sum that is no such chain are errors. A function without
    `loom.microbatches` is left as it is.

    Input (K = 4, N = 3, the microbatch attribute abbreviated `mb`):
    ```mlir
    %x0 = loom.slice %x [0] [2] [1] ...   %y0 = loom.exp %x0 {mb = 0} ...
    %x1 = loom.slice %x [2] [4] [1] ...   %y1 = loom.exp %x1 {mb = 1} ...
    %s1 = loom.add %y0, %y1 ...
    %x2 = loom.slice %x [4] [6] [1] ...   %y2 = loom.exp %x2 {mb = 2} ...
    %s2 = loom.add %s1, %y2 ...
    return %s2
    ```
    Output (microbatch 2 made again before the original, which becomes
    microbatch 3):
    ```mlir
    ... (microbatches 0 and 1 and %s1 as before, then)
    %x2 = loom.slice %x [4] [6] [1] ...   %y2 = loom.exp %x2 {mb = 2} ...
    %s2 = loom.add %s1, %y2 ...
    %x3 = loom.slice %x [6] [8] [1] ...   %y3 = loom.exp %x3 {mb = 3} ...
    %s3 = loom.add %s2, %y3 ...
    return %s3
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomSplitStages : Pass<"loom-split-stages", "::mlir::ModuleOp"> {
  let summary = "Split the training step into one program per pipeline rank";
  let description = [{
    Lowers the module's pipeline schedule (`loom.pipeline_schedule`, from
    `loom-build-schedule`) onto the training step `function`, whose forward
    and backward ops carry their `loom.stage` (loom-cut-stages and
    loom-autodiff) and `loom.microbatch` (loom-build-train-step). Each rank
    gets a function of its own (`loom.ranks`, named `<function>_rank<R>`)
    holding the ops of its stages, in the order of its actions: the
    forward (F), backward (B) and weight-gradient (W) of each stage and
    microbatch, its W ops being the backward ops the input gradient does
    not need. A value that one rank makes and another reads becomes a
    `loom.send` right after the op that makes it and a `loom.recv` just
    before the op that first reads it, one tag per value and pair of
    ranks. Parameter reads, constants and pure work on them and on the
    arguments are computed on every rank that reads them; a parameter is
    updated on every stage that reads it (a tied embedding and head: both,
    from one gradient, so that the copies stay equal); the remaining work
    (gradient sums, the clipping norm, the loss) runs where its largest
    operand is, after its rank's actions when an operand comes from
    another rank. Stores come last. The last stage's rank returns the
    results.

    A step already partitioned over G ranks (tp, dp: the module's
    `loom.world_size`) makes each pipeline rank r a group of G world ranks
    r * G + j running its stages' SPMD program: collectives move into the
    group, and device j of one stage sends to device j of the other. The
    module's `loom.world_size` becomes the schedule's ranks times G. Ops
    that partitioning added inside one stage and microbatch (a tensor-
    parallel all-reduce) join that action; collectives on parameters
    (ZeRO-3's gathers) run on each stage that reads them. Each op's action
    rides in its location (fused, with the action's name as metadata) to
    the plan, for traces and the measured bubble.

    A stage or microbatch the schedule does not have, a staged op with no
    microbatch, a schedule that runs an action before the one making a
    value it reads, and programs that would wait on each other (the pass
    replays them with blocking receives) are errors.

    ```mlir
    // Before: stage 0 makes %h, stage 1 reads it.
    %h = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} ...
    %y = loom.exp %h {loom.stage = 1 : i64, loom.microbatch = 0 : i64} ...
    // After, in @train_step_rank0:
    %h = loom.relu %x : tensor<4xf32>
    loom.send %h to [[0, 1]] tag 0 : tensor<4xf32>
    // and in @train_step_rank1:
    %h = loom.recv from [[0, 1]] tag 0 : tensor<4xf32>
    %y = loom.exp %h : tensor<4xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string",
           /*default=*/"\"train_step\"", "The training step to split">,
    Option<"sharedCores", "shared-cores", "int", /*default=*/"0",
           "The processors the pipeline ranks share, for the prediction "
           "(0: a processor each; loom-run gives this machine's cores when "
           "its ranks run here on the CPU)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect",
                           "::mlir::func::FuncDialect"];
}

def LoomPrintSchedule : Pass<"loom-print-schedule", "::mlir::ModuleOp"> {
  let summary = "Print the module's pipeline schedule and its simulation";
  let description = [{
    Proves the module's `loom.pipeline_schedule` again (a hand-edited one
    too) and prints it to stdout as a table, one line per rank, followed by
    a simulation with the given per-stage costs of a microbatch's forward,
    backward and weight gradient (B includes W when the schedule does not
    split them): the step time, the bubble fraction of every rank (the
    share of the step it does not compute) and, per stage, the most
    microbatches whose activations it holds at once.

    ```
    schedule 1f1b: 2 ranks, 2 stages, 2 microbatches
    rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1
    rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1
    simulated (F 1, B 1, W 1 per stage): step 9, bubble 33.3% (rank 0 33.3%, rank 1 33.3%)
    stage 0: at most 2 microbatches in flight
    stage 1: at most 1 microbatch in flight
    ```
  }];
  let options = [
    Option<"forwardCost", "forward-cost", "double", /*default=*/"1.0",
           "Time of one stage's forward of one microbatch">,
    Option<"backwardCost", "backward-cost", "double", /*default=*/"1.0",
           "Time of its backward (input gradient)">,
    Option<"weightCost", "weight-cost", "double", /*default=*/"1.0",
           "Time of its weight gradient">,
  ];
}

#endif // LOOM_TRANSFORMS_PARALLEL_PASSES_TD
