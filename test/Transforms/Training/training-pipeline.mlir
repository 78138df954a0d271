// RUN: loom-opt --loom-training-pipeline='optimizer=sgd lr=0.1' %s | FileCheck %s
// RUN: loom-opt --loom-training-pipeline='optimizer=adamw lr=0.01 precision=bf16 freeze=^b1$ loss=mse' %s --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPELINE
// RUN: loom-opt --loom-training-pipeline='optimizer=adamw lr=0.01 precision=bf16 freeze=^b1$ loss=mse' %s | FileCheck %s --check-prefix=BF16
// RUN: not loom-opt --loom-training-pipeline='optimizer=lion' %s 2>&1 | FileCheck %s --check-prefix=ENUM
// RUN: not loom-opt --loom-training-pipeline='freeze=.' %s 2>&1 | FileCheck %s --check-prefix=FROZEN

// The step replaces the model: its own functions are erased.
// CHECK-NOT: func.func @forward
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {onnx.name = "x"}
// CHECK-SAME: {onnx.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"})
// CHECK-COUNT-2: loom.sgd_update
// CHECK-NOT: func.func

// The order the pipeline's definition names, with loom-run's flags as its
// options.
// PIPELINE: builtin.module(loom-freeze-parameters{freeze=^b1$},loom-mark-padding-rows{},canonicalize{{.*}},func.func(loom-fuse-attention),func.func(loom-mixed-precision{precision=bf16}),loom-attach-loss{function=forward kind=mse},func.func(loom-pad-classes{{.*}}),loom-autodiff{function=forward_loss {{.*}}},func.func(loom-narrow-bias-gradients),loom-build-train-step{{.*}}erase-sources=true function=forward_loss_grad{{.*}}optimizer=adamw

// The frozen bias gets no update; the GEMMs run in bf16.
// BF16: loom.parameter @b1 : tensor<16xf32>
// BF16: loom.parameter @optimizer.w1.exp_avg
// BF16-NOT: optimizer.b1
// BF16: func.func @train_step
// BF16: loom.matmul {{.*}}bf16
// BF16-COUNT-2: loom.adamw_update

// ENUM: for the --optimizer option: Cannot find option named 'lion'!
// FROZEN: error: the model has no trainable parameters (float initializers; --freeze '.' matches them all)

loom.parameter @w1 trainable : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
loom.parameter @b1 trainable : tensor<16xf32> = dense<0.1> : tensor<16xf32>
loom.parameter @w2 trainable : tensor<4x16xf32> = dense<0.25> : tensor<4x16xf32>
func.func @forward(%x: tensor<2x3x8xf32> {onnx.name = "x"}) -> tensor<2x3x4xf32> {
  %w1 = loom.param @w1 : tensor<16x8xf32>
  %b1 = loom.param @b1 : tensor<16xf32>
  %w2 = loom.param @w2 : tensor<4x16xf32>
  %0 = loom.matmul %x, %w1 transpose_rhs : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %1 = loom.bias_add %0, %b1 : tensor<2x3x16xf32>, tensor<16xf32>
  %2 = loom.gelu %1 : tensor<2x3x16xf32>
  %3 = loom.matmul %2, %w2 transpose_rhs : (tensor<2x3x16xf32>, tensor<4x16xf32>) -> tensor<2x3x4xf32>
  return %3 : tensor<2x3x4xf32>
}
