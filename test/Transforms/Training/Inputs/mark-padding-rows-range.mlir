// loom-mark-padding-rows=padding-idx=emb=8 (run from mark-padding-rows.mlir).

// expected-error @+1 {{--padding-idx emb=8: parameter 'emb.weight' has 8 rows}}
module {
  loom.parameter @emb.weight trainable : tensor<8x4xf32>
  func.func @forward(%ids: tensor<3xi64>) -> tensor<3x4xf32> {
    %w = loom.param @emb.weight : tensor<8x4xf32>
    %e = loom.gather %w[%ids] : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    return %e : tensor<3x4xf32>
  }
}
