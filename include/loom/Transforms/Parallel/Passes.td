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

#endif // LOOM_TRANSFORMS_PARALLEL_PASSES_TD
