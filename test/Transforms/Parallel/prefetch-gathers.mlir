// RUN: loom-opt --loom-prefetch-gathers %s | FileCheck %s
// RUN: loom-opt "--loom-prefetch-gathers=distance=0" %s | FileCheck %s --check-prefix=OFF

// Each parameter gather moves, with its read, before the op that reads the
// previous gather: @w2's before the first GEMM, @w3's before the second;
// the first stays. A gather of something else than a parameter read stays.
// CHECK-LABEL: func.func @layers
// CHECK:         %[[R1:.*]] = loom.param @w1
// CHECK-NEXT:    %[[G1:.*]] = loom.all_gather %[[R1]]
// CHECK-NEXT:    %[[R2:.*]] = loom.param @w2
// CHECK-NEXT:    %[[G2:.*]] = loom.all_gather %[[R2]]
// CHECK-NEXT:    %[[Y1:.*]] = loom.matmul %{{.*}}, %[[G1]]
// CHECK-NEXT:    %[[R3:.*]] = loom.param @w3
// CHECK-NEXT:    %[[G3:.*]] = loom.all_gather %[[R3]]
// CHECK-NEXT:    %[[Y2:.*]] = loom.matmul %[[Y1]], %[[G2]]
// CHECK-NEXT:    %[[A:.*]] = loom.all_gather %[[Y2]]
// CHECK-NEXT:    loom.matmul %{{.*}}, %[[G3]]
// OFF-LABEL:   func.func @layers
// OFF:           loom.param @w1
// OFF-NEXT:      loom.all_gather
// OFF-NEXT:      loom.matmul
// OFF-NEXT:      loom.param @w2
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <dp = 2>
  loom.parameter @w1 : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>
  loom.parameter @w2 : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>
  loom.parameter @w3 : tensor<4x4xf32> sharding <@mesh, [{dp}, {}]>
  func.func @layers(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<8x4xf32>) {
    %r1 = loom.param @w1 : tensor<2x4xf32>
    %g1 = loom.all_gather %r1 axis 0 groups [[0, 1]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %y1 = loom.matmul %x, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %r2 = loom.param @w2 : tensor<2x4xf32>
    %g2 = loom.all_gather %r2 axis 0 groups [[0, 1]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %y2 = loom.matmul %y1, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %a = loom.all_gather %y2 axis 0 groups [[0, 1]] : tensor<4x4xf32> -> tensor<8x4xf32>
    %r3 = loom.param @w3 : tensor<2x4xf32>
    %g3 = loom.all_gather %r3 axis 0 groups [[0, 1]] : tensor<2x4xf32> -> tensor<4x4xf32>
    %y3 = loom.matmul %y2, %g3 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %y3, %a : tensor<4x4xf32>, tensor<8x4xf32>
  }
}
