//===- LoomKernelOps.td - Loom's kernel-level ops ---------*- tablegen -*-===//
//
// The ops that exist only after loom-lower-to-plan's fusion passes: GEMMs
// with their epilogues, fused backward kernels, packed attention and the
// elementwise `loom.fusion`. Autodiff, sharding propagation and the SPMD
// partitioner never see them, so they need neither gradient nor factor
// rules; every one carries `KernelOpTrait` (LoomTraits.h) so that code and
// tests can tell them from graph ops. Included at the end of LoomOps.td:
// they share its generated LoomOps.h.inc.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMKERNELOPS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMKERNELOPS_TD

include "loom/Dialect/Loom/IR/LoomOps.td"

def Loom_KernelOpTrait : NativeOpTrait<"KernelOpTrait"> {
  let cppNamespace = "::mlir::loom";
}

def Loom_KernelOpDocGroup : OpDocGroup {
  let summary = "Kernel ops";
  let description = [{
    Made by `loom-lower-to-plan`'s fusion passes, after autodiff and
    partitioning, and lowered to one kernel each (`KernelOpTrait`). They
    have no factor or gradient rule.
  }];
}

// An op that only exists after fusion (see the file comment).
class Loom_KernelOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([Loom_KernelOpTrait], traits)> {
  let opDocGroup = Loom_KernelOpDocGroup;
}

//===----------------------------------------------------------------------===//
// GEMMs with fused epilogues
//===----------------------------------------------------------------------===//

def Loom_FusedMatmulOp : Loom_KernelOp<"fused_matmul", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "A matmul with its bias and activation fused (GEMM epilogue)";
  let description = [{
    `activation(matmul(lhs, rhs) + bias)`, computed as one GEMM whose
    epilogue adds the bias (a vector along the last dimension) and applies
    the activation before the result is stored: products accumulate in f32
    (f64 for f64) and the result is rounded to its element type once, at
    the end. With a `preactivation` result the epilogue also stores
    `matmul(lhs, rhs) + bias`, which the backward of the activation reads.
    `lhs`, `rhs` and the transposes are as in `loom.matmul`; `gelu_tanh` is
    `loom.gelu approximate tanh`, the form cuBLASLt's epilogue computes.

    With `add`, a tensor of the result's type is added too (cuBLASLt's C
    with beta = 1; no activation then): a residual connection,
    `matmul(lhs, rhs) + bias + addend`. bf16 operands may give an f32
    result (the bias and the addend are then f32): the sums are not
    rounded to bf16 on the way.

    Made by `loom-fuse-matmul-epilogue` when a plan is lowered, after
    autodiff and partitioning: it has no gradient or sharding rule.

    ```mlir
    %y = loom.fused_matmul %x, %w bias %b
        : (tensor<8x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    %g, %z = loom.fused_matmul %x, %w bias %b activation gelu_tanh
        : (tensor<8x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>)
        -> (tensor<8x3072xf32>, tensor<8x3072xf32>)
    %r = loom.fused_matmul %h, %w bias %b add %x transpose_rhs
        : (tensor<8x3072xbf16>, tensor<768x3072xbf16>, tensor<768xf32>,
           tensor<8x768xf32>) -> tensor<8x768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Optional<Loom_FloatTensor>:$bias,
                       Optional<Loom_FloatTensor>:$addend,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       DefaultValuedAttr<Loom_MatmulActivation,
                           "::mlir::loom::MatmulActivation::none">:$activation);
  let results = (outs Loom_FloatTensor:$result,
                      Optional<Loom_FloatTensor>:$preactivation);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? (`add` $addend^)?
    (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`activation` $activation^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MatmulBiasGradOp : Loom_KernelOp<"matmul_bias_grad", [Pure]> {
  let summary = "A weight-gradient GEMM that also sums one operand (bias "
                "gradient)";
  let description = [{
    The backward GEMM of a linear layer's weight, `lhs^T rhs` for `lhs`
    [K, M] and `rhs` [K, N] (the K rows are the layer's samples), that also
    stores the sum of the `summed` operand over those K rows: the bias
    gradient, which reads the same output gradient as the GEMM. One kernel
    reads that gradient once (cuBLASLt's BGRADA/BGRADB epilogues) where a
    `loom.reduce_sum` read it again. `result` is [M, N]; `bias_grad` is [M]
    when `lhs` is summed and [N] when `rhs` is. Everything has one element
    type: products and sums accumulate in f32 (f64 for f64) and each result
    is rounded to it once, so a bf16 GEMM gives a bf16 bias gradient (what
    `torch.autocast`, whose bias is bf16 too, computes).

    Made by `loom-fuse-bias-grad` when a plan is lowered, after autodiff
    and partitioning: it has no gradient or sharding rule.

    ```mlir
    %dw, %db = loom.matmul_bias_grad %g, %x sum lhs
        : (tensor<8192x3072xbf16>, tensor<8192x768xbf16>)
        -> (tensor<3072x768xbf16>, tensor<3072xbf16>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_MatmulOperand:$summed);
  let results = (outs Loom_FloatTensor:$result, Loom_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs `sum` $summed attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MatmulGeluGradOp : Loom_KernelOp<"matmul_gelu_grad", [Pure]> {
  let summary = "An input-gradient GEMM times the tanh GELU's derivative "
                "(DGELU epilogue)";
  let description = [{
    `matmul(lhs, rhs) * gelu'(input)` for the tanh GELU: the input gradient
    of a linear layer that a tanh GELU feeds, carried on through the GELU
    (`loom.gelu_grad approximate tanh` of the product), in one GEMM whose
    epilogue reads the GELU's input `input` (cuBLASLt's DGELU, its aux
    operand) instead of a kernel that reads the stored product again.
    Products accumulate in f32 (f64 for f64); the derivative is taken at
    `input` in f32 (f64) and the result rounded once, so a bf16 product is
    not rounded before it is multiplied (the CUDA backend's fallback for
    GEMMs cuBLASLt's DGELU does not take rounds it twice). `lhs`, `rhs`
    and the transposes
    are as in `loom.matmul`; `input` and the result have the product's
    type.

    Made by `loom-fuse-matmul-epilogue` when a plan is lowered, after
    autodiff and partitioning: it has no gradient or sharding rule.

    ```mlir
    %dh = loom.matmul_gelu_grad %dy, %w, %pre
        : (tensor<8x768xbf16>, tensor<768x3072xbf16>, tensor<8x3072xbf16>)
        -> tensor<8x3072xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_FloatTensor:$input,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $input (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused layers
//===----------------------------------------------------------------------===//

def Loom_FusedLayerNormGradOp
    : Loom_KernelOp<"fused_layer_norm_grad", [Pure]> {
  let summary = "loom.layer_norm_grad that adds its input gradient to another";
  let description = [{
    `loom.layer_norm_grad` whose `dinput` is added to `addend` (the
    gradient the residual branch brings to the same activations) before it
    is stored, and optionally also stored in bf16 (`dinput_bf16`, what a
    cast of the sum before a bf16 GEMM gives). The sum is exactly what
    `loom.add` of `addend` and the rounded layer_norm_grad `dinput` gives,
    so the fusion changes no value: only the f32 `dinput` is neither
    written nor read back.

    Made by `loom-fuse-layer-norm-grad` when a plan is lowered, after
    autodiff and partitioning: it has no gradient or sharding rule.

    ```mlir
    %dx, %dg, %db = loom.fused_layer_norm_grad %x, %g, %dy add %r axis 2
        : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>, tensor<8x128x768xf32>)
        -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>)
    %dx2, %dg2, %db2, %dxb = loom.fused_layer_norm_grad %x, %g, %dy add %r axis 2
        : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>, tensor<8x128x768xf32>)
        -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$dout, Loom_FloatTensor:$addend,
                       I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Loom_FloatTensor:$dinput, Loom_FloatTensor:$dscale,
                      Loom_FloatTensor:$dbias,
                      Optional<Loom_FloatTensor>:$dinput_bf16);
  let assemblyFormat = [{
    $input `,` $scale `,` $dout `add` $addend `axis` $axis
    (`epsilon` $epsilon^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_CrossEntropyWithGradOp
    : Loom_KernelOp<"cross_entropy_with_grad", [Pure]> {
  let summary = "loom.cross_entropy and its gradient from one read of the "
                "logits";
  let description = [{
    `loom.cross_entropy` and `loom.cross_entropy_grad` of the same logits,
    labels, `ignore_index` and `classes`, computed together: `loss` is what
    `loom.cross_entropy` with this `reduction` gives, `dlogits` what
    `loom.cross_entropy_grad` with this `scale` gives (the same formulas,
    types and roundings). One kernel reads the logits once for both, where
    the two ops read them at least twice (a GPT-2-sized batch has 0.8 GB
    of bf16 logits).

    Made by `loom-fuse-cross-entropy-grad` when a plan is lowered, after
    autodiff and partitioning, where the gradient's `scale` is known before
    the loss (the training step's constant loss seed): it has no gradient or
    sharding rule.

    ```mlir
    %loss, %d = loom.cross_entropy_with_grad %logits, %labels, %scale classes 50257
        : (tensor<8192x50264xbf16>, tensor<8192xi64>, tensor<f32>)
        -> (tensor<f32>, tensor<8192x50264xbf16>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
      Loom_FloatTensor:$scale,
      DefaultValuedAttr<Loom_LossReduction,
                        "::mlir::loom::LossReduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index,
      OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$classes);
  let results = (outs Loom_FloatTensor:$loss, Loom_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $scale (`reduction` $reduction^)?
    (`ignore_index` $ignore_index^)? (`classes` $classes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Packed attention
//===----------------------------------------------------------------------===//

def Loom_PackedAttentionOp : Loom_KernelOp<"packed_attention", [
    Pure, Loom_InferTypes]> {
  let summary = "loom.attention reading q, k and v from one packed tensor";
  let description = [{
    `loom.attention ... seq_major` of `q = qkv[..., 0, :, :]`,
    `k = qkv[..., 1, :, :]` and `v = qkv[..., 2, :, :]`, where `qkv` is
    `[..., S, 3, H, D]`: the layout a fused QKV projection writes (its
    `[..., S, 3 * H * D]` result, reshaped). The kernels read the three
    operands where they lie, so the split of the projection into q, k and
    v, a copy of the whole projection, is not needed. Results, mask,
    `scale` and `mask_value` are those of `loom.attention ... seq_major`.

    Made by `loom-pack-attention` when lowering to a plan, after
    partitioning: it has no factor rule and no gradient rule (the
    backward is `loom.packed_attention_grad`, packed by the same pass).

    ```mlir
    %o, %lse = loom.packed_attention %qkv mask %causal scale 1.250000e-01
        : (tensor<8x1024x3x12x64xbf16>, tensor<1x1x1024x1024xi1>)
        -> (tensor<8x1024x12x64xbf16>, tensor<8x1024x12xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$qkv, Optional<Loom_BoolTensor>:$mask,
                       F64Attr:$scale,
                       DefaultValuedAttr<F64Attr,
                           "-::std::numeric_limits<double>::infinity()">
                           :$mask_value);
  let results = (outs Loom_FloatTensor:$output, Loom_FloatTensor:$logsumexp);
  let assemblyFormat = [{
    $qkv (`mask` $mask^)? `scale` $scale (`mask_value` $mask_value^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_PackedAttentionGradOp : Loom_KernelOp<"packed_attention_grad", [
    Pure, Loom_InferTypes]> {
  let summary = "loom.attention_grad writing dq, dk and dv into one tensor";
  let description = [{
    The backward of `loom.packed_attention`: `loom.attention_grad ...
    seq_major` of the q, k and v packed in `qkv` (`[..., S, 3, H, D]`),
    whose one result `dqkv` holds `dq`, `dk` and `dv` in the same packed
    layout: the layout of the QKV projection's gradient, so the concat of
    the three gradients is not needed either. `dout`, `logsumexp` and
    `output` are those of `loom.attention_grad ... seq_major`.

    Made by `loom-pack-attention`.

    ```mlir
    %dqkv = loom.packed_attention_grad %qkv, %dout, %lse, %o
        mask %causal scale 1.250000e-01
        : (tensor<8x1024x3x12x64xbf16>, tensor<8x1024x12x64xbf16>,
           tensor<8x1024x12xf32>, tensor<8x1024x12x64xbf16>,
           tensor<1x1x1024x1024xi1>)
        -> tensor<8x1024x3x12x64xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$qkv, Loom_FloatTensor:$dout,
                       Loom_FloatTensor:$logsumexp, Loom_FloatTensor:$output,
                       Optional<Loom_BoolTensor>:$mask, F64Attr:$scale,
                       DefaultValuedAttr<F64Attr,
                           "-::std::numeric_limits<double>::infinity()">
                           :$mask_value);
  let results = (outs Loom_FloatTensor:$dqkv);
  let assemblyFormat = [{
    $qkv `,` $dout `,` $logsumexp `,` $output (`mask` $mask^)?
    `scale` $scale (`mask_value` $mask_value^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise fusion
//===----------------------------------------------------------------------===//

def Loom_FusionOp : Loom_KernelOp<"fusion", [
    IsolatedFromAbove, SingleBlockImplicitTerminator<"YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "Elementwise ops fused into one kernel";
  let description = [{
    Evaluates its body, a chain of elementwise loom ops, element by element
    over one iteration space: the shape shared by every result. Each input
    broadcasts numpy-style to that shape, so a kernel reads every input once
    and writes every result once, with no intermediate tensors in memory.
    Made by `loom-fuse-elementwise`; lowered to one `elementwise` kernel.
    The body may also hold splat `loom.constant`s, which become immediates.

    ```mlir
    %y = loom.fusion(%h, %b) : (tensor<8x3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32> {
    ^bb0(%x: tensor<8x3072xf32>, %bias: tensor<3072xf32>):
      %0 = loom.bias_add %x, %bias : tensor<8x3072xf32>, tensor<3072xf32>
      %1 = loom.gelu %0 : tensor<8x3072xf32>
      loom.yield %1 : tensor<8x3072xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                                 "::mlir::ValueRange":$inputs)>];
  let extraClassDeclaration = [{
    /// The iteration space: the shape of every result.
    ::llvm::ArrayRef<int64_t> getIterationShape() {
      return ::llvm::cast<::mlir::RankedTensorType>(getResult(0).getType())
          .getShape();
    }
    /// Whether `op` may appear in a fusion body.
    static bool isFusible(::mlir::Operation *op);
  }];
}

def Loom_YieldOp : Loom_KernelOp<"yield", [
    Pure, Terminator, ReturnLike]> {
  let summary = "Returns the results of an elementwise body";
  let description = [{
    Terminates the body of a `loom.fusion` and, after bufferization, of an
    `elementwise` `plan.kernel`.

    ```mlir
    loom.yield %0, %1 : tensor<8x16xf32>, tensor<8x16xi1>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMKERNELOPS_TD
