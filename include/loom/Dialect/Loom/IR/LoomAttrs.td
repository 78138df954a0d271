//===- LoomAttrs.td - Loom enums and attributes ------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMATTRS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMATTRS_TD

include "loom/Dialect/Loom/IR/LoomDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Loom_CompareDirection : I32EnumAttr<"CompareDirection",
    "comparison direction", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU approximation", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_MatmulActivation : I32EnumAttr<"MatmulActivation",
    "activation applied by a GEMM epilogue", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"relu", 1>,
      I32EnumAttrCase<"gelu_tanh", 2>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_MatmulOperand : I32EnumAttr<"MatmulOperand",
    "an operand of a matmul", [
      I32EnumAttrCase<"lhs", 0>, I32EnumAttrCase<"rhs", 1>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_LossReduction : I32EnumAttr<"LossReduction",
    "how a loss reduces over samples", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_CollectiveReduction : I32EnumAttr<"CollectiveReduction",
    "how a collective combines the ranks' values", [
      I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"avg", 2>]> {
  let cppNamespace = "::mlir::loom";
}

def Loom_PartialKind : I32EnumAttr<"PartialKind",
    "pending cross-device reduction of a sharded value", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::loom";
}

//===----------------------------------------------------------------------===//
// Mesh and sharding
//===----------------------------------------------------------------------===//

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Loom_MeshAttr : Loom_Attr<"Mesh", "mesh"> {
  let summary = "A logical device mesh with named axes";
  let description = [{
    A row-major grid of devices whose axes have names and sizes; the device
    count is the product of the sizes. Axis names are identifiers and unique.

    ```mlir
    #loom.mesh<dp = 2, pp = 2, tp = 4>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "axis names">:$axisNames,
    ArrayRefParameter<"int64_t", "axis sizes">:$axisSizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Index of the axis called `name`, if any.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name) const;
    /// Size of the axis called `name`; the axis must exist.
    int64_t getAxisSize(::llvm::StringRef name) const;
    /// Number of devices: the product of all axis sizes.
    int64_t getNumDevices() const;
  }];
}

def Loom_ShardingAttr : Loom_Attr<"Sharding", "sharding"> {
  let summary = "How a tensor is distributed over the axes of a mesh";
  // Sharding literals end in `}]`, which would close a [{ }] block, so the
  // example lines are plain strings.
  let description = [{
    Refers to a `loom.mesh` symbol and lists, for every tensor dimension, the
    mesh axes the dimension is split over (major to minor; `{}` means the
    dimension is replicated). An optional `partial<sum>` or `partial<max>`
    names mesh axes over which the per-device values still have to be
    reduced: a value is never partial implicitly.

    ```mlir
    // rows split over dp, columns over tp
}] # "    #loom.sharding<@mesh, [{dp}, {tp}]>\n" # [{
    // rows split over dp; every tp rank holds a partial sum of the value
}] # "    #loom.sharding<@mesh, [{dp}, {}], partial<sum> {tp}>\n" # [{
    ```

    A dimension is *closed* unless its axes end in `?` (`{?}`, `{tp, ?}`):
    sharding propagation never adds an axis to a closed dimension, so a
    sharding whose dimensions are all `{}` pins a value replicated, while
    `{?}` as dimension 0 lets propagation split it.

    A mesh axis may appear only once in a sharding. Where the sharding is
    attached to a value, the mesh must exist, know every axis, and the
    product of the axis sizes must divide the static dimension it splits.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    "::mlir::ArrayAttr":$dims,
    "::mlir::loom::PartialKind":$partialKind,
    "::mlir::ArrayAttr":$partialAxes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$mesh,
                     "::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>>":$dimAxes,
                     CArg<"::mlir::loom::PartialKind", "::mlir::loom::PartialKind::none">:$partialKind,
                     CArg<"::llvm::ArrayRef<::llvm::StringRef>", "{}">:$partialAxes)>
  ];
  let extraClassDeclaration = [{
    /// Number of tensor dimensions this sharding describes.
    unsigned getRank() const { return getDims().size(); }
    /// Mesh axes that split dimension `dim`, major to minor.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// Whether dimension `dim` is open (`{?}`, `{tp, ?}`): sharding
    /// propagation may split it further. Other dimensions are closed.
    bool isDimOpen(unsigned dim) const;
    /// Mesh axes over which the value is pending reduction.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxesNames() const;
    /// True if no dimension is split and nothing is partial.
    bool isFullyReplicated() const;
  }];
}

//===----------------------------------------------------------------------===//
// Weights stored outside the module
//===----------------------------------------------------------------------===//

def Loom_ExternalDataAttr : Loom_Attr<"ExternalData", "external_data"> {
  let summary = "Tensor bytes that live in a file next to the module";
  let description = [{
    Names `length` bytes at byte `offset` of the file `path`, in the raw
    little-endian layout of ONNX external data (one byte per `i1`). Large
    models keep their weights in such files rather than in the module, so
    that importing, planning and partitioning never copy them; the runtime
    maps the file when it loads the parameter. A relative `path` is relative
    to the working directory of the tool that reads it.

    ```mlir
    loom.parameter @wte trainable : tensor<50257x1600xf32>
        = #loom.external_data<"gpt.onnx.data", offset = 0, length = 321644800>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"file holding the bytes">:$path,
    "int64_t":$offset,
    "int64_t":$length);
  let assemblyFormat = [{
    `<` $path `,` `offset` `=` $offset `,` `length` `=` $length `>`
  }];
  let genVerifyDecl = 1;
}

def Loom_CastOfAttr : Loom_Attr<"CastOf", "cast_of"> {
  let summary = "another parameter's initial value, narrowed to bf16";
  let description = [{
    The initial value of a parameter that holds a narrower copy of the
    parameter `source`: `source`'s initial value converted to this
    parameter's element type exactly as `loom.cast` converts it (f32 or f64
    to bf16, rounded once to nearest even). `loom-cache-parameter-casts`
    makes such copies so that a bf16 GEMM reads its weight without a cast
    kernel per step; the plan stores the converted bytes, which are
    computed when the plan is emitted (the source may be external data).

    ```mlir
    loom.parameter @fc1.weight trainable : tensor<512x2048xf32> = dense<0.5> : tensor<512x2048xf32>
    loom.parameter @fc1.weight.bf16 : tensor<512x2048xbf16> = #loom.cast_of<@fc1.weight>
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$source);
  let assemblyFormat = "`<` $source `>`";
}

def Loom_SliceOfAttr : Loom_Attr<"SliceOf", "slice_of"> {
  let summary = "a block of another parameter, trained as a parameter of its own";
  let description = [{
    The initial value of a parameter that is the block of parameter
    `source` starting at `offsets` (its own type gives the block's shape
    and must have the source's element type and rank). Such a piece is
    trained, checkpointed and sharded as a parameter of its own, while the
    plan names its weights after the source, with their place in it (plan
    format 4's `slice`), so `--save` writes the source whole.
    `loom-split-fused-projections` makes them: the query, key and value
    blocks of a fused QKV weight become three pieces, which tensor
    parallelism splits by heads each. A block may reach past the end of its
    source (it must start inside it): the part beyond is zeros, which is how
    `loom-pad-vocabulary` pads a vocabulary to a multiple of tp.

    ```mlir
    loom.parameter @qkv trainable : tensor<96x32xf32> = dense<0.5> : tensor<96x32xf32>
    loom.parameter @qkv.k trainable : tensor<32x32xf32> = #loom.slice_of<@qkv, [32, 0]>
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$source,
                        ArrayRefParameter<"int64_t", "block offsets">:$offsets);
  let assemblyFormat = "`<` $source `,` `[` $offsets `]` `>`";
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMATTRS_TD
