// RUN: loom-opt "--loom-propagate-sharding=zero=1" --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=ONE
// RUN: loom-opt "--loom-propagate-sharding=zero=2" --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=TWO
// RUN: loom-opt "--loom-propagate-sharding=zero=3" --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=THREE
// RUN: loom-opt "--loom-propagate-sharding=eager-gradients=1" --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=EAGER
// RUN: not loom-opt "--loom-propagate-sharding=zero=4" --split-input-file %s 2>&1 | FileCheck %s --check-prefix=STAGE4

// ZeRO has stages 1 to 3.
// STAGE4: error: loom-propagate-sharding: zero=4 is no ZeRO stage (0: off, 1, 2 or 3)

// Where each ZeRO stage shards, on a step with two microbatches (their
// gradients summed by the add that loom-build-train-step marks) and a
// scaling of the sum (1/K, clipping). Stage 1 reduces and scatters the
// summed gradient once the backward pass is done and scales the shard;
// stage 2 each microbatch's gradient as soon as it is produced, summing the
// shards; stage 3 also keeps @w as its shard, gathered before each op that
// reads it (each microbatch's GEMM and its input gradient's), and stores
// the updated shard without a gather. Every function says the gradient
// bytes each rank holds.
// ONE-LABEL:   func.func @step
// ONE-SAME:      loom.gradient_bytes = 64
// ONE:           loom.matmul
// ONE:           %[[G1:.*]] = loom.matmul {{.*}} -> tensor<4x4xf32>
// ONE:           %[[G2:.*]] = loom.matmul {{.*}} -> tensor<4x4xf32>
// ONE:           %[[G:.*]] = loom.add %[[G1]], %[[G2]] {loom.gradient_accumulation} : tensor<4x4xf32>
// ONE:           %[[S:.*]] = loom.reduce_scatter sum %[[G]] axis 0 {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// ONE:           loom.mul %[[S]], %{{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// ONE:           loom.all_gather
// ONE-NOT:       loom.reduce_scatter
// ONE:           loom.assign @w, %{{.*}} : tensor<4x4xf32>

// TWO-LABEL:   func.func @step
// TWO-SAME:      loom.gradient_bytes = 32
// TWO:           %[[G1:.*]] = loom.matmul {{.*}} -> tensor<4x4xf32>
// TWO-NEXT:      %[[S1:.*]] = loom.reduce_scatter sum %[[G1]] axis 0 {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// TWO:           %[[G2:.*]] = loom.matmul {{.*}} -> tensor<4x4xf32>
// TWO-NEXT:      %[[S2:.*]] = loom.reduce_scatter sum %[[G2]] axis 0 {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// TWO:           loom.add %[[S1]], %[[S2]] {loom.gradient_accumulation} : tensor<2x4xf32>
// TWO:           loom.all_gather
// TWO:           loom.assign @w, %{{.*}} : tensor<4x4xf32>

// Without ZeRO (eager-gradients, data parallelism's default): the summed
// gradient is all-reduced right where it is produced, before the step
// scales it; the function says the gradient bytes each rank holds (the
// whole gradient).
// EAGER-LABEL: func.func @step
// EAGER-SAME:    loom.gradient_bytes = 64
// EAGER:         %[[G:.*]] = loom.add %{{.*}}, %{{.*}} {loom.gradient_accumulation} : tensor<4x4xf32>
// EAGER-NEXT:    %[[R:.*]] = loom.all_reduce sum %[[G]] groups {{\[}}[0, 1]] {{.*}}origin = "data parallelism: the gradient all-reduced as soon as it is produced"
// EAGER-NEXT:    loom.constant
// EAGER-NEXT:    loom.mul %[[R]]
// EAGER:         loom.sgd_update %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f64>, tensor<4x4xf32>)

// THREE:       loom.parameter @w trainable : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>
// THREE-LABEL: func.func @step
// THREE-SAME:    loom.gradient_bytes = 32
// THREE-COUNT-4: loom.all_gather {{.*}} : tensor<2x4xf32> -> tensor<4x4xf32>
// THREE-NOT:     loom.all_gather
// THREE:         loom.assign @w, %{{.*}} : tensor<2x4xf32>
module {
  loom.mesh @mesh = <dp = 2>
  loom.parameter @w trainable : tensor<4x4xf32>
  loom.parameter @m : tensor<4x4xf32>
  func.func @step(%x1: tensor<4x4xf32>, %x2: tensor<4x4xf32>, %step: tensor<f64>) {
    %p1 = loom.shard %x1 to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %p2 = loom.shard %x2 to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %w = loom.param @w : tensor<4x4xf32>
    %y1 = loom.matmul %p1, %w transpose_rhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %d1 = loom.matmul %y1, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %g1 = loom.matmul %y1, %p1 transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %y2 = loom.matmul %p2, %w transpose_rhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %d2 = loom.matmul %y2, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %g2 = loom.matmul %y2, %p2 transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %g = loom.add %g1, %g2 {loom.gradient_accumulation} : tensor<4x4xf32>
    %half = loom.constant dense<0.5> : tensor<f32>
    %scaled = loom.mul %g, %half : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %m = loom.param @m : tensor<4x4xf32>
    %new, %state = loom.sgd_update %w, %scaled, %step, %m {lr = 1.0e-1 : f64, momentum = 9.0e-01 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f64>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    loom.assign @w, %new : tensor<4x4xf32>
    loom.assign @m, %state : tensor<4x4xf32>
    return
  }
}

// -----

// A master that the step also reads in f32 (here an add; a layer norm's
// weight, an embedding table) stays whole under stages 1 and 2: a bf16
// copy could not stand in for it.
// ONE:         loom.parameter @v trainable : tensor<4xf32>{{$}}
// ONE-NEXT:    loom.parameter @n : tensor<4xf32> sharding <@mesh, [{dp}]>{{$}}
// ONE-LABEL:   func.func @read_in_f32
// ONE-NOT:       @v.bf16
// ONE:           loom.param @v : tensor<4xf32>
// ONE:           loom.all_gather %{{.*}} : tensor<2xf32> -> tensor<4xf32>
// ONE-NEXT:      loom.assign @v, %{{.*}} : tensor<4xf32>
module {
  loom.mesh @mesh = <dp = 2>
  loom.parameter @v trainable : tensor<4xf32>
  loom.parameter @n : tensor<4xf32>
  func.func @read_in_f32(%x: tensor<4x4xf32>, %g: tensor<4xf32>, %step: tensor<f64>) -> tensor<4x4xf32> {
    %p = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %v = loom.param @v : tensor<4xf32>
    %vb = loom.cast %v : tensor<4xf32> -> tensor<4xbf16>
    %vw = loom.cast %vb : tensor<4xbf16> -> tensor<4xf32>
    %y = loom.add %p, %v : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %z = loom.add %y, %vw : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = loom.param @n : tensor<4xf32>
    %new, %state = loom.sgd_update %v, %g, %step, %n {lr = 1.0e-1 : f64, momentum = 9.0e-01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    loom.assign @v, %new : tensor<4xf32>
    loom.assign @n, %state : tensor<4xf32>
    return %z : tensor<4x4xf32>
  }
}

// -----

// Hybrid sharding (<replica = 2, dp = 2>, the batch over both): the
// gradient, a partial sum over both axes, is reduced and scattered within
// the shard group (dp) and its shard all-reduced across the groups
// (replica); the optimizer state is split over dp only.
// ONE:         loom.mesh @mesh = <replica = 2, dp = 2>
// ONE:         loom.parameter @m : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>
// ONE-LABEL:   func.func @hybrid
// ONE:           %[[S:.*]] = loom.reduce_scatter sum %{{.*}} axis 0 groups {{\[}}[0, 1], [2, 3]] {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// ONE-NEXT:      loom.all_reduce sum %[[S]] groups {{\[}}[0, 2], [1, 3]] {{.*}} : tensor<2x4xf32>
// ONE:           loom.all_gather %{{.*}} axis 0 groups {{\[}}[0, 1], [2, 3]]
module {
  loom.mesh @mesh = <replica = 2, dp = 2>
  loom.parameter @w trainable : tensor<4x4xf32>
  loom.parameter @m : tensor<4x4xf32>
  func.func @hybrid(%x: tensor<8x4xf32>, %step: tensor<f64>) {
    %p = loom.shard %x to <@mesh, [{replica, dp}, {}]> : tensor<8x4xf32>
    %w = loom.param @w : tensor<4x4xf32>
    %y = loom.matmul %p, %w transpose_rhs : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %g = loom.matmul %y, %p transpose_lhs : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %m = loom.param @m : tensor<4x4xf32>
    %new, %state = loom.sgd_update %w, %g, %step, %m {lr = 1.0e-1 : f64, momentum = 9.0e-01 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f64>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    loom.assign @w, %new : tensor<4x4xf32>
    loom.assign @m, %state : tensor<4x4xf32>
    return
  }
}


// -----

// Mixed precision under stage 3: @w is read through one cast to bf16 that
// the forward GEMM and the backward's input-gradient GEMM share. Each GEMM
// casts its own shard and gathers it in bf16 (half the bytes of the f32
// master), and the gathered copy dies at that GEMM, instead of one gather
// whose bf16 copy lives from the forward to the backward.
// THREE-LABEL: func.func @mixed_precision
// THREE:         %[[C1:.*]] = loom.cast %{{.*}} : tensor<2x4xf32> -> tensor<2x4xbf16>
// THREE-NEXT:    %[[W1:.*]] = loom.all_gather %[[C1]] axis 0 {{.*}} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// THREE-NEXT:    loom.matmul %{{.*}}, %[[W1]] transpose_rhs
// THREE-NEXT:    %[[R2:.*]] = loom.param @w : tensor<2x4xf32>
// THREE-NEXT:    %[[C2:.*]] = loom.cast %[[R2]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// THREE-NEXT:    %[[W2:.*]] = loom.all_gather %[[C2]] axis 0 {{.*}} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// THREE-NEXT:    loom.matmul %{{.*}}, %[[W2]] :
// THREE-NOT:     loom.all_gather
// THREE:         loom.assign @w, %{{.*}} : tensor<2x4xf32>
//
// Under stages 1 and 2 (ZeRO's mixed-precision layout): the GEMMs read a
// whole bf16 copy, @w.bf16 (the cast of the master, as one rank's
// loom-cache-parameter-casts makes it); the f32 master lives as its shard,
// which only its update reads; the update casts the updated shard and
// gathers the copy in bf16.
// ONE:         loom.parameter @w trainable : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>{{$}}
// ONE-NEXT:    loom.parameter @w.bf16 : tensor<4x4xbf16> sharding <@mesh, [{}, {}]> = #loom.cast_of<@w>{{$}}
// ONE-LABEL:   func.func @mixed_precision
// ONE:           %[[MASTER:.*]] = loom.param @w : tensor<2x4xf32>
// ONE-NEXT:      %[[COPY:.*]] = loom.param @w.bf16 : tensor<4x4xbf16>
// ONE-NEXT:      loom.matmul %{{.*}}, %[[COPY]] transpose_rhs
// ONE-NEXT:      loom.matmul %{{.*}}, %[[COPY]] :
// ONE-NOT:       loom.all_gather
// ONE:           %[[NEW:.*]], %{{.*}} = loom.sgd_update %[[MASTER]]
// ONE-NEXT:      loom.assign @w, %[[NEW]] : tensor<2x4xf32>
// ONE-NEXT:      %[[NARROW:.*]] = loom.cast %[[NEW]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// ONE-NEXT:      %[[GATHERED:.*]] = loom.all_gather %[[NARROW]] axis 0 {{.*}} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// ONE-NEXT:      loom.assign @w.bf16, %[[GATHERED]] : tensor<4x4xbf16>
// TWO:         loom.parameter @w.bf16 : tensor<4x4xbf16> sharding <@mesh, [{}, {}]> = #loom.cast_of<@w>{{$}}
// TWO-LABEL:   func.func @mixed_precision
// TWO:           loom.param @w : tensor<2x4xf32>
// TWO:           loom.all_gather %{{.*}} : tensor<2x4xbf16> -> tensor<4x4xbf16>
// TWO-NEXT:      loom.assign @w.bf16
module {
  loom.mesh @mesh = <dp = 2>
  loom.parameter @w trainable : tensor<4x4xf32>
  loom.parameter @m : tensor<4x4xf32>
  func.func @mixed_precision(%x: tensor<4x4xbf16>, %step: tensor<f64>) {
    %p = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<4x4xbf16>
    %w = loom.param @w : tensor<4x4xf32>
    %wb = loom.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y = loom.matmul %p, %wb transpose_rhs : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
    %d = loom.matmul %y, %wb : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
    %gb = loom.matmul %d, %p transpose_lhs : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
    %g = loom.cast %gb : tensor<4x4xbf16> -> tensor<4x4xf32>
    %m = loom.param @m : tensor<4x4xf32>
    %new, %state = loom.sgd_update %w, %g, %step, %m {lr = 1.0e-1 : f64, momentum = 9.0e-01 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f64>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
    loom.assign @w, %new : tensor<4x4xf32>
    loom.assign @m, %state : tensor<4x4xf32>
    return
  }
}

// -----

// A gradient kept in bf16 (loom-build-train-step's gradient-precision):
// each rank rounds its partial sum to bf16 (the partial passes the marked
// rounding) and the ranks' bf16 values are reduced, before the widening
// for the update; the function counts 2-byte gradients.
// TWO-LABEL:   func.func @kept_gradient
// TWO-SAME:      loom.gradient_bytes = 4
// TWO:           %[[R:.*]] = loom.cast %{{.*}} {loom.kept_gradient} : tensor<4xf32> -> tensor<4xbf16>
// TWO-NEXT:      %[[S:.*]] = loom.reduce_scatter sum %[[R]] axis 0 {{.*}} : tensor<4xbf16> -> tensor<2xbf16>
// TWO-NEXT:      loom.cast %[[S]] {loom.kept_gradient} : tensor<2xbf16> -> tensor<2xf32>
// EAGER-LABEL: func.func @kept_gradient
// EAGER-SAME:    loom.gradient_bytes = 8
// EAGER:         %[[R:.*]] = loom.cast %{{.*}} {loom.kept_gradient} : tensor<4xf32> -> tensor<4xbf16>
// EAGER-NEXT:    %[[S:.*]] = loom.all_reduce sum %[[R]] {{.*}} : tensor<4xbf16>
// EAGER-NEXT:    loom.cast %[[S]] {loom.kept_gradient} : tensor<4xbf16> -> tensor<4xf32>
module {
  loom.mesh @mesh = <dp = 2>
  loom.parameter @b trainable : tensor<4xf32>
  loom.parameter @m : tensor<4xf32>
  func.func @kept_gradient(%x: tensor<4x4xf32>, %step: tensor<f64>) {
    %p = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %g = loom.reduce_sum %p [0] : tensor<4x4xf32> -> tensor<4xf32>
    %gb = loom.cast %g {loom.kept_gradient} : tensor<4xf32> -> tensor<4xbf16>
    %gw = loom.cast %gb {loom.kept_gradient} : tensor<4xbf16> -> tensor<4xf32>
    %b = loom.param @b : tensor<4xf32>
    %m = loom.param @m : tensor<4xf32>
    %new, %state = loom.sgd_update %b, %gw, %step, %m {lr = 1.0e-1 : f64, momentum = 9.0e-01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    loom.assign @b, %new : tensor<4xf32>
    loom.assign @m, %state : tensor<4xf32>
    return
  }
}
