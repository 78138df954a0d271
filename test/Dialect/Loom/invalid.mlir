// Every verifier error of the loom ops.
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

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.parameter' op is trainable but has element type 'i64'; only floating-point parameters can be trained}}
loom.parameter @ids trainable : tensor<4xi64>

// -----

// expected-error @+1 {{'loom.parameter' op has initial value of type 'tensor<3xf32>' but is declared as 'tensor<4xf32>'}}
loom.parameter @w : tensor<4xf32> = dense<0.0> : tensor<3xf32>

// -----

// expected-error @+1 {{'loom.parameter' op has external data of 12 bytes but 'tensor<4xf32>' takes 4 x 4 bytes}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = 0, length = 12>

// -----

// One byte per i1 element, as in ONNX (not bit-packed).
// expected-error @+1 {{'loom.parameter' op has external data of 1 bytes but 'tensor<4xi1>' takes 4 x 1 bytes}}
loom.parameter @mask : tensor<4xi1> = #loom.external_data<"m.bin", offset = 8, length = 1>

// -----

// expected-error @+1 {{external data offset and length must be non-negative, got offset -1 and length 16}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = -1, length = 16>

// -----

// expected-error @+1 {{external data needs a file path}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"", offset = 0, length = 16>

// -----

// expected-error @+1 {{external data ends past 2^63 bytes}}
loom.parameter @w : tensor<4xf32> = #loom.external_data<"w.bin", offset = 9223372036854775800, length = 16>

// -----

loom.parameter @w trainable : tensor<4xf32>
// expected-error @+1 {{'loom.parameter' op is trainable but its value is a cast of another parameter}}
loom.parameter @c trainable : tensor<4xbf16> = #loom.cast_of<@w>

// -----

loom.parameter @w : tensor<4xf64>
// expected-error @+1 {{'loom.parameter' op is a cast of another parameter, which needs a bf16 element type, not 'f32'}}
loom.parameter @c : tensor<4xf32> = #loom.cast_of<@w>

// -----

// expected-error @+1 {{'loom.parameter' op is a cast of @missing, which is not a loom.parameter}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@missing>

// -----

loom.parameter @w : tensor<3xf32>
// expected-error @+1 {{'loom.parameter' op is a cast of @w of type 'tensor<3xf32>', which has another shape}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>

// -----

loom.parameter @w : tensor<4xi32>
// expected-error @+1 {{'loom.parameter' op is a cast of @w of type 'tensor<4xi32>'; only f32 and f64 parameters have bf16 copies}}
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>

// -----

// A copy is bf16, so a copy of a copy has the wrong source type.
loom.parameter @w : tensor<4xf32>
loom.parameter @c : tensor<4xbf16> = #loom.cast_of<@w>
// expected-error @+1 {{'loom.parameter' op is a cast of @c of type 'tensor<4xbf16>'; only f32 and f64 parameters have bf16 copies}}
loom.parameter @d : tensor<4xbf16> = #loom.cast_of<@c>

// -----

loom.mesh @mesh = <tp = 4>
// expected-error @+1 {{'loom.parameter' op has an invalid sharding of the parameter: dimension 0 of 'tensor<6xf32>' has size 6, which 4 shards do not divide evenly}}
loom.parameter @w : tensor<6xf32> sharding <@mesh, [{tp}]>

// -----

func.func @undefined_parameter() {
  // expected-error @+1 {{'loom.param' op reads @missing, which is not defined}}
  %0 = loom.param @missing : tensor<4xf32>
  return
}

// -----

loom.mesh @mesh = <tp = 4>
func.func @not_a_parameter() {
  // expected-error @+1 {{'loom.param' op reads @mesh, which is not a loom.parameter}}
  %0 = loom.param @mesh : tensor<4xf32>
  return
}

// -----

loom.parameter @w : tensor<4xf32>
func.func @parameter_type_mismatch() {
  // expected-error @+1 {{'loom.param' op has type 'tensor<8xf32>' but parameter @w is 'tensor<4xf32>'}}
  %0 = loom.param @w : tensor<8xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{'loom.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "loom.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

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

func.func @fused_matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op result 'tensor<4x8xf32>' is not the product's type 'tensor<4x16xf32>' (or f32 for bf16 operands)}}
  %0 = loom.fused_matmul %a, %b activation relu : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @fused_matmul_contracting(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op contracting dimensions differ: lhs 4x8 has K = 8, rhs 16x8 has K = 16}}
  %0 = loom.fused_matmul %a, %b activation relu : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @fused_matmul_bias(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op bias 'tensor<8xf32>' must be a vector of the 16 'f32' columns of the result}}
  %0 = loom.fused_matmul %a, %b bias %c : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_matmul_bias_type(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op bias 'tensor<16xf32>' must be a vector of the 16 'bf16' columns of the result}}
  %0 = loom.fused_matmul %a, %b bias %c : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @gelu_grad_types(%dy: tensor<4xf32>, %x: tensor<4xbf16>) {
  // expected-error @+1 {{'loom.gelu_grad' op requires the same type for all operands and results}}
  %0 = "loom.gelu_grad"(%dy, %x) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_gelu_grad_product(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %x: tensor<4x16xf32>) {
  // expected-error @+1 {{'loom.matmul_gelu_grad' op contracting dimensions differ: lhs 4x8 has K = 8, rhs 16x8 has K = 16}}
  %0 = loom.matmul_gelu_grad %a, %b, %x : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @matmul_gelu_grad_result(%a: tensor<4x8xbf16>, %b: tensor<16x8xbf16>, %x: tensor<4x16xbf16>) {
  // expected-error @+1 {{'loom.matmul_gelu_grad' op result 'tensor<4x16xf32>' is not the product's type 'tensor<4x16xbf16>'}}
  %0 = loom.matmul_gelu_grad %a, %b, %x transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<4x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @matmul_gelu_grad_input(%a: tensor<4x8xbf16>, %b: tensor<16x8xbf16>, %x: tensor<4x16xf32>) {
  // expected-error @+1 {{'loom.matmul_gelu_grad' op input 'tensor<4x16xf32>' must have the product's type 'tensor<4x16xbf16>'}}
  %0 = loom.matmul_gelu_grad %a, %b, %x transpose_rhs : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<4x16xf32>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @matmul_bias_grad_rank(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.matmul_bias_grad' op operands 'tensor<2x4x8xf32>' and 'tensor<8x16xf32>' must be matrices [K, M] and [K, N]}}
  %0:2 = loom.matmul_bias_grad %a, %b sum lhs : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>)
  return
}

// -----

func.func @matmul_bias_grad_rows(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.matmul_bias_grad' op operands 'tensor<4x8xf32>' and 'tensor<8x16xf32>' must have the same K rows}}
  %0:2 = loom.matmul_bias_grad %a, %b sum lhs : (tensor<4x8xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>)
  return
}

// -----

func.func @matmul_bias_grad_types(%a: tensor<4x8xbf16>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{'loom.matmul_bias_grad' op operands 'tensor<4x8xbf16>' and 'tensor<4x16xf32>' must have one element type}}
  %0:2 = loom.matmul_bias_grad %a, %b sum lhs : (tensor<4x8xbf16>, tensor<4x16xf32>) -> (tensor<8x16xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @matmul_bias_grad_result(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{'loom.matmul_bias_grad' op result 'tensor<16x8xf32>' is not the product's type 'tensor<8x16xf32>'}}
  %0:2 = loom.matmul_bias_grad %a, %b sum lhs : (tensor<4x8xf32>, tensor<4x16xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @matmul_bias_grad_sum(%a: tensor<4x8xbf16>, %b: tensor<4x16xbf16>) {
  // expected-error @+1 {{'loom.matmul_bias_grad' op bias_grad 'tensor<16xf32>' must be 'tensor<16xbf16>', the sum of the rhs's rows}}
  %0:2 = loom.matmul_bias_grad %a, %b sum rhs : (tensor<4x8xbf16>, tensor<4x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xf32>)
  return
}

// -----

func.func @fused_matmul_addend_type(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %c: tensor<16xf32>, %r: tensor<4x16xbf16>) {
  // expected-error @+1 {{'loom.fused_matmul' op addend 'tensor<4x16xbf16>' must have the result's type 'tensor<4x16xf32>'}}
  %0 = loom.fused_matmul %a, %b bias %c add %r : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>, tensor<4x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_matmul_addend_bf16(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %r: tensor<4x16xbf16>) {
  // expected-error @+1 {{'loom.fused_matmul' op adds an addend to a bf16 result; it needs an f32 or f64 one}}
  %0 = loom.fused_matmul %a, %b add %r : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @fused_matmul_addend_activation(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %r: tensor<4x16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op adds an addend after an activation, which a GEMM epilogue does not do}}
  %0 = loom.fused_matmul %a, %b add %r activation relu : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_matmul_widened_f32(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op result 'tensor<4x16xf64>' is not the product's type 'tensor<4x16xf32>' (or f32 for bf16 operands)}}
  %0 = loom.fused_matmul %a, %b activation relu : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf64>
  return
}

// -----

func.func @fused_matmul_preactivation(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op has a preactivation result but no activation}}
  %0:2 = loom.fused_matmul %a, %b bias %c : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @fused_matmul_preactivation_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.fused_matmul' op preactivation 'tensor<4x8xf32>' must have the result's type 'tensor<4x16xf32>'}}
  %0:2 = loom.fused_matmul %a, %b activation gelu_tanh : (tensor<4x8xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x8xf32>)
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

// -----

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

func.func @reshape_count(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reshape' op cannot reshape 'tensor<4x8xf32>' (32 elements) to 'tensor<4x4xf32>' (16 elements)}}
  %0 = loom.reshape %x : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.transpose' op permutation has 3 entries for an input of rank 2}}
  %0 = loom.transpose %x [0, 1, 2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.transpose' op [1, 1] is not a permutation of 0..1}}
  %0 = loom.transpose %x [1, 1] : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @slice_ranges(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op expected 2 ranges (one per dimension), got 1}}
  %0 = loom.slice %x [0:2] : tensor<4x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op range 2:9 of dimension 1 is not within 0:8 with start <= limit}}
  %0 = loom.slice %x [0:4, 2:9] : tensor<4x8xf32> -> tensor<4x7xf32>
  return
}

// -----

func.func @slice_reversed(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op range 3:1 of dimension 0 is not within 0:4 with start <= limit}}
  %0 = loom.slice %x [3:1, 0:8] : tensor<4x8xf32> -> tensor<0x8xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op stride 0 of dimension 0 must be positive}}
  %0 = loom.slice %x [0:4:0, 0:8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{'loom.concat' op needs at least one input}}
  %0 = loom.concat axis 0 : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.concat' op axis 1 is out of range for inputs of rank 1}}
  %0 = loom.concat %a, %a axis 1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<4xf32>, %b: tensor<4x1xf32>) {
  // expected-error @+1 {{'loom.concat' op input #1 is 'tensor<4x1xf32>' but input #0 is 'tensor<4xf32>'; inputs need one rank and element type}}
  %0 = loom.concat %a, %b axis 0 : (tensor<4xf32>, tensor<4x1xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_other_dims(%a: tensor<4x3xf32>, %b: tensor<5x3xf32>) {
  // expected-error @+1 {{'loom.concat' op input #1 has size 5 in dimension 0 but input #0 has 4; only the axis dimension 1 may differ}}
  %0 = loom.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op axis 2 is out of range for an input of rank 2}}
  %0:2 = loom.split %x axis 2 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result sizes along axis 1 add up to 7 but the input has 8}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @split_other_dims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result #1 has size 2 in dimension 0 but the input has 4}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @split_element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result #0 is 'tensor<4x4xbf16>' but the input is 'tensor<4x8xf32>'; pieces keep the rank and element type}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x4xbf16>, tensor<4x4xf32>
  return
}

// -----

func.func @split_nothing(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op needs at least one result}}
  "loom.split"(%x) {axis = 1 : i64} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @broadcast_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast 3x4 to 8x5: input dimensions, aligned with the trailing result dimensions, must equal them or be 1}}
  %0 = loom.broadcast %x : tensor<3x4xf32> -> tensor<8x5xf32>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast 2x3x4 to 3x4}}
  %0 = loom.broadcast %x : tensor<2x3x4xf32> -> tensor<3x4xf32>
  return
}

// -----

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

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @reduce_unsorted(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op axes [1, 0] must be sorted, unique and within [0, 2)}}
  %0 = loom.reduce_sum %x [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

// Only bf16 and f16 sums may widen (to f32).
func.func @reduce_sum_widens_f32(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op has result type 'tensor<4xf64>' but its operands and attributes give 'tensor<4xf32>'}}
  %0 = loom.reduce_sum %x [1] : tensor<4x8xf32> -> tensor<4xf64>
  return
}

// -----

func.func @reduce_max_widens(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{'loom.reduce_max' op has result type 'tensor<4xf32>' but its operands and attributes give 'tensor<4xbf16>'}}
  %0 = loom.reduce_max %x [1] : tensor<4x8xbf16> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_max' op axes [2] must be sorted, unique and within [0, 2)}}
  %0 = loom.reduce_max %x [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @reduce_keepdims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_mean' op has result type 'tensor<4xf32>' but its operands and attributes give 'tensor<4x1xf32>'}}
  %0 = loom.reduce_mean %x [1] keepdims : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.softmax' op axis 2 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.softmax %x axis 2 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.log_softmax' op axis -1 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.log_softmax %x axis -1 : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op axis 2 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.layer_norm %x, %g, %g axis 2 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op scale and bias have shape 4 but the normalized dimensions 1..1 of the input have shape 8}}
  %0 = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op scale and bias have shape 4 but the normalized dimensions 1..1 of the input have shape 8}}
  %0:3 = loom.layer_norm_grad %x, %g, %x axis 1 : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op axis -1 is out of range for 'tensor<4x8xf32>'}}
  %0:3 = loom.layer_norm_grad %x, %g, %x axis -1 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_grad_dout(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf64>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op dout 'tensor<4x8xf64>' must have the input's type 'tensor<4x8xf32>' or be its bf16 form for an f32 input}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %dy) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf64>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_bf16_dout_of_f64(%x: tensor<4x8xf64>, %g: tensor<8xf64>, %dy: tensor<4x8xbf16>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op dout 'tensor<4x8xbf16>' must have the input's type 'tensor<4x8xf64>' or be its bf16 form for an f32 input}}
  %0:3 = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf64>, tensor<8xf64> dout tensor<4x8xbf16>
  return
}

// -----

func.func @fused_layer_norm_grad_addend(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %r: tensor<4x8xf64>) {
  // expected-error @+1 {{'loom.fused_layer_norm_grad' op addend 'tensor<4x8xf64>' must have the input's type 'tensor<4x8xf32>'}}
  %0:3 = loom.fused_layer_norm_grad %x, %g, %x add %r axis 1 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf64>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @fused_layer_norm_grad_dscale(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.fused_layer_norm_grad' op dscale 'tensor<4xf32>' must have the scale's type 'tensor<8xf32>'}}
  %0:3 = loom.fused_layer_norm_grad %x, %g, %x add %x axis 1 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

func.func @fused_layer_norm_grad_narrow_of_f64(%x: tensor<4x8xf64>, %g: tensor<8xf64>) {
  // expected-error @+1 {{'loom.fused_layer_norm_grad' op dinput_bf16 'tensor<4x8xbf16>' must be the bf16 form of an f32 input 'tensor<4x8xf64>'}}
  %0:4 = loom.fused_layer_norm_grad %x, %g, %x add %x axis 1 : (tensor<4x8xf64>, tensor<8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) -> (tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<4x8xbf16>)
  return
}

// -----

func.func @fused_layer_norm_grad_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.fused_layer_norm_grad' op axis 2 is out of range for 'tensor<4x8xf32>'}}
  %0:3 = loom.fused_layer_norm_grad %x, %g, %x add %x axis 2 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_scale_type(%x: tensor<4x8xf32>, %g: tensor<8xf64>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op scale 'tensor<8xf64>' must have the input's element type 'f32'}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %x) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf64>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf64>, tensor<8xf64>)
  return
}

// -----

func.func @layer_norm_result(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{'loom.layer_norm' op result 'tensor<4x8xf32>' must have the input's type 'tensor<4x8xbf16>' or be its bf16 form for an f32 input}}
  %0 = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_grad_result(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op failed to verify that all of {scale, dscale, dbias} have same type}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %x) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>)
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op epsilon must be non-negative}}
  %0 = loom.layer_norm %x, %g, %g axis 1 epsilon -1.0 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.dropout' op ratio 1.000000e+00 must be in [0, 1)}}
  %0:2 = loom.dropout %x ratio 1.0 : tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<8x127x100xf32>, %y: tensor<8x128xi64>) {
  // expected-error @+1 {{'loom.cross_entropy' op labels have shape 8x128 but logits 8x127x100 (classes last) need labels of shape 8x127}}
  %0 = loom.cross_entropy %l, %y : (tensor<8x127x100xf32>, tensor<8x128xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %y: tensor<i64>) {
  // expected-error @+1 {{'loom.cross_entropy' op logits need a class dimension (rank >= 1)}}
  %0 = loom.cross_entropy %l, %y : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_none_result(%l: tensor<8x100xf32>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'loom.cross_entropy' op has result type 'tensor<f32>' but its operands and attributes give 'tensor<8xf32>'}}
  %0 = loom.cross_entropy %l, %y reduction none : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_bf16_loss(%l: tensor<8x100xbf16>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'loom.cross_entropy' op has result type 'tensor<bf16>' but its operands and attributes give 'tensor<f32>'}}
  %0 = loom.cross_entropy %l, %y : (tensor<8x100xbf16>, tensor<8xi64>) -> tensor<bf16>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<8x100xf32>, %y: tensor<7xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op labels have shape 7 but logits 8x100 (classes last) need labels of shape 8}}
  %0 = loom.cross_entropy_grad %l, %y, %s : (tensor<8x100xf32>, tensor<7xi64>, tensor<f32>) -> tensor<8x100xf32>
  return
}

// -----

func.func @cross_entropy_grad_scale_shape(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op scale has shape 1; it must be a scalar or have the samples' shape 8}}
  %0 = loom.cross_entropy_grad %l, %y, %s : (tensor<8x100xf32>, tensor<8xi64>, tensor<1xf32>) -> tensor<8x100xf32>
  return
}

// -----

func.func @cross_entropy_grad_scale_type(%l: tensor<8x100xbf16>, %y: tensor<8xi64>, %s: tensor<bf16>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op scale must be 'f32' for 'bf16' logits, got 'bf16'}}
  %0 = loom.cross_entropy_grad %l, %y, %s : (tensor<8x100xbf16>, tensor<8xi64>, tensor<bf16>) -> tensor<8x100xbf16>
  return
}

// -----

func.func @cross_entropy_grad_result(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op dlogits have shape 100x8 but logits 8x100}}
  %0 = loom.cross_entropy_grad %l, %y, %s : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> tensor<100x8xf32>
  return
}

// -----

func.func @cross_entropy_classes_too_many(%l: tensor<8x100xf32>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'loom.cross_entropy' op has classes 101 but its logits have only 100 entries in the last dimension}}
  %0 = loom.cross_entropy %l, %y classes 101 : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_classes_zero(%l: tensor<8x100xf32>, %y: tensor<8xi64>) {
  // expected-error @+1 {{'loom.cross_entropy' op attribute 'classes' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = loom.cross_entropy %l, %y classes 0 : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_classes(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op has classes 128 but its logits have only 100 entries in the last dimension}}
  %0 = loom.cross_entropy_grad %l, %y, %s classes 128 : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x100xf32>
  return
}

// -----

func.func @cross_entropy_with_grad_loss(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op loss 'tensor<f32>' must be 'tensor<8xf32>' for reduction none}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s reduction none : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_loss_type(%l: tensor<8x100xbf16>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op loss 'tensor<bf16>' must be 'tensor<f32>' for reduction mean}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s : (tensor<8x100xbf16>, tensor<8xi64>, tensor<f32>) -> (tensor<bf16>, tensor<8x100xbf16>)
  return
}

// -----

func.func @cross_entropy_with_grad_scale(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op scale has shape 4; it must be a scalar or have the samples' shape 8}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s : (tensor<8x100xf32>, tensor<8xi64>, tensor<4xf32>) -> (tensor<f32>, tensor<8x100xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_labels(%l: tensor<8x100xf32>, %y: tensor<7xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op labels have shape 7 but logits 8x100 (classes last) need labels of shape 8}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s : (tensor<8x100xf32>, tensor<7xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_dlogits(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op dlogits have shape 8x99 but logits 8x100}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x99xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_classes(%l: tensor<8x100xf32>, %y: tensor<8xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op has classes 101 but its logits have only 100 entries in the last dimension}}
  %0, %1 = loom.cross_entropy_with_grad %l, %y, %s classes 101 : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sizes that do not fit in 64 bits
//===----------------------------------------------------------------------===//

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

// -----

func.func @concat_overflow(%x: tensor<6917529027641081856xi1>) {
  // expected-error @+1 {{'loom.concat' op concatenated size along axis 0 does not fit in 64 bits}}
  %0 = loom.concat %x, %x axis 0 : (tensor<6917529027641081856xi1>, tensor<6917529027641081856xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @split_overflow(%x: tensor<2xf32>) {
  // expected-error @+1 {{'loom.split' op result sizes along axis 0 add up to more than fits in 64 bits}}
  %0:3 = loom.split %x axis 0 : tensor<2xf32>
      -> tensor<6148914691236517206xf32>, tensor<6148914691236517206xf32>, tensor<6148914691236517206xf32>
  return
}

// -----

func.func @slice_attribute_lengths(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op expected 2 ranges (one per dimension), got 2 starts, 2 limits and 1 strides}}
  %0 = "loom.slice"(%x) {starts = array<i64: 0, 0>, limits = array<i64: 4, 8>, strides = array<i64: 1>}
      : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_nan_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op epsilon must be non-negative, got nan}}
  %0 = loom.layer_norm %x, %g, %g axis 1 epsilon 0x7FF8000000000000 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @fusion_not_elementwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.fusion(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{'loom.softmax' op is not elementwise and cannot be in a 'loom.fusion' body}}
    %1 = loom.softmax %a axis 1 : tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_results_differ(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.fusion' op results must share one shape, the iteration space; got 'tensor<4x8xf32>' and 'tensor<8xf32>'}}
  %0:2 = loom.fusion(%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    loom.yield %a, %a : tensor<4x8xf32>, tensor<4x8xf32>
  }
  return %0#1 : tensor<8xf32>
}

// -----

func.func @fusion_input_does_not_broadcast(%x: tensor<3xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'loom.fusion' op input 0 of type 'tensor<3xf32>' does not broadcast to the iteration space 4x8}}
  %0 = loom.fusion(%x) : (tensor<3xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<3xf32>):
    %1 = loom.broadcast %a : tensor<3xf32> -> tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_yield_mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = loom.compare lt, %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    // expected-error @+1 {{'loom.yield' op yields 'tensor<4xi1>' but the fusion returns 'tensor<4xf32>'}}
    loom.yield %1 : tensor<4xi1>
  }
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.gradient_of' on result #0 must name a loom.parameter}}
func.func @gradient_of_not_symbol(%x: tensor<4xf32>) -> (tensor<4xf32> {loom.gradient_of = 3 : i64}) {
  return %x : tensor<4xf32>
}

// -----

loom.parameter @w trainable : tensor<4xf32>
func.func @assign_twice(%x: tensor<4xf32>) {
  loom.assign @w, %x : tensor<4xf32>
  // expected-error @+1 {{assigns @w a second time in the same block}}
  loom.assign @w, %x : tensor<4xf32>
  return
}

// -----

loom.parameter @w trainable : tensor<4xf32>
func.func @assign_wrong_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{assigns a 'tensor<2xf32>' to parameter @w of type 'tensor<4xf32>'}}
  loom.assign @w, %x : tensor<2xf32>
  return
}

// -----

func.func @assign_unknown(%x: tensor<2xf32>) {
  // expected-error @+1 {{assigns @nope, which is not a loom.parameter}}
  loom.assign @nope, %x : tensor<2xf32>
  return
}

// -----

func.func @sgd_missing_buffer(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{takes 1 state operand(s) (the momentum buffer) with these hyper-parameters, got 0}}
  %0 = loom.sgd_update %p, %p, %step {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sgd_nesterov_without_momentum(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{nesterov needs a momentum and zero dampening}}
  %0 = loom.sgd_update %p, %p, %step {lr = 0.1 : f64, nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sgd_grad_type(%p: tensor<4xf32>, %g: tensor<4xf64>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{has gradient type 'tensor<4xf64>' but parameter type 'tensor<4xf32>'}}
  %0 = loom.sgd_update %p, %g, %step {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf64>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @adamw_betas(%p: tensor<4xf32>, %step: tensor<f64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{betas (9.000000e-01, 1.000000e+00) must lie in [0, 1)}}
  %0:3 = loom.adamw_update %p, %p, %step, %p, %p {lr = 0.1 : f64, beta2 = 1.0 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @adamw_negative_lr(%p: tensor<4xf32>, %step: tensor<f64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{lr -1.000000e-01 must be >= 0}}
  %0:3 = loom.adamw_update %p, %p, %step, %p, %p {lr = -0.1 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @scatter_add_shape(%dy: tensor<8x16xf32>, %ids: tensor<4xi64>) -> tensor<64x16xf32> {
  // expected-error @+1 {{updates 'tensor<8x16xf32>' should have shape 4x16 for indices 'tensor<4xi64>' and result 'tensor<64x16xf32>'}}
  %0 = loom.scatter_add %dy[%ids] : (tensor<8x16xf32>, tensor<4xi64>) -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}

// -----

func.func @attention_head_dims(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4xf32>) -> tensor<2x16x4xf32> {
  // expected-error @+1 {{'loom.attention' op q 2x16x8 and k 2x16x4 have different head dimensions}}
  %o, %l = loom.attention %q, %k, %k scale 1.0 : (tensor<2x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> (tensor<2x16x4xf32>, tensor<2x16xf32>)
  return %o : tensor<2x16x4xf32>
}

// -----

func.func @attention_batch(%q: tensor<2x16x8xf32>, %k: tensor<3x16x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{'loom.attention' op q, k and v batch dimensions differ: 2x16x8, 3x16x8, 3x16x8}}
  %o, %l = loom.attention %q, %k, %k scale 1.0 : (tensor<2x16x8xf32>, tensor<3x16x8xf32>, tensor<3x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return %o : tensor<2x16x8xf32>
}

// -----

func.func @attention_mask(%q: tensor<2x16x8xf32>, %m: tensor<16x16xi1>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{'loom.attention' op mask 16x16 must be [..., 16, 16] with each leading dimension 1 or the batch size (2)}}
  %o, %l = loom.attention %q, %q, %q mask %m scale 1.0 : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<16x16xi1>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return %o : tensor<2x16x8xf32>
}

// -----

func.func @attention_values(%q: tensor<2x16x8xf32>, %v: tensor<2x12x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{'loom.attention' op v 2x12x8 needs one row per key of k 2x16x8}}
  %o, %l = loom.attention %q, %q, %v scale 1.0 : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x12x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return %o : tensor<2x16x8xf32>
}

// -----

func.func @attention_seq_major_rank(%q: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'loom.attention' op q, k and v need the same rank >= 3 ([..., S, H, D] with seq_major), got 16x8, 16x8, 16x8}}
  %o, %l = loom.attention %q, %q, %q scale 1.0 seq_major : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16xf32>)
  return %o : tensor<16x8xf32>
}

// -----

func.func @attention_seq_major_heads(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x2x8xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'loom.attention' op q, k and v head counts (dimension 2 with seq_major) differ: 2x16x4x8, 2x16x2x8, 2x16x2x8}}
  %o, %l = loom.attention %q, %k, %k scale 1.0 seq_major : (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4xf32>)
  return %o : tensor<2x16x4x8xf32>
}

// -----

func.func @attention_seq_major_mask(%q: tensor<2x16x4x8xf32>, %m: tensor<1x16x4x16xi1>) -> tensor<2x16x4x8xf32> {
  // The mask is head-major, [B, H, Sq, Sk], whatever the operands' layout.
  // expected-error @+1 {{'loom.attention' op mask 1x16x4x16 must be [..., 16, 16] with each leading dimension 1 or the batch size (2x4)}}
  %o, %l = loom.attention %q, %q, %q mask %m scale 1.0 seq_major : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<1x16x4x16xi1>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4xf32>)
  return %o : tensor<2x16x4x8xf32>
}

// -----

func.func @attention_seq_major_stats(%q: tensor<2x16x4x8xf32>, %s: tensor<2x4x16xf32>) -> tensor<2x16x4x8xf32> {
  // expected-error @+1 {{'loom.attention_grad' op logsumexp has type 'tensor<2x4x16xf32>', expected 'tensor<2x16x4xf32>'}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %s, %q scale 1.0 seq_major
      : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
  return %dq : tensor<2x16x4x8xf32>
}

// -----

func.func @attention_grad_stats(%q: tensor<2x16x8xbf16>, %s: tensor<2x16xbf16>) -> tensor<2x16x8xbf16> {
  // expected-error @+1 {{'loom.attention_grad' op logsumexp has type 'tensor<2x16xbf16>', expected 'tensor<2x16xf32>'}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %s, %q scale 1.0
      : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16xbf16>, tensor<2x16x8xbf16>) -> (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>)
  return %dq : tensor<2x16x8xbf16>
}

// -----

func.func @attention_grad_output(%q: tensor<2x16x8xbf16>, %s: tensor<2x16xf32>, %o: tensor<2x16x8xf32>) -> tensor<2x16x8xbf16> {
  // expected-error @+1 {{'loom.attention_grad' op output has type 'tensor<2x16x8xf32>' but the attention output is 'tensor<2x16x8xbf16>'}}
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %q, %s, %o scale 1.0
      : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>)
  return %dq : tensor<2x16x8xbf16>
}

// -----

func.func @packed_attention_parts(%qkv: tensor<2x16x4x2x8xf32>) -> tensor<2x16x2x8xf32> {
  // expected-error @+1 {{'loom.packed_attention' op qkv must be [..., S, 3, H, D], got 'tensor<2x16x4x2x8xf32>'}}
  %o, %l = loom.packed_attention %qkv scale 1.0 : (tensor<2x16x4x2x8xf32>) -> (tensor<2x16x2x8xf32>, tensor<2x16x2xf32>)
  return %o : tensor<2x16x2x8xf32>
}

// -----

func.func @packed_attention_mask(%qkv: tensor<2x16x3x2x8xf32>, %m: tensor<1x2x16x12xi1>) -> tensor<2x16x2x8xf32> {
  // expected-error @+1 {{'loom.packed_attention' op mask 1x2x16x12 must be [..., 16, 16] with each leading dimension 1 or the batch size (2x2)}}
  %o, %l = loom.packed_attention %qkv mask %m scale 1.0 : (tensor<2x16x3x2x8xf32>, tensor<1x2x16x12xi1>) -> (tensor<2x16x2x8xf32>, tensor<2x16x2xf32>)
  return %o : tensor<2x16x2x8xf32>
}

// -----

func.func @packed_attention_grad_dout(%qkv: tensor<2x16x3x2x8xf32>, %o: tensor<2x16x2x8xf32>, %d: tensor<2x16x2x4xf32>, %l: tensor<2x16x2xf32>) -> tensor<2x16x3x2x8xf32> {
  // expected-error @+1 {{'loom.packed_attention_grad' op dout has type 'tensor<2x16x2x4xf32>' but the attention output is 'tensor<2x16x2x8xf32>'}}
  %g = loom.packed_attention_grad %qkv, %d, %l, %o scale 1.0 : (tensor<2x16x3x2x8xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2xf32>, tensor<2x16x2x8xf32>) -> tensor<2x16x3x2x8xf32>
  return %g : tensor<2x16x3x2x8xf32>
}

// -----

func.func @packed_attention_grad_lse(%qkv: tensor<2x16x3x2x8xf32>, %o: tensor<2x16x2x8xf32>, %l: tensor<2x2x16xf32>) -> tensor<2x16x3x2x8xf32> {
  // expected-error @+1 {{'loom.packed_attention_grad' op logsumexp has type 'tensor<2x2x16xf32>', expected 'tensor<2x16x2xf32>'}}
  %g = loom.packed_attention_grad %qkv, %o, %l, %o scale 1.0 : (tensor<2x16x3x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x2x16xf32>, tensor<2x16x2x8xf32>) -> tensor<2x16x3x2x8xf32>
  return %g : tensor<2x16x3x2x8xf32>
}

// -----

func.func @gather_padding(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.gather' op padding_idx 10 is outside [-10, 10)}}
  %0 = loom.gather %t[%i] padding_idx 10 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'loom.cumsum' op axis 2 is out of range for 'tensor<4x3xf32>'}}
  %0 = loom.cumsum %x axis 2 : tensor<4x3xf32>
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
