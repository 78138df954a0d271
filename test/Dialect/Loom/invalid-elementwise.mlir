// Every verifier error of the elementwise ops (broadcasting, element types,
// compare, select, cast, gelu_grad, dropout).
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @no_broadcast(%a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'loom.add' op shapes 4x8 and 3 do not broadcast: trailing dimension 0 is 8 vs 3}}
  %0 = loom.add %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @element_types_differ(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'loom.mul' op operand element types differ: 'f32' vs 'bf16'}}
  %0 = loom.mul %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @wrong_result_shape(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'loom.sub' op has result type 'tensor<4x4xf32>' but its operands and attributes give 'tensor<4x8xf32>'}}
  %0 = loom.sub %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @pow_on_ints(%a: tensor<4xi32>) {
  // expected-error @+1 {{'loom.pow' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = loom.pow %a, %a : tensor<4xi32>
  return
}

// -----

func.func @bad_elementwise_types(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected '(lhs type, rhs type) -> result type' or a single type}}
  %0 = loom.add %a, %a : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_not_bool(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.compare' op result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = loom.compare lt, %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_no_broadcast(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'loom.compare' op shapes 4 and 5 do not broadcast}}
  %0 = loom.compare ge, %a, %b : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xi1>
  return
}

// -----

func.func @select_condition(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.select' op condition and branches: shapes 3 and 4 do not broadcast}}
  %0 = loom.select %c, %a, %a : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_branches(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'loom.select' op operand element types differ: 'f32' vs 'i32'}}
  %0 = loom.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.cast' op requires the same shape for all operands and results}}
  %0 = loom.cast %a : tensor<4xf32> -> tensor<2x2xbf16>
  return
}

// -----

func.func @gelu_grad_types(%dy: tensor<4xf32>, %x: tensor<4xbf16>) {
  // expected-error @+1 {{'loom.gelu_grad' op requires the same type for all operands and results}}
  %0 = "loom.gelu_grad"(%dy, %x) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.dropout' op ratio 1.000000e+00 must be in [0, 1)}}
  %0:2 = loom.dropout %x ratio 1.0 : tensor<4xf32>
  return
}

// -----

func.func @dropout_block_rank(%x: tensor<4x2xf32>, %at: tensor<1xi64>) {
  // expected-error @+1 {{'loom.dropout' op needs one offset and one global size per dimension of its 2-d input}}
  %0:2 = loom.dropout %x ratio 0.5 at %at of [8] : tensor<4x2xf32>
  return
}

// -----

func.func @dropout_block_larger(%x: tensor<4x2xf32>, %at: tensor<2xi64>) {
  // expected-error @+1 {{'loom.dropout' op global size 1 of dimension 1 is smaller than the block's 2}}
  %0:2 = loom.dropout %x ratio 0.5 at %at of [8, 1] : tensor<4x2xf32>
  return
}

// -----

func.func @dropout_index_base(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.dropout' op index_base -1 must not be negative}}
  %0:2 = loom.dropout %x ratio 0.5 {index_base = -1} : tensor<4xf32>
  return
}

// -----

func.func @maximum_types(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{'loom.maximum' op operand element types differ}}
  %0 = loom.maximum %a, %b : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @sin_integer(%i: tensor<4xi64>) {
  // expected-error @+1 {{'loom.sin' op operand #0 must be statically shaped tensor of}}
  %0 = loom.sin %i : tensor<4xi64>
  return
}
