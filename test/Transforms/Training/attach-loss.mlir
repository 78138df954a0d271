// RUN: loom-opt --loom-attach-loss %s | FileCheck %s --check-prefix=CE
// RUN: loom-opt --loom-attach-loss=kind=mse %s | FileCheck %s --check-prefix=MSE
// RUN: loom-opt --split-input-file --verify-diagnostics --loom-attach-loss=kind=none %S/Inputs/attach-loss-errors.mlir
// RUN: not loom-opt --loom-attach-loss=kind=hinge %s 2>&1 | FileCheck %s --check-prefix=KIND

// The model is inlined into the loss function, which takes the labels last
// and returns the loss first, then the model's results.
// CE-LABEL: func.func @forward_loss(
// CE-SAME:    %[[X:[^:]*]]: tensor<2x3x4xf32> {onnx.name = "x"}, %[[L:[^:]*]]: tensor<2x3xi64> {onnx.name = "labels"})
// CE-SAME:    -> (tensor<f32> {onnx.name = "loss"}, tensor<2x3x5xf32> {onnx.name = "logits"})
// CE-NEXT:    %[[W:.*]] = loom.param @w
// CE-NEXT:    %[[Y:.*]] = loom.matmul %[[X]], %[[W]]
// CE-NEXT:    %[[LOSS:.*]] = loom.cross_entropy %[[Y]], %[[L]] : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> tensor<f32>
// CE-NEXT:    return %[[LOSS]], %[[Y]]

// MSE-LABEL: func.func @forward_loss(
// MSE-SAME:    %{{.*}}: tensor<2x3x4xf32> {onnx.name = "x"}, %[[L:[^:]*]]: tensor<2x3x5xf32> {onnx.name = "labels"})
// MSE:         %[[Y:.*]] = loom.matmul
// MSE-NEXT:    %[[D:.*]] = loom.sub %[[Y]], %[[L]]
// MSE-NEXT:    %[[S:.*]] = loom.mul %[[D]], %[[D]]
// MSE-NEXT:    %[[LOSS:.*]] = loom.reduce_mean %[[S]] [0, 1, 2] : tensor<2x3x5xf32> -> tensor<f32>
// MSE-NEXT:    return %[[LOSS]], %[[Y]]

// KIND: for the --kind option: Cannot find option named 'hinge'!
loom.parameter @w trainable : tensor<4x5xf32>
func.func @forward(%x: tensor<2x3x4xf32> {onnx.name = "x"}) -> (tensor<2x3x5xf32> {onnx.name = "logits"}) {
  %w = loom.param @w : tensor<4x5xf32>
  %y = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}
