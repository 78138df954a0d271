// Every verifier error of `loom.attention` and `loom.attention_grad`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

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
