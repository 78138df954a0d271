// Every verifier error of `loom.matmul` and `loom.bias_add`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @matmul_vector(%a: tensor<4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op lhs has rank 1; matmul needs rank >= 2 (reshape vectors to matrices)}}
  %0 = loom.matmul %a, %b : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<4x64xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+1 {{'loom.matmul' op contracting dimensions differ: lhs 4x64 has K = 64, rhs 32x8 has K = 32}}
  %0 = loom.matmul %a, %b : (tensor<4x64xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<4x2x8xf32>, %b: tensor<8x8x3xf32>) {
  // expected-error @+1 {{'loom.matmul' op batch dimensions differ: lhs 4x2x8 vs rhs 8x8x3 (4 vs 8); broadcast them explicitly with loom.broadcast}}
  %0 = loom.matmul %a, %b : (tensor<4x2x8xf32>, tensor<8x8x3xf32>) -> tensor<4x2x3xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<4x8xf32>, %b: tensor<8x4xbf16>) {
  // expected-error @+1 {{'loom.matmul' op operand element types differ: 'f32' vs 'bf16'}}
  %0 = loom.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xbf16>) -> tensor<4x4xf32>
  return
}

// -----

func.func @bias_rank(%x: tensor<4x8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'loom.bias_add' op bias must have rank 1, got 'tensor<1x8xf32>'}}
  %0 = loom.bias_add %x, %b : tensor<4x8xf32>, tensor<1x8xf32>
  return
}

// -----

func.func @bias_size(%x: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'loom.bias_add' op bias has 4 elements but the last dimension of 'tensor<4x8xf32>' must match it}}
  %0 = loom.bias_add %x, %b : tensor<4x8xf32>, tensor<4xf32>
  return
}
