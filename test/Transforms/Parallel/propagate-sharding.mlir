// RUN: loom-opt --loom-propagate-sharding --split-input-file --verify-diagnostics %s | FileCheck %s

// MLP: annotating the first GEMM's weight on its output features splits the
// hidden activations, the bias, and the second weight on its input features
// (the row-split second GEMM emerges); the second GEMM's output and bias
// stay replicated (its result is a partial sum, which is partitioning's
// business). Every decision names the annotation and the op it came
// through.
// CHECK-LABEL: module
// CHECK: loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]> {loom.sharding_origin = "@w1 annotated [{tp}, {}] (priority 0)"}
// CHECK: loom.parameter @b1 trainable : tensor<8xf32> sharding <@mesh, [{tp}]> {loom.sharding_origin = "@w1 annotated [{tp}, {}] (priority 0), via loom.bias_add at 'fc1.bias'"}
// CHECK: loom.parameter @w2 trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> {loom.sharding_origin = "@w1 annotated [{tp}, {}] (priority 0), via loom.matmul at 'fc2'"}
// CHECK: loom.parameter @b2 trainable : tensor<4xf32>{{$}}
// CHECK: loom.matmul %{{.*}} transpose_rhs {{{.*}}loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>
// CHECK: loom.bias_add {{.*}}loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>
// CHECK: loom.relu {{.*}}loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>
// CHECK: %[[Y:.*]] = loom.matmul %{{.*}} transpose_rhs {loom.factor_sharding = {{\[}}[], [], ["tp"]]} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: loom.bias_add %[[Y]], %{{.*}} : tensor<2x4xf32>, tensor<4xf32>
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
    %h0 = loom.matmul %x, %w1 transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32> loc("fc1")
    %h1 = loom.bias_add %h0, %b1 : tensor<2x8xf32>, tensor<8xf32> loc("fc1.bias")
    %h = loom.relu %h1 : tensor<2x8xf32>
    %y0 = loom.matmul %h, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32> loc("fc2")
    %y = loom.bias_add %y0, %b2 : tensor<2x4xf32>, tensor<4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// Attention: one projection split on its output features splits the heads
// through the reshape; the attention op's rule shares the heads of q, k and
// v, so the other two projections are split too, and the output projection
// on its input features.
// CHECK-LABEL: module
// CHECK: loom.parameter @wq {{.*}}sharding <@mesh, [{tp}, {}]>
// CHECK: loom.parameter @wk {{.*}}sharding <@mesh, [{tp}, {}]> {loom.sharding_origin = "@wq annotated [{tp}, {}] (priority 0), via loom.matmul
// CHECK: loom.parameter @wv {{.*}}sharding <@mesh, [{tp}, {}]>
// CHECK: loom.parameter @wo {{.*}}sharding <@mesh, [{}, {tp}]>
// CHECK: loom.reshape {{.*}}loom.sharding = #loom.sharding<@mesh, [{}, {}, {tp}, {}]>{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
// CHECK: loom.attention {{.*}}loom.sharding = [#loom.sharding<@mesh, [{}, {}, {tp}, {}]>, #loom.sharding<@mesh, [{}, {}, {tp}]>]
// CHECK: loom.reshape {{.*}}loom.sharding = #loom.sharding<@mesh, [{}, {}, {tp}]>{{.*}} : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @wq trainable : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @wk trainable : tensor<8x8xf32>
  loom.parameter @wv trainable : tensor<8x8xf32>
  loom.parameter @wo trainable : tensor<8x8xf32>
  func.func @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %wq = loom.param @wq : tensor<8x8xf32>
    %wk = loom.param @wk : tensor<8x8xf32>
    %wv = loom.param @wv : tensor<8x8xf32>
    %wo = loom.param @wo : tensor<8x8xf32>
    %q0 = loom.matmul %x, %wq transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k0 = loom.matmul %x, %wk transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v0 = loom.matmul %x, %wv transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q = loom.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k = loom.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v = loom.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %o, %lse = loom.attention %q, %k, %v scale 0.5 seq_major : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x4x2xf32>)
    %o1 = loom.reshape %o : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %y = loom.matmul %o1, %wo transpose_rhs : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %r = loom.add %x, %y : tensor<2x4x8xf32>
    return %r : tensor<2x4x8xf32>
  }
}

// -----

// A parameter's reads and stores share one sharding: the update's value is
// split like the parameter, and a second read (another use) is too.
// CHECK-LABEL: module
// CHECK: loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
// CHECK: loom.parameter @m : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
// CHECK: loom.sgd_update {{.*}}loom.sharding = [#loom.sharding<@mesh, [{tp}, {}]>, #loom.sharding<@mesh, [{tp}, {}]>]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @m : tensor<8x4xf32>
  func.func @step(%g: tensor<8x4xf32>, %step: tensor<f64>) {
    %w = loom.param @w : tensor<8x4xf32>
    %m = loom.param @m : tensor<8x4xf32>
    %new, %state = loom.sgd_update %w, %g, %step, %m {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f64>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
    loom.assign @w, %new : tensor<8x4xf32>
    loom.assign @m, %state : tensor<8x4xf32>
    return
  }
}

// -----

// Priorities: the priority-0 annotation of @a propagates to a fixed point
// before the priority-1 one of @b is planted, so @b's annotation loses (its
// origin says so) and the add follows @a.
// CHECK-LABEL: module
// CHECK: loom.parameter @a {{.*}}sharding <@mesh, [{tp}, {}]>
// CHECK: loom.parameter @b {{.*}}sharding <@mesh, [{tp}, {}]> priority 1 {loom.sharding_origin = "@a annotated [{tp}, {}] (priority 0), via loom.add at 'sum'; overrides @b annotated [{}, {tp}] (priority 1)"}
// CHECK: loom.add {{.*}}loom.sharding = #loom.sharding<@mesh, [{tp}, {}]>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @b trainable : tensor<4x4xf32> sharding <@mesh, [{}, {tp}]> priority 1
  func.func @f() -> tensor<4x4xf32> {
    %a = loom.param @a : tensor<4x4xf32>
    %b = loom.param @b : tensor<4x4xf32>
    %s = loom.add %a, %b : tensor<4x4xf32> loc("sum")
    return %s : tensor<4x4xf32>
  }
}

// -----

// A conflict between two annotations of the same priority is not guessed
// away: the operand that loses is resharded explicitly before the op, and
// the reshard says why.
// CHECK-LABEL: module
// CHECK: %[[B:.*]] = loom.param @b
// CHECK: %[[R:.*]] = loom.reshard %[[B]] to <@mesh, [{tp}, {}]> because "conflict at loom.add at 'sum': operand #1 is [{}, {tp}] from @b annotated [{}, {tp}] (priority 0), but [{tp}, {}] from @a annotated [{tp}, {}] (priority 0) wins (priority 0 vs 0)"
// CHECK: loom.add %{{.*}}, %[[R]]
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @b trainable : tensor<4x4xf32> sharding <@mesh, [{}, {tp}]>
  func.func @f() -> tensor<4x4xf32> {
    %a = loom.param @a : tensor<4x4xf32>
    %b = loom.param @b : tensor<4x4xf32>
    %s = loom.add %a, %b : tensor<4x4xf32> loc("sum")
    return %s : tensor<4x4xf32>
  }
}

// -----

// A closed annotation pins a value replicated: the split does not cross
// the pin, and an open dimension ({?}) may gain one (the pin is written
// with what propagation made of it, which the partitioner converts to).
// CHECK-LABEL: module
// CHECK: loom.shard %{{.*}} to <@mesh, [{}, {}]>
// CHECK: loom.exp %{{.*}} : tensor<4x4xf32>
// CHECK: loom.shard %{{.*}} to <@mesh, [{tp}, {}]> priority 1
// CHECK: loom.neg %{{.*}} {{{.*}}loom.sharding = #loom.sharding<@mesh, [{tp}, {}]>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x4xf32> sharding <@mesh, [{tp}, {}]>
  func.func @f() -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %a = loom.param @a : tensor<4x4xf32>
    %pinned = loom.shard %a to <@mesh, [{}, {}]> : tensor<4x4xf32>
    %e = loom.exp %pinned : tensor<4x4xf32>
    %open = loom.shard %a to <@mesh, [{?}, {}]> priority 1 : tensor<4x4xf32>
    %n = loom.neg %open : tensor<4x4xf32>
    return %e, %n : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// A later round fills what an earlier one left open and unsplit: the
// priority-2 pin splits the sequence of the value dp split at priority 0
// (sequence parallelism under data parallelism). What it adds is a
// priority-2 decision: at the GEMM, the weight's tp (priority 1) wins the
// axis and the sequence is gathered, where a priority-0 claim would have
// taken tp from the weight.
// CHECK-LABEL: module
// CHECK: %[[P:.*]] = loom.shard %{{.*}} to <@mesh, [{dp}, {tp}, {}]> priority 2
// CHECK: loom.layer_norm %[[P]]{{.*}}loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}, {}]>
// CHECK: loom.matmul {{.*}}loom.sharding = #loom.sharding<@mesh, [{dp}, {}, {tp}]>
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @g trainable : tensor<8xf32>
  loom.parameter @b trainable : tensor<8xf32>
  loom.parameter @w trainable : tensor<8x8xf32> sharding <@mesh, [{}, {tp}]> priority 1
  func.func @f(%x: tensor<4x4x8xf32>) -> tensor<4x4x8xf32> {
    %s = loom.shard %x to <@mesh, [{dp}, {}, {}]> : tensor<4x4x8xf32>
    %g = loom.param @g : tensor<8xf32>
    %b = loom.param @b : tensor<8xf32>
    %w = loom.param @w : tensor<8x8xf32>
    %e = loom.exp %s : tensor<4x4x8xf32>
    %p = loom.shard %e to <@mesh, [{?}, {tp}, {?}]> priority 2 : tensor<4x4x8xf32>
    %n = loom.layer_norm %p, %g, %b axis 2 epsilon 1.0e-5 : tensor<4x4x8xf32>, tensor<8xf32>
    %y = loom.matmul %n, %w : (tensor<4x4x8xf32>, tensor<8x8xf32>) -> tensor<4x4x8xf32>
    return %y : tensor<4x4x8xf32>
  }
}

// -----

// Ops that need a factor whole do not pass a split through it: softmax
// over the split dimension leaves its result unsplit.
// CHECK-LABEL: module
// CHECK: loom.softmax %{{.*}} axis 1 : tensor<4x8xf32>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @a trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @f() -> tensor<4x8xf32> {
    %a = loom.param @a : tensor<4x8xf32>
    %s = loom.softmax %a axis 1 : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// -----

// Without annotations the module is left as it is.
// CHECK-LABEL: module
// CHECK-NOT: loom.sharding
module {
  loom.parameter @a trainable : tensor<4x8xf32>
  func.func @f() -> tensor<4x8xf32> {
    %a = loom.param @a : tensor<4x8xf32>
    %e = loom.exp %a : tensor<4x8xf32>
    return %e : tensor<4x8xf32>
  }
}

// -----

// Annotations must name one mesh.
module {
  loom.mesh @mesh = <tp = 2>
  loom.mesh @other = <dp = 2>
  // expected-note @+1 {{the other annotation}}
  loom.parameter @a trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  // expected-error @+1 {{'loom.parameter' op names mesh @other, but another annotation names @mesh; sharding propagation needs one mesh}}
  loom.parameter @b trainable : tensor<4x8xf32> sharding <@other, [{dp}, {}]>
}
