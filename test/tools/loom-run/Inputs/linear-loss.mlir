loom.parameter @w : tensor<4x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]> : tensor<4x3xf32>
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}, %ids: tensor<2xi64> {onnx.name = "ids"}) -> (tensor<2x3xf32> {onnx.name = "y"}, tensor<f32> {onnx.name = "loss"}) {
  %w = loom.param @w : tensor<4x3xf32>
  %h = loom.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = loom.cross_entropy %h, %ids : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %h, %l : tensor<2x3xf32>, tensor<f32>
}
