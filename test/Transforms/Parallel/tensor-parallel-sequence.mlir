// RUN: loom-opt "--loom-tensor-parallel=sequence-parallel=true" --split-input-file --verify-diagnostics %s | FileCheck %s

// Sequence parallelism pins the input of every forward normalization over
// the last dimension split on the sequence, at priority 2, its other
// dimensions open (data parallelism keeps the batch split): a loom.layer_norm,
// an RMSNorm from primitive ops (the base of the square whose mean it
// takes), and a decomposed layer norm (the input of its mean). A mean over
// another dimension and a softmax's sum are no normalization.
// CHECK-LABEL: func.func @f
// CHECK:      %[[X:.*]] = loom.shard %arg0 to <@mesh, [{?}, {tp}, {?}]> priority 2
// CHECK:      loom.layer_norm %[[X]]
// CHECK:      %[[R:.*]] = loom.shard %arg1 to <@mesh, [{?}, {tp}, {?}]> priority 2
// CHECK:      loom.pow %[[R]], %{{.*}}
// CHECK:      %[[Q:.*]] = loom.shard %arg2 to <@mesh, [{?}, {tp}, {?}]> priority 2
// CHECK:      loom.mul %[[Q]], %[[Q]] :
// CHECK:      %[[M:.*]] = loom.shard %arg3 to <@mesh, [{?}, {tp}, {?}]> priority 2
// CHECK:      loom.reduce_mean %[[M]] [2] keepdims
// CHECK-NOT:  loom.shard
// CHECK:      return
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @g trainable : tensor<8xf32>
  loom.parameter @b trainable : tensor<8xf32>
  func.func @f(%x: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %m: tensor<2x4x8xf32>, %s: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x1x8xf32>, tensor<2x4x1xf32>) {
    %g = loom.param @g : tensor<8xf32>
    %b = loom.param @b : tensor<8xf32>
    %n = loom.layer_norm %x, %g, %b axis 2 epsilon 1.0e-5 : tensor<2x4x8xf32>, tensor<8xf32>
    %two = loom.constant dense<2.0> : tensor<f32>
    %r2 = loom.pow %r, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
    %rms = loom.reduce_mean %r2 [2] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %q2 = loom.mul %q, %q : tensor<2x4x8xf32>
    %qms = loom.reduce_mean %q2 [2] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %mean = loom.reduce_mean %m [2] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %seq = loom.reduce_mean %s [1] keepdims : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
    %sum = loom.reduce_sum %s [2] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    return %n, %rms, %qms, %mean, %seq, %sum : tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x1x8xf32>, tensor<2x4x1xf32>
  }
}

// -----

// A sequence the axis does not divide: an error at the normalization.
module {
  loom.mesh @mesh = <tp = 2>
  func.func @f(%r: tensor<2x3x8xf32>) -> tensor<2x3x1xf32> {
    %two = loom.constant dense<2.0> : tensor<f32>
    // expected-error @+1 {{'loom.pow' op normalizes rows of a sequence of 3, which tp = 2 does not divide; sequence parallelism needs it to}}
    %r2 = loom.pow %r, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
    %rms = loom.reduce_mean %r2 [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
    return %rms : tensor<2x3x1xf32>
  }
}
