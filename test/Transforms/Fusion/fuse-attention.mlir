// RUN: loom-opt --loom-fuse-attention --split-input-file %s | FileCheck %s

// nanoGPT's attention: scale, causal mask filled with -inf, softmax, product
// with v. One loom.attention, with the mask as the model had it.
// CHECK-LABEL: func.func @gpt_causal
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x4x16x8xf32>, %[[V:.*]]: tensor<2x4x16x8xf32>, %[[M:.*]]: tensor<1x1x16x16xi1>)
// CHECK-NOT:     loom.matmul
// CHECK:         %[[O:.*]], %{{.*}} = loom.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale 0.35355338454246521 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK-NOT:     loom.softmax
// CHECK:         return %[[O]]
func.func @gpt_causal(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %mask: tensor<1x1x16x16xi1>) -> tensor<2x4x16x8xf32> {
  %c = loom.constant dense<0.353553385> : tensor<f32>
  %ninf = loom.constant dense<0xFF800000> : tensor<f32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %t = loom.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %u = loom.select %mask, %ninf, %t : (tensor<1x1x16x16xi1>, tensor<f32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %p = loom.softmax %u axis 3 : tensor<2x4x16x16xf32>
  %o = loom.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// -----

// Hugging Face's form: a division, and a mask that keeps the scores where
// it is true (negated), of a lower rank (reshaped), with a finite fill.
// CHECK-LABEL: func.func @hf_where
// CHECK-SAME:    (%[[Q:.*]]: tensor<3x16x8xf32>, %[[K:.*]]: tensor<3x12x8xf32>, %[[V:.*]]: tensor<3x12x4xf32>, %[[KEEP:.*]]: tensor<16x12xi1>)
// CHECK:         %[[R:.*]] = loom.reshape %[[KEEP]] : tensor<16x12xi1> -> tensor<1x16x12xi1>
// CHECK:         %[[F:.*]] = loom.constant dense<false> : tensor<i1>
// CHECK:         %[[M:.*]] = loom.compare eq, %[[R]], %[[F]]
// CHECK:         %[[O:.*]], %{{.*}} = loom.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale 5.000000e-01 mask_value -3.0000000054977558E+38 : (tensor<3x16x8xf32>, tensor<3x12x8xf32>, tensor<3x12x4xf32>, tensor<1x16x12xi1>) -> (tensor<3x16x4xf32>, tensor<3x16xf32>)
// CHECK:         return %[[O]]
func.func @hf_where(%q: tensor<3x16x8xf32>, %k: tensor<3x12x8xf32>, %v: tensor<3x12x4xf32>, %keep: tensor<16x12xi1>) -> tensor<3x16x4xf32> {
  %c = loom.constant dense<2.0> : tensor<f32>
  %fill = loom.constant dense<-3.0e+38> : tensor<f32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<3x16x8xf32>, tensor<3x12x8xf32>) -> tensor<3x16x12xf32>
  %t = loom.div %s, %c : (tensor<3x16x12xf32>, tensor<f32>) -> tensor<3x16x12xf32>
  %u = loom.select %keep, %t, %fill : (tensor<16x12xi1>, tensor<3x16x12xf32>, tensor<f32>) -> tensor<3x16x12xf32>
  %p = loom.softmax %u axis 2 : tensor<3x16x12xf32>
  %o = loom.matmul %p, %v : (tensor<3x16x12xf32>, tensor<3x12x4xf32>) -> tensor<3x16x4xf32>
  return %o : tensor<3x16x4xf32>
}

// -----

// What loom-mixed-precision makes of an unfused attention: the bf16 scores
// read in f32 and the probabilities cast back. The fused op computes in
// bf16 (scores in f32, never rounded).
// CHECK-LABEL: func.func @autocast
// CHECK-NOT:     loom.cast
// CHECK:         %[[O:.*]], %{{.*}} = loom.attention %arg0, %arg1, %arg2 scale 5.000000e-01 : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> (tensor<2x16x8xbf16>, tensor<2x16xf32>)
// CHECK-NOT:     loom.cast
// CHECK:         return %[[O]]
func.func @autocast(%q: tensor<2x16x8xbf16>, %k: tensor<2x16x8xbf16>, %v: tensor<2x16x8xbf16>) -> tensor<2x16x8xbf16> {
  %c = loom.constant dense<0.5> : tensor<f32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x16x16xbf16>
  %w = loom.cast %s : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %t = loom.mul %c, %w : (tensor<f32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %p = loom.softmax %t axis 2 : tensor<2x16x16xf32>
  %n = loom.cast %p : tensor<2x16x16xf32> -> tensor<2x16x16xbf16>
  %o = loom.matmul %n, %v : (tensor<2x16x16xbf16>, tensor<2x16x8xbf16>) -> tensor<2x16x8xbf16>
  return %o : tensor<2x16x8xbf16>
}

// -----

// The mask applied before the scale: the fill is scaled too. k and v come
// transposed, a [16, 1] mask is broadcast along the keys.
// CHECK-LABEL: func.func @mask_then_scale
// CHECK-DAG:     %[[K:.*]] = loom.transpose %arg1 [0, 2, 1] : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
// CHECK-DAG:     %[[V:.*]] = loom.transpose %arg2 [0, 2, 1] : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
// CHECK-DAG:     %[[R:.*]] = loom.reshape %arg3 : tensor<16x1xi1> -> tensor<1x16x1xi1>
// CHECK:         %[[M:.*]] = loom.broadcast %[[R]] : tensor<1x16x1xi1> -> tensor<1x16x16xi1>
// CHECK:         loom.attention %arg0, %[[K]], %[[V]] mask %[[M]] scale 5.000000e-01 mask_value -5.000000e+03
func.func @mask_then_scale(%q: tensor<2x16x8xf32>, %kt: tensor<2x8x16xf32>, %vt: tensor<2x8x16xf32>, %mask: tensor<16x1xi1>) -> tensor<2x16x8xf32> {
  %c = loom.constant dense<0.5> : tensor<f32>
  %fill = loom.constant dense<-1.0e+04> : tensor<f32>
  %s = loom.matmul %q, %kt : (tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  %u = loom.select %mask, %fill, %s : (tensor<16x1xi1>, tensor<f32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %t = loom.mul %u, %c : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %p = loom.softmax %t axis 2 : tensor<2x16x16xf32>
  %o = loom.matmul %p, %vt transpose_rhs : (tensor<2x16x16xf32>, tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Left alone: the probabilities are also returned (the fused op has none).
// CHECK-LABEL: func.func @probabilities_used
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
func.func @probabilities_used(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x16xf32>) {
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x16xf32>
  %p = loom.softmax %s axis 2 : tensor<2x16x16xf32>
  %o = loom.matmul %p, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o, %p : tensor<2x16x8xf32>, tensor<2x16x16xf32>
}

// -----

// Left alone: a softmax over the queries, a scale that is not a constant,
// and values shared by every batch (matmul's rank-2 broadcasting).
// CHECK-LABEL: func.func @not_attention
// CHECK-NOT:     loom.attention
func.func @not_attention(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %w: tensor<16x8xf32>, %c: tensor<f32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) {
  %s0 = loom.matmul %q, %k transpose_rhs : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x16xf32>
  %p0 = loom.softmax %s0 axis 1 : tensor<2x16x16xf32>
  %o0 = loom.matmul %p0, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  %s1 = loom.matmul %q, %k transpose_rhs : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x16xf32>
  %t1 = loom.mul %s1, %c : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %p1 = loom.softmax %t1 axis 2 : tensor<2x16x16xf32>
  %o1 = loom.matmul %p1, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  %s2 = loom.matmul %q, %k transpose_rhs : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x16xf32>
  %p2 = loom.softmax %s2 axis 2 : tensor<2x16x16xf32>
  %o2 = loom.matmul %p2, %w : (tensor<2x16x16xf32>, tensor<16x8xf32>) -> tensor<2x16x8xf32>
  return %o0, %o1, %o2 : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
}

// -----

// GPT-2's heads: q, k and v come from [B, S, H, D] values through head
// transposes (k's composed with the key transpose of q k^T), and the output
// goes back through one. The attention takes them seq-major and every
// transpose goes.
// CHECK-LABEL: func.func @heads_seq_major
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x16x4x8xf32>, %[[K:.*]]: tensor<2x16x4x8xf32>, %[[V:.*]]: tensor<2x16x4x8xf32>, %[[M:.*]]: tensor<1x1x16x16xi1>)
// CHECK-NOT:     loom.transpose
// CHECK:         %[[O:.*]], %{{.*}} = loom.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale 0.35355338454246521 seq_major : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4xf32>)
// CHECK-NOT:     loom.transpose
// CHECK:         %[[R:.*]] = loom.reshape %[[O]] : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
// CHECK:         return %[[R]]
func.func @heads_seq_major(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x8xf32>, %mask: tensor<1x1x16x16xi1>) -> tensor<2x16x32xf32> {
  %c = loom.constant dense<0.353553385> : tensor<f32>
  %ninf = loom.constant dense<0xFF800000> : tensor<f32>
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kh = loom.transpose %k [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kt = loom.transpose %kh [0, 1, 3, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  %vh = loom.transpose %v [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %s = loom.matmul %qh, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %t = loom.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %u = loom.select %mask, %ninf, %t : (tensor<1x1x16x16xi1>, tensor<f32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %p = loom.softmax %u axis 3 : tensor<2x4x16x16xf32>
  %o = loom.matmul %p, %vh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %ot = loom.transpose %o [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %r = loom.reshape %ot : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  return %r : tensor<2x16x32xf32>
}

// -----

// Head-major when anything else reads the output in that layout, or when
// an operand is not a head transpose; a head transpose with another user
// stays for it.
// CHECK-LABEL: func.func @heads_kept
// CHECK:         %[[QH:.*]] = loom.transpose %{{.*}} [0, 2, 1, 3]
// CHECK:         loom.attention %[[QH]], %{{.*}}, %{{.*}} scale 5.000000e-01 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK:         loom.attention %[[QH]], %{{.*}}, %{{.*}} scale 5.000000e-01 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK-NOT:     seq_major
func.func @heads_kept(%q: tensor<2x16x4x8xf32>, %k: tensor<2x4x16x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x16x4x8xf32>) {
  %c = loom.constant dense<0.5> : tensor<f32>
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  // Two consumers of the output.
  %s0 = loom.matmul %qh, %qh transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %t0 = loom.mul %s0, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p0 = loom.softmax %t0 axis 3 : tensor<2x4x16x16xf32>
  %o0 = loom.matmul %p0, %qh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r0 = loom.transpose %o0 [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %e0 = loom.exp %o0 : tensor<2x4x16x8xf32>
  // k is head-major already.
  %s1 = loom.matmul %qh, %k transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %t1 = loom.mul %s1, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p1 = loom.softmax %t1 axis 3 : tensor<2x4x16x16xf32>
  %o1 = loom.matmul %p1, %qh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r1 = loom.transpose %o1 [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %r0, %e0, %r1 : tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x16x4x8xf32>
}

// -----

// Keys and values from one tensor, k^T spelled as a transpose of v's head
// transpose: the chains share an op, which goes once nothing reads it.
// CHECK-LABEL: func.func @heads_shared_chain
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x16x4x8xf32>, %[[KV:.*]]: tensor<2x16x4x8xf32>)
// CHECK-NOT:     loom.transpose
// CHECK:         %[[O:.*]], %{{.*}} = loom.attention %[[Q]], %[[KV]], %[[KV]] scale 5.000000e-01 seq_major
// CHECK-NOT:     loom.transpose
// CHECK:         return %[[O]]
func.func @heads_shared_chain(%q: tensor<2x16x4x8xf32>, %kv: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %c = loom.constant dense<0.5> : tensor<f32>
  %qh = loom.transpose %q [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %vh = loom.transpose %kv [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kt = loom.transpose %vh [0, 1, 3, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  %s = loom.matmul %qh, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %t = loom.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p = loom.softmax %t axis 3 : tensor<2x4x16x16xf32>
  %o = loom.matmul %p, %vh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %ot = loom.transpose %o [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %ot : tensor<2x16x4x8xf32>
}

// -----

// Hugging Face LLaMA's form: an additive causal mask, a constant of zeros
// and finfo.min, then the scores clamped at finfo.min. Where the mask holds
// the fill the sum is the fill (a score is far below half its ulp) and the
// clamp changes no finite score, so this is a select with that fill: one
// loom.attention, its mask true where the constant held finfo.min.
// CHECK-LABEL: func.func @hf_additive_mask
// CHECK:         %[[MASK:.*]] = loom.constant dense<{{\[\[}}[false, true, true], [false, false, true], [false, false, false]]]> : tensor<1x3x3xi1>
// CHECK:         loom.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[MASK]] scale 5.000000e-01 mask_value -3.40282{{[0-9]*}}E+38
// CHECK-NOT:     loom.softmax
// CHECK-NOT:     loom.maximum
func.func @hf_additive_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %c = loom.constant dense<2.0> : tensor<f32>
  %causal = loom.constant dense<[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]> : tensor<1x3x3xf32>
  %lowest = loom.constant dense<-3.40282347E+38> : tensor<f32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x3xf32>
  %t = loom.div %s, %c : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %u = loom.add %t, %causal : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32>
  %w = loom.maximum %u, %lowest : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = loom.softmax %w axis 2 : tensor<2x3x3xf32>
  %o = loom.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// Left alone: an additive mask of small values is a bias, not a mask (the
// sum is not the fill), and a clamp above the lowest value changes scores.
// CHECK-LABEL: func.func @additive_bias
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
// CHECK-LABEL: func.func @clamped_scores
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
func.func @additive_bias(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %bias = loom.constant dense<[[[0.0, -1.0e+04, -1.0e+04], [0.0, 0.0, -1.0e+04], [0.0, 0.0, 0.0]]]> : tensor<1x3x3xf32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x3xf32>
  %u = loom.add %s, %bias : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32>
  %p = loom.softmax %u axis 2 : tensor<2x3x3xf32>
  %o = loom.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}
func.func @clamped_scores(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %floor = loom.constant dense<-5.0> : tensor<f32>
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x3xf32>
  %w = loom.maximum %s, %floor : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = loom.softmax %w axis 2 : tensor<2x3x3xf32>
  %o = loom.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}
