// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=2 erase-sources=true" "--loom-build-schedule=ranks=2 microbatches=2" --loom-split-stages %S/Inputs/split-stages-model.mlir 2>/dev/null | FileCheck %s
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=2 erase-sources=true" "--loom-build-schedule=ranks=2 microbatches=2 schedule=zb-h1" --loom-split-stages %S/Inputs/split-stages-model.mlir 2>/dev/null | FileCheck %s --check-prefix=ZB
// RUN: loom-opt --split-input-file --verify-diagnostics --loom-split-stages %s
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=2 erase-sources=true" "--loom-build-schedule=ranks=2 microbatches=2" --loom-split-stages %S/Inputs/split-stages-model.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=PREDICT
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=2 erase-sources=true" "--loom-build-schedule=ranks=2 microbatches=2" --loom-split-stages=shared-cores=1 %S/Inputs/split-stages-model.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SHARED
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=2 erase-sources=true" --loom-annotate-shardings=mesh=dp=2 --loom-data-parallel=axis=dp --loom-propagate-sharding=zero=1 --loom-partition "--loom-build-schedule=ranks=2 microbatches=2" --loom-split-stages %S/Inputs/split-stages-model.mlir 2>/dev/null | FileCheck %s --check-prefix=TIED

// The tied @w0 under ZeRO-1 over dp 2: both stages update their shard of
// it with the same reduced gradient, and both gather the updated shards
// and store the whole @w0. (The gather used to go only where the larger
// operand's last stage was, so the first stage kept its old @w0 and the
// zoo's BERT, whose decoder reuses its word embeddings, drifted from one
// device.)
// TIED-LABEL: func.func @train_step_rank0(
// TIED-SAME:    attributes {loom.ranks = array<i64: 0, 1>}
// TIED:         %[[NEW0:.*]] = loom.sgd_update
// TIED-NEXT:    %[[WHOLE0:.*]] = loom.all_gather %[[NEW0]] axis 0 groups {{\[\[}}0, 1]]
// TIED-NEXT:    loom.assign @w0, %[[WHOLE0]] : tensor<8x8xf32>
// TIED-LABEL: func.func @train_step_rank1(
// TIED-SAME:    attributes {loom.ranks = array<i64: 2, 3>}
// TIED:         loom.assign @w0, %{{.*}} : tensor<8x8xf32>

// Before launch, the schedule replayed with the cost model's time of each
// stage's forward and backward: 1F1B's first stage holds the activations
// of both microbatches at once (each stage's forward keeps two [2, 8] f32
// results for its backward, 128 bytes), the last stage those of one.
// PREDICT: remark: pipeline 1f1b on 2 ranks, 2 microbatches (cost model): step {{[0-9.e-]+}} ms, bubble {{[0-9.]+}}% ({{[0-9.]+}}% between each rank's first and last action, as a trace measures it); per stage, forward/backward ms and peak activations: s0 {{[0-9.e-]+}}/{{[0-9.e-]+}} ms, 2 x 128 B, s1 {{[0-9.e-]+}}/{{[0-9.e-]+}} ms, 1 x 128 B
//
// Ranks that share one core (shared-cores=1) are replayed on one clock:
// some rank computes from the first action to the last, so the step is all
// the work and the ranks' bubble as a trace measures it only their waits.
// SHARED: remark: pipeline 1f1b on 2 ranks, 2 microbatches sharing 1 cores (cost model): step {{[0-9.e-]+}} ms, bubble {{[0-9.]+}}%

// 1F1B on two ranks, two microbatches. Rank 0 runs the first layer of both
// microbatches (F0.0 F0.1), each sending its residual stream to rank 1 as
// soon as it is made, then the backward of each (B0.0 B0.1), each
// receiving its gradient just before the op that reads it. The head reuses @w0, so rank 0's
// share of @w0's gradient goes to rank 1, which sums the shares as one
// device does (per microbatch, then over microbatches) and sends the sum
// back: both ranks update their copy of @w0 alike. Each rank keeps its
// update count; the last stage's rank returns the loss. Each send is
// released by the first receive from its target that the target sends
// after reading it (a microbatch's activation by its gradient), so that
// its buffer need not live to the end of the step; the last one has none.
// CHECK-LABEL: func.func @train_step_rank0(%arg0: tensor<4x8xf32>)
// CHECK-SAME:    attributes {loom.ranks = array<i64: 0>}
// CHECK:         %[[X0:.*]] = loom.slice %arg0 [0:2, 0:8]
// CHECK:         %[[H0:.*]] = loom.add %[[X0]], %{{.*}} : tensor<2x8xf32>
// CHECK-NEXT:    loom.send %[[H0]] to {{\[\[}}0, 1]] tag 0 released_by 0 : tensor<2x8xf32>
// CHECK:         %[[X1:.*]] = loom.slice %arg0 [2:4, 0:8]
// CHECK:         %[[H1:.*]] = loom.add %[[X1]], %{{.*}} : tensor<2x8xf32>
// CHECK-NEXT:    loom.send %[[H1]] to {{\[\[}}0, 1]] tag 2 released_by 1 : tensor<2x8xf32>
// CHECK:         %[[G0:.*]] = loom.recv from {{\[\[}}1, 0]] tag 0 : tensor<2x8xf32>
// CHECK-NEXT:    %[[M0:.*]] = loom.select %{{.*}}, %[[G0]], %{{.*}}
// CHECK-NEXT:    %[[W0G0:.*]] = loom.matmul %[[X0]], %[[M0]] transpose_lhs
// CHECK-NEXT:    loom.send %[[W0G0]] to {{\[\[}}0, 1]] tag 1 released_by 2 : tensor<8x8xf32>
// CHECK:         loom.recv from {{\[\[}}1, 0]] tag 1 : tensor<2x8xf32>
// CHECK:         loom.send %{{.*}} to {{\[\[}}0, 1]] tag 3 released_by 2 : tensor<8x8xf32>
// CHECK:         %[[SUM:.*]] = loom.recv from {{\[\[}}1, 0]] tag 2 : tensor<8x8xf32>
// CHECK-NEXT:    %[[NEW:.*]] = loom.sgd_update %{{.*}}, %[[SUM]]
// CHECK-NEXT:    loom.assign @w0, %[[NEW]]
// CHECK-NEXT:    loom.assign @optimizer.step
// CHECK-NEXT:    return{{$}}
// CHECK-LABEL: func.func @train_step_rank1(%arg0: tensor<4x8xf32>) -> (tensor<f32> {onnx.name = "loss"})
// CHECK-SAME:    attributes {loom.ranks = array<i64: 1>}
// CHECK-NEXT:    %[[W1:.*]] = loom.param @w1
// CHECK-NEXT:    %[[R0:.*]] = loom.recv from {{\[\[}}0, 1]] tag 0 : tensor<2x8xf32>
// CHECK-NEXT:    loom.matmul %[[R0]], %[[W1]]
// CHECK:         loom.send %{{.*}} to {{\[\[}}1, 0]] tag 0 released_by 1 : tensor<2x8xf32>
// CHECK:         loom.recv from {{\[\[}}0, 1]] tag 2 : tensor<2x8xf32>
// CHECK:         loom.send %{{.*}} to {{\[\[}}1, 0]] tag 1 released_by 3 : tensor<2x8xf32>
// CHECK:         %[[S0:.*]] = loom.recv from {{\[\[}}0, 1]] tag 1 : tensor<8x8xf32>
// CHECK-NEXT:    %[[M0:.*]] = loom.add %{{.*}}, %[[S0]] : tensor<8x8xf32>
// CHECK-NEXT:    %[[S1:.*]] = loom.recv from {{\[\[}}0, 1]] tag 3 : tensor<8x8xf32>
// CHECK-NEXT:    %[[M1:.*]] = loom.add %{{.*}}, %[[S1]] : tensor<8x8xf32>
// CHECK-NEXT:    %[[ACC:.*]] = loom.add %[[M0]], %[[M1]] {loom.gradient_accumulation}
// CHECK:         %[[MEAN:.*]] = loom.mul %[[ACC]], %{{.*}} : (tensor<8x8xf32>, tensor<f32>)
// CHECK-NEXT:    loom.send %[[MEAN]] to {{\[\[}}1, 0]] tag 2 : tensor<8x8xf32>
// CHECK:         loom.sgd_update %{{.*}}, %[[MEAN]]
// CHECK:         loom.assign @w0
// CHECK-NEXT:    loom.assign @w1
// CHECK-NEXT:    loom.assign @optimizer.step
// CHECK-NEXT:    return %{{.*}} : tensor<f32>
// CHECK-NOT:   loom.stage
// CHECK-NOT:   loom.microbatch

// ZB-H1 splits each backward in two: B makes the input gradient (sent at
// once), W the weight gradients, which the last rank defers until both
// microbatches' B are done (F1.0 B1.0 F1.1 B1.1 W1.0 W1.1).
// ZB-LABEL: func.func @train_step_rank1
// ZB:         loom.send %{{.*}} to {{\[\[}}1, 0]] tag 0 {{.*}}: tensor<2x8xf32>
// ZB-NOT:     transpose_lhs
// ZB:         loom.send %{{.*}} to {{\[\[}}1, 0]] tag 1 {{.*}}: tensor<2x8xf32>
// ZB-NEXT:    loom.matmul {{.*}} transpose_lhs
// ZB-NEXT:    loom.matmul {{.*}} transpose_lhs

// The error cases, one per split of this file (the first is this one).
// expected-error @below {{loom-split-stages: the module has no 'loom.pipeline_schedule' (run loom-build-schedule first)}}
module {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 RB0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    // expected-error @below {{is on pipeline stage 2, but the schedule has 2 stages}}
    %b = loom.exp %a {loom.stage = 2 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 RB0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    // expected-error @below {{has a pipeline stage but no microbatch (loom-build-train-step gives staged ops theirs)}}
    %b = loom.exp %a {loom.stage = 1 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 RB0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    // expected-error @below {{is in microbatch 1, but the schedule has 1}}
    %b = loom.exp %a {loom.stage = 1 : i64, loom.microbatch = 1 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 RB0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  // expected-error @below {{has 1 pipeline stages, but the schedule has 2}}
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Both stages on one rank, but this (unproved) schedule runs stage 1's
// forward before stage 0's, which makes what it reads.
module attributes {loom.pipeline_schedule = {actions = ["F1.0 F0.0 B1.0 B0.0"], kind = "file", microbatches = 1 : i64, ranks = 1 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-note @below {{made here (in F0.0)}}
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    // expected-error @below {{runs on rank 0 (in F1.0) before a value it reads: the schedule orders its action before the one making it}}
    %b = loom.exp %a {loom.stage = 1 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// This (unproved) schedule runs rank 0's backward, which needs rank 1's,
// before its forward, which rank 1's forward needs before rank 1 runs its
// backward: each rank would wait for the other.
// expected-error @below {{loom-split-stages: the ranks' programs would wait on each other: rank 0 waits at its receive of tag 0 from rank 1, which is made after rank 1's receive of tag 0 from rank 0}}
module attributes {loom.pipeline_schedule = {actions = ["B0.0 F0.0", "F1.0 B1.0"], kind = "file", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    %b = loom.exp %a {loom.stage = 1 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    %c = loom.neg %x {loom.stage = 1 : i64, loom.microbatch = 0 : i64, loom.backward} : tensor<4xf32>
    %d = loom.neg %c {loom.stage = 0 : i64, loom.microbatch = 0 : i64, loom.backward} : tensor<4xf32>
    return %b, %d : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64, loom.pipeline_schedule = {actions = ["F0.0 SF0.0 RB0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = loom.relu %x {loom.stage = 0 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    %b = loom.exp %a {loom.stage = 1 : i64, loom.microbatch = 0 : i64} : tensor<4xf32>
    // expected-error @below {{has side effects and reads no staged value, so no pipeline stage runs it}}
    loom.send %x to [[0, 1], [1, 0]] tag 5 : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// The step is split only once loom-unroll-microbatches has made the
// microbatches loom-build-train-step left (microbatch-copies).
module attributes {loom.pipeline_schedule = {actions = ["F0.0 B0.0"], kind = "1f1b", microbatches = 1 : i64, ranks = 1 : i64, stages = 1 : i64}} {
  // expected-error @+1 {{has microbatches still to make (loom.microbatches): run loom-unroll-microbatches before loom-split-stages}}
  func.func @train_step(%x: tensor<2xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
    return %x : tensor<2xf32>
  }
}
