//===- Passes.td - Loom fusion passes ----------------------*- tablegen -*-===//
//
// The rewrites that make kernels out of graph ops: attention, GEMM
// epilogues, gradient fusions, elementwise fusion, mixed precision. They
// run on the forward model (attention, precision) or in
// `loom-lower-to-plan`; lib/Transforms/Fusion holds one file per pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_FUSION_PASSES_TD
#define LOOM_TRANSFORMS_FUSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomFuseAttention : Pass<"loom-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Turn the unfused attention pattern into loom.attention";
  let description = [{
    Finds `matmul(softmax(select(mask, fill, scale * matmul(q, k^T))), v)`,
    the attention every transformer export spells out, and replaces it by
    one `loom.attention`, whose kernels never store the `[..., Sq, Sk]`
    scores and probabilities: at GPT-2 size those tensors are most of a
    training step's memory traffic. Its gradient rule makes a
    `loom.attention_grad`, so run it before `loom-autodiff` (and before
    `loom-mixed-precision`, which then casts the fused op as a whole).

    What is matched:
    * the scores are a matmul of `q` and `k` transposed (other transposes
      become `loom.transpose` of the operands), with the same batch
      dimensions as `v`;
    * an optional scale, a `mul` or `div` by a scalar constant;
    * an optional mask, a `select` between a scalar constant and the scores
      (either order: a mask that keeps the scores where it is true is
      negated) whose condition broadcasts to the scores;
    * a softmax over the last dimension whose result feeds only the second
      matmul, not transposed, with `v`.
    Casts between the steps (a bf16 product read in f32, f32
    probabilities cast to bf16: what `loom-mixed-precision` makes) are
    taken in; the fused op then computes in the matmuls' type, keeping the
    scores in f32 where the unfused form rounded them to bf16. Every
    intermediate must have no other use; anything else is left unfused.

    Input:
    ```mlir
    %s = loom.matmul %q, %k transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
    %t = loom.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
    %u = loom.select %mask, %ninf, %t : (tensor<1x1x16x16xi1>, tensor<f32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %p = loom.softmax %u axis 3 : tensor<2x4x16x16xf32>
    %o = loom.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
    ```
    Output:
    ```mlir
    %o, %lse = loom.attention %q, %k, %v mask %mask scale 0.35355339059327379
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomMixedPrecision : Pass<"loom-mixed-precision", "::mlir::func::FuncOp"> {
  let summary = "Run the f32 matmuls in bf16 (torch.autocast-style)";
  let description = [{
    With `precision=bf16`, every f32 `loom.matmul` becomes a cast of both
    operands to bf16, a bf16 `loom.matmul` (the kernels multiply in f32 and
    round the result to bf16) and a cast of the result back to f32, so
    the rest of the function is unchanged. Everything else (reductions,
    softmax, layer norm, the loss, the optimizer, parameters and optimizer
    state) stays f32.

    Run it on the forward model before `loom-autodiff`: the gradient of a
    cast is a cast, so the backward GEMMs come out in bf16 as well and the
    weight gradients are cast back to f32 before the f32 optimizer. After
    `loom-fuse-elementwise` the casts join their neighbouring elementwise
    kernels, so activations that feed GEMMs are stored in bf16.
    Canonicalization also folds the casts into the ops next to them that
    read or write bf16 exactly as the cast would: the loss
    (`loom.cross_entropy` and its gradient), layer norms (a bf16 result, a
    bf16 incoming gradient) and bias-gradient sums (`loom.reduce_sum` into
    f32), so the values stay those of the f32 form. Run `canonicalize`
    first, so that transposes are folded into the GEMMs before casts
    separate them.

    Matmuls in other types are left alone: bf16 ones already are, and f64
    ones (a remark says so), as torch.autocast leaves f64. `precision=f32`
    changes nothing.

    Input:
    ```mlir
    %y = loom.matmul %x, %w transpose_rhs
        : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
    ```
    Output (`precision=bf16`):
    ```mlir
    %0 = loom.cast %x : tensor<8x32xf32> -> tensor<8x32xbf16>
    %1 = loom.cast %w : tensor<16x32xf32> -> tensor<16x32xbf16>
    %2 = loom.matmul %0, %1 transpose_rhs
        : (tensor<8x32xbf16>, tensor<16x32xbf16>) -> tensor<8x16xbf16>
    %y = loom.cast %2 : tensor<8x16xbf16> -> tensor<8x16xf32>
    ```
  }];
  let options = [
    Option<"precision", "precision", "::mlir::loom::Precision",
           /*default=*/"::mlir::loom::Precision::BF16",
           "bf16 (GEMMs in bf16) or f32 (no change)", [{::llvm::cl::values(
             clEnumValN(::mlir::loom::Precision::F32, "f32", "no change"),
             clEnumValN(::mlir::loom::Precision::BF16, "bf16",
                        "GEMMs and attention in bf16"))}]>,
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomPackAttention : Pass<"loom-pack-attention", "::mlir::func::FuncOp"> {
  let summary = "Let attention read q, k and v from the fused QKV projection";
  let description = [{
    A GPT-style block computes q, k and v with one projection and splits
    its `[..., S, 3 * H * D]` result along the last dimension; the
    backward concatenates the three gradients back. Each is a copy of the
    whole projection (at GPT-2 size, 0.9 GB per step each way). This pass
    rewrites a seq-major `loom.attention` whose q, k and v are the three
    parts of one such split (each reshaped to `[..., S, H, D]`) into a
    `loom.packed_attention` of the split's input reshaped to
    `[..., S, 3, H, D]`, whose kernels read the parts where they lie.

    A `loom.attention_grad` of the same operands becomes a
    `loom.packed_attention_grad` when its three gradients (reshaped) are
    exactly the operands, in order, of a concat along the last dimension,
    which is then replaced by the packed gradient. Otherwise it is left as
    it is (reading the split's results, which then stay). A split or
    concat in any other shape (unequal parts, another axis, parts in
    another order, head-major operands) is left alone.

    Runs in `loom-lower-to-plan`, on each rank's program (after any
    parallelization): the packed ops are kernel-level ops, with no gradient
    rule, that nothing differentiates or shards after this point.

    Input:
    ```mlir
    %p:3 = loom.split %x axis 2 : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>
    %q = loom.reshape %p#0 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
    %k = loom.reshape %p#1 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
    %v = loom.reshape %p#2 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
    %o, %lse = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2xf32>)
    ```
    Output:
    ```mlir
    %qkv = loom.reshape %x : tensor<2x16x96xbf16> -> tensor<2x16x3x2x16xbf16>
    %o, %lse = loom.packed_attention %qkv scale 2.500000e-01 : (tensor<2x16x3x2x16xbf16>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFuseMatmulEpilogue : Pass<"loom-fuse-matmul-epilogue",
                                   "::mlir::func::FuncOp"> {
  let summary = "Fold a linear layer's bias and activation into its GEMM";
  let description = [{
    Rewrites `matmul -> bias add -> activation` into one
    `loom.fused_matmul`, which the runtimes run as a GEMM with an epilogue
    (cuBLASLt's BIAS, GELU_BIAS and GELU_AUX_BIAS on the GPU), so
    the product is written once, already biased and activated, instead of
    being written by the GEMM and read back by an elementwise kernel.

    The bias is a `loom.bias_add`, or a `loom.add` of a vector that
    broadcasts along the last dimension (what ONNX exports of linear layers
    hold). The activation is `loom.relu` or `loom.gelu approximate tanh`
    (cuBLASLt computes the tanh form; the exact GELU stays elementwise).
    The product, bias and sum must share one element type and the product
    may have no other use. One mixed form is taken too: a bf16 product
    widened to f32 (what `loom-mixed-precision` makes), plus an f32 bias,
    whose every use rounds the sum back to bf16 (a QKV projection feeding
    attention). cuBLASLt's bias has D's type, so the bias is cast to bf16
    and the fused op is a bf16 GEMM adding it in f32 and rounding once, as
    torch.autocast's bf16 `linear` does (the separate ops rounded the
    product, added the f32 bias and rounded again). The same widened,
    biased product under a tanh GELU whose every use rounds it to bf16 (an
    MLP's first layer feeding its second) becomes a bf16 GEMM with the
    GELU in its epilogue (GELU_AUX_BIAS); every other use of the sum (the
    GELU's backward) reads its `preactivation`, rounded to bf16 and
    widened, as torch.autocast keeps it (a sum that another GELU reads is
    left alone). And a third: that
    widened product plus an f32 bias plus an f32 tensor of the sum's type
    (a residual connection), each the only use of the value before it,
    becomes one GEMM with an f32 result that adds the bias and reads the
    residual as cuBLASLt's C (beta = 1): the product is not rounded to
    bf16 on the way, where the separate ops (and torch.autocast) rounded
    it. A widened product added without a bias is a gradient being
    accumulated and is left alone. In f32 and f64 the
    fused op computes exactly what the separate ops did; in bf16 it rounds
    once, after the activation, where the separate ops rounded after each
    op: what cuBLASLt's epilogues and PyTorch's autocast `linear` compute,
    and never further from the exact result. When the value before the activation has other uses (the backward
    of GELU reads it) the fused op also returns it (`preactivation`); a
    ReLU whose input is read elsewhere is left out, because cuBLASLt keeps
    only a bit mask of it.

    In the backward, a `loom.gelu_grad approximate tanh` whose gradient is
    a GEMM's product (the input gradient of the layer the GELU feeds),
    that product's only use, becomes one `loom.matmul_gelu_grad`
    (cuBLASLt's DGELU, reading the GELU's input): in one type, or a bf16
    product widened at a bf16 input widened (the preactivation the forward
    kept) whose every use rounds it back to bf16, which the GEMM then
    rounds once, after multiplying by the derivative (a bf16 chain of one
    type, like the forward ones, loses its intermediate rounding too).

    Runs in `loom-lower-to-plan` before `loom-decompose-gelu-grad` and
    `loom-fuse-elementwise`.

    Input:
    ```mlir
    %h = loom.matmul %x, %w : (tensor<8x768xf32>, tensor<768x3072xf32>) -> tensor<8x3072xf32>
    %z = loom.add %b, %h : (tensor<3072xf32>, tensor<8x3072xf32>) -> tensor<8x3072xf32>
    %y = loom.gelu %z approximate tanh : tensor<8x3072xf32>
    ```
    Output:
    ```mlir
    %y = loom.fused_matmul %x, %w bias %b activation gelu_tanh
        : (tensor<8x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomDecomposeGeluGrad : Pass<"loom-decompose-gelu-grad",
                                 "::mlir::func::FuncOp"> {
  let summary = "Spell loom.gelu_grad out in elementwise ops";
  let description = [{
    Autodiff gives a GELU's backward as one `loom.gelu_grad`, so that
    `loom-fuse-matmul-epilogue` can hand it to the GEMM that computes its
    gradient (`loom.matmul_gelu_grad`, cuBLASLt's DGELU). Every other one
    becomes the elementwise ops of `grad * gelu'(input)` here, for
    `loom-fuse-elementwise` to put into a kernel: `Phi(x) + x phi(x)` for
    the exact GELU, and for the tanh form, with `u = k (x + 0.044715 x^3)`
    and `k = sqrt(2 / pi)`,
    `0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2)`.

    Runs in `loom-lower-to-plan` after `loom-fuse-matmul-epilogue`.

    Input:
    ```mlir
    %dx = loom.gelu_grad %dy, %x : tensor<8xf32>
    ```
    Output (the constants' definitions left out: `%one` is 1, `%c0` to
    `%c3` are 1/sqrt(2), 0.5, -0.5 and 1/sqrt(2 pi)):
    ```mlir
    %0 = loom.mul %x, %x : tensor<8xf32>
    %1 = loom.mul %x, %c0 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %2 = loom.erf %1 : tensor<8xf32>
    %3 = loom.add %2, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %4 = loom.mul %3, %c1 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %5 = loom.mul %0, %c2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %6 = loom.exp %5 : tensor<8xf32>
    %7 = loom.mul %6, %c3 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %8 = loom.mul %x, %7 : tensor<8xf32>
    %9 = loom.add %4, %8 : tensor<8xf32>
    %dx = loom.mul %dy, %9 : tensor<8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFuseLayerNormGrad : Pass<"loom-fuse-layer-norm-grad",
                                  "::mlir::func::FuncOp"> {
  let summary = "Add the residual gradient inside the layer norm backward";
  let description = [{
    In a pre-norm transformer every layer norm's input is also the residual
    stream, so autodiff adds the layer norm's input gradient to the
    gradient the residual branch brings, and mixed precision casts that sum
    to bf16 for the GEMMs of the layer below. Done separately, the layer
    norm backward writes its f32 gradient and an elementwise kernel reads
    it back, with the addend, to write the sum and its bf16 copy: at GPT-2
    size 1.2 GB of traffic and 24 launches per step. This pass rewrites a
    `loom.add` of a `loom.layer_norm_grad`'s `dinput` (its only use) and
    another tensor of the same type into a `loom.fused_layer_norm_grad`
    that adds it before storing; a `loom.cast` of the sum to bf16 becomes
    the fused op's `dinput_bf16`. The values are bit-identical to the
    separate ops'.

    An add that broadcasts, or a `dinput` with other uses, is left alone.
    Runs in `loom-lower-to-plan` (after any parallelization), before
    `loom-fuse-elementwise`: the fused op is a kernel-level op that nothing
    differentiates or shards after this point.

    Input:
    ```mlir
    %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf32>, tensor<8xf32> dout tensor<4x8xbf16>
    %s = loom.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %c = loom.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
    Output:
    ```mlir
    %s, %dg, %db, %c = loom.fused_layer_norm_grad %x, %g, %dy add %r axis 1
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>)
        -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>)
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFuseBiasGrad : Pass<"loom-fuse-bias-grad", "::mlir::func::FuncOp"> {
  let summary = "Sum bias gradients inside the weight-gradient GEMM";
  let description = [{
    A linear layer's bias gradient sums its output gradient over the rows
    that its weight-gradient GEMM contracts. Done separately, the sum reads
    the whole gradient once more (at GPT-2 size 1.4 GB and 49 launches per
    step); cuBLASLt's BGRADA/BGRADB epilogues sum the operand while the GEMM
    reads it. This pass rewrites a `loom.reduce_sum` over every dimension
    but the last and a `loom.matmul` with `transpose_lhs` (not
    `transpose_rhs`) whose lhs or rhs is the same tensor (or a reshape of it
    to [rows, last dimension]) into one `loom.matmul_bias_grad`.

    The fused op rounds the sum to the GEMM's element type: in f32 nothing
    changes but the summation order; a bf16 GEMM gives a bf16 bias
    gradient, which a `loom.cast` widens to the sum's f32 (a deliberate
    change from the f32 sum of `loom-narrow-bias-gradients`: it is what
    `torch.autocast` computes, and cuBLASLt's epilogue stores the bias
    gradient in the GEMM's output type). A sum without such a GEMM in its
    block, or whose uses come before the GEMM while the GEMM's operands are
    defined after the sum, is left alone. Runs in `loom-lower-to-plan`
    (after any parallelization), before `loom-fuse-elementwise` (which takes the
    widening into the optimizer's kernel).

    Input:
    ```mlir
    %b = loom.reduce_sum %g [0, 1] : tensor<8x128x64xbf16> -> tensor<64xf32>
    %r = loom.reshape %g : tensor<8x128x64xbf16> -> tensor<1024x64xbf16>
    %w = loom.matmul %r, %x transpose_lhs
        : (tensor<1024x64xbf16>, tensor<1024x32xbf16>) -> tensor<64x32xbf16>
    ```
    Output:
    ```mlir
    %r = loom.reshape %g : tensor<8x128x64xbf16> -> tensor<1024x64xbf16>
    %w, %n = loom.matmul_bias_grad %r, %x sum lhs
        : (tensor<1024x64xbf16>, tensor<1024x32xbf16>)
        -> (tensor<64x32xbf16>, tensor<64xbf16>)
    %b = loom.cast %n : tensor<64xbf16> -> tensor<64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFuseCrossEntropyGrad
    : Pass<"loom-fuse-cross-entropy-grad", "::mlir::func::FuncOp"> {
  let summary = "Compute the loss and its gradient from one read of the "
                "logits";
  let description = [{
    A training step's `loom.cross_entropy` and `loom.cross_entropy_grad`
    read the same logits: the loss for each row's log-sum-exp, the gradient
    for the same log-sum-exp and the probabilities. At GPT-2 size the
    logits are 0.8 GB of bf16, read two or three times. This pass rewrites a loss and a gradient of the same logits,
    labels, `ignore_index` and `classes` into one
    `loom.cross_entropy_with_grad`, whose kernel reads each row once for
    both, when the gradient's scale is defined before the first of the two
    or computed by pure ops that can move there (the step's loss seed with
    the reduction folded in: a constant, or with `ignore_index` and a mean
    the seed over a count of the labels, which autodiff computes after the
    loss and this pass moves up). The results are the two ops': same
    formulas, types and roundings.

    A gradient whose scale is computed from the loss itself (as dynamic
    loss scaling would) is left alone. Runs in
    `loom-lower-to-plan` (after any parallelization).

    Input:
    ```mlir
    %scale = loom.constant dense<1.220703125E-4> : tensor<f32>
    %loss = loom.cross_entropy %logits, %labels
        : (tensor<8192x50264xbf16>, tensor<8192xi64>) -> tensor<f32>
    %d = loom.cross_entropy_grad %logits, %labels, %scale
        : (tensor<8192x50264xbf16>, tensor<8192xi64>, tensor<f32>)
        -> tensor<8192x50264xbf16>
    ```
    Output:
    ```mlir
    %scale = loom.constant dense<1.220703125E-4> : tensor<f32>
    %loss, %d = loom.cross_entropy_with_grad %logits, %labels, %scale
        : (tensor<8192x50264xbf16>, tensor<8192xi64>, tensor<f32>)
        -> (tensor<f32>, tensor<8192x50264xbf16>)
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomCacheParameterCasts
    : Pass<"loom-cache-parameter-casts", "::mlir::ModuleOp"> {
  let summary = "Keep a bf16 copy of parameters that bf16 GEMMs read";
  let description = [{
    Under `loom-mixed-precision` every step casts each f32 weight to bf16
    before its GEMM: a kernel per weight that reads 4 bytes and writes 2
    per element, and an arena buffer that holds the copy for the whole
    step. This pass makes such a copy a parameter of its own,
    `<name>.bf16` (not trainable, initialized to `#loom.cast_of<@name>`):
    each `loom.cast` of a `loom.param` read from f32 or f64 to bf16 reads
    the copy instead, and every function that assigns the parameter also
    assigns the copy the cast of the new value. Fusion puts that cast into
    the optimizer's update kernel, which then writes the copy from values it
    already holds (the master-weight scheme of Megatron's mixed-precision
    optimizer). A `loom.param` read always yields the value the step began
    with, and the copy is assigned exactly the cast of what the parameter
    is assigned, so every value the function computes is unchanged, bit for
    bit. A parameter that nothing assigns (inference, frozen weights) is
    simply stored in bf16 when nothing else reads it in f32. Checkpoints
    hold the copy as they hold optimizer state. Run it after
    `loom-build-train-step`: the copy is not trainable, so a gradient built
    afterwards would not reach the parameter through it.
    `loom-lower-to-plan` runs it.

    Input:
    ```mlir
    loom.parameter @w trainable : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
    func.func @step(%x: tensor<2x4xbf16>, %g: tensor<4x8xf32>) -> tensor<2x8xbf16> {
      %w = loom.param @w : tensor<4x8xf32>
      %wl = loom.cast %w : tensor<4x8xf32> -> tensor<4x8xbf16>
      %y = loom.matmul %x, %wl : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
      %w1 = loom.sub %w, %g : tensor<4x8xf32>
      loom.assign @w, %w1 : tensor<4x8xf32>
      return %y : tensor<2x8xbf16>
    }
    ```
    Output:
    ```mlir
    loom.parameter @w trainable : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
    loom.parameter @w.bf16 : tensor<4x8xbf16> = #loom.cast_of<@w>
    func.func @step(%x: tensor<2x4xbf16>, %g: tensor<4x8xf32>) -> tensor<2x8xbf16> {
      %w = loom.param @w : tensor<4x8xf32>
      %wl = loom.param @w.bf16 : tensor<4x8xbf16>
      %y = loom.matmul %x, %wl : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
      %w1 = loom.sub %w, %g : tensor<4x8xf32>
      loom.assign @w, %w1 : tensor<4x8xf32>
      %c = loom.cast %w1 : tensor<4x8xf32> -> tensor<4x8xbf16>
      loom.assign @w.bf16, %c : tensor<4x8xbf16>
      return %y : tensor<2x8xbf16>
    }
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomFuseElementwise : Pass<"loom-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Group chains of elementwise ops into loom.fusion kernels";
  let description = [{
    Walks each function in order and puts every elementwise op (unary and
    binary math, `gelu`, `cast`, `compare`, `select`, `bias_add`,
    `broadcast`) into a `loom.fusion` with the ops producing its operands,
    when they compute over the same shape. A fusion reads each input once
    and writes only the values used outside it, so a chain like
    `bias_add -> gelu` or the tanh-GELU polynomial costs one pass over
    memory instead of one per op. Splat constants are copied into the
    bodies. Every elementwise op ends up in a fusion, alone if need be, so
    the runtime has one elementwise kernel.

    An op joins a fusion only if each of its other operands is defined
    before the fusion's first op; the fusion is placed there, so the
    rewrite never reorders a use before its definition. An operand defined
    later by an elementwise op whose own operands are available (a causal
    mask compared from a buffer after the scores were scaled), or by a
    `loom.param` (an optimizer state read after the weight's gradient), is
    moved above the fusion instead, so the consumer still joins.

    A widening cast of a value in memory (a bf16 GEMM result read as f32)
    is recomputed in every fusion that reads it instead of being stored
    once in the wide type: reading the narrow value is cheaper than writing
    and reading the wide one. Likewise, an op that reads a value a fusion
    computed before the last non-elementwise kernel (a GEMM, a reduction)
    gets a copy of that value's computation (at most 16 ops) when its
    inputs take fewer bytes per element than the value: an activation's
    backward recomputes `x + b`, `erf` and `exp(-x^2)` from the bf16 GEMM
    result rather than reading them as f32 tensors stored by the forward.
    Ops left without users are erased.

    Input:
    ```mlir
    %0 = loom.bias_add %h, %b : tensor<8x3072xf32>, tensor<3072xf32>
    %1 = loom.gelu %0 : tensor<8x3072xf32>
    ```
    Output:
    ```mlir
    %1 = loom.fusion(%h, %b) : (tensor<8x3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32> {
    ^bb0(%x: tensor<8x3072xf32>, %bias: tensor<3072xf32>):
      %0 = loom.bias_add %x, %bias : tensor<8x3072xf32>, tensor<3072xf32>
      %1 = loom.gelu %0 : tensor<8x3072xf32>
      loom.yield %1 : tensor<8x3072xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_FUSION_PASSES_TD
