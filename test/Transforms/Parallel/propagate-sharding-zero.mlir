// RUN: loom-opt "--loom-propagate-sharding=zero=1" --split-input-file --verify-diagnostics %s | FileCheck %s
// RUN: loom-opt "--loom-propagate-sharding=zero=1" --loom-partition --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=SPMD

// ZeRO stage 1 over dp, with the batch split over dp and @w split over tp:
// the AdamW states are refined by dp on the first dimension whose block it
// divides (minor to tp), @w itself stays [{tp}, {}], and the update runs
// on the shard. Partitioned: the gradient (a partial sum over dp) is
// reduced and scattered, the parameter read sliced locally, and the updated
// shard gathered over dp into @w.
// CHECK-LABEL: module
// CHECK-DAG:   loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
// CHECK-DAG:   loom.parameter @m : tensor<8x4xf32> sharding <@mesh, [{tp, dp}, {}]>
// CHECK-DAG:   loom.parameter @v : tensor<8x4xf32> sharding <@mesh, [{tp, dp}, {}]>
// CHECK:       loom.reshard %{{.*}} to <@mesh, [{tp, dp}, {}]> because "ZeRO: the update runs on its shard"
// CHECK:       loom.adamw_update
// SPMD-LABEL:  func.func @step
// SPMD:        %[[G:.*]] = loom.reduce_scatter sum %{{.*}} axis 0 groups {{\[}}[0, 2], [1, 3]] {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// SPMD:        %[[N:.*]], %{{.*}}:2 = loom.adamw_update %{{.*}}, %[[G]], {{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<f64>, tensor<2x4xf32>, tensor<2x4xf32>)
// SPMD:        %[[W:.*]] = loom.all_gather %[[N]] axis 0 groups {{\[}}[0, 2], [1, 3]] {{.*}} : tensor<2x4xf32> -> tensor<4x4xf32>
// SPMD:        loom.assign @w, %[[W]] : tensor<4x4xf32>
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]> priority 1
  loom.parameter @m : tensor<8x4xf32>
  loom.parameter @v : tensor<8x4xf32>
  func.func @step(%x: tensor<4x4xf32>, %step: tensor<f64>) {
    %px = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<4x4xf32>
    %w = loom.param @w : tensor<8x4xf32>
    %y = loom.matmul %px, %w transpose_rhs : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
    %g = loom.matmul %y, %px transpose_lhs : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %m = loom.param @m : tensor<8x4xf32>
    %v = loom.param @v : tensor<8x4xf32>
    %w2 = loom.param @w : tensor<8x4xf32>
    %new, %states:2 = loom.adamw_update %w2, %g, %step, %m, %v {lr = 1.0e-2 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f64>, tensor<8x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
    loom.assign @w, %new : tensor<8x4xf32>
    loom.assign @m, %states#0 : tensor<8x4xf32>
    loom.assign @v, %states#1 : tensor<8x4xf32>
    return
  }
}

// -----

// ZeRO shards over an axis the mesh must have.
// expected-error @+1 {{loom-propagate-sharding: zero=1 shards over axis 'dp', which the mesh does not have}}
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
}
