// RUN: loom-opt --loom-fold-repeated-blocks=keep=1 %s 2>&1 | FileCheck %s

// Blocks whose constants differ in value and sit above the blocks (as
// canonicalization hoists them: LLaMA's rotary tables are one constant per
// layer) are still alike: x -> x + (x W_i) * c_i. Folded to one block, the
// head reads it, and the other blocks' constants and parameters are gone.
// CHECK: remark: {{.*}}loom-fold-repeated-blocks: 3 repeated blocks of 3 operations start here; keeping 1
// CHECK-NOT: loom.parameter @w1
// CHECK-LABEL: func.func @forward
// CHECK-NOT: dense<2.0
// CHECK: %[[C0:.*]] = loom.constant dense<1.000000e+00>
// CHECK-NOT: dense<2.0
// CHECK-NOT: dense<3.0
// CHECK: %[[M0:.*]] = loom.matmul
// CHECK: %[[S0:.*]] = loom.mul %[[M0]], %[[C0]]
// CHECK: %[[A0:.*]] = loom.add %{{.*}}, %[[S0]]
// CHECK-NEXT: return %[[A0]]
module {
  loom.parameter @w0 trainable : tensor<8x8xf32>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  loom.parameter @w2 trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %c0 = loom.constant dense<1.0> : tensor<f32>
    %c1 = loom.constant dense<2.0> : tensor<f32>
    %c2 = loom.constant dense<3.0> : tensor<f32>
    %w0 = loom.param @w0 : tensor<8x8xf32>
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %w2 = loom.param @w2 : tensor<8x8xf32>
    %m0 = loom.matmul %x, %w0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %s0 = loom.mul %m0, %c0 : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    %a0 = loom.add %x, %s0 : tensor<8x8xf32>
    %m1 = loom.matmul %a0, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %s1 = loom.mul %m1, %c1 : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    %a1 = loom.add %a0, %s1 : tensor<8x8xf32>
    %m2 = loom.matmul %a1, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %s2 = loom.mul %m2, %c2 : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
    %a2 = loom.add %a1, %s2 : tensor<8x8xf32>
    return %a2 : tensor<8x8xf32>
  }
}
