// Every verifier error of the ops made when a plan is lowered: fused_matmul,
// matmul_gelu_grad, matmul_bias_grad, fused_layer_norm_grad,
// cross_entropy_with_grad, packed_attention, packed_attention_grad and fusion.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

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
