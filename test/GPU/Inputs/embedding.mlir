// An embedding lookup: the row of @table named by each index.
loom.parameter @table : tensor<4x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
func.func @forward(%ids: tensor<3xi64> {onnx.name = "ids"}) -> (tensor<3x2xf32> {onnx.name = "rows"}) {
  %t = loom.param @table : tensor<4x2xf32>
  %r = loom.gather %t[%ids] : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}
