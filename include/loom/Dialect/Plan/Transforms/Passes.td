//===- Passes.td - Plan dialect passes ---------------------*- tablegen -*-===//
//
// Passes on the plan dialect (buffers, kernels, collectives): what runs after
// bufferization and before the emitter (lib/Target/Plan) writes the plan.
// lib/Dialect/Plan/Transforms holds one file per pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_TD
#define LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomPlanMemory : Pass<"loom-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Place every buffer in one arena by liveness";
  let description = [{
    Static memory planning. A buffer lives from its `plan.input` or
    `plan.alloc` to its last use, through the `plan.view`s of it; outputs
    live to the end, and so do the buffers a `send` reads (it completes
    when the receiver takes them), unless the send is `released_by` a
    receive (tag) from its target that the target sends only after it read
    them: those live until that receive's result is first read, and the
    attribute is dropped. The buffers of any other collective live
    at least until its result is first read or the next collective is
    posted, whichever is first: the runtime waits for a collective only
    where a later instruction touches its buffers, so that is how far its
    communication may run while kernels go on (data parallelism's gradient
    buckets overlapping the backward pass), and the bound keeps about one
    collective in flight. An `elementwise` kernel with one output writes it
    in place of an input of the same type whose last use it is (read
    directly, not also through a view), where it is the output's first use:
    the two take the same bytes (the runtimes compute each block before
    storing it), so a sum over microbatches keeps one buffer, not two at
    each step. Buffers are placed greedily, largest first, at the
    lowest 64-byte aligned offset that no buffer with an overlapping
    lifetime occupies, so buffers that are never live together share bytes.
    Sets each buffer's `offset` and the function's `plan.arena_size`, the
    planned peak, known before anything runs.

    The search for the lowest free offset looks only at buffers placed in
    windows of positions around the lifetime (`window-positions` wide,
    then four times as wide, up to the whole body), each keeping its
    buffers sorted in chunks of `chunk-buffers`; the placement is the same
    whatever their sizes, which tests vary.

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
    Option<"windowPositions", "window-positions", "unsigned",
           /*default=*/"1024",
           "Positions in the narrowest window of the search's index (its "
           "speed only; at least 1)">,
    Option<"chunkBuffers", "chunk-buffers", "unsigned", /*default=*/"512",
           "Placed buffers per chunk of a window's sorted list (its speed "
           "only; at least 2)">,
  ];
}

#endif // LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_TD
