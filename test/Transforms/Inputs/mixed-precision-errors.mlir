// Error cases of loom-mixed-precision=precision=fp8 (run from
// mixed-precision.mlir): an unknown precision is an error at each function.

// expected-error @+1 {{unknown precision 'fp8' (known: f32, bf16)}}
func.func @forward(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = loom.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
