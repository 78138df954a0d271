// RUN: loom-opt --loom-data-parallel --split-input-file --verify-diagnostics %s | FileCheck %s

// Every argument (a batch of the step's data) is pinned split on its batch
// dimension over dp; the parameters are left alone.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%[[X:.*]]: tensor<8x4xf32>, %[[Y:.*]]: tensor<8xi64>)
// CHECK:         %[[PX:.*]] = loom.shard %[[X]] to <@mesh, [{dp}, {}]> : tensor<8x4xf32>
// CHECK:         %[[PY:.*]] = loom.shard %[[Y]] to <@mesh, [{dp}]> : tensor<8xi64>
// CHECK:         loom.matmul %[[PX]], %{{.*}}
// CHECK:         loom.cross_entropy %{{.*}}, %[[PY]]
// CHECK:       loom.parameter @w trainable : tensor<3x4xf32>{{$}}
module {
  loom.mesh @mesh = <dp = 2, tp = 2>
  func.func @train_step(%x: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w = loom.param @w : tensor<3x4xf32>
    %l = loom.matmul %x, %w transpose_rhs : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
    %loss = loom.cross_entropy %l, %y : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  loom.parameter @w trainable : tensor<3x4xf32>
}

// -----

// A batch dp does not divide: an error naming the argument.
module {
  loom.mesh @mesh = <dp = 4>
  // expected-error @+1 {{'func.func' op has a batch of 6 in argument #0 ('x'), which dp (4 ranks) does not divide; data parallelism splits the global batch evenly}}
  func.func @train_step(%x: tensor<6x4xf32> {onnx.name = "x"}) -> tensor<6x4xf32> {
    return %x : tensor<6x4xf32>
  }
}

// -----

// The tactic needs the mesh axis it splits over.
// expected-error @+1 {{'loom.mesh' op has no axis 'dp' to split the batch over}}
loom.mesh @mesh = <tp = 2>

// -----

// Two microbatches of 4 rows over dp 2: each rank reads its 4 contiguous
// rows, and microbatch k takes the k-th pair of them ([ways, microbatches,
// rows / ways] sliced at k). A dropout of microbatch k (index_base = k times
// its 16 elements, as loom-build-train-step numbers it) then numbers its
// rows where they sit in the batch: chunks of 8 elements (one rank's pair),
// 16 apart, the second microbatch's starting at 8.
// CHECK-LABEL: func.func @interleaved
// CHECK:         loom.reshape %{{.*}} : tensor<8x4xf32> -> tensor<2x2x2x4xf32>
// CHECK:         loom.slice %{{.*}} [0:2, 0:1, 0:2, 0:4]
// CHECK:         loom.dropout %{{.*}} ratio 5.000000e-01 {index_chunk = 8 : i64, index_chunk_stride = 16 : i64} : tensor<4x4xf32>
// CHECK:         loom.slice %{{.*}} [0:2, 1:2, 0:2, 0:4]
// CHECK:         loom.dropout %{{.*}} ratio 5.000000e-01 {index_base = 8 : i64, index_chunk = 8 : i64, index_chunk_stride = 16 : i64} : tensor<4x4xf32>
module {
  loom.mesh @mesh = <dp = 2>
  func.func @interleaved(%x: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %a = loom.slice %x [0:4, 0:4] : tensor<8x4xf32> -> tensor<4x4xf32>
    %da, %ma = loom.dropout %a ratio 0.5 : tensor<4x4xf32>
    %b = loom.slice %x [4:8, 0:4] : tensor<8x4xf32> -> tensor<4x4xf32>
    %db, %mb = loom.dropout %b ratio 0.5 {index_base = 16} : tensor<4x4xf32>
    return %da, %db : tensor<4x4xf32>, tensor<4x4xf32>
  }
}
