// The training-step pipeline of `loom-run --train --precision bf16`: mixed
// precision on the forward model, then loss, autodiff and the step
// (loom-run also pads the 4 classes to 8 after the loss, loom-pad-classes:
// left out here, tested in pad-classes.mlir and Examples/train-bf16.test).
// RUN: loom-opt %s --canonicalize --loom-mixed-precision --loom-attach-loss --loom-autodiff=function=forward_loss --loom-narrow-bias-gradients "--loom-build-train-step=function=forward_loss_grad optimizer=sgd lr=0.1" | FileCheck %s
// RUN: loom-opt %s --canonicalize --loom-mixed-precision --loom-attach-loss --loom-autodiff=function=forward_loss --loom-narrow-bias-gradients "--loom-build-train-step=function=forward_loss_grad optimizer=sgd lr=0.1" --loom-lower-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: loom-opt %s --canonicalize --loom-mixed-precision --loom-attach-loss --loom-autodiff=function=forward_loss --loom-narrow-bias-gradients "--loom-build-train-step=function=forward_loss_grad optimizer=sgd lr=0.1" | FileCheck %s --check-prefix=BIAS

// The bias gradient sums the bf16 copy of the GELU's gradient that the
// first layer's weight-gradient GEMM reads (loom-narrow-bias-gradients).
// BIAS-LABEL: func.func @train_step(
// BIAS-NOT:   loom.reduce_sum {{.*}} : tensor<2x3x16xf32>
// BIAS:       loom.reduce_sum %{{.*}} [0, 1] keepdims : tensor<2x3x16xbf16> -> tensor<1x1x16xf32>
// BIAS-NOT:   loom.reduce_sum {{.*}} : tensor<2x3x16xf32>

loom.parameter @w1 trainable : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
loom.parameter @b1 trainable : tensor<16xf32> = dense<0.1> : tensor<16xf32>
loom.parameter @w2 trainable : tensor<4x16xf32> = dense<0.25> : tensor<4x16xf32>

// Parameters and optimizer state stay f32 (master weights).
// CHECK-NOT: loom.parameter {{.*}}bf16

// Forward: GEMMs in bf16 between casts; bias, GELU and the loss in f32.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[W1:.*]] = loom.param @w1 : tensor<16x8xf32>
// CHECK: %[[W2:.*]] = loom.param @w2 : tensor<4x16xf32>
// CHECK: %[[X:.*]] = loom.cast %arg0 : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
// CHECK: %[[W1L:.*]] = loom.cast %[[W1]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK: loom.matmul %[[X]], %[[W1L]] transpose_rhs : (tensor<2x3x8xbf16>, tensor<16x8xbf16>) -> tensor<2x3x16xbf16>
// CHECK: %[[PRE:.*]] = loom.bias_add %{{.*}} : tensor<2x3x16xf32>, tensor<16xf32>
// CHECK: %[[H:.*]] = loom.gelu %[[PRE]] : tensor<2x3x16xf32>
// CHECK: %[[HL:.*]] = loom.cast %[[H]] : tensor<2x3x16xf32> -> tensor<2x3x16xbf16>
// CHECK: %[[W2L:.*]] = loom.cast %[[W2]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: loom.matmul %[[HL]], %[[W2L]] transpose_rhs : (tensor<2x3x16xbf16>, tensor<4x16xbf16>) -> tensor<2x3x4xbf16>
// CHECK: %[[LOGITS:.*]] = loom.cast %{{.*}} : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: loom.cross_entropy %[[LOGITS]], %arg1 : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<f32>

// Backward: the gradient of the logits is cast to bf16 (the gradient of the
// cast), the backward GEMMs read the saved bf16 operands, and their results
// are cast back to f32; loom-build-train-step marks the casts that make the
// weights' gradients (`loom.parameter_gradient`: data parallelism reduces
// those in f32, any other partial sum before its widening, in bf16).
// CHECK: %[[DYF:.*]] = loom.cross_entropy_grad %[[LOGITS]], %arg1, %{{.*}} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x4xf32>
// CHECK: %[[DY:.*]] = loom.cast %[[DYF]] : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK: %[[DH:.*]] = loom.matmul %[[DY]], %[[W2L]] : (tensor<2x3x4xbf16>, tensor<4x16xbf16>) -> tensor<2x3x16xbf16>
// CHECK: %[[DW2L:.*]] = loom.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<6x4xbf16>, tensor<6x16xbf16>) -> tensor<4x16xbf16>
// CHECK: %[[DW2:.*]] = loom.cast %[[DW2L]] {loom.parameter_gradient} : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: loom.cast %[[DH]] : tensor<2x3x16xbf16> -> tensor<2x3x16xf32>
// CHECK: %[[DW1L:.*]] = loom.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<6x16xbf16>, tensor<6x8xbf16>) -> tensor<16x8xbf16>
// CHECK: %[[DW1:.*]] = loom.cast %[[DW1L]] {loom.parameter_gradient} : tensor<16x8xbf16> -> tensor<16x8xf32>

// The optimizer updates f32 weights with f32 gradients.
// CHECK: loom.sgd_update %{{.*}}, %[[DW1]], %{{.*}} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<f64>) -> tensor<16x8xf32>
// CHECK: loom.sgd_update %{{.*}}, %[[DW2]], %{{.*}} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f64>) -> tensor<4x16xf32>

// Lowered: the casts fuse into their neighbours, so the GELU kernel stores
// its activation for the GEMM in bf16, and the GEMMs run on bf16 buffers.
// PLAN-LABEL: func.func @train_step(
// PLAN: plan.kernel "matmul" ins(%{{.*}}, %{{.*}} : memref<2x3x8xbf16>, memref<16x8xbf16>) outs(%{{.*}} : memref<2x3x16xbf16>)
// PLAN: plan.kernel "elementwise" ins(%{{.*}}, %{{.*}} : memref<2x3x16xbf16>, memref<16xf32>) outs({{.*}}memref<2x3x16xbf16>
// PLAN: loom.cast %{{.*}} : tensor<2x3x16xbf16> -> tensor<2x3x16xf32>
// PLAN: loom.gelu
// PLAN: loom.cast %{{.*}} : tensor<2x3x16xf32> -> tensor<2x3x16xbf16>
// PLAN: plan.kernel "matmul" ins(%{{.*}}, %{{.*}} : memref<2x3x16xbf16>, memref<4x16xbf16>) outs(%[[LOGITS:.*]] : memref<2x3x4xbf16>)
// The loss and its gradient read the bf16 logits (one kernel:
// loom-fuse-cross-entropy-grad), and the gradient is written in bf16 for
// the backward GEMM: no f32 logits.
// PLAN: plan.kernel "cross_entropy" ins(%[[LOGITS]], %{{.*}}, %{{.*}} : memref<2x3x4xbf16>, memref<2x3xi64>, memref<f32>) outs(%{{.*}}, %[[DY:.*]] : memref<f32>, memref<2x3x4xbf16>)
// PLAN-NOT: cross_entropy_backward
// PLAN: plan.kernel "matmul" ins(%[[DY]], %{{.*}} : memref<2x3x4xbf16>, memref<4x16xbf16>)
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x4xf32> {
  %w1 = loom.param @w1 : tensor<16x8xf32>
  %b1 = loom.param @b1 : tensor<16xf32>
  %w2 = loom.param @w2 : tensor<4x16xf32>
  %0 = loom.matmul %x, %w1 transpose_rhs : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %1 = loom.bias_add %0, %b1 : tensor<2x3x16xf32>, tensor<16xf32>
  %2 = loom.gelu %1 : tensor<2x3x16xf32>
  %3 = loom.matmul %2, %w2 transpose_rhs : (tensor<2x3x16xf32>, tensor<4x16xf32>) -> tensor<2x3x4xf32>
  return %3 : tensor<2x3x4xf32>
}
