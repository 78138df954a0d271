//===- Passes.td - Lowering of loom functions to runtime plans -*- tablegen -*-===//
//
// The conversion from loom functions to the plan dialect, in pipeline order
// after `loom-fuse-elementwise`: kernel selection, then bufferization. Memory
// planning is a plan-dialect pass (include/loom/Dialect/Plan/Transforms).
// lib/Conversion/LoomToPlan holds one file per pass and the
// `loom-lower-to-plan` pipeline.
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
    Option<"target", "target", "::mlir::loom::KernelTarget",
           /*default=*/"::mlir::loom::KernelTarget::CPU",
           "The backend whose kernels are chosen (cpu)", [{::llvm::cl::values(
             clEnumValN(::mlir::loom::KernelTarget::CPU, "cpu",
                        "the CPU backend's kernels, which the CUDA backend "
                        "also runs"))}]>,
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
    value lives either in the arena or in the weights. An all-reduce of a
    value nothing else reads, in an alloc of its own, writes its result in
    place into that buffer (every engine reduces in place). Arguments and
    results
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

#endif // LOOM_CONVERSION_PASSES_TD
