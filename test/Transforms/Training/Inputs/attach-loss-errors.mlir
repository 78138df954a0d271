// Error cases of loom-attach-loss=kind=none (run from attach-loss.mlir).

// expected-error @+1 {{'func.func' op result #0 must be the scalar loss for loss 'none', got 'tensor<4xf32>'}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op result #0 must be a float tensor to take a loss of}}
func.func @forward(%x: tensor<4xi64>) -> tensor<4xi64> {
  return %x : tensor<4xi64>
}

// -----

// expected-error @+1 {{no function 'forward' with a result to attach a loss to}}
module {
}
