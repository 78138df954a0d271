// loom-decompose-gelu-grad spells out any loom.gelu_grad the verifier
// accepts; malformed ones are reported at the op before it runs.

func.func @operand_types(%dy: tensor<4xf32>, %x: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.gelu_grad' op requires the same type for all operands and results}}
  %0 = "loom.gelu_grad"(%dy, %x) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @integers(%dy: tensor<4xi32>, %x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'loom.gelu_grad' op operand #0 must be}}
  %0 = "loom.gelu_grad"(%dy, %x) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
