//===- Passes.td - Loom training passes --------------------*- tablegen -*-===//
//
// The passes that turn a forward model into a training step: a loss,
// its gradients (autodiff), the optimizer update, and the rewrites around
// them. lib/Transforms/Training holds one file per pass and the
// `loom-training-pipeline` that strings them together.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_TRAINING_PASSES_TD
#define LOOM_TRANSFORMS_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomFreezeParameters : Pass<"loom-freeze-parameters", "::mlir::ModuleOp"> {
  let summary = "Freeze the parameters a name pattern matches";
  let description = [{
    Marks every `loom.parameter` whose name the ECMAScript regular
    expression `freeze` matches (anywhere in the name, as `std::regex_search`)
    not trainable, so the training step neither differentiates nor updates
    it. Then checks that some parameter is still trainable: a training step
    that updates nothing is an error, named after loom-run's `--freeze`
    flag, whose value this option is. An invalid pattern is an error.

    Input (`freeze=^emb`):
    ```mlir
    loom.parameter @emb.weight trainable : tensor<8x4xf32>
    loom.parameter @fc.weight trainable : tensor<4x4xf32>
    ```
    Output:
    ```mlir
    loom.parameter @emb.weight : tensor<8x4xf32>
    loom.parameter @fc.weight trainable : tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"freeze", "freeze", "std::string", /*default=*/"\"\"",
           "ECMAScript regex of the parameter names to freeze (empty: none)">,
  ];
}

def LoomMarkPaddingRows : Pass<"loom-mark-padding-rows", "::mlir::ModuleOp"> {
  let summary = "Give embedding lookups their padding row";
  let description = [{
    `torch.nn.Embedding(padding_idx=ROW)` never trains row ROW, which an
    ONNX export cannot say. Each `padding-idx` entry `REGEX=ROW` sets
    `padding_idx = ROW` on the embedding lookups (axis-0 `loom.gather`s of a
    parameter) whose parameter name REGEX matches, so that autodiff passes
    no gradient to that row. An entry that marks nothing, a row out of
    range and an invalid REGEX are errors. A trainable f32 table with one
    all-zero row (of at least 3) and no padding row gets a warning: that is
    how `nn.Embedding(padding_idx)` initializes its table.

    Input (`padding-idx=emb=0`):
    ```mlir
    %w = loom.param @emb.weight : tensor<8x4xf32>
    %e = loom.gather %w[%ids] : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    ```
    Output:
    ```mlir
    %e = loom.gather %w[%ids] padding_idx 0 : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    ```
  }];
  let options = [
    ListOption<"paddingIdx", "padding-idx", "std::string",
               "REGEX=ROW entries, applied in order">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAttachLoss : Pass<"loom-attach-loss", "::mlir::ModuleOp"> {
  let summary = "Build the loss function of a model for training";
  let description = [{
    Adds `@<function>_loss`, which runs `function` and returns a scalar
    training loss first, then the model's own results:

    * `cross_entropy`: the model's first result are logits `[..., C]`; a new
      last argument `labels : [...]` (i64) holds class indices; the loss is
      their mean cross-entropy over all positions, as
      `torch.nn.functional.cross_entropy` over the flattened logits.
    * `mse`: a new last argument `labels` of the first result's type; the
      loss is the mean of the squared differences (`torch.nn.MSELoss`).
    * `none`: the model's first result already is the scalar loss (an ONNX
      model that ends in SoftmaxCrossEntropyLoss); no argument is added.

    `loom-autodiff{function=<function>_loss}` then differentiates it.

    Input:
    ```mlir
    func.func @forward(%x: tensor<8x32xf32>) -> tensor<8x10xf32>
    ```
    Added (`kind=cross_entropy`):
    ```mlir
    func.func @forward_loss(%x: tensor<8x32xf32>, %labels: tensor<8xi64> {onnx.name = "labels"})
        -> (tensor<f32> {onnx.name = "loss"}, tensor<8x10xf32>)
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "The model function">,
    Option<"kind", "kind", "::mlir::loom::LossKind",
           /*default=*/"::mlir::loom::LossKind::CrossEntropy",
           "The loss: cross_entropy, mse or none", [{::llvm::cl::values(
             clEnumValN(::mlir::loom::LossKind::CrossEntropy, "cross_entropy",
                        "mean cross-entropy of logits and class labels"),
             clEnumValN(::mlir::loom::LossKind::MSE, "mse",
                        "mean squared error against labels"),
             clEnumValN(::mlir::loom::LossKind::None, "none",
                        "the model's scalar result is the loss"))}]>,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPadClasses : Pass<"loom-pad-classes", "::mlir::func::FuncOp"> {
  let summary = "Pad the class dimension of a cross-entropy's GEMM for aligned rows";
  let description = [{
    A language model's last GEMM writes one row of `V` logits per token,
    and its backward reads those rows twice. When a row is not a multiple
    of 16 bytes (GPT-2's `V` = 50257 in bf16), cuBLASLt cannot use its
    aligned tensor-core kernels for any of the three GEMMs, which are the
    largest of the step. This pass pads `V` to the next multiple of
    `multiple` entries: the weight gets zero columns (a `loom.concat` with
    zeros, so the parameter itself keeps its shape), the logits get the
    padded width, and the `loom.cross_entropy` is told by `classes V` that
    the padding is not a class. The loss and every gradient are unchanged:
    the padded logits are 0 and excluded from the softmax, their gradient
    is 0, and the weight's gradient is the slice of the padded one.

    What is matched, walking up from the cross-entropy's logits: casts,
    reshapes that keep the last dimension, `loom.bias_add` and `loom.add`
    of a `[V]` bias (padded with zeros too), and at the top a `loom.matmul`
    whose `rhs` provides `V`. Other uses of any of these values read a
    `loom.slice` of the first `V` entries. Anything else is left alone. Run
    it before `loom-autodiff`, so that the backward is built from the padded
    forward.

    Input:
    ```mlir
    %l = loom.matmul %x, %w : (tensor<8x16xbf16>, tensor<16x50xbf16>) -> tensor<8x50xbf16>
    %loss = loom.cross_entropy %l, %labels : (tensor<8x50xbf16>, tensor<8xi64>) -> tensor<f32>
    ```
    Output (`multiple=8`):
    ```mlir
    %z = loom.constant dense<0.000000e+00> : tensor<16x6xbf16>
    %p = loom.concat %w, %z axis 1 : (tensor<16x50xbf16>, tensor<16x6xbf16>) -> tensor<16x56xbf16>
    %l = loom.matmul %x, %p : (tensor<8x16xbf16>, tensor<16x56xbf16>) -> tensor<8x56xbf16>
    %loss = loom.cross_entropy %l, %labels classes 50 : (tensor<8x56xbf16>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"8",
           "Pad the classes to a multiple of this many entries (8: 16-byte "
           "bf16 rows)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPadVocabulary : Pass<"loom-pad-vocabulary", "::mlir::ModuleOp"> {
  let summary = "Pad vocabulary parameters so that tensor parallelism splits them evenly";
  let description = [{
    Megatron's answer to a vocabulary that tensor parallelism does not
    divide (GPT-2's 50257 entries with tp 8): the embedding table and the
    LM head get zero rows up to a multiple, each rank holds an equal block,
    and the loss ignores the padding. This pass pads the parameters
    themselves, so that the padded rows are what autodiff, the optimizer,
    sharding propagation and partitioning see:

    - the weight of every GEMM that makes a `loom.cross_entropy`'s logits
      (found as `loom-pad-classes` finds it) whose `V` classes are not a
      multiple of `8 * ways` gets `V'` rows (the next multiple: 16-byte
      bf16 rows on every rank); a `[V]` bias parameter likewise. The GEMM
      and the ops down to the loss get the width `V'` and the loss
      `classes V`;
    - every embedding table (a `loom.gather` on axis 0 of a parameter)
      whose rows `ways` does not divide gets rows up to a multiple of
      `ways` (a table that is also a head is padded as the head).

    A padded parameter `P` becomes `P#padded`, a trainable
    `#loom.slice_of<@P, [0, ...]>` that reaches past `P`'s end: the part
    beyond it is zeros. `P` keeps the ONNX weights (not trainable), and the
    plan names the weights after it, so `--save` writes `P` unpadded.
    Other reads of a padded parameter get a `loom.slice` of the real rows.
    Nothing the model computes changes: the padded rows are never looked up
    (labels and indices are below `V`), their logits are excluded from the
    softmax, so their gradient is 0 and they stay 0 under SGD and AdamW
    (weight decay included). Run it after `loom-attach-loss` and before
    `loom-pad-classes` and `loom-autodiff`; `loom-training-pipeline` runs it
    with `ways` = tp when tp > 1.

    Input (`ways=2`):
    ```mlir
    loom.parameter @head trainable : tensor<61x16xf32> = dense<0.5> : tensor<61x16xf32>
    ...
    %w = loom.param @head : tensor<61x16xf32>
    %l = loom.matmul %x, %w transpose_rhs : (tensor<8x16xf32>, tensor<61x16xf32>) -> tensor<8x61xf32>
    %loss = loom.cross_entropy %l, %labels : (tensor<8x61xf32>, tensor<8xi64>) -> tensor<f32>
    ```
    Output:
    ```mlir
    loom.parameter @head : tensor<61x16xf32> = dense<0.5> : tensor<61x16xf32>
    loom.parameter @head#padded trainable : tensor<64x16xf32> = #loom.slice_of<@head, [0, 0]>
    ...
    %w = loom.param @head#padded : tensor<64x16xf32>
    %l = loom.matmul %x, %w transpose_rhs : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %loss = loom.cross_entropy %l, %labels classes 61 : (tensor<8x64xf32>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"ways", "ways", "int64_t", /*default=*/"1",
           "The number of ranks that split the vocabulary (tp)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomAutodiff : Pass<"loom-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    Adds `@<function>_grad`, which computes what `function` does and, after
    its results, the gradient of its scalar loss result (`loss-result`) with
    respect to every trainable `loom.parameter` the loss depends on, in the
    order the parameters are declared. Gradient results are named
    `grad.<parameter>` (`onnx.name`) and carry `loom.gradient_of`.

    Gradients are built from loom ops, so they are lowered and run like the
    forward computation. Only values that depend on a trainable parameter
    get adjoints: integer values, masks and shape computations are simply
    not differentiated. Each op's rule is checked against finite
    differences in f64 (test/Transforms/Inputs/check_gradients.py).

    Input:
    ```mlir
    loom.parameter @w trainable : tensor<4xf32>
    func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
      %w = loom.param @w : tensor<4xf32>
      %y = loom.mul %x, %w : tensor<4xf32>
      %l = loom.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    Added:
    ```mlir
    func.func @forward_grad(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {loom.gradient_of = @w, onnx.name = "grad.w"})
    ```

    With `recompute=full` (activation recompute, also called gradient
    checkpointing) the forward is split into segments where the fewest
    activations are alive (the pipeline's cut points: for a transformer, the
    residual stream between sublayers); every segment but the last keeps only
    its input for the backward pass, and the values its backward ops read are
    computed again by clones of its ops placed right before the first of
    them. Memory planning then frees the forward's values as soon as the
    forward is done with them; the clones compute the same values (bit for
    bit: dropout's mask is a function of its seed and indices). `none`, the
    default, keeps what the backward reads.

    With `recompute=selective` (Megatron's selective recompute) only the
    attention cores are recomputed: for each softmax between two matmuls,
    the ops from the scores' matmul (q kᵀ) through their scale, mask,
    softmax and dropout, but not the probabilities' product with v. The
    backward then keeps q, k and v, not the [.., S, S] scores and
    probabilities. A fused `loom.attention` never stores those anyway, so
    there selective is the same as none.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "The function to differentiate">,
    Option<"lossResult", "loss-result", "unsigned", /*default=*/"0",
           "Which result is the scalar loss">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activation recompute: none; selective (the attention cores that "
           "are not fused); or full (every segment between the cut points "
           "but the last recomputes its forward in the backward)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomNarrowBiasGradients
    : Pass<"loom-narrow-bias-gradients", "::mlir::func::FuncOp"> {
  let summary = "Sum bias gradients from the bf16 gradient the GEMMs read";
  let description = [{
    Under `loom-mixed-precision` a linear layer's backward GEMMs read its
    output gradient rounded to bf16, but its bias gradient (a
    `loom.reduce_sum` of the f32 gradient over every dimension but the
    last) read the f32 value, which then had to be stored for the sum
    alone. This pass makes such a sum read the narrow copy when the f32
    value also has one (a `loom.cast` to a narrower float type): the sum
    still accumulates and returns f32, as `torch.autocast` computes a bias
    gradient, and reads half the bytes; the f32 gradient often need not be
    stored at all. Run it on the gradient (or training step) function,
    after `loom-autodiff`; `loom-run --train --precision bf16` does.
    Sums over other axes, of other types, and values without a narrow copy
    are left alone. The match is structural: a forward column sum of an
    activation that a bf16 GEMM also reads (rare in models) would read the
    rounded copy too, which `torch.autocast` would not do.

    Input:
    ```mlir
    %n = loom.cast %g : tensor<8x64xf32> -> tensor<8x64xbf16>
    %b = loom.reduce_sum %g [0] : tensor<8x64xf32> -> tensor<64xf32>
    ```
    Output:
    ```mlir
    %n = loom.cast %g : tensor<8x64xf32> -> tensor<8x64xbf16>
    %b = loom.reduce_sum %n [0] : tensor<8x64xbf16> -> tensor<64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomBuildTrainStep : Pass<"loom-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Build one training step: accumulate, clip, update, assign";
  let description = [{
    Adds `@train_step`, one complete optimizer step over a gradient function
    made by `loom-autodiff` (`function`, whose results carrying
    `loom.gradient_of` are gradients). It returns the loss and, as side
    effects (`loom.assign`), stores every trained parameter's new value and
    the optimizer's state:

    * `grad-accum` K > 1 splits every argument along dimension 0 into K
      microbatches, runs the gradient function on each, and averages the
      losses and the gradients (for a mean loss, the full batch's gradient).
      The gradient function's parameter reads and constants are made once,
      with the first microbatch, and read by all of them.
    * `gradient-precision` bf16 rounds each microbatch's f32 gradient to
      bf16 where it is produced (a bf16 GEMM's gradient is taken as it
      is), sums the microbatches and scales by 1/K in bf16, and widens it
      to f32 only for clipping and the update: gradients are stored and
      reduced over data-parallel ranks in bf16 (Megatron's
      `--grad-reduce-in-bf16`, ZeRO's fp16 gradients); the step's
      `loom.gradient_bytes` counts them at 2 bytes each.
    * `microbatch-copies` N >= 3 on a pipelined step (its ops carry
      `loom.stage`) with K > N builds only microbatches 0 to N - 1 and
      marks the step `loom.microbatches = K`: sharding propagation and
      partitioning then work on N microbatches instead of K, and
      `loom-unroll-microbatches` makes the others from the last one. The
      module it ends with is the one N = 0 (all K) gives.
    * Every `loom.dropout` of the step takes the update count as its `step`
      (a new mask every step), and microbatch k's numbers its elements
      after the earlier microbatches' (`index_base`).
    * `clip-grad-norm` > 0 scales all gradients by
      `min(1, max_norm / (total_norm + 1e-6))`, with `total_norm` the 2-norm
      of all gradients together (`torch.nn.utils.clip_grad_norm_`).
    * `optimizer` `sgd` or `adamw` adds one `loom.sgd_update` or
      `loom.adamw_update` per parameter. Optimizer state lives in new
      zero-initialized parameters named like torch's state
      (`optimizer.<param>.momentum_buffer`, `.exp_avg`, `.exp_avg_sq`) and
      the update count in `optimizer.step` (f64). Hyper-parameters left
      negative take torch's defaults (AdamW: lr 1e-3, weight decay 1e-2;
      SGD needs `lr`).

    Input (from `loom-autodiff`):
    ```mlir
    func.func @forward_loss_grad(%x: tensor<8x4xf32>, %labels: tensor<8xi64>)
        -> (tensor<f32>, tensor<8x3xf32>, tensor<4x3xf32> {loom.gradient_of = @w})
    ```
    Added (`optimizer=sgd lr=0.1`):
    ```mlir
    loom.parameter @optimizer.step : tensor<f64> = dense<0.0> : tensor<f64>
    func.func @train_step(%x: tensor<8x4xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
      ...
      %w1 = loom.sgd_update %w, %g, %step {lr = 1.000000e-01 : f64} : ...
      loom.assign @w, %w1 : tensor<4x3xf32>
      loom.assign @optimizer.step, %step : tensor<f64>
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string",
           /*default=*/"\"forward_loss_grad\"",
           "The gradient function (made by loom-autodiff)">,
    Option<"lossResult", "loss-result", "unsigned", /*default=*/"0",
           "Which result of the gradient function is the scalar loss">,
    Option<"stepName", "name", "std::string", /*default=*/"\"train_step\"",
           "The name of the added function">,
    Option<"eraseSources", "erase-sources", "bool", /*default=*/"false",
           "Erase every other function (the model, its loss and gradient "
           "functions, which the step inlines)">,
    Option<"optimizer", "optimizer", "::mlir::loom::OptimizerKind",
           /*default=*/"::mlir::loom::OptimizerKind::AdamW", "sgd or adamw",
           [{::llvm::cl::values(
             clEnumValN(::mlir::loom::OptimizerKind::SGD, "sgd",
                        "torch.optim.SGD"),
             clEnumValN(::mlir::loom::OptimizerKind::AdamW, "adamw",
                        "torch.optim.AdamW"))}]>,
    Option<"lr", "lr", "double", /*default=*/"-1", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0", "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (negative: the optimizer's default)">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0",
           "Clip the global gradient 2-norm to this value (0: off)">,
    Option<"gradAccum", "grad-accum", "unsigned", /*default=*/"1",
           "Microbatches per step">,
    Option<"gradientPrecision", "gradient-precision", "std::string",
           /*default=*/"\"f32\"",
           "f32, or bf16: gradients rounded to bf16 where the backward "
           "produces them, accumulated, reduced and kept in bf16, widened "
           "for the update">,
    Option<"microbatchCopies", "microbatch-copies", "unsigned",
           /*default=*/"0",
           "On a pipelined step: build at most this many microbatches (at "
           "least 3) and leave the rest to loom-unroll-microbatches (0: "
           "build all)">,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomExpandOptimizers : Pass<"loom-expand-optimizers",
                                "::mlir::func::FuncOp"> {
  let summary = "Expand optimizer updates into elementwise loom ops";
  let description = [{
    Rewrites every `loom.sgd_update` and `loom.adamw_update` into the
    elementwise arithmetic it stands for, so that `loom-fuse-elementwise`
    makes each parameter's whole update one kernel that reads the parameter,
    its gradient and state once and writes them in place. Step-dependent
    scalars (AdamW's bias corrections, SGD's first-step dampening) are
    computed in f64 from the step count and cast to the parameter's type,
    as torch computes them in Python floats.

    Input:
    ```mlir
    %w1 = loom.sgd_update %w, %g, %step {lr = 1.000000e-01 : f64}
        : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
    ```
    Output:
    ```mlir
    %lr = loom.constant dense<1.000000e-01> : tensor<f32>
    %0 = loom.mul %g, %lr : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %w1 = loom.sub %w, %0 : tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_TRAINING_PASSES_TD
