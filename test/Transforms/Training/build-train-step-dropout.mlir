// RUN: loom-opt --loom-build-train-step="optimizer=sgd lr=0.1 grad-accum=2" %s | FileCheck %s

// Dropout in a training step draws a new mask every step: each dropout of
// the inlined gradient function takes the update count (the step number
// the optimizer uses) as its `step`. Microbatch k numbers its elements
// after those of microbatches 0..k-1 (`index_base` = k times its 24
// elements), so the two microbatches draw the masks one whole batch of 8
// rows would.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[COUNT:.*]] = loom.param @optimizer.step : tensor<f64>
// CHECK:         %[[STEP:.*]] = loom.add %[[COUNT]], %{{.*}} : tensor<f64>
// CHECK:         loom.dropout %{{.*}} ratio 2.500000e-01 seed 11 step %[[STEP]] : tensor<4x3xf32>
// CHECK:         loom.dropout %{{.*}} ratio 2.500000e-01 seed 11 step %[[STEP]] {index_base = 12 : i64} : tensor<4x3xf32>
// CHECK:         loom.assign @optimizer.step, %[[STEP]]
loom.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @forward_loss_grad(%x: tensor<4x4xf32> {onnx.name = "x"},
                             %labels: tensor<4xi64> {onnx.name = "labels"})
    -> (tensor<f32>, tensor<4x3xf32> {loom.gradient_of = @w, onnx.name = "grad.w"}) {
  %w = loom.param @w : tensor<4x3xf32>
  %y = loom.matmul %x, %w : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %d, %m = loom.dropout %y ratio 0.25 seed 11 : tensor<4x3xf32>
  %l = loom.cross_entropy %d, %labels : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  %g = loom.matmul %x, %d transpose_lhs : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}
