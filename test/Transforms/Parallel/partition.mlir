// RUN: loom-opt --loom-propagate-sharding --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s

// Megatron's MLP on tp = 2: local shapes, one all_reduce after the
// row-split GEMM (its output is a partial sum) before the bias that every
// rank adds whole. The function runs on both ranks; the parameters keep
// their global types and shardings.
// CHECK-LABEL: module attributes {loom.world_size = 2 : i64}
// CHECK: loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>{{$}}
// CHECK: loom.parameter @w2 trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>{{$}}
// CHECK: func.func @mlp(%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {loom.ranks = array<i64: 0, 1>}
// CHECK: %[[W1:.*]] = loom.param @w1 : tensor<4x4xf32>
// CHECK: %[[B1:.*]] = loom.param @b1 : tensor<4xf32>
// CHECK: %[[W2:.*]] = loom.param @w2 : tensor<4x4xf32>
// CHECK: %[[B2:.*]] = loom.param @b2 : tensor<4xf32>
// CHECK: %[[H0:.*]] = loom.matmul %{{.*}}, %[[W1]] transpose_rhs : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[H1:.*]] = loom.bias_add %[[H0]], %[[B1]] : tensor<2x4xf32>, tensor<4xf32>
// CHECK: %[[H:.*]] = loom.relu %[[H1]] : tensor<2x4xf32>
// CHECK: %[[Y0:.*]] = loom.matmul %[[H]], %[[W2]] transpose_rhs : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = loom.all_reduce sum %[[Y0]] groups {{\[}}[0, 1]] {loom.resharding = {from = #loom.sharding<@mesh, [{}, {}], partial<sum> {tp}>, origin = "summed over a split from @w1 annotated [{tp}, {}] (priority 0), via loom.relu {{.*}}", to = #loom.sharding<@mesh, [{}, {}]>, type = tensor<2x4xf32>}} : tensor<2x4xf32>
// CHECK-NEXT: %[[Y:.*]] = loom.bias_add %[[SUM]], %[[B2]]
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: loom.all_
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @b1 trainable : tensor<8xf32>
  loom.parameter @w2 trainable : tensor<4x8xf32>
  loom.parameter @b2 trainable : tensor<4xf32>
  func.func @mlp(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w1 = loom.param @w1 : tensor<8x4xf32>
    %b1 = loom.param @b1 : tensor<8xf32>
    %w2 = loom.param @w2 : tensor<4x8xf32>
    %b2 = loom.param @b2 : tensor<4xf32>
    %h0 = loom.matmul %x, %w1 transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %h1 = loom.bias_add %h0, %b1 : tensor<2x8xf32>, tensor<8xf32>
    %h = loom.relu %h1 : tensor<2x8xf32>
    %y0 = loom.matmul %h, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %y = loom.bias_add %y0, %b2 : tensor<2x4xf32>, tensor<4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// Partial sums stay partial through an add of two partial sums, a scale by
// a whole value and a reshape: one all_reduce, where the result leaves.
// CHECK-LABEL: func.func @partial_chain
// CHECK: %[[A:.*]] = loom.matmul {{.*}} -> tensor<2x4xf32>
// CHECK: %[[B:.*]] = loom.matmul {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = loom.add %[[A]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT: %[[M:.*]] = loom.mul %[[S]], %{{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = loom.reshape %[[M]] : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[SUM:.*]] = loom.all_reduce sum %[[R]] groups {{\[}}[0, 1]]
// CHECK-NEXT: return %[[SUM]]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @u trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  loom.parameter @v trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @partial_chain(%x: tensor<2x8xf32>, %c: tensor<f32>) -> tensor<8xf32> {
    %u = loom.param @u : tensor<4x8xf32>
    %v = loom.param @v : tensor<4x8xf32>
    %a = loom.matmul %x, %u transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %b = loom.matmul %x, %v transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = loom.add %a, %b : tensor<2x4xf32>
    %m = loom.mul %s, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %r = loom.reshape %m : tensor<2x4xf32> -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
}

// -----

// An add of a partial sum and a whole value is not a partial sum: the
// partial operand is reduced first.
// CHECK-LABEL: func.func @partial_plus_whole
// CHECK: %[[A:.*]] = loom.matmul
// CHECK-NEXT: %[[SUM:.*]] = loom.all_reduce sum %[[A]]
// CHECK-NEXT: loom.add %[[SUM]], %{{.*}} : tensor<2x4xf32>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @u trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @partial_plus_whole(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %u = loom.param @u : tensor<4x8xf32>
    %a = loom.matmul %x, %u transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = loom.add %a, %y : tensor<2x4xf32>
    return %s : tensor<2x4xf32>
  }
}

// -----

// A whole value that meets a split one is sliced locally, with no
// communication: the rank's block is gathered at its mesh coordinate (the
// shard of an iota parameter); a split value that must leave whole is
// gathered.
// CHECK-LABEL: module
// CHECK: loom.parameter @loom.mesh_coordinate.tp : tensor<2xi64> sharding <@mesh, [{tp}]> = dense<[0, 1]> : tensor<2xi64>
// CHECK: func.func @slice_and_gather(%[[X:.*]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[A:.*]] = loom.param @a : tensor<2x8xf32>
// CHECK: %[[BLOCKS:.*]] = loom.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[COORD:.*]] = loom.param @loom.mesh_coordinate.tp : tensor<1xi64>
// CHECK: %[[BLOCK:.*]] = loom.gather %[[BLOCKS]][%[[COORD]]] : (tensor<2x2x8xf32>, tensor<1xi64>) -> tensor<1x2x8xf32>
// CHECK: %[[MINE:.*]] = loom.reshape %[[BLOCK]] : tensor<1x2x8xf32> -> tensor<2x8xf32>
// CHECK: %[[S:.*]] = loom.add %[[A]], %[[MINE]] : tensor<2x8xf32>
// CHECK: %[[G:.*]] = loom.all_gather %[[S]] axis 0 groups {{\[}}[0, 1]] {{.*}} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[G]]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x8xf32> sharding <@mesh, [{tp}, {}]>
  func.func @slice_and_gather(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %a = loom.param @a : tensor<4x8xf32>
    %s = loom.add %a, %x : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// -----

// A reshard that moves an axis from one dimension to another is one
// all_to_all: the block is cut along the new dimension, the pieces go first
// and are exchanged, and what arrives from each rank (its block along the
// old dimension) is put back in order (an axis never splits two dimensions
// at once).
// CHECK-LABEL: func.func @move
// CHECK: %[[B:.*]] = loom.param @b : tensor<4x2xf32>
// CHECK: %[[P:.*]] = loom.reshape %[[B]] : tensor<4x2xf32> -> tensor<2x2x2xf32>
// CHECK: %[[X:.*]] = loom.all_to_all %[[P]] groups {{\[}}[0, 1]] {{.*}}origin = "conflict at loom.add{{.*}} : tensor<2x2x2xf32>
// CHECK: %[[T:.*]] = loom.transpose %[[X]] [1, 0, 2] : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
// CHECK: %[[R:.*]] = loom.reshape %[[T]] : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK: loom.add %{{.*}}, %[[R]] : tensor<2x4xf32>
// CHECK-NOT: loom.all_gather {{.*}} axis 1
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @b trainable : tensor<4x4xf32> sharding <@mesh, [{}, {tp}]>
  func.func @move() -> tensor<4x4xf32> {
    %a = loom.param @a : tensor<4x4xf32>
    %b = loom.param @b : tensor<4x4xf32>
    %s = loom.add %a, %b : tensor<4x4xf32>
    return %s : tensor<4x4xf32>
  }
}

// -----

// On a 2-D mesh, collectives run over the groups that differ only along
// the axis: tp groups are {0, 1} and {2, 3} on <dp = 2, tp = 2>.
// CHECK-LABEL: module attributes {loom.world_size = 4 : i64}
// CHECK: loom.all_reduce sum %{{.*}} groups {{\[}}[0, 1], [2, 3]]
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @u trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @grid(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
    %u = loom.param @u : tensor<4x8xf32>
    %a = loom.matmul %x, %u transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
}

// -----

// Inputs arrive whole: where propagation split one, its consumer slices it
// locally.
// CHECK-LABEL: func.func @split_input(%{{.*}}: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: loom.gather
// CHECK: loom.exp %{{.*}} : tensor<2x8xf32>
// CHECK: loom.all_gather
module {
  loom.mesh @mesh = <tp = 2>
  func.func @split_input(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@mesh, [{tp}, {}]>}) -> tensor<4x8xf32> {
    %e = loom.exp %x : tensor<4x8xf32>
    return %e : tensor<4x8xf32>
  }
}

// -----

// Collectives are the partitioner's to insert: a step that has some already
// is not a single-device program.
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x8xf32> sharding <@mesh, [{tp}, {}]>
  func.func @has_collective() -> tensor<4x8xf32> {
    %a = loom.param @a : tensor<4x8xf32>
    // expected-error @+1 {{'loom.all_reduce' op is already a collective; loom-partition expects the single-device program}}
    %s = loom.all_reduce sum %a groups [[0, 1]] : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// -----

// A mean over a split dimension: each rank averages its block, scaled by
// the block's share of the count, so the ranks' partial values sum to the
// mean (an RMS norm over split features).
// CHECK-LABEL: func.func @mean
// CHECK: %[[M:.*]] = loom.reduce_mean %{{.*}} [1] : tensor<4x4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = loom.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = loom.mul %[[M]], %[[H]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: loom.all_reduce sum %[[S]]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @mean() -> tensor<4xf32> {
    %a = loom.param @a : tensor<4x8xf32>
    %m = loom.reduce_mean %a [1] : tensor<4x8xf32> -> tensor<4xf32>
    return %m : tensor<4xf32>
  }
}

// -----

// Data parallelism on <dp = 2, tp = 2>: an argument pinned split on its
// batch arrives as the rank's rows (local type, loom.batch_offsets: ranks
// 0 and 1 are dp rank 0, 2 and 3 dp rank 1); the replicated weight's
// gradient, a GEMM over the split batch, is a partial sum over dp, reduced
// over the dp groups {0, 2} and {1, 3} before it is assigned.
// CHECK-LABEL: func.func @batch
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32> {loom.batch_offsets = array<i64: 0, 0, 2, 2>})
// CHECK:         %[[G:.*]] = loom.matmul %[[X]], %[[X]] transpose_lhs : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK:         %[[S:.*]] = loom.all_reduce sum %[[G]] groups {{\[}}[0, 2], [1, 3]]
// CHECK:         loom.assign @w, %[[S]]
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @w trainable : tensor<4x4xf32>
  func.func @batch(%x: tensor<4x4xf32>) {
    %p = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %g = loom.matmul %p, %p transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    loom.assign @w, %g : tensor<4x4xf32>
    return
  }
}

// -----

// A dropout of a tensor split over dp (rows) and tp (columns) draws its
// block of the whole tensor's mask: the block's offsets come from a table
// parameter with one row per block, split over both axes, so each rank
// reads its own row; tensors of one shape and split share the table.
// CHECK-LABEL: module attributes {loom.world_size = 4 : i64}
// CHECK: loom.parameter @loom.block_offsets.4x8.dp.tp : tensor<8xi64> sharding <@mesh, [{dp, tp}]> = dense<[0, 0, 0, 4, 2, 0, 2, 4]> : tensor<8xi64>
// CHECK: func.func @dropouts
// CHECK: %[[AT:.*]] = loom.param @loom.block_offsets.4x8.dp.tp : tensor<2xi64>
// CHECK: loom.dropout %{{.*}} ratio 1.000000e-01 seed 3 step %{{.*}} at %[[AT]] of [4, 8] : tensor<2x4xf32>
// CHECK: %[[AT2:.*]] = loom.param @loom.block_offsets.4x8.dp.tp : tensor<2xi64>
// CHECK: loom.dropout %{{.*}} ratio 2.000000e-01 seed 5 at %[[AT2]] of [4, 8] {index_base = 32 : i64} : tensor<2x4xf32>
// A replicated dropout needs no offsets.
// CHECK: loom.dropout %{{.*}} ratio 3.000000e-01 : tensor<4x8xf32>
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  func.func @dropouts(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}]>},
                      %r: tensor<4x8xf32> {loom.sharding = #loom.sharding<@mesh, [{}, {}]>},
                      %step: tensor<f64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
    %y, %m = loom.dropout %x ratio 0.1 seed 3 step %step : tensor<4x8xf32>
    %z, %n = loom.dropout %y ratio 0.2 seed 5 {index_base = 32} : tensor<4x8xf32>
    %w, %o = loom.dropout %r ratio 0.3 : tensor<4x8xf32>
    return %y, %z, %w : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// Mixed precision: a row-parallel bf16 GEMM's partial output joins the f32
// residual stream through a widening cast. The sum is reduced before the
// cast, in bf16 (half the bytes, rounded as one rank's GEMM rounds it), as
// Megatron reduces activations. A parameter's gradient widened for its f32
// master (`loom.parameter_gradient`, from loom-build-train-step) is
// reduced after the widening, in f32, as PyTorch's DDP sums `.grad`.
// CHECK-LABEL: func.func @mixed_precision_partials
// CHECK:         %[[Y:.*]] = loom.matmul %{{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT:    %[[SUM:.*]] = loom.all_reduce sum %[[Y]] {{.*}} : tensor<2x4xbf16>
// CHECK-NEXT:    loom.cast %[[SUM]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK:         %[[G:.*]] = loom.matmul %{{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT:    %[[GW:.*]] = loom.cast %[[G]] {loom.parameter_gradient} : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK-NEXT:    loom.all_reduce sum %[[GW]] {{.*}} : tensor<4x4xf32>
module {
  loom.mesh @mesh = <tp = 2>
  func.func @mixed_precision_partials(%h: tensor<2x8xbf16>, %w: tensor<4x8xbf16>, %a: tensor<4x4xbf16>, %b: tensor<4x4xbf16>) -> (tensor<2x4xf32>, tensor<4x4xf32>) {
    %hs = loom.shard %h to <@mesh, [{}, {tp}]> : tensor<2x8xbf16>
    %ws = loom.shard %w to <@mesh, [{}, {tp}]> : tensor<4x8xbf16>
    %y = loom.matmul %hs, %ws transpose_rhs : (tensor<2x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4xbf16>
    %yw = loom.cast %y : tensor<2x4xbf16> -> tensor<2x4xf32>
    %as = loom.shard %a to <@mesh, [{tp}, {}]> : tensor<4x4xbf16>
    %bs = loom.shard %b to <@mesh, [{tp}, {}]> : tensor<4x4xbf16>
    %g = loom.matmul %as, %bs transpose_lhs : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
    %gw = loom.cast %g {loom.parameter_gradient} : tensor<4x4xbf16> -> tensor<4x4xf32>
    return %yw, %gw : tensor<2x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Mixed precision casts a sequence-split activation once per GEMM that
// reads it (as torch.autocast does); the casts hold the same bytes, so one
// all_gather serves the q and k projections (Megatron's fused QKV GEMM has
// one), and the gradients' flattenings of the two copies are gathered once.
// CHECK-LABEL: func.func @equivalent_casts
// CHECK: %[[CQ:.*]] = loom.cast %arg0 : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK: loom.cast %arg0 : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK: %[[G:.*]] = loom.all_gather %[[CQ]] axis 0 {{.*}} : tensor<2x8xbf16> -> tensor<4x8xbf16>
// CHECK: loom.matmul %[[G]]
// CHECK: loom.matmul %[[G]]
// CHECK: %[[F:.*]] = loom.reshape %[[CQ]] : tensor<2x8xbf16> -> tensor<2x1x8xbf16>
// CHECK: %[[GF:.*]] = loom.all_gather %[[F]] axis 0 {{.*}} : tensor<2x1x8xbf16> -> tensor<4x1x8xbf16>
// CHECK-NOT: loom.all_gather
// CHECK: return %{{.*}}, %{{.*}}, %[[GF]], %[[GF]]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @q trainable : tensor<8x4xbf16>
  loom.parameter @k trainable : tensor<8x4xbf16>
  func.func @equivalent_casts(%x: tensor<4x8xf32>) -> (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4x1x8xbf16>, tensor<4x1x8xbf16>) {
    %s = loom.shard %x to <@mesh, [{tp}, {}]> : tensor<4x8xf32>
    %wq = loom.param @q : tensor<8x4xbf16>
    %wk = loom.param @k : tensor<8x4xbf16>
    %cq = loom.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
    %ck = loom.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
    %aq = loom.shard %cq to <@mesh, [{}, {}]> : tensor<4x8xbf16>
    %ak = loom.shard %ck to <@mesh, [{}, {}]> : tensor<4x8xbf16>
    %q = loom.matmul %aq, %wq : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
    %k = loom.matmul %ak, %wk : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
    %fq = loom.reshape %cq : tensor<4x8xbf16> -> tensor<4x1x8xbf16>
    %fk = loom.reshape %ck : tensor<4x8xbf16> -> tensor<4x1x8xbf16>
    %gq = loom.shard %fq to <@mesh, [{}, {}, {}]> : tensor<4x1x8xbf16>
    %gk = loom.shard %fk to <@mesh, [{}, {}, {}]> : tensor<4x1x8xbf16>
    return %q, %k, %gq, %gk : tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4x1x8xbf16>, tensor<4x1x8xbf16>
  }
}
