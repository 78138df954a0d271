// RUN: loom-opt --loom-fuse-matmul-epilogue --split-input-file %s | FileCheck %s

// An ONNX-style linear layer (an add of the bias vector, either operand
// order) followed by the tanh GELU is one GEMM with a GELU_BIAS epilogue.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT:    %[[Y:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[B]] activation gelu_tanh : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_gelu(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %h = loom.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %z = loom.add %b, %h : (tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %y = loom.gelu %z approximate tanh : tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// The bias alone (a bias_add, the weight transposed): a BIAS epilogue. The
// transposes are kept.
// CHECK-LABEL: func.func @bias_only
// CHECK-NEXT:    %[[Y:.*]] = loom.fused_matmul %arg0, %arg1 bias %arg2 transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT:    %[[E:.*]] = loom.exp %[[Y]]
func.func @bias_only(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xbf16>) -> tensor<8x32xbf16> {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %z = loom.bias_add %h, %b : tensor<8x32xbf16>, tensor<32xbf16>
  %e = loom.exp %z : tensor<8x32xbf16>
  return %e : tensor<8x32xbf16>
}

// -----

// Training: the backward of GELU reads the value before it, so the fused op
// returns it too (GELU_AUX_BIAS), and its uses, even one placed before the
// GELU, read that result.
// CHECK-LABEL: func.func @keeps_preactivation
// CHECK-NEXT:    %[[Y:.*]], %[[Z:.*]] = loom.fused_matmul %arg0, %arg1 bias %arg2 activation gelu_tanh : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK-NEXT:    %[[T:.*]] = loom.tanh %[[Z]]
// CHECK-NEXT:    return %[[Y]], %[[T]]
func.func @keeps_preactivation(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %z = loom.add %h, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %t = loom.tanh %z : tensor<8x32xf32>
  %y = loom.gelu %z approximate tanh : tensor<8x32xf32>
  return %y, %t : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// ReLU without a bias; a ReLU whose input is read elsewhere is not fused
// (cuBLASLt keeps only a bit mask of it), but its bias is.
// CHECK-LABEL: func.func @relu
// CHECK-NEXT:    %[[R:.*]] = loom.fused_matmul %arg0, %arg1 activation relu : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    %[[Z:.*]] = loom.fused_matmul %arg0, %arg1 bias %arg2 : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    %[[S:.*]] = loom.relu %[[Z]]
// CHECK-NEXT:    return %[[R]], %[[S]], %[[Z]]
func.func @relu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = loom.relu %h : tensor<8x32xf32>
  %h2 = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %z = loom.add %h2, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %s = loom.relu %z : tensor<8x32xf32>
  return %r, %s, %z : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Left alone: a product used twice; an add that is not a bias (not a vector
// along the last dim, a different element type: the widened bf16 product of
// mixed precision); the exact GELU (cuBLASLt computes the tanh form).
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:     loom.fused_matmul
// CHECK:         loom.fused_matmul %arg0, %arg1 bias %arg2 :
// CHECK-NEXT:    loom.gelu %{{.*}} : tensor<8x32xf32>
// CHECK-NOT:     loom.fused_matmul
// CHECK:         return
func.func @not_fused(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>,
                     %c: tensor<8x1xf32>, %xl: tensor<8x16xbf16>, %wl: tensor<16x32xbf16>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a = loom.add %h, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h2 = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a2 = loom.add %h2, %c : (tensor<8x32xf32>, tensor<8x1xf32>) -> tensor<8x32xf32>
  %l = loom.matmul %xl, %wl : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %lw = loom.cast %l : tensor<8x32xbf16> -> tensor<8x32xf32>
  %a3 = loom.add %lw, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h4 = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a4 = loom.add %h4, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g = loom.gelu %a4 : tensor<8x32xf32>
  return %h, %a, %a2, %a3, %g : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Mixed precision's linear layer feeding a bf16 op: the widened product
// plus an f32 bias, rounded back to bf16. The bias is rounded to bf16 and
// added by the bf16 GEMM's epilogue (torch.autocast's linear). Every use of
// the sum must be such a rounding: with an f32 use it stays.
// CHECK-LABEL: func.func @narrowed_bias
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x16xbf16>, %[[W:[^:]*]]: tensor<32x16xbf16>, %[[B:[^:]*]]: tensor<32xf32>)
// CHECK-NEXT:    %[[BB:.*]] = loom.cast %[[B]] : tensor<32xf32> -> tensor<32xbf16>
// CHECK-NEXT:    %[[Y:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[BB]] transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT:    %[[H:.*]] = loom.matmul %[[X]], %[[W]] transpose_rhs
// CHECK-NEXT:    %[[HW:.*]] = loom.cast %[[H]]
// CHECK-NEXT:    %[[S:.*]] = loom.add %[[HW]], %[[B]]
// CHECK-NEXT:    %[[SN:.*]] = loom.cast %[[S]]
// CHECK-NEXT:    return %[[Y]], %[[Y]], %[[SN]], %[[S]]
func.func @narrowed_bias(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>) -> (tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s = loom.add %b, %hw : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %n = loom.cast %s : tensor<8x32xf32> -> tensor<8x32xbf16>
  %n2 = loom.cast %s : tensor<8x32xf32> -> tensor<8x32xbf16>
  %h2 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw2 = loom.cast %h2 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s2 = loom.add %hw2, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %n3 = loom.cast %s2 : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %n, %n2, %n3, %s2 : tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>
}

// -----

// Mixed precision's MLP layer: the widened, biased product under a tanh
// GELU whose result is only read in bf16 (the next layer's GEMM). One bf16
// GEMM applies the bf16 bias and the GELU (GELU_AUX_BIAS) and keeps the
// sum rounded to bf16 for the GELU's backward, which reads it widened.
// CHECK-LABEL: func.func @narrowed_gelu
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x16xbf16>, %[[W:[^:]*]]: tensor<32x16xbf16>, %[[B:[^:]*]]: tensor<32xf32>)
// CHECK-NEXT:    %[[BB:.*]] = loom.cast %[[B]] : tensor<32xf32> -> tensor<32xbf16>
// CHECK-NEXT:    %[[Y:.*]], %[[P:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[BB]] transpose_rhs activation gelu_tanh : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> (tensor<8x32xbf16>, tensor<8x32xbf16>)
// CHECK-NEXT:    %[[PW:.*]] = loom.cast %[[P]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT:    %[[D:.*]] = loom.mul %[[PW]], %[[PW]]
// CHECK-NEXT:    %[[BB2:.*]] = loom.cast %[[B]] : tensor<32xf32> -> tensor<32xbf16>
// CHECK-NEXT:    %[[Y2:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[BB2]] transpose_rhs activation gelu_tanh : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT:    return %[[Y]], %[[Y]], %[[D]], %[[Y2]]
func.func @narrowed_gelu(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>) -> (tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xbf16>) {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s = loom.add %hw, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g = loom.gelu %s approximate tanh : tensor<8x32xf32>
  %n = loom.cast %g : tensor<8x32xf32> -> tensor<8x32xbf16>
  %n2 = loom.cast %g : tensor<8x32xf32> -> tensor<8x32xbf16>
  %d = loom.mul %s, %s : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  // Only the GELU reads this sum: no preactivation result.
  %h2 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw2 = loom.cast %h2 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s2 = loom.add %b, %hw2 : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %g2 = loom.gelu %s2 approximate tanh : tensor<8x32xf32>
  %n3 = loom.cast %g2 : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %n, %n2, %d, %n3 : tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xbf16>
}

// -----

// Left alone: a GELU read in f32 (rounding it to bf16 would lose what the
// chain keeps), the exact GELU (cuBLASLt computes the tanh form only), two
// GELUs of one sum, and a tanh GELU whose sum an exact GELU also reads
// (which would then read it rounded).
// CHECK-LABEL: func.func @not_narrowed_gelu
// CHECK-NOT: loom.fused_matmul
// CHECK-COUNT-6: loom.gelu
// CHECK-NOT: loom.fused_matmul
// CHECK-NOT: loom.gelu
func.func @not_narrowed_gelu(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>) -> (tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s = loom.add %hw, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g = loom.gelu %s approximate tanh : tensor<8x32xf32>
  %n = loom.cast %g : tensor<8x32xf32> -> tensor<8x32xbf16>
  %h2 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw2 = loom.cast %h2 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s2 = loom.add %hw2, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g2 = loom.gelu %s2 : tensor<8x32xf32>
  %n2 = loom.cast %g2 : tensor<8x32xf32> -> tensor<8x32xbf16>
  %h3 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw3 = loom.cast %h3 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s3 = loom.add %hw3, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g3 = loom.gelu %s3 approximate tanh : tensor<8x32xf32>
  %g4 = loom.gelu %s3 approximate tanh : tensor<8x32xf32>
  %n3 = loom.cast %g3 : tensor<8x32xf32> -> tensor<8x32xbf16>
  %n4 = loom.cast %g4 : tensor<8x32xf32> -> tensor<8x32xbf16>
  %h5 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw5 = loom.cast %h5 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s5 = loom.add %hw5, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g5 = loom.gelu %s5 approximate tanh : tensor<8x32xf32>
  %e5 = loom.gelu %s5 : tensor<8x32xf32>
  %n5 = loom.cast %g5 : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %n, %g, %n2, %n4, %n5, %e5 : tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x32xf32>
}

// -----

// Mixed precision's residual connection: the widened product plus an f32
// bias plus the f32 residual stream (in either operand order). One GEMM
// stores the f32 sum, reading the residual as cuBLASLt's C; two blocks'
// residuals chain (the second reads the first's fused result).
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4x16xbf16>, %[[W:[^:]*]]: tensor<32x16xbf16>, %[[B:[^:]*]]: tensor<32xf32>, %[[R:[^:]*]]: tensor<2x4x32xf32>)
// CHECK-NEXT:    %[[Y:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[B]] add %[[R]] transpose_rhs : (tensor<2x4x16xbf16>, tensor<32x16xbf16>, tensor<32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
// CHECK-NEXT:    %[[Z:.*]] = loom.fused_matmul %[[X]], %[[W]] bias %[[B]] add %[[Y]] transpose_rhs : (tensor<2x4x16xbf16>, tensor<32x16xbf16>, tensor<32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
// CHECK-NEXT:    return %[[Z]]
func.func @residual(%x: tensor<2x4x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>, %r: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<2x4x16xbf16>, tensor<32x16xbf16>) -> tensor<2x4x32xbf16>
  %hw = loom.cast %h : tensor<2x4x32xbf16> -> tensor<2x4x32xf32>
  %s = loom.add %b, %hw : (tensor<32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %y = loom.add %r, %s : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %h2 = loom.matmul %x, %w transpose_rhs : (tensor<2x4x16xbf16>, tensor<32x16xbf16>) -> tensor<2x4x32xbf16>
  %hw2 = loom.cast %h2 : tensor<2x4x32xbf16> -> tensor<2x4x32xf32>
  %s2 = loom.add %hw2, %b : (tensor<2x4x32xf32>, tensor<32xf32>) -> tensor<2x4x32xf32>
  %z = loom.add %s2, %y : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  return %z : tensor<2x4x32xf32>
}

// -----

// Not residual connections: a widened product added without a bias (a
// gradient being accumulated, whose bf16 rounding stays), a biased sum
// with another use, and an addend that broadcasts.
// CHECK-LABEL: func.func @not_residual
// CHECK-NOT: loom.fused_matmul
// CHECK-COUNT-3: loom.matmul
// CHECK-NOT: loom.fused_matmul
func.func @not_residual(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>, %r: tensor<8x32xf32>, %v: tensor<1x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %g = loom.add %r, %hw : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %h2 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw2 = loom.cast %h2 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s2 = loom.add %hw2, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %y2 = loom.add %s2, %r : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %h3 = loom.matmul %x, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw3 = loom.cast %h3 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s3 = loom.add %hw3, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %y3 = loom.add %s3, %v : (tensor<8x32xf32>, tensor<1x32xf32>) -> tensor<8x32xf32>
  return %g, %y2, %s2, %y3 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// The backward of a tanh GELU applied to an input-gradient GEMM's product:
// in f32, and in bf16 (product and GELU input widened, the gradient only
// read rounded to bf16), where the GEMM reads the forward's bf16
// preactivation.
// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: (%[[G:[^:]*]]: tensor<8x16xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[Z:[^:]*]]: tensor<8x32xf32>, %[[GB:[^:]*]]: tensor<8x16xbf16>, %[[WB:[^:]*]]: tensor<32x16xbf16>, %[[P:[^:]*]]: tensor<8x32xbf16>)
// CHECK-NEXT:    %[[D:.*]] = loom.matmul_gelu_grad %[[G]], %[[W]], %[[Z]] transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    %[[DB:.*]] = loom.matmul_gelu_grad %[[GB]], %[[WB]], %[[P]] transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<8x32xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT:    return %[[D]], %[[DB]], %[[DB]]
func.func @gelu_grad(%g: tensor<8x16xf32>, %w: tensor<32x16xf32>, %z: tensor<8x32xf32>, %gb: tensor<8x16xbf16>, %wb: tensor<32x16xbf16>, %p: tensor<8x32xbf16>) -> (tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>) {
  %h = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %d = loom.gelu_grad %h, %z approximate tanh : tensor<8x32xf32>
  %hb = loom.matmul %gb, %wb transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %hb : tensor<8x32xbf16> -> tensor<8x32xf32>
  %pw = loom.cast %p : tensor<8x32xbf16> -> tensor<8x32xf32>
  %dw = loom.gelu_grad %hw, %pw approximate tanh : tensor<8x32xf32>
  %n = loom.cast %dw : tensor<8x32xf32> -> tensor<8x32xbf16>
  %n2 = loom.cast %dw : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %d, %n, %n2 : tensor<8x32xf32>, tensor<8x32xbf16>, tensor<8x32xbf16>
}

// -----

// Left alone: the exact GELU's backward (cuBLASLt's DGELU is the tanh
// form's), a product read elsewhere too, a GELU input the product is
// multiplied by rather than the gradient, a bf16 gradient read in f32, and
// a bf16 product at an f32 GELU input (rounding it would change it).
// CHECK-LABEL: func.func @not_gelu_grad
// CHECK-NOT: loom.matmul_gelu_grad
// CHECK-COUNT-5: loom.gelu_grad
// CHECK-NOT: loom.matmul_gelu_grad
func.func @not_gelu_grad(%g: tensor<8x16xf32>, %w: tensor<32x16xf32>, %z: tensor<8x32xf32>, %gb: tensor<8x16xbf16>, %wb: tensor<32x16xbf16>, %p: tensor<8x32xbf16>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xbf16>) {
  %h = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %d = loom.gelu_grad %h, %z : tensor<8x32xf32>
  %h2 = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %d2 = loom.gelu_grad %h2, %z approximate tanh : tensor<8x32xf32>
  %h3 = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %d3 = loom.gelu_grad %z, %h3 approximate tanh : tensor<8x32xf32>
  %hb = loom.matmul %gb, %wb transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw = loom.cast %hb : tensor<8x32xbf16> -> tensor<8x32xf32>
  %pw = loom.cast %p : tensor<8x32xbf16> -> tensor<8x32xf32>
  %dw = loom.gelu_grad %hw, %pw approximate tanh : tensor<8x32xf32>
  %hb2 = loom.matmul %gb, %wb transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %hw2 = loom.cast %hb2 : tensor<8x32xbf16> -> tensor<8x32xf32>
  %dw2 = loom.gelu_grad %hw2, %z approximate tanh : tensor<8x32xf32>
  %n2 = loom.cast %dw2 : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %d, %d2, %h2, %d3, %dw, %n2 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xbf16>
}

// -----

// One GELU backward's input is another's result (legal, if not what
// autodiff makes): the second is found again after the first is fused.
// CHECK-LABEL: func.func @chained_gelu_grads
// CHECK-SAME: (%[[G:[^:]*]]: tensor<8x16xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[Z:[^:]*]]: tensor<8x32xf32>)
// CHECK-NEXT:    %[[B:.*]] = loom.matmul_gelu_grad %[[G]], %[[W]], %[[Z]] transpose_rhs
// CHECK-NEXT:    %[[A:.*]] = loom.matmul_gelu_grad %[[G]], %[[W]], %[[B]] transpose_rhs
// CHECK-NEXT:    return %[[A]]
func.func @chained_gelu_grads(%g: tensor<8x16xf32>, %w: tensor<32x16xf32>, %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %b = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %gb = loom.gelu_grad %b, %z approximate tanh : tensor<8x32xf32>
  %a = loom.matmul %g, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %ga = loom.gelu_grad %a, %gb approximate tanh : tensor<8x32xf32>
  return %ga : tensor<8x32xf32>
}
