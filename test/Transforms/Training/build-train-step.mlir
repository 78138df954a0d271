// RUN: loom-opt --loom-build-train-step="optimizer=sgd lr=0.1 momentum=0.9" %s | FileCheck %s --check-prefix=SGD
// RUN: loom-opt --loom-build-train-step="optimizer=adamw" %s | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt --loom-build-train-step="optimizer=sgd lr=0.1 grad-accum=2 clip-grad-norm=1.0" %s | FileCheck %s --check-prefix=ACCUM
// RUN: not loom-opt --loom-build-train-step="optimizer=sgd" %s 2>&1 | FileCheck %s --check-prefix=NOLR
// RUN: not loom-opt --loom-build-train-step="optimizer=lion" %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: loom-opt --split-input-file --verify-diagnostics --loom-build-train-step %S/Inputs/build-train-step-errors.mlir
// RUN: loom-opt --verify-diagnostics --loom-build-train-step=grad-accum=2 %S/Inputs/build-train-step-accum-errors.mlir

// One update per gradient result, state named like torch's, zero-initialized;
// the step count is shared, read first (the updates' step-dependent scalars
// are then ready before the backward pass) and stored last; only the loss
// is returned.
// SGD:         loom.parameter @optimizer.step : tensor<f64> = dense<0.000000e+00>
// SGD:         loom.parameter @optimizer.w.momentum_buffer : tensor<4x3xf32> = dense<0.000000e+00>
// SGD-NOT:     loom.parameter @optimizer.frozen
// SGD-LABEL:   func.func @train_step(
// SGD-SAME:      %{{.*}}: tensor<8x4xf32> {onnx.name = "x"}, %{{.*}}: tensor<8xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"})
// SGD-NEXT:      %[[COUNT:.*]] = loom.param @optimizer.step : tensor<f64>
// SGD-NEXT:      %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f64>
// SGD-NEXT:      %[[STEP:.*]] = loom.add %[[COUNT]], %[[ONE]] : tensor<f64>
// SGD:           %[[LOSS:.*]] = loom.cross_entropy
// SGD:           %[[BUF:.*]] = loom.param @optimizer.w.momentum_buffer
// SGD:           %[[W:.*]] = loom.param @w
// SGD:           %[[NEW:.*]], %[[NEWBUF:.*]] = loom.sgd_update %[[W]], %{{.*}}, %[[STEP]], %[[BUF]] {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64}
// SGD-NEXT:      loom.assign @w, %[[NEW]] : tensor<4x3xf32>
// SGD-NEXT:      loom.assign @optimizer.w.momentum_buffer, %[[NEWBUF]] : tensor<4x3xf32>
// SGD-NEXT:      loom.assign @optimizer.step, %[[STEP]] : tensor<f64>
// SGD-NEXT:      return %[[LOSS]] : tensor<f32>

// AdamW keeps two moments; torch's defaults apply (lr 1e-3, weight decay 1e-2).
// ADAMW: loom.parameter @optimizer.w.exp_avg : tensor<4x3xf32>
// ADAMW: loom.parameter @optimizer.w.exp_avg_sq : tensor<4x3xf32>
// ADAMW: loom.adamw_update {{.*}} {lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f64>, tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)

// Two microbatches: the arguments double along dimension 0, each half runs
// the gradient function, losses and gradients are averaged, then clipped by
// the global norm. The parameters are read once, with the first microbatch,
// for both: the second reuses the reads.
// ACCUM-LABEL: func.func @train_step(
// ACCUM-SAME:    tensor<16x4xf32> {onnx.name = "x"}, %{{.*}}: tensor<16xi64> {onnx.name = "labels"})
// ACCUM:         loom.slice %{{.*}} [0:8, 0:4] : tensor<16x4xf32> -> tensor<8x4xf32>
// ACCUM:         %[[W:.*]] = loom.param @w
// ACCUM:         %[[FROZEN:.*]] = loom.param @frozen
// ACCUM:         loom.matmul %{{.*}}, %[[W]]
// ACCUM:         %[[L0:.*]] = loom.cross_entropy
// ACCUM-NOT:     loom.param
// ACCUM:         loom.slice %{{.*}} [8:16, 0:4] : tensor<16x4xf32> -> tensor<8x4xf32>
// ACCUM-NOT:     loom.param
// ACCUM:         loom.matmul %{{.*}}, %[[W]]
// ACCUM-NOT:     loom.param
// ACCUM:         loom.mul %{{.*}}, %[[FROZEN]]
// ACCUM:         %[[L1:.*]] = loom.cross_entropy
// ACCUM:         loom.add %[[L0]], %[[L1]] : tensor<f32>
// ACCUM:         %[[HALF:.*]] = loom.constant dense<5.000000e-01> : tensor<f32>
// ACCUM:         loom.mul %{{.*}}, %[[HALF]] : tensor<f32>
// ACCUM:         loom.reduce_sum
// ACCUM:         %[[NORM:.*]] = loom.sqrt
// ACCUM:         loom.compare lt
// ACCUM:         %[[COEF:.*]] = loom.select
// ACCUM:         loom.mul %{{.*}}, %[[COEF]] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// ACCUM:         loom.sgd_update

// NOLR: error: the sgd optimizer needs a learning rate (lr), as torch.optim.SGD
// UNKNOWN: for the --optimizer option: Cannot find option named 'lion'!

loom.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
loom.parameter @frozen : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward_loss_grad(%x: tensor<8x4xf32> {onnx.name = "x"},
                             %labels: tensor<8xi64> {onnx.name = "labels"})
    -> (tensor<f32>, tensor<4x3xf32> {loom.gradient_of = @w, onnx.name = "grad.w"}) {
  %w = loom.param @w : tensor<4x3xf32>
  %f = loom.param @frozen : tensor<3xf32>
  %y = loom.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %z = loom.mul %y, %f : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %l = loom.cross_entropy %z, %labels : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  %g = loom.matmul %x, %y transpose_lhs : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}
