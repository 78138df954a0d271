// RUN: loom-opt --loom-decompose-collectives --split-input-file %s | FileCheck %s

// An all_gather of the hidden dim (tensor parallelism) gathers dim 0 between
// two transposes.
// CHECK-LABEL: func.func @gather_hidden
// CHECK:      %[[T:.*]] = loom.transpose %{{.*}} [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[G:.*]] = loom.all_gather %[[T]] axis 0 groups {{\[}}[0, 1]] : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[B:.*]] = loom.transpose %[[G]] [1, 0] : tensor<16x4xf32> -> tensor<4x16xf32>
// CHECK-NEXT: return %[[B]]
module attributes {loom.world_size = 2 : i64} {
  func.func @gather_hidden(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
    %0 = loom.all_gather %x axis 1 groups [[0, 1]] : tensor<4x8xf32> -> tensor<4x16xf32>
    return %0 : tensor<4x16xf32>
  }
}

// -----

// A middle axis of a rank-3 tensor: it moves to the front and back.
// CHECK-LABEL: func.func @scatter_middle
// CHECK:      %[[T:.*]] = loom.transpose %{{.*}} [1, 0, 2] : tensor<2x8x3xf32> -> tensor<8x2x3xf32>
// CHECK-NEXT: %[[S:.*]] = loom.reduce_scatter max %[[T]] axis 0 groups {{\[}}[0, 1, 2, 3]] : tensor<8x2x3xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT: loom.transpose %[[S]] [1, 0, 2] : tensor<2x2x3xf32> -> tensor<2x2x3xf32>
module attributes {loom.world_size = 4 : i64} {
  func.func @scatter_middle(%x: tensor<2x8x3xf32>) -> tensor<2x2x3xf32> {
    %0 = loom.reduce_scatter max %x axis 1 groups [[0, 1, 2, 3]] : tensor<2x8x3xf32> -> tensor<2x2x3xf32>
    return %0 : tensor<2x2x3xf32>
  }
}

// -----

// Dims of size 1 before the axis leave the blocks contiguous: nothing to do.
// CHECK-LABEL: func.func @already_blocks
// CHECK-NOT:  loom.transpose
// CHECK:      loom.all_gather %{{.*}} axis 1
// CHECK-NOT:  loom.transpose
module attributes {loom.world_size = 2 : i64} {
  func.func @already_blocks(%x: tensor<1x8xf32>) -> tensor<1x16xf32> {
    %0 = loom.all_gather %x axis 1 groups [[0, 1]] : tensor<1x8xf32> -> tensor<1x16xf32>
    return %0 : tensor<1x16xf32>
  }
}
