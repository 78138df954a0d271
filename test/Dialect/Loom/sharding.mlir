// Meshes and shardings round-trip wherever they can be attached.
// RUN: loom-opt %s | loom-opt | FileCheck %s

// CHECK: loom.mesh @mesh = <dp = 2, pp = 2, tp = 4>
loom.mesh @mesh = <dp = 2, pp = 2, tp = 4>
// CHECK: loom.mesh @single = <x = 1>
loom.mesh @single = <x = 1>

// CHECK: loom.parameter @w trainable : tensor<512x2048xf32> sharding <@mesh, [{}, {tp}]>
loom.parameter @w trainable : tensor<512x2048xf32> sharding <@mesh, [{}, {tp}]>
// A priority orders annotations for propagation (0 first).
// CHECK: loom.parameter @v trainable : tensor<512x2048xf32> sharding <@mesh, [{tp}, {}]> priority 1
loom.parameter @v trainable : tensor<512x2048xf32> sharding <@mesh, [{tp}, {}]> priority 1
// Two axes on one dimension, major to minor.
// CHECK: loom.parameter @emb trainable : tensor<50304x768xf32> sharding <@mesh, [{tp, dp}, {}]>
loom.parameter @emb trainable : tensor<50304x768xf32> sharding <@mesh, [{tp, dp}, {}]>

// CHECK-LABEL: func @attached
// CHECK-SAME: (%{{.*}}: tensor<8x512xf32> {loom.sharding = #loom.sharding<@mesh, [{dp}, {}]>})
// CHECK-SAME: -> (tensor<8x2048xf32> {loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}]>})
func.func @attached(%x: tensor<8x512xf32> {loom.sharding = #loom.sharding<@mesh, [{dp}, {}]>})
    -> (tensor<8x2048xf32> {loom.sharding = #loom.sharding<@mesh, [{dp}, {tp}]>}) {
  %w = loom.param @w : tensor<512x2048xf32>
  // CHECK: loom.matmul
  // CHECK-SAME: {loom.sharding = #loom.sharding<@mesh, [{dp}, {}], partial<sum> {tp}>}
  %h = loom.matmul %x, %w {loom.sharding = #loom.sharding<@mesh, [{dp}, {}], partial<sum> {tp}>}
      : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
  // CHECK: loom.reduce_max
  // CHECK-SAME: {loom.sharding = #loom.sharding<@mesh, [{dp}], partial<max> {tp, pp}>}
  %m = loom.reduce_max %h [1] {loom.sharding = #loom.sharding<@mesh, [{dp}], partial<max> {tp, pp}>}
      : tensor<8x2048xf32> -> tensor<8xf32>
  // One sharding per result of a multi-result op.
  // CHECK: loom.split
  // CHECK-SAME: {loom.sharding = [#loom.sharding<@mesh, [{dp}, {tp}]>, #loom.sharding<@mesh, [{}, {}]>]}
  %a, %b = loom.split %h axis 1 {loom.sharding = [#loom.sharding<@mesh, [{dp}, {tp}]>, #loom.sharding<@mesh, [{}, {}]>]}
      : tensor<8x2048xf32> -> tensor<8x1024xf32>, tensor<8x1024xf32>
  // CHECK: loom.shard %{{.*}} to <@mesh, [{dp}, {tp}]> : tensor<8x2048xf32>
  %s = loom.shard %h to <@mesh, [{dp}, {tp}]> : tensor<8x2048xf32>
  // Scalars have no dimensions to split.
  // CHECK: loom.shard %{{.*}} to <@mesh, []> : tensor<f32>
  %c = loom.constant dense<1.0> : tensor<f32>
  %cs = loom.shard %c to <@mesh, []> : tensor<f32>
  // Open dimensions (propagation may split them further) and a priority.
  // CHECK: loom.shard %{{.*}} to <@mesh, [{?}, {tp, ?}]> priority 2 : tensor<8x2048xf32>
  %open = loom.shard %h to <@mesh, [{?}, {tp, ?}]> priority 2 : tensor<8x2048xf32>
  // A reshard says why.
  // CHECK: loom.reshard %{{.*}} to <@mesh, [{dp}, {}]> because "conflict" : tensor<8x2048xf32>
  %r = loom.reshard %h to <@mesh, [{dp}, {}]> because "conflict" : tensor<8x2048xf32>
  return %s : tensor<8x2048xf32>
}

// A declaration has no body, yet its signature can carry shardings.
// CHECK-LABEL: func private @declared
// CHECK-SAME: {loom.sharding = #loom.sharding<@mesh, [{tp}]>}
func.func private @declared(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{tp}]>})
