//===- PlanOps.td - The plan dialect -----------------------*- tablegen -*-===//
//
// The buffer-level form of a loom function, one step above the runtime plan
// file: every tensor is a memref in the rank's arena (or a weight), every
// compute op is a `plan.kernel` writing into buffers it is given.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_PLAN_IR_PLANOPS_TD
#define LOOM_DIALECT_PLAN_IR_PLANOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlir::loom::plan";
  let summary = "Buffers and kernels of a runtime plan";
  let description = [{
    `loom-bufferize` turns a loom function whose ops have kernels selected
    into this form; `loom-plan-memory` gives every buffer its arena offset;
    `loom-translate --emit-plan` (or `loom-run --emit-plan`) writes the
    result as a plan file (docs/design/plan-format.md), almost one line per
    op. The function has no arguments or results: graph inputs and outputs
    are `plan.input` / `plan.output` ops, so that they are planned like any
    other buffer.
  }];
  let extraClassDeclaration = [{
    /// The function attribute that holds the planned arena size in bytes.
    static constexpr ::llvm::StringLiteral kArenaSizeAttrName =
        "plan.arena_size";
    /// The alignment of every buffer in the arena, in bytes.
    static constexpr int64_t kAlignment = 64;
    /// Bytes of a buffer's elements, as the runtime stores them (`i1` takes
    /// one byte).
    static int64_t getBufferBytes(::mlir::MemRefType type);
  }];
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_Buffer : MemRefRankOf<[AnyType], [0, 1, 2, 3, 4, 5, 6, 7, 8]>;

def Plan_InputOp : Plan_Op<"input", [MemoryEffects<[MemAlloc]>]> {
  let summary = "The arena buffer that receives a graph input";
  let description = [{
    The runtime copies the input named `name` into this buffer before the
    first kernel runs. `offset` (bytes into the arena) is set by
    `loom-plan-memory`. `rows`, for a training step's data input, says
    which rows of the step's global batch the buffer holds: one first-row
    offset per rank that runs the function, in its `loom.ranks` order
    (bufferization takes it from the argument's `loom.batch_offsets`).

    ```mlir
    %idx = plan.input "idx" offset 0 : memref<8x128xi64>
    %x = plan.input "x" rows [0, 4] : memref<4x32xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<DenseI64ArrayAttr>:$rows);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = [{
    $name (`offset` $offset^)? (`rows` $rows^)? attr-dict `:` type($buffer)
  }];
}

def Plan_AllocOp : Plan_Op<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "A buffer in the arena";
  let description = [{
    A buffer for one tensor. It lives from here to its last use (through
    `plan.view`s too); `loom-plan-memory` places buffers whose lifetimes
    overlap at disjoint `offset`s.

    ```mlir
    %0 = plan.alloc offset 4096 : memref<8x128x768xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "(`offset` $offset^)? attr-dict `:` type($buffer)";
}

def Plan_WeightOp : Plan_Op<"weight", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The buffer of a `loom.parameter`";
  let description = [{
    Weights live in the plan's data section, outside the arena. A kernel may
    write one (a trained parameter or optimizer state, from `loom.assign`):
    the plan then marks it `state`, and the runtime keeps its value from one
    step to the next. Its type is the parameter's, or where the parameter
    has a sharding, one rank's shard of it (a partitioned function reads
    its own shard): the emitter then writes the rank's slice of the
    parameter as the weight (plan-format.md, `slice`).

    ```mlir
    %w = plan.weight @wte : memref<64x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$name attr-dict `:` type($buffer)";
}

def Plan_ViewOp : Plan_Op<"view", [Pure]> {
  let summary = "The same bytes, or their prefix, with another shape";
  let description = [{
    A reshape of the source buffer, or (a smaller result) its leading
    bytes: a `loom.slice` that keeps a row-major prefix of its input (the
    rows a padded dimension adds are cut off) reads them in place.

    ```mlir
    %v = plan.view %0 : memref<8x128x768xf32> to memref<1024x768xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$source);
  let results = (outs Plan_Buffer:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The `plan.input`, `plan.alloc` or `plan.weight` behind `buffer`.
    static ::mlir::Value getRoot(::mlir::Value buffer);
  }];
}

def Plan_KernelOp : Plan_Op<"kernel", [AttrSizedOperandSegments]> {
  let summary = "Runs a kernel of the runtime";
  let description = [{
    Runs the runtime kernel `kernel` (see docs/design/plan-format.md), which
    reads `ins` and writes `outs`. `kernel_attrs` (printed after `attrs`)
    are the kernel's attributes: integers, floats, integer arrays and
    strings, and for the collectives (all_reduce, all_gather,
    reduce_scatter, broadcast, all_to_all, send, recv) lists of world ranks
    (`groups`, `pairs`), which become each rank's group or peer when the plan
    is written. Only `send` writes no outputs. An `elementwise` kernel has a
    body: the fused loom ops, on tensors of the inputs' types, ending in a
    `loom.yield` of one value per output.

    ```mlir
    plan.kernel "matmul" ins(%x, %w : memref<8x32xf32>, memref<32x64xf32>)
        outs(%y : memref<8x64xf32>) attrs {transpose_rhs = 0 : i64}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<Plan_Buffer>:$inputs,
                       Variadic<Plan_Buffer>:$outputs,
                       DefaultValuedAttr<DictionaryAttr, "{}">:$kernel_attrs);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    $kernel (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    (`outs` `(` $outputs^ `:` type($outputs) `)`)?
    (`attrs` $kernel_attrs^)? ($body^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_OutputOp : Plan_Op<"output"> {
  let summary = "Marks a buffer as the graph output `name`";
  let description = [{
    The runtime reads the buffer after the last kernel, so it lives to the
    end of the function.

    ```mlir
    plan.output "logits", %3 : memref<8x128x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Plan_Buffer:$buffer);
  let assemblyFormat = "$name `,` $buffer attr-dict `:` type($buffer)";
}

#endif // LOOM_DIALECT_PLAN_IR_PLANOPS_TD
