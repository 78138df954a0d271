// Every verifier error of `loom.gather` and `loom.scatter_add`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @gather_axis(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.gather' op axis 2 is out of range for an input of rank 2}}
  %0 = loom.gather %t[%i] axis 2 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'loom.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = loom.gather %t[%i] : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_result(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.gather' op has result type 'tensor<4x3xf32>' but its operands and attributes give 'tensor<3x4xf32>'}}
  %0 = loom.gather %t[%i] : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @scatter_add_shape(%dy: tensor<8x16xf32>, %ids: tensor<4xi64>) -> tensor<64x16xf32> {
  // expected-error @+1 {{updates 'tensor<8x16xf32>' should have shape 4x16 for indices 'tensor<4xi64>' and result 'tensor<64x16xf32>'}}
  %0 = loom.scatter_add %dy[%ids] : (tensor<8x16xf32>, tensor<4xi64>) -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}

// -----

func.func @gather_padding(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.gather' op padding_idx 10 is outside [-10, 10)}}
  %0 = loom.gather %t[%i] padding_idx 10 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}
