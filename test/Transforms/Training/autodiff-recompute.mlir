// RUN: loom-opt --loom-autodiff='recompute=full' %s | FileCheck %s
// RUN: loom-opt --loom-autodiff %s | FileCheck %s --check-prefix=NONE

// Two wide sublayers joined by a narrow value (%c): with recompute=full the
// first segment (%a, %b) and the second (%d, %e) are computed again, marked
// loom.recomputed, right before the first backward op that reads them; the
// backward reads only the clones, so the forward's wide values die with the
// forward. The last segment (the loss) and the narrow value %c are kept.
// CHECK-LABEL: func.func @forward_grad
// CHECK:      %[[X:.*]]: tensor<4x8xf32>
// CHECK:      %[[W1:.*]] = loom.param @w1
// CHECK-NEXT: %[[A:.*]] = loom.matmul %[[X]], %[[W1]] :
// CHECK-NEXT: %[[B:.*]] = loom.tanh %[[A]] :
// CHECK-NEXT: %[[W2:.*]] = loom.param @w2
// CHECK-NEXT: %[[C:.*]] = loom.matmul %[[B]], %[[W2]] :
// CHECK-NEXT: %[[W3:.*]] = loom.param @w3
// CHECK-NEXT: %[[D:.*]] = loom.matmul %[[C]], %[[W3]] :
// CHECK-NEXT: %[[E:.*]] = loom.tanh %[[D]] :
// CHECK:      loom.reduce_sum
// CHECK-NOT:  %[[E]]{{[ ,:]}}
// CHECK:      %[[D2:.*]] = loom.matmul %[[C]], %[[W3]] {loom.recomputed}
// CHECK-NEXT: %[[E2:.*]] = loom.tanh %[[D2]] {loom.recomputed}
// CHECK-NEXT: loom.matmul %[[E2]], %{{.*}} transpose_lhs
// CHECK-NEXT: loom.mul %[[E2]], %[[E2]]
// CHECK-NOT:  %[[B]]{{[ ,:]}}
// CHECK:      %[[A2:.*]] = loom.matmul %[[X]], %[[W1]] {loom.recomputed}
// CHECK-NEXT: %[[B2:.*]] = loom.tanh %[[A2]] {loom.recomputed}
// CHECK-NEXT: loom.matmul %[[B2]], %{{.*}} transpose_lhs
// CHECK-NOT:  %[[B]]{{[ ,:]}}
// CHECK-NOT:  %[[E]]{{[ ,:]}}
// CHECK:      return

// Without recompute the backward reads the forward's values.
// NONE-LABEL: func.func @forward_grad
// NONE-NOT:   loom.recomputed
// NONE:       %[[E:.*]] = loom.tanh
// NONE:       loom.matmul %[[E]], %{{.*}} transpose_lhs
module {
  loom.parameter @w1 trainable : tensor<8x32xf32> = dense<0.1> : tensor<8x32xf32>
  loom.parameter @w2 trainable : tensor<32x8xf32> = dense<0.2> : tensor<32x8xf32>
  loom.parameter @w3 trainable : tensor<8x32xf32> = dense<0.3> : tensor<8x32xf32>
  loom.parameter @w4 trainable : tensor<32x8xf32> = dense<0.4> : tensor<32x8xf32>
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %w1 = loom.param @w1 : tensor<8x32xf32>
    %a = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %b = loom.tanh %a : tensor<4x32xf32>
    %w2 = loom.param @w2 : tensor<32x8xf32>
    %c = loom.matmul %b, %w2 : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %w3 = loom.param @w3 : tensor<8x32xf32>
    %d = loom.matmul %c, %w3 : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %e = loom.tanh %d : tensor<4x32xf32>
    %w4 = loom.param @w4 : tensor<32x8xf32>
    %f = loom.matmul %e, %w4 : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %l = loom.reduce_sum %f [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
