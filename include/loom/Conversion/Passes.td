//===- Passes.td - Lowering of loom functions to runtime plans -*- tablegen -*-===//
//
// The passes of `loom-lower-to-plan`, in pipeline order after
// `loom-fuse-elementwise`: kernel selection, bufferization, memory planning.
// lib/Conversion/LoomToPlan holds one file per pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomSelectKernels : Pass<"loom-select-kernels", "::mlir::func::FuncOp"> {
  let summary = "Choose the runtime kernel of every compute op";
  let description = [{
    Annotates every compute op with the runtime kernel that will execute it
    (`plan.kernel`) and that kernel's attributes (`plan.kernel_attrs`),
    translated from the op's attributes (docs/design/plan-format.md lists
    the kernels). Ops the target has no kernel for are errors at their
    location: element types the backend lacks (the CPU backend computes in
    f32 and f64), unfused elementwise ops (run `loom-fuse-elementwise`
    first), sharding annotations not yet partitioned away.

    Input:
    ```mlir
    %y = loom.softmax %x axis 1 : tensor<8x16xf32>
    ```
    Output:
    ```mlir
    %y = loom.softmax %x axis 1 {plan.kernel = "softmax",
                                 plan.kernel_attrs = {axis = 1 : i64}} : tensor<8x16xf32>
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The backend whose kernels are chosen (cpu)">,
  ];
  let dependentDialects = ["::mlir::loom::plan::PlanDialect"];
}

def LoomBufferize : Pass<"loom-bufferize", "::mlir::ModuleOp"> {
  let summary = "Turn tensors into arena buffers and ops into plan.kernel";
  let description = [{
    Rewrites every function whose compute ops have kernels selected into the
    `plan` dialect: each result gets a `plan.alloc` and its op becomes a
    `plan.kernel` writing into it (destination-passing style); reshapes
    become `plan.view`s of their input's buffer (no copy); parameters become
    `plan.weight`s and non-splat constants become parameters too, so every
    value lives either in the arena or in the weights. Arguments and results
    become `plan.input` / `plan.output` ops named after the graph's
    `onnx.name` (else `arg<i>` / `result<i>`), leaving `() -> ()`.

    Input:
    ```mlir
    func.func @f(%x: tensor<8x16xf32> {onnx.name = "x"}) -> (tensor<8x16xf32> {onnx.name = "y"}) {
      %y = loom.softmax %x axis 1 {plan.kernel = "softmax", plan.kernel_attrs = {axis = 1 : i64}} : tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    }
    ```
    Output:
    ```mlir
    func.func @f() {
      %0 = plan.input "x" : memref<8x16xf32>
      %1 = plan.alloc : memref<8x16xf32>
      plan.kernel "softmax" ins(%0 : memref<8x16xf32>) outs(%1 : memref<8x16xf32>) attrs {axis = 1 : i64}
      plan.output "y", %1 : memref<8x16xf32>
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::loom::plan::PlanDialect"];
}

def LoomPlanMemory : Pass<"loom-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Place every buffer in one arena by liveness";
  let description = [{
    Static memory planning. A buffer lives from its `plan.input` or
    `plan.alloc` to its last use, through the `plan.view`s of it; outputs
    live to the end. Buffers are placed greedily, largest first, at the
    lowest 64-byte aligned offset that no buffer with an overlapping
    lifetime occupies, so buffers that are never live together share bytes.
    Sets each buffer's `offset` and the function's `plan.arena_size`, the
    planned peak, known before anything runs.

    Input:
    ```mlir
    %0 = plan.input "x" : memref<16xf32>
    %1 = plan.alloc : memref<16xf32>
    ```
    Output:
    ```mlir
    func.func @f() attributes {plan.arena_size = 128 : i64} {
      %0 = plan.input "x" offset 0 : memref<16xf32>
      %1 = plan.alloc offset 64 : memref<16xf32>
    ```
  }];
  let options = [
    Option<"printSummary", "print-summary", "bool", /*default=*/"false",
           "Emit a remark with the arena size and the sum of all buffers">,
  ];
}

#endif // LOOM_CONVERSION_PASSES_TD
