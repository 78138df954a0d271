// Verifier errors of the tensor types themselves, whatever the op: dynamic
// shapes, unsupported element types and element counts past 64 bits.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @dynamic_shape(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = loom.exp %x : tensor<?x4xf32>
  return
}

// -----

func.func @unsupported_element(%x: tensor<4xi8>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values}}
  %0 = loom.reshape %x : tensor<4xi8> -> tensor<2x2xi8>
  return
}

// -----

func.func @float_op_on_ints(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = loom.exp %x : tensor<4xi32>
  return
}

// -----

func.func @too_many_elements(%x: tensor<8589934592x2147483648xf32>) {
  // expected-error @+1 {{'loom.reshape' op operand #0 of type 'tensor<8589934592x2147483648xf32>' has more elements than fit in 64 bits}}
  %0 = loom.reshape %x : tensor<8589934592x2147483648xf32> -> tensor<4294967296x4294967296xf32>
  return
}

// -----

func.func @too_many_result_elements(%x: tensor<2xi32>) {
  // expected-error @+1 {{'loom.reshape' op result #0 of type 'tensor<3x6148914691236517206xi32>' has more elements than fit in 64 bits}}
  %0 = loom.reshape %x : tensor<2xi32> -> tensor<3x6148914691236517206xi32>
  return
}

// -----

// expected-error @+1 {{'loom.parameter' op has type 'tensor<4294967296x4294967296xf32>', which has more elements than fit in 64 bits}}
loom.parameter @huge : tensor<4294967296x4294967296xf32>
