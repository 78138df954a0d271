// A two-layer GELU MLP for bf16 training tests (mixed-precision-train.mlir's
// model with a named input).
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
