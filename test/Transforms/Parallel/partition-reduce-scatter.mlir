// RUN: loom-opt --loom-partition %s | FileCheck %s

// A partial sum that its consumer wants split over the partial axis is
// reduced and scattered at once (sequence parallelism's reduce-scatter),
// not all-reduced and sliced. The shardings are written as
// loom-propagate-sharding writes them.
// CHECK-LABEL: func.func @scatter
// CHECK: %[[A:.*]] = loom.matmul {{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = loom.reduce_scatter sum %[[A]] axis 0 groups {{\[}}[0, 1]] {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: loom.exp %[[S]] : tensor<2x4xf32>
// CHECK-NOT: loom.all_reduce
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @u trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]>
  func.func @scatter(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>}) -> tensor<4x4xf32> {
    %u = loom.param @u {loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>} : tensor<4x8xf32>
    %a = loom.matmul %x, %u transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %e = loom.exp %a {loom.sharding = #loom.sharding<@mesh, [{tp}, {}]>} : tensor<4x4xf32>
    return %e : tensor<4x4xf32>
  }
}
