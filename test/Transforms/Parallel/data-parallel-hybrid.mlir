// RUN: loom-opt "--loom-data-parallel=axis=replica,dp" --split-input-file --verify-diagnostics %s | FileCheck %s

// Hybrid sharding's mesh <replica = G, dp = K>: the batch is split over
// both axes, replica major, so the K ranks of a shard group hold adjacent
// blocks of rows.
// CHECK-LABEL: func.func @train_step
// CHECK:         loom.shard %{{.*}} to <@mesh, [{replica, dp}, {}]> : tensor<8x4xf32>
module {
  loom.mesh @mesh = <replica = 2, dp = 2, tp = 2>
  func.func @train_step(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    return %x : tensor<8x4xf32>
  }
}

// -----

// The batch must divide over both axes together.
module {
  loom.mesh @mesh = <replica = 2, dp = 2>
  // expected-error @+1 {{'func.func' op has a batch of 6 in argument #0, which replica,dp (4 ranks) does not divide; data parallelism splits the global batch evenly}}
  func.func @train_step(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
    return %x : tensor<6x4xf32>
  }
}

// -----

// Every named axis must be on the mesh.
// expected-error @+1 {{'loom.mesh' op has no axis 'replica' to split the batch over}}
loom.mesh @mesh = <dp = 2>
