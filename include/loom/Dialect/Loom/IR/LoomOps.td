//===- LoomOps.td - Loom operations ------------------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_TD

include "loom/Dialect/Loom/IR/LoomAttrs.td"
include "loom/Dialect/Loom/IR/LoomDialect.td"
include "loom/Dialect/Loom/IR/LoomInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

def Loom_VerifyInferredTypes : NativeOpTrait<"VerifyInferredTypes"> {
  let cppNamespace = "::mlir::loom";
}

// Result types inferred from operands and attributes; shape errors are
// reported once, precisely (see LoomTraits.h).
def Loom_InferTypes : TraitList<[Loom_VerifyInferredTypes, InferTypeOpAdaptor]>;
// The same, for ops that accept other result types than the inferred ones
// (their isCompatibleReturnTypes says which).
def Loom_InferTypesWithIsCompatible
    : TraitList<[Loom_VerifyInferredTypes, InferTypeOpAdaptorWithIsCompatible]>;

// Opts a graph op out of FactorRuleOpInterface, which every other graph op
// implements (test/Unit/Dialect/FactorRulesTest.cpp checks it). Only for ops
// that compute nothing on tensors (module-level symbols); the op's
// description says why.
def Loom_NoFactorRule : NativeOpTrait<"NoFactorRule"> {
  let cppNamespace = "::mlir::loom";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Loom_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def Loom_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Loom_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def Loom_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Loom_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Mesh, parameters, constants, sharding annotations
//===----------------------------------------------------------------------===//

def Loom_MeshOp : Loom_Op<"mesh", [Symbol, Loom_NoFactorRule]> {
  let summary = "Declares a device mesh";
  let description = [{
    Declares a device mesh with named axes; `#loom.sharding` attributes refer
    to it by symbol name. A module-level symbol with no operands or results:
    it has no factor rule.

    ```mlir
    loom.mesh @mesh = <dp = 2, pp = 2, tp = 4>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Loom_MeshAttr:$mesh);
  let assemblyFormat = "$sym_name `=` $mesh attr-dict";
}

def Loom_ParameterOp : Loom_Op<"parameter", [
    Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Loom_NoFactorRule]> {
  let summary = "Declares a model parameter (a weight that persists across steps)";
  let description = [{
    Declares a named tensor of model state. `trainable` parameters receive
    gradients and optimizer updates; the others (frozen weights, integer
    tables) are only read. The initial value is optional: without it the
    module is *shapes-only* and can still be planned and partitioned. Large
    values are `dense_resource` blobs or `#loom.external_data` references to
    a weights file, never inline text; `#loom.cast_of` makes a parameter a
    narrowed copy of another's initial value, `#loom.slice_of` a block of
    it. An optional
    `sharding` is a user annotation for the parameter's layout, with an
    optional `priority` (0, the default, propagates first; see
    `loom.shard`).

    After SPMD partitioning (`loom-partition`) the parameter keeps its
    global type and sharding, while `loom.param` and `loom.assign` in the
    partitioned function use each rank's shard type.

    A module-level symbol with no operands or results, it has no factor
    rule: `loom.param` reads it and `loom.assign` writes it, and those have
    one.

    ```mlir
    loom.parameter @fc1.weight trainable : tensor<512x2048xf32>
}] # "    loom.parameter @fc1.bias trainable : tensor<2048xf32>\n" #
     "        sharding <@mesh, [{tp}]> = dense<0.0> : tensor<2048xf32>\n" # [{
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<Loom_Tensor>:$type,
    UnitAttr:$trainable,
    OptionalAttr<Loom_ShardingAttr>:$sharding,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$sharding_priority,
    OptionalAttr<AnyAttrOf<[ElementsAttr, Loom_ExternalDataAttr,
                                 Loom_CastOfAttr, Loom_SliceOfAttr]>>
        :$initial_value);
  let assemblyFormat = [{
    $sym_name (`trainable` $trainable^)? `:` $type
    (`sharding` $sharding^)? (`priority` $sharding_priority^)?
    (`=` $initial_value^)? attr-dict
  }];
  let builders = [
    // Without a sharding priority (the default, 0).
    OpBuilder<(ins "::mlir::StringAttr":$sym_name, "::mlir::TypeAttr":$type,
                   "::mlir::UnitAttr":$trainable,
                   "::mlir::loom::ShardingAttr":$sharding,
                   "::mlir::Attribute":$initial_value), [{
      build($_builder, $_state, sym_name, type, trainable, sharding,
            /*sharding_priority=*/nullptr, initial_value);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Loom_ParamOp : Loom_Op<"param", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Reads a model parameter";
  let description = [{
    Yields the current value of the `loom.parameter` named by `name`; the
    result type must equal the parameter's type.

    ```mlir
    %w = loom.param @fc1.weight : tensor<512x2048xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Loom_ConstantOp : Loom_Op<"constant", [
    ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "A constant tensor";
  let description = [{
    A constant tensor: `dense` for small values, `dense_resource` for large
    ones so that they never appear as text.

    ```mlir
    %c = loom.constant dense<1.0> : tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Loom_ShardOp : Loom_Op<"shard", [
    Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Pins the sharding of a value";
  let description = [{
    Returns its operand unchanged and states the sharding its result must
    have. Sharding propagation treats it as a user annotation; where the
    operand's sharding differs, the partitioner inserts the resharding
    collectives here.

    `priority` (default 0) orders annotations the way OpenXLA Shardy does:
    all annotations of priority 0 propagate to a fixed point first, then
    those of priority 1 fill what is still open, and so on; a sharding that
    came from a lower number is never overridden by a higher one. Closed
    dimensions (those without `?`) are never split further, so a sharding
    whose dimensions are all `{}` pins a value replicated.

    ```mlir
}] # "    %y = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<8x512xf32>\n" #
     "    %z = loom.shard %x to <@mesh, [{?}, {tp}]> priority 1 : tensor<8x512xf32>\n" # [{
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_ShardingAttr:$sharding,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$priority);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat =
      "$input `to` $sharding (`priority` $priority^)? attr-dict `:` type($result)";
}

def Loom_ReshardOp : Loom_Op<"reshard", [
    Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Where sharding propagation changes a value's sharding";
  let description = [{
    Returns its operand unchanged, with the sharding `sharding`, where the
    operand has another one. `loom-propagate-sharding` inserts it where two
    annotations disagree about a value (a conflict is never resolved
    silently) and records in `reason` which sharding won and why;
    `loom-partition` turns it into the collectives (or the local slice)
    that move the data, and `loom-explain-sharding` reports it.

    ```mlir
}] # "    %y = loom.reshard %x to <@mesh, [{}, {tp}]> because \"...\" : tensor<8x512xf32>\n" # [{
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_ShardingAttr:$sharding,
                       StrAttr:$reason);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat =
      "$input `to` $sharding `because` $reason attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// Elementwise ops share one factor rule: one parallel factor per result
// dimension, operands mapped with numpy broadcasting.
defvar Loom_ElementwiseFactorRule = [{
  ::mlir::loom::FactorRule getFactorRule() {
    return ::mlir::loom::getElementwiseFactorRule(getOperation());
  }
}];

class Loom_UnaryOp<string mnemonic, Type type, string doc,
                   list<Trait> traits = []>
    : Loom_Op<mnemonic, traits # [Pure, SameOperandsAndResultType,
                                  Loom_FactorRuleOpInterface]> {
  let summary = "Elementwise " # mnemonic;
  let description = "    " # doc # [{

    ```mlir
    %y = loom.}] # mnemonic # [{ %x : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_SqrtOp : Loom_UnaryOp<"sqrt", Loom_FloatTensor, "Square root.">;
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt", Loom_FloatTensor,
    "Reciprocal square root, `1 / sqrt(x)`.">;
def Loom_ExpOp : Loom_UnaryOp<"exp", Loom_FloatTensor, "Natural exponential.">;
def Loom_LogOp : Loom_UnaryOp<"log", Loom_FloatTensor, "Natural logarithm.">;
def Loom_NegOp : Loom_UnaryOp<"neg", Loom_NumericTensor, "Negation.">;
def Loom_ErfOp : Loom_UnaryOp<"erf", Loom_FloatTensor, "Gauss error function.">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", Loom_FloatTensor, "Hyperbolic tangent.">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", Loom_FloatTensor,
    "Logistic sigmoid, `1 / (1 + exp(-x))`.">;
def Loom_ReluOp : Loom_UnaryOp<"relu", Loom_FloatTensor,
    "Rectified linear unit, `max(x, 0)`.">;
def Loom_ReciprocalOp : Loom_UnaryOp<"reciprocal", Loom_FloatTensor,
    "Reciprocal, `1 / x`.">;
def Loom_AbsOp : Loom_UnaryOp<"abs", Loom_NumericTensor,
    "Absolute value (integers wrap: the most negative value stays).">;
def Loom_SinOp : Loom_UnaryOp<"sin", Loom_FloatTensor, "Sine (radians).">;
def Loom_CosOp : Loom_UnaryOp<"cos", Loom_FloatTensor, "Cosine (radians).">;

def Loom_GeluOp : Loom_Op<"gelu", [Pure, SameOperandsAndResultType,
                                   Loom_FactorRuleOpInterface]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` with the exact normal CDF (`approximate none`, the default)
    or the tanh approximation (`approximate tanh`), as `torch.nn.GELU`.

    ```mlir
    %y = loom.gelu %x : tensor<8x2048xf32>
    %z = loom.gelu %x approximate tanh : tensor<8x2048xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
      DefaultValuedAttr<Loom_GeluApproximation,
                        "::mlir::loom::GeluApproximation::none">:$approximate);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` $approximate^)? attr-dict `:` type($result)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_GeluGradOp : Loom_Op<"gelu_grad", [Pure, SameOperandsAndResultType,
                                           Loom_FactorRuleOpInterface]> {
  let summary = "The gradient of `loom.gelu`: `grad * gelu'(input)`";
  let description = [{
    The input gradient of `loom.gelu %input` whose result gradient is
    `grad`, for the same `approximate`. Autodiff emits it as one op so that
    lowering can give it to the GEMM that computes `grad` (cuBLASLt's DGELU
    epilogue, `loom.matmul_gelu_grad`); `loom-decompose-gelu-grad` spells
    the rest out in elementwise ops before kernels are chosen.

    ```mlir
    %dx = loom.gelu_grad %dy, %x approximate tanh : tensor<8x3072xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
      DefaultValuedAttr<Loom_GeluApproximation,
                        "::mlir::loom::GeluApproximation::none">:$approximate);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input (`approximate` $approximate^)? attr-dict `:` type($result)
  }];
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_CastOp : Loom_Op<"cast", [Pure, SameOperandsAndResultShape,
                                   Loom_FactorRuleOpInterface]> {
  let summary = "Elementwise element-type conversion";
  let description = [{
    Converts every element to the result's element type. Float to integer
    rounds toward zero, anything to `i1` tests for non-zero, `i1` converts
    to 0 or 1.

    ```mlir
    %y = loom.cast %x : tensor<8x16xf32> -> tensor<8x16xbf16>
    ```

    Canonicalization moves narrowing casts before, and widening casts
    after, `reshape` and `transpose` (so those copy the narrow type), does
    the same for a `split` whose results are all narrowed alike and a
    `concat` whose inputs were all widened alike, and folds a cast back
    through a lossless widening (bf16 -> f32 -> bf16).
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

class Loom_BinaryOp<string mnemonic, Type type, string doc>
    : Loom_Op<mnemonic, [Pure, Loom_InferTypes,
                         SameOperandsAndResultElementType,
                         Loom_FactorRuleOpInterface]> {
  let summary = "Elementwise " # mnemonic # " with numpy broadcasting";
  let description = "    " # doc # [{ Operands broadcast as in numpy: shapes are
    right-aligned and each pair of dimensions must be equal or one of them 1.
    The type is printed once when operands and result share it.

    ```mlir
    %y = loom.}] # mnemonic # [{ %a, %b : tensor<8x16xf32>
    %z = loom.}] # mnemonic # [{ %a, %c : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<ElementwiseTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasFolder = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_AddOp : Loom_BinaryOp<"add", Loom_NumericTensor, "Addition.">;
def Loom_SubOp : Loom_BinaryOp<"sub", Loom_NumericTensor, "Subtraction.">;
def Loom_MulOp : Loom_BinaryOp<"mul", Loom_NumericTensor, "Multiplication."> {
  // Recognizes the tanh GELU that ONNX exports spell out (GeluPatterns.cpp).
  let hasCanonicalizer = 1;
}
def Loom_DivOp : Loom_BinaryOp<"div", Loom_NumericTensor,
    "Division (integers round toward zero).">;
def Loom_PowOp : Loom_BinaryOp<"pow", Loom_FloatTensor, "Power, `lhs ^ rhs`.">;
def Loom_FmodOp : Loom_BinaryOp<"fmod", Loom_FloatTensor,
    "Remainder of division rounded toward zero, with the sign of `lhs` (C's "
    "`fmod`, `torch.fmod`).">;
def Loom_MaximumOp : Loom_BinaryOp<"maximum", Loom_Tensor,
    "The larger operand (`torch.maximum`): a NaN operand gives NaN; on `i1`, "
    "logical or.">;
def Loom_MinimumOp : Loom_BinaryOp<"minimum", Loom_Tensor,
    "The smaller operand (`torch.minimum`): a NaN operand gives NaN; on `i1`, "
    "logical and.">;

def Loom_CompareOp : Loom_Op<"compare", [Pure, Loom_InferTypes,
                                         Loom_FactorRuleOpInterface]> {
  let summary = "Elementwise comparison with numpy broadcasting";
  let description = [{
    Compares `lhs` and `rhs` elementwise (broadcast as in numpy) and yields
    an `i1` tensor. Comparisons involving NaN are false, except `ne`;
    booleans order `false < true`.

    ```mlir
    %m = loom.compare lt, %a, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xi1>
    ```
  }];
  let arguments = (ins Loom_CompareDirection:$direction,
                       Loom_Tensor:$lhs, Loom_Tensor:$rhs);
  let results = (outs Loom_BoolTensor:$result);
  let assemblyFormat = [{
    $direction `,` $lhs `,` $rhs attr-dict `:`
    custom<ElementwiseTypes>(type($lhs), type($rhs), type($result))
  }];
  let hasFolder = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_SelectOp : Loom_Op<"select", [Pure, Loom_InferTypes,
                                       Loom_FactorRuleOpInterface]> {
  let summary = "Elementwise choice with numpy broadcasting (ONNX Where)";
  let description = [{
    Yields `on_true` where `condition` holds and `on_false` elsewhere; the
    three operands broadcast together as in numpy.

    ```mlir
    %y = loom.select %mask, %scores, %neg_inf
        : (tensor<1x1x128x128xi1>, tensor<8x12x128x128xf32>, tensor<f32>)
        -> tensor<8x12x128x128xf32>
    ```
  }];
  let arguments = (ins Loom_BoolTensor:$condition, Loom_Tensor:$on_true,
                       Loom_Tensor:$on_false);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    functional-type(operands, results)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_Op<"matmul", [
    Pure, Loom_InferTypes, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Batched matrix multiplication with optional transposes";
  let description = [{
    Multiplies the trailing two dimensions, `[..., M, K] x [..., K, N] ->
    [..., M, N]`; `transpose_lhs` / `transpose_rhs` read an operand's two
    trailing dimensions swapped. Leading (batch) dimensions are aligned from
    the right and must be equal where both operands have them; the operand
    with more of them contributes the rest (a rank-2 `rhs` is a weight
    shared by every batch). Size-1 batch broadcasting is not implicit: use
    `loom.broadcast`.

    ```mlir
    %h = loom.matmul %x, %w : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
    %s = loom.matmul %q, %k transpose_rhs
        : (tensor<8x12x128x64xf32>, tensor<8x12x128x64xf32>) -> tensor<8x12x128x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

def Loom_BiasAddOp : Loom_Op<"bias_add", [
    Pure, AllTypesMatch<["input", "result"]>, SameOperandsElementType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Adds a bias vector along the last dimension";
  let description = [{
    `input[..., n] + bias[n]`: the bias of a linear layer. Kept apart from
    `loom.add` so that GEMM epilogues can fuse it and its gradient is a plain
    column sum.

    ```mlir
    %y = loom.bias_add %h, %b : tensor<8x128x3072xf32>, tensor<3072xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$bias);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Loom_ReshapeOp : Loom_Op<"reshape", [
    Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Reinterprets a tensor with another shape (row-major)";
  let description = [{
    Same elements in the same row-major order, another shape; the element
    counts must be equal.

    ```mlir
    %y = loom.reshape %x : tensor<8x128x768xf32> -> tensor<8x128x12x64xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_TransposeOp : Loom_Op<"transpose", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Permutes dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %y = loom.transpose %x [0, 2, 1, 3] : tensor<8x128x12x64xf32> -> tensor<8x12x128x64xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Loom_SliceOp : Loom_Op<"slice", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Takes a strided window of a tensor";
  let description = [{
    For every dimension `d`, keeps indices `start[d], start[d] + stride[d],
    ...` below `limit[d]`, with `0 <= start <= limit <= size` and
    `stride >= 1`. Written `start:limit` or `start:limit:stride` per
    dimension.

    ```mlir
    %y = loom.slice %x [0:8, 0:128, 768:1536] : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>
    %z = loom.slice %x [0:8:2] : tensor<8xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input custom<SliceRanges>($starts, $limits, $strides) attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// Whether the result is the input's leading elements in row-major
    /// order (the first dimension that is cut has only size-1 dimensions
    /// before it and full ones after it, every start 0 and stride 1): the
    /// same bytes' prefix, which a plan can view instead of copying.
    bool isLeadingPrefix();
  }];
}

def Loom_ConcatOp : Loom_Op<"concat", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Concatenates tensors along one axis";
  let description = [{
    All inputs have the same rank and element type and agree on every
    dimension except `axis`.

    ```mlir
    %y = loom.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` functional-type($inputs, $result)
  }];
  let hasFolder = 1;
}

def Loom_SplitOp : Loom_Op<"split", [
    Pure, DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Splits a tensor into consecutive pieces along one axis";
  let description = [{
    The result types give the piece sizes along `axis`; they must add up to
    the input's size there and agree with the input elsewhere.

    ```mlir
    %q, %k, %v = loom.split %qkv axis 2 : tensor<8x128x2304xf32>
        -> tensor<8x128x768xf32>, tensor<8x128x768xf32>, tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_BroadcastOp : Loom_Op<"broadcast", [
    Pure, SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Broadcasts a tensor to a larger shape (ONNX Expand)";
  let description = [{
    Numpy broadcasting to the result shape: input dimensions are aligned
    with the trailing result dimensions and must equal them or be 1.

    ```mlir
    %y = loom.broadcast %b : tensor<1x768xf32> -> tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_GatherOp : Loom_Op<"gather", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Gathers slices along an axis by index (embedding lookup)";
  let description = [{
    ONNX Gather: the result shape is `input.shape[:axis] + indices.shape +
    input.shape[axis+1:]`. Negative indices count from the end; indices out
    of range are a runtime error. An embedding lookup is `axis 0`, the
    default.

    `padding_idx` (PyTorch's `nn.Embedding(padding_idx=...)`, which ONNX
    cannot express) changes only the gradient: the positions that read
    that index pass none to the input, so that row is never trained through
    this lookup. `loom-run --padding-idx` sets it.

    ```mlir
    %e = loom.gather %wte[%ids] : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<8x128x768xf32>
    %p = loom.gather %wte[%ids] padding_idx 0 : (tensor<32000x4096xf32>, tensor<8x128xi64>) -> tensor<8x128x4096xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` (`axis` $axis^)? (`padding_idx` $padding_idx^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Loom_ScatterAddOp : Loom_Op<"scatter_add", [
    Pure, DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Sums slices into rows by index (the adjoint of gather)";
  let description = [{
    `result[v, ...] = sum of updates[i, ...] over every index position i
    with indices[i] == v`: rows no index names are zero. `updates` has the
    shape `indices.shape + result.shape[1:]`. Negative indices count from
    the end; indices out of range are a runtime error. It is the gradient
    of an embedding lookup (`loom.gather` along axis 0), computed in one
    pass over the updates instead of a product with a one-hot matrix.

    ```mlir
    %dwte = loom.scatter_add %dy[%ids] : (tensor<8x128x768xf32>, tensor<8x128xi64>) -> tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$updates, Loom_IndexTensor:$indices);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $updates `[` $indices `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Loom_ReduceOp<string mnemonic, Type type, string doc,
                    list<Trait> typing = [Loom_InferTypes,
                                          SameOperandsAndResultElementType]>
    : Loom_Op<mnemonic, !listconcat([Pure,
                         DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>],
                         typing)> {
  let summary = doc # " over the given axes";
  let description = "    " # doc # [{ over `axes` (sorted, unique, in range); the
    reduced dimensions are dropped, or kept with size 1 under `keepdims`.
    Empty `axes` reduce nothing.

    ```mlir
    %y = loom.}] # mnemonic # [{ %x [1] : tensor<8x16xf32> -> tensor<8xf32>
    %z = loom.}] # mnemonic # [{ %x [1] keepdims : tensor<8x16xf32> -> tensor<8x1xf32>
    ```
  }];
  let arguments = (ins type:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs type:$result);
  let assemblyFormat = [{
    $input $axes (`keepdims` $keepdims^)? attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasFolder = 1;
}

def Loom_ReduceSumOp : Loom_ReduceOp<"reduce_sum", Loom_NumericTensor, "Sum",
                                     [Loom_InferTypesWithIsCompatible]> {
  let description = [{
    Sum over `axes` (sorted, unique, in range); the reduced dimensions are
    dropped, or kept with size 1 under `keepdims`. Empty `axes` reduce
    nothing.

    The result has the input's element type, or is f32 for a bf16 or f16
    input: the sum of the exact f32 values, as a widening cast before the
    sum gives. Canonicalization folds such a cast into the op (a bias
    gradient under mixed precision sums the bf16 GEMM gradient without an
    f32 copy of it).

    ```mlir
    %y = loom.reduce_sum %x [1] : tensor<8x16xf32> -> tensor<8xf32>
    %z = loom.reduce_sum %x [1] keepdims : tensor<8x16xf32> -> tensor<8x1xf32>
    %b = loom.reduce_sum %g [0, 1] : tensor<8x1024x768xbf16> -> tensor<768xf32>
    ```
  }];
  let hasCanonicalizer = 1;
}
def Loom_ReduceMeanOp : Loom_ReduceOp<"reduce_mean", Loom_FloatTensor, "Mean">;
def Loom_ReduceMaxOp : Loom_ReduceOp<"reduce_max", Loom_NumericTensor, "Maximum">;

def Loom_CumsumOp : Loom_Op<"cumsum", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Cumulative sum along one axis (ONNX CumSum, torch.cumsum)";
  let description = [{
    Element `i` along `axis` is the sum of elements `0..i` (`exclusive`:
    `0..i-1`; `reverse`: from the end, `i..n-1` or `i+1..n-1`), added one
    after the other in that order in the element type (integers wrap). Its
    gradient is the cumulative sum of the result's gradient the other way.

    ```mlir
    %pos = loom.cumsum %mask axis 1 : tensor<8x128xi64>
    %rev = loom.cumsum %x axis 0 exclusive reverse : tensor<16x4xf32>
    ```
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Loom_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis (`exclusive` $exclusive^)? (`reverse` $reverse^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

class Loom_SoftmaxLikeOp<string mnemonic, string doc>
    : Loom_Op<mnemonic, [Pure, SameOperandsAndResultType,
                         DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = doc;
  let description = "    " # doc # [{ along `axis`, computed stably (the maximum is
    subtracted first).

    ```mlir
    %p = loom.}] # mnemonic # [{ %scores axis 3 : tensor<8x12x128x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_SoftmaxOp : Loom_SoftmaxLikeOp<"softmax", "Softmax">;
def Loom_LogSoftmaxOp : Loom_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

def Loom_LayerNormOp : Loom_Op<"layer_norm", [
    Pure, AllTypesMatch<["scale", "bias"]>, SameOperandsElementType,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `axis..rank-1` to zero mean and unit variance
    (biased variance, `epsilon` added before the square root), then applies
    `scale` and `bias`, whose shape is the normalized shape. As
    `torch.nn.LayerNorm` and ONNX LayerNormalization.

    The result has the input's type, or is bf16 for an f32 input: the f32
    result rounded once, which is what a cast of it gives. Canonicalization
    folds such a cast (mixed precision's cast before a GEMM) into the op,
    so the f32 normalized activations are not stored.

    ```mlir
    %y = loom.layer_norm %x, %g, %b axis 2 : tensor<8x128x768xf32>, tensor<768xf32>
    %z = loom.layer_norm %x, %g, %b axis 2 epsilon 1.000000e-06 : tensor<8x128x768xf32>, tensor<768xf32>
    %h = loom.layer_norm %x, %g, %b axis 2 : tensor<8x128x768xf32>, tensor<768xf32> -> tensor<8x128x768xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `axis` $axis (`epsilon` $epsilon^)? attr-dict
    `:` custom<LayerNormTypes>(type($input), type($scale), type($result))
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Loom_LayerNormGradOp : Loom_Op<"layer_norm_grad", [
    Pure, AllTypesMatch<["input", "dinput"]>,
    AllTypesMatch<["scale", "dscale", "dbias"]>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Gradients of loom.layer_norm";
  let description = [{
    The backward of `loom.layer_norm` (same `input`, `scale`, `axis` and
    `epsilon`) given the gradient `dout` of its result. Each row's mean and
    reciprocal standard deviation are recomputed from `input`, so the
    forward keeps nothing but its input. With `xhat` the normalized input
    and `g = dout * scale`:
    `dinput = rstd * (g - mean(g) - xhat * mean(g * xhat))` over the
    normalized dimensions, `dscale = sum(dout * xhat)` and
    `dbias = sum(dout)` over the leading ones.

    Made by the gradient rule of `loom.layer_norm`; it has no gradient of
    its own. `dout` has the input's type, or is bf16 for an f32 input (read
    as its exact f32 values); canonicalization folds a widening cast of
    `dout` (a bf16 GEMM's gradient) into the op.

    ```mlir
    %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 2
        : tensor<8x128x768xf32>, tensor<768xf32>
    %dx2, %dg2, %db2 = loom.layer_norm_grad %x, %g, %dyb axis 2
        : tensor<8x128x768xf32>, tensor<768xf32> dout tensor<8x128x768xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$dout, I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Loom_FloatTensor:$dinput, Loom_FloatTensor:$dscale,
                      Loom_FloatTensor:$dbias);
  let assemblyFormat = [{
    $input `,` $scale `,` $dout `axis` $axis (`epsilon` $epsilon^)? attr-dict
    `:` custom<LayerNormGradTypes>(type($input), type($scale), type($dout))
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Loom_DropoutOp : Loom_Op<"dropout", [
    Pure, Loom_InferTypes, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Inverted dropout with a reproducible mask";
  let description = [{
    Zeroes each element with probability `ratio` and scales the kept ones by
    `1 / (1 - ratio)`; the mask is returned for the backward pass. It is a
    counter-based random function (splitmix64, plan-format.md) of `seed`,
    the training `step` (0 without one) and each element's index in the
    logical tensor, so it does not depend on how that tensor is split:

    - `step`, an f64 scalar: the optimizer's update count, which
      `loom-build-train-step` passes so that every step draws a new mask;
    - `index_base`: added to every index (microbatch k of a step numbers
      its elements after those of microbatches 0..k-1, so a batch split
      into microbatches along its leading dimension draws the masks of
      the whole batch);
    - `offsets` and `global_shape`: this rank's block of a tensor split
      by `loom-partition`, which starts at `offsets` (one per dimension)
      in a tensor of `global_shape`; the index is the element's row-major
      index in the global tensor.
    - `index_chunk` c > 0 with `index_chunk_stride` s: the global index g
      counts as `(g / c) * s + g % c`, chunks of c elements spread s apart
      (under data parallelism with gradient accumulation, a microbatch
      holds a block of rows of each rank's part of the batch:
      `loom-data-parallel` numbers its rows where they are in the batch).

    The element's index is then `index_base` plus that.

    ```mlir
    %y, %mask = loom.dropout %x ratio 1.000000e-01 seed 7 : tensor<8x128x768xf32>
    %y, %mask = loom.dropout %x ratio 1.000000e-01 seed 7 step %n
        at %offsets of [16, 128, 768] {index_base = 4096 : i64}
        : tensor<8x128x768xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
                       Optional<0DTensorOf<[F64]>>:$step,
                       Optional<1DTensorOf<[I64]>>:$offsets,
                       F64Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       DefaultValuedAttr<I64Attr, "0">:$index_base,
                       DefaultValuedAttr<I64Attr, "0">:$index_chunk,
                       DefaultValuedAttr<I64Attr, "0">:$index_chunk_stride,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let results = (outs Loom_FloatTensor:$output, Loom_BoolTensor:$mask);
  let assemblyFormat = [{
    $input `ratio` $ratio (`seed` $seed^)? `` custom<DropoutStep>($step,
    type($step)) `` custom<DropoutBlock>($offsets, type($offsets),
    $global_shape) attr-dict `:` type($input)
  }];
  let builders = [
    OpBuilder<(ins "Value":$input, "double":$ratio, "int64_t":$seed), [{
      build($_builder, $_state, input, /*step=*/Value(), /*offsets=*/Value(),
            $_builder.getF64FloatAttr(ratio), $_builder.getI64IntegerAttr(seed),
            $_builder.getI64IntegerAttr(0), $_builder.getI64IntegerAttr(0),
            $_builder.getI64IntegerAttr(0), DenseI64ArrayAttr());
    }]>
  ];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Softmax cross-entropy against class indices";
  let description = [{
    `logits` are `[..., C]` with the classes last; `labels` hold class
    indices of shape `[...]`. Per sample the loss is
    `logsumexp(logits) - logits[label]`; samples whose label equals
    `ignore_index` contribute 0 and are not counted. `reduction` is `mean`
    (the default: over the counted samples, as `torch.nn.functional.
    cross_entropy`), `sum`, or `none` (the per-sample losses).

    The loss is f32 for f16, bf16 and f32 logits and f64 for f64 ones: the
    log-sum-exp accumulates in that type, so bf16 logits need no f32 copy.
    Canonicalization folds a widening cast of the logits into the op (bf16
    -> f32 logits give the same loss read as bf16).

    `classes N` says that only the first N entries of the last dimension are
    classes and the rest is padding (loom-pad-classes aligns the rows of the
    logits' GEMMs that way): the padding takes no part in the softmax and
    labels must be below N. Without it every entry is a class.

    ```mlir
    %l = loom.cross_entropy %logits, %labels : (tensor<1024x50257xf32>, tensor<1024xi64>) -> tensor<f32>
    %p = loom.cross_entropy %logits, %labels reduction none ignore_index -100
        : (tensor<8x128x50257xf32>, tensor<8x128xi64>) -> tensor<8x128xf32>
    %q = loom.cross_entropy %padded, %labels classes 50257
        : (tensor<1024x50264xbf16>, tensor<1024xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
      DefaultValuedAttr<Loom_LossReduction,
                        "::mlir::loom::LossReduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index,
      OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$classes);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`reduction` $reduction^)?
    (`ignore_index` $ignore_index^)? (`classes` $classes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [
    Pure, DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Gradient of loom.cross_entropy with respect to its logits";
  let description = [{
    `dlogits = (softmax(logits) - onehot(labels)) * scale` per sample, 0
    for the samples whose label is `ignore_index`. `scale` is a scalar or
    has the samples' shape (`[...]`): the loss gradient with the reduction
    folded in (divided by the counted samples for `mean`). It is computed in
    the loss type of `loom.cross_entropy` (f32, f64 for f64 logits), which
    `scale` must have, and rounded once to the result's element type.

    With `classes N`, as for `loom.cross_entropy`, only the first N entries
    of the last dimension are classes; the gradient of the padding is 0.

    Made by the gradient rule of `loom.cross_entropy`, so that neither the
    probabilities nor f32 logits are stored. Canonicalization folds a
    widening cast of the logits into the op, and a narrowing cast of its
    only use into its result type (f32 -> bf16, f64 -> f32): bf16 logits
    in, bf16 gradient out. It has no gradient of its own.

    ```mlir
    %d = loom.cross_entropy_grad %logits, %labels, %scale ignore_index -100
        : (tensor<8192x50257xbf16>, tensor<8192xi64>, tensor<f32>)
        -> tensor<8192x50257xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
      Loom_FloatTensor:$scale, OptionalAttr<I64Attr>:$ignore_index,
      OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$classes);
  let results = (outs Loom_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $scale (`ignore_index` $ignore_index^)?
    (`classes` $classes^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Loom_AttentionOp : Loom_Op<"attention", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Scaled dot-product attention, computed without its scores";
  let description = [{
    `softmax(select(mask, mask_value, scale * q k^T)) v` over the trailing
    two dimensions: `q` is `[..., Sq, D]`, `k` is `[..., Sk, D]`, `v` is
    `[..., Sk, Dv]`, with equal leading (batch) dimensions. Where the
    optional i1 `mask` is true a score is replaced by `mask_value` (default
    -inf: that key is ignored); the mask has the rank of `q`, its last two
    dimensions are `[Sq, Sk]` and each leading one is 1 (broadcast) or the
    batch size. Scores accumulate in f32 (f64 for f64) and are never
    stored, so the `[..., Sq, Sk]` tensors of the unfused form do not
    exist; the probabilities are rounded to the element type before they
    multiply `v`, as a tensor-core kernel does.

    The second result is each row's log-sum-exp of the scores (f32, f64 for
    f64), which `loom.attention_grad` needs to recompute the
    probabilities. A fully masked row with `mask_value` -inf gives NaN, as
    the unfused softmax does. Made from the unfused form by
    `loom-fuse-attention`.

    With `seq_major` the operands keep the layout the projections write,
    `[..., S, H, D]` (sequence before heads), instead of `[..., H, S, D]`:
    `q` is `[..., Sq, H, D]`, `k` `[..., Sk, H, D]`, `v` `[..., Sk, H, Dv]`,
    the output `[..., Sq, H, Dv]` and the log-sum-exp `[..., Sq, H]`. It is
    the attention of the operands with those two dimensions swapped, with
    the output swapped back, so the head transposes around the attention
    are not needed. The mask keeps the head-major form: rank of `q`,
    `[..., H or 1, Sq, Sk]`.

    ```mlir
    %o, %lse = loom.attention %q, %k, %v mask %causal scale 1.250000e-01
        : (tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>,
           tensor<8x12x1024x64xbf16>, tensor<1x1x1024x1024xi1>)
        -> (tensor<8x12x1024x64xbf16>, tensor<8x12x1024xf32>)
    %o2, %lse2 = loom.attention %q2, %k2, %v2 mask %causal
        scale 1.250000e-01 seq_major
        : (tensor<8x1024x12x64xbf16>, tensor<8x1024x12x64xbf16>,
           tensor<8x1024x12x64xbf16>, tensor<1x1x1024x1024xi1>)
        -> (tensor<8x1024x12x64xbf16>, tensor<8x1024x12xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$q, Loom_FloatTensor:$k,
                       Loom_FloatTensor:$v, Optional<Loom_BoolTensor>:$mask,
                       F64Attr:$scale,
                       DefaultValuedAttr<F64Attr,
                           "-::std::numeric_limits<double>::infinity()">
                           :$mask_value,
                       UnitAttr:$seq_major);
  let results = (outs Loom_FloatTensor:$output, Loom_FloatTensor:$logsumexp);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? `scale` $scale
    (`mask_value` $mask_value^)? (`seq_major` $seq_major^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad", [
    Pure, Loom_InferTypes,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Gradients of loom.attention with respect to q, k and v";
  let description = [{
    The backward of `loom.attention` (same `q`, `k`, `v`, `mask`, `scale`
    and `mask_value`) given the gradient `dout` of its output, its
    `logsumexp` result and the `output` itself. The probabilities are
    recomputed from the log-sum-exp, so nothing of size `[..., Sq, Sk]` is
    kept between the passes: with `delta = sum(dout * output)` over the
    last dimension (products in f32, f64 for f64, summed in f64),
    `p = exp(s - lse)`, `ds = p * (dout v^T - delta)` (0 where masked),
    `dq = scale * ds k`, `dk = scale * ds^T q`, `dv = p^T dout`, with `p`
    and `ds` rounded to the element type before those products. With
    `seq_major` every operand and result has the layout it has in
    `loom.attention ... seq_major`.

    Made by the gradient rule of `loom.attention`; it has no gradient of
    its own.

    ```mlir
    %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %dout, %lse, %o
        mask %causal scale 1.250000e-01
        : (tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>,
           tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>,
           tensor<8x12x1024xf32>, tensor<8x12x1024x64xbf16>,
           tensor<1x1x1024x1024xi1>)
        -> (tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>,
            tensor<8x12x1024x64xbf16>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$q, Loom_FloatTensor:$k,
                       Loom_FloatTensor:$v, Loom_FloatTensor:$dout,
                       Loom_FloatTensor:$logsumexp, Loom_FloatTensor:$output,
                       Optional<Loom_BoolTensor>:$mask, F64Attr:$scale,
                       DefaultValuedAttr<F64Attr,
                           "-::std::numeric_limits<double>::infinity()">
                           :$mask_value,
                       UnitAttr:$seq_major);
  let results = (outs Loom_FloatTensor:$dq, Loom_FloatTensor:$dk,
                      Loom_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $dout `,` $logsumexp `,` $output (`mask` $mask^)?
    `scale` $scale (`mask_value` $mask_value^)? (`seq_major` $seq_major^)?
    attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Training: parameter updates and optimizers
//===----------------------------------------------------------------------===//

def Loom_AssignOp : Loom_Op<"assign", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite]>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Sets the value a parameter has in the next step";
  let description = [{
    Stores `value` as the new value of the `loom.parameter` named by `name`.
    Every `loom.param` of the same function still reads the value the
    parameter had when the step began: the store takes effect when the step
    ends. A function assigns each parameter at most once. Bufferization
    writes the new value in place when nothing reads the parameter
    afterwards, and copies it otherwise.

    ```mlir
    loom.assign @fc1.weight, %updated : tensor<512x2048xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, Loom_Tensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

// Elementwise over the parameter (what ZeRO shards): one parallel factor per
// dimension of `param`, shared by `grad`, the states and every result;
// `step` is a scalar and maps to no factor.
class Loom_OptimizerUpdateOp<string mnemonic>
    : Loom_Op<mnemonic, [Pure, Loom_FactorRuleOpInterface]> {
  /// The optimizer's hyper-parameters, as attributes.
  dag hyperParameters = (ins);
  let arguments = !con((ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                            0DTensorOf<[F64]>:$step,
                            Variadic<Loom_FloatTensor>:$states),
                       hyperParameters);
  let results = (outs Loom_FloatTensor:$new_param,
                      Variadic<Loom_FloatTensor>:$new_states);
  let assemblyFormat = [{
    $param `,` $grad `,` $step (`,` $states^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = Loom_ElementwiseFactorRule;
}

def Loom_SGDUpdateOp : Loom_OptimizerUpdateOp<"sgd_update"> {
  let summary = "One torch.optim.SGD update of a parameter";
  let description = [{
    Returns the parameter after one step of stochastic gradient descent, and
    the new momentum buffer when `momentum` is not 0 (then `states` holds
    the buffer, zero before the first step). `step` is the 1-based number of
    this update. The semantics are exactly `torch.optim.SGD`'s:

    ```
    d = grad + weight_decay * param
    buf' = step == 1 ? d : momentum * buf + (1 - dampening) * d
    d = nesterov ? d + momentum * buf' : buf'      (with momentum)
    param' = param - lr * d
    ```

    Elementwise over the parameter, as its factor rule says: every
    dimension is parallel (what ZeRO shards) and `step` maps to no factor.

    ```mlir
    %w1, %buf1 = loom.sgd_update %w, %g, %step, %buf {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64}
        : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>)
    ```
  }];
  let hyperParameters = (ins F64Attr:$lr,
      DefaultValuedAttr<F64Attr, "0.0">:$momentum,
      DefaultValuedAttr<F64Attr, "0.0">:$dampening,
      DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
      UnitAttr:$nesterov);
}

def Loom_AdamWUpdateOp : Loom_OptimizerUpdateOp<"adamw_update"> {
  let summary = "One torch.optim.AdamW update of a parameter";
  let description = [{
    Returns the parameter after one AdamW step and the new first and second
    moments (`states` holds both, zero before the first step). `step` is the
    1-based number of this update. The semantics are exactly
    `torch.optim.AdamW`'s (without amsgrad):

    ```
    param = param * (1 - lr * weight_decay)
    m' = beta1 * m + (1 - beta1) * grad
    v' = beta2 * v + (1 - beta2) * grad * grad
    param' = param - lr / (1 - beta1^step) * m' / (sqrt(v') / sqrt(1 - beta2^step) + eps)
    ```

    Elementwise over the parameter, as its factor rule says: every
    dimension is parallel (what ZeRO shards) and `step` maps to no factor.

    ```mlir
    %w1, %m1, %v1 = loom.adamw_update %w, %g, %step, %m, %v {lr = 1.000000e-03 : f64}
        : (tensor<64xf32>, tensor<64xf32>, tensor<f64>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let hyperParameters = (ins F64Attr:$lr,
      DefaultValuedAttr<F64Attr, "0.9">:$beta1,
      DefaultValuedAttr<F64Attr, "0.999">:$beta2,
      DefaultValuedAttr<F64Attr, "1.0e-8">:$eps,
      DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
}

//===----------------------------------------------------------------------===//
// Communication between ranks
//===----------------------------------------------------------------------===//

// Lists of world ranks: `[[0, 1], [2, 3]]`.
def Loom_RankListsAttr : TypedArrayAttrBase<DenseI64ArrayAttr,
                                            "lists of world ranks">;

// Factor rules of the collectives describe each rank's tensors: every
// dimension that is not the collective's axis is parallel (each rank moves
// its own part of it); a gathered, scattered or exchanged axis needs
// replication, with one factor for the input and one for the result.
class Loom_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits, [
        // Every rank of a group must issue the same collectives in the same
        // order: none may be removed, merged or reordered across another.
        MemoryEffects<[MemRead, MemWrite]>,
        DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>])> {
  code commonDescription = [{
    A function may run on several ranks at once (all of them, or those its
    `loom.ranks` attribute lists; the module's `loom.world_size` says how
    many there are). `groups` partitions the ranks that run the op into
    groups of equal size, each a sorted list of world ranks; a rank's group
    rank is its position in its group. Collectives are never removed,
    merged or reordered: every rank of a group must issue the same ones in
    the same order.

    The factor rule describes each rank's tensors: the dimensions other
    than the collective's axis are parallel, and a gathered, scattered or
    exchanged axis needs replication.
  }];
}

def Loom_AllReduceOp : Loom_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Combines a tensor across the ranks of each group";
  let description = !strconcat([{
    Every rank of a group receives the elementwise `reduction` (sum, max or
    avg, the last for floats only) of the group's inputs.

    ```mlir
    %sum = loom.all_reduce sum %partial groups [[0, 1], [2, 3]]
        : tensor<8x768xf32>
    ```
  }], commonDescription);
  let arguments = (ins Loom_CollectiveReduction:$reduction,
                       Loom_NumericTensor:$input, Loom_RankListsAttr:$groups);
  let results = (outs Loom_NumericTensor:$result);
  let assemblyFormat = [{
    $reduction $input `groups` custom<RankLists>($groups) attr-dict `:`
    type($input)
  }];
  let hasVerifier = 1;
}

def Loom_AllGatherOp : Loom_CollectiveOp<"all_gather"> {
  let summary = "Concatenates the ranks' tensors along an axis";
  let description = !strconcat([{
    Every rank of a group receives the group's inputs concatenated along
    `axis` in group-rank order: the result's `axis` is the group size times
    the input's.

    ```mlir
    %full = loom.all_gather %shard axis 1 groups [[0, 1]]
        : tensor<8x384xf32> -> tensor<8x768xf32>
    ```
  }], commonDescription);
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis,
                       Loom_RankListsAttr:$groups);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis `groups` custom<RankLists>($groups) attr-dict `:`
    type($input) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Whether the op moves contiguous blocks: every dim before `axis` is 1
    /// (what the runtime's collective does; see
    /// -loom-decompose-collectives).
    bool movesWholeBlocks();
  }];
  let hasVerifier = 1;
}

def Loom_ReduceScatterOp : Loom_CollectiveOp<"reduce_scatter"> {
  let summary = "Combines tensors across ranks and splits the result";
  let description = !strconcat([{
    The group's inputs are combined elementwise by `reduction`, then split
    into equal pieces along `axis`: group rank i receives piece i.

    ```mlir
    %piece = loom.reduce_scatter sum %grad axis 0 groups [[0, 1]]
        : tensor<1024x768xf32> -> tensor<512x768xf32>
    ```
  }], commonDescription);
  let arguments = (ins Loom_CollectiveReduction:$reduction,
                       Loom_NumericTensor:$input, I64Attr:$axis,
                       Loom_RankListsAttr:$groups);
  let results = (outs Loom_NumericTensor:$result);
  let assemblyFormat = [{
    $reduction $input `axis` $axis `groups` custom<RankLists>($groups)
    attr-dict `:` type($input) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Whether the op moves contiguous blocks: every dim before `axis` is 1
    /// (what the runtime's collective does; see
    /// -loom-decompose-collectives).
    bool movesWholeBlocks();
  }];
  let hasVerifier = 1;
}

def Loom_CollectiveBroadcastOp : Loom_CollectiveOp<"collective_broadcast",
    [SameOperandsAndResultType]> {
  let summary = "Sends one rank's tensor to every rank of its group";
  let description = !strconcat([{
    Every rank of a group receives the input of its group rank `root`
    (`loom.broadcast` is the shape broadcast; this is its cross-rank
    counterpart).

    ```mlir
    %w = loom.collective_broadcast %init root 0 groups [[0, 1, 2, 3]]
        : tensor<768xf32>
    ```
  }], commonDescription);
  let arguments = (ins Loom_Tensor:$input, I64Attr:$root,
                       Loom_RankListsAttr:$groups);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `root` $root `groups` custom<RankLists>($groups) attr-dict `:`
    type($input)
  }];
  let hasVerifier = 1;
}

def Loom_AllToAllOp : Loom_CollectiveOp<"all_to_all",
    [SameOperandsAndResultType]> {
  let summary = "Exchanges equal pieces of a tensor between all ranks";
  let description = !strconcat([{
    Each input splits into group-size equal pieces along dim 0; piece j of
    group rank i becomes piece i of group rank j's result.

    ```mlir
    %routed = loom.all_to_all %tokens groups [[0, 1, 2, 3]]
        : tensor<64x768xf32>
    ```
  }], commonDescription);
  let arguments = (ins Loom_Tensor:$input, Loom_RankListsAttr:$groups);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `groups` custom<RankLists>($groups) attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Loom_SendOp : Loom_Op<"send", [MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Sends a tensor to another rank";
  let description = [{
    Each `[source, target]` pair of `pairs` sends from world rank `source`
    to world rank `target`, which receives it with a `loom.recv` of the same
    pair and `tag`. Every rank that runs the op must be the source of one
    pair. Sends and receives with the same pair and tag match in order.

    A send completes once its target has taken the data, so what it reads
    stays allocated until then. `released_by T` says when that is known:
    once this rank has waited for its `loom.recv` with tag `T` from the
    target, which the target sends only after it read this send's data
    (loom-split-stages proves it). Without it, the input lives to the end
    of the step.

    ```mlir
    loom.send %activations to [[0, 1], [2, 3]] tag 0 released_by 4
        : tensor<8x768xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_RankListsAttr:$pairs,
                       I64Attr:$tag, OptionalAttr<I64Attr>:$released_by);
  let assemblyFormat = [{
    $input `to` custom<RankLists>($pairs) `tag` $tag
    (`released_by` $released_by^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Loom_RecvOp : Loom_Op<"recv", [MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<Loom_FactorRuleOpInterface>]> {
  let summary = "Receives a tensor from another rank";
  let description = [{
    The counterpart of `loom.send`: every rank that runs the op must be the
    target of one `[source, target]` pair, and receives what its source
    sends with the same `tag`.

    ```mlir
    %activations = loom.recv from [[0, 1], [2, 3]] tag 0 : tensor<8x768xf32>
    ```
  }];
  let arguments = (ins Loom_RankListsAttr:$pairs, I64Attr:$tag);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    `from` custom<RankLists>($pairs) `tag` $tag attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

// The kernel-level ops, made by loom-lower-to-plan's fusion passes.
include "loom/Dialect/Loom/IR/LoomKernelOps.td"

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
