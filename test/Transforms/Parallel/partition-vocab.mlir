// RUN: loom-opt --loom-propagate-sharding --loom-partition --split-input-file %s | FileCheck %s

// Vocabulary-parallel cross-entropy: logits split on their classes are
// never gathered; the ranks all-reduce the row maximum, the exp-sum and
// the target logit (one value per sample each); the gradient stays split.
// CHECK-LABEL: func.func @loss
// CHECK-NOT: loom.all_gather
// CHECK: loom.all_reduce max %{{.*}} : tensor<4x1xf32>
// CHECK: loom.all_reduce sum %{{.*}} : tensor<4x1xf32>
// CHECK: loom.all_reduce sum %{{.*}} : tensor<4xf32>
// CHECK: loom.all_reduce max %{{.*}} : tensor<4x1xf32>
// CHECK: loom.all_reduce sum %{{.*}} : tensor<4x1xf32>
// CHECK: loom.mul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// Only the function's result is gathered (results leave whole).
// CHECK: %[[G:.*]] = loom.all_gather %{{.*}} axis 1 {{.*}} : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]] : tensor<f32>, tensor<4x16xf32>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @head trainable : tensor<16x8xf32> sharding <@mesh, [{tp}, {}]>
  func.func @loss(%h: tensor<4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<4x16xf32>) {
    %w = loom.param @head : tensor<16x8xf32>
    %logits = loom.matmul %h, %w transpose_rhs : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    %loss = loom.cross_entropy %logits, %labels classes 13 : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    %scale = loom.constant dense<0.25> : tensor<f32>
    %d = loom.cross_entropy_grad %logits, %labels, %scale classes 13 : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
    return %loss, %d : tensor<f32>, tensor<4x16xf32>
  }
}

// -----

// Vocabulary-parallel embedding: each rank looks up the rows it holds and
// zeroes the others, a partial sum reduced where it is needed whole; its
// adjoint scatters only the rank's rows.
// CHECK-LABEL: func.func @embed
// CHECK: %[[T:.*]] = loom.param @table : tensor<4x8xf32>
// CHECK: %[[G:.*]] = loom.gather %[[T]][%{{.*}}] : (tensor<4x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
// CHECK: %[[Z:.*]] = loom.select %{{.*}}, %[[G]], %{{.*}} : (tensor<2x3x1xi1>, tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
// CHECK: %[[D:.*]] = loom.scatter_add %{{.*}}[%{{.*}}] : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = loom.all_reduce sum %[[Z]]
// CHECK: %[[W:.*]] = loom.all_gather %[[D]] axis 0
// CHECK: return %[[S]], %[[W]] : tensor<2x3x8xf32>, tensor<8x8xf32>
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @table trainable : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]>
  func.func @embed(%ids: tensor<2x3xi64>, %dy: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8x8xf32>) {
    %t = loom.param @table : tensor<8x8xf32>
    %e = loom.gather %t[%ids] : (tensor<8x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %dt = loom.scatter_add %dy[%ids] : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<8x8xf32>
    %s = loom.shard %dt to <@mesh, [{tp}, {}]> : tensor<8x8xf32>
    return %e, %s : tensor<2x3x8xf32>, tensor<8x8xf32>
  }
}
