// RUN: loom-opt --loom-autodiff='recompute=selective' %s | FileCheck %s
// RUN: loom-opt --loom-autodiff %s | FileCheck %s --check-prefix=NONE

// Selective recompute (Megatron's): an attention core that is not fused,
// the scores q kᵀ, their scale, the softmax and the dropout, is computed
// again right before the first backward op that reads it, marked
// loom.recomputed, so the backward keeps q, k and v instead of the [S, S]
// scores, probabilities and mask. The probabilities' product with v (the
// core's output) and the projections around the core are kept.
// CHECK-LABEL: func.func @forward_grad
// CHECK:      %[[S:.*]] = loom.matmul %[[Q:.*]], %[[K:.*]] transpose_rhs :
// CHECK:      %[[SC:.*]] = loom.mul %[[S]], %{{.*}} :
// CHECK-NEXT: %[[P:.*]] = loom.softmax %[[SC]]
// CHECK-NEXT: %[[D:.*]], %[[M:.*]] = loom.dropout %[[P]]
// CHECK-NEXT: %[[O:.*]] = loom.matmul %[[D]], %[[V:.*]] :
// CHECK:      %[[S2:.*]] = loom.matmul %[[Q]], %[[K]] transpose_rhs {loom.recomputed}
// CHECK-NEXT: %[[SC2:.*]] = loom.mul %[[S2]], %{{.*}} {loom.recomputed}
// CHECK-NEXT: %[[P2:.*]] = loom.softmax %[[SC2]] {{.*}}{loom.recomputed}
// CHECK-NEXT: %[[D2:.*]], %[[M2:.*]] = loom.dropout %[[P2]] {{.*}}{loom.recomputed}
// CHECK-NOT:  loom.recomputed
// CHECK-NOT:  {{%[[:alnum:]_]+ = .*}}%[[P]]{{[ ,:]}}
// CHECK-NOT:  {{%[[:alnum:]_]+ = .*}}%[[M]]{{[ ,:]}}
// CHECK-NOT:  {{%[[:alnum:]_]+ = .*}}%[[D]]{{[ ,:]}}
// CHECK:      return

// Without it the backward reads the forward's probabilities and mask.
// NONE-LABEL: func.func @forward_grad
// NONE-NOT:   loom.recomputed
// NONE:       return
module {
  loom.parameter @wq trainable : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
  loom.parameter @wk trainable : tensor<8x8xf32> = dense<0.2> : tensor<8x8xf32>
  loom.parameter @wv trainable : tensor<8x8xf32> = dense<0.3> : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %wq = loom.param @wq : tensor<8x8xf32>
    %wk = loom.param @wk : tensor<8x8xf32>
    %wv = loom.param @wv : tensor<8x8xf32>
    %q = loom.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k = loom.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v = loom.matmul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %s = loom.matmul %q, %k transpose_rhs : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
    %c = loom.constant dense<0.35> : tensor<f32>
    %sc = loom.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
    %p = loom.softmax %sc axis 2 : tensor<2x4x4xf32>
    %d, %m = loom.dropout %p ratio 0.1 seed 7 : tensor<2x4x4xf32>
    %o = loom.matmul %d, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %l = loom.reduce_sum %o [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
