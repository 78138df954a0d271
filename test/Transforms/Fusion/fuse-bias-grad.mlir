// RUN: loom-opt --loom-fuse-bias-grad --split-input-file %s | FileCheck %s

// Mixed precision: the bias gradient sums the bf16 output gradient in f32
// (loom-narrow-bias-gradients), and the weight gradient contracts a reshape
// of the same gradient over its rows. One GEMM does both, the bias gradient
// in bf16, widened to the sum's f32 and reshaped to its (kept) dimensions.
// CHECK-LABEL: func.func @mixed_precision_lhs
// CHECK-SAME: (%[[G:[^:]*]]: tensor<2x4x8xbf16>, %[[X:[^:]*]]: tensor<8x16xbf16>)
// CHECK-NEXT: %[[R:.*]] = loom.reshape %[[G]] : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[W:.*]], %[[N:.*]] = loom.matmul_bias_grad %[[R]], %[[X]] sum lhs : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<8xbf16>)
// CHECK-NEXT: %[[C:.*]] = loom.cast %[[N]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: %[[B:.*]] = loom.reshape %[[C]] : tensor<8xf32> -> tensor<1x1x8xf32>
// CHECK-NOT: loom.reduce_sum
// CHECK-NEXT: return %[[W]], %[[B]]
func.func @mixed_precision_lhs(%g: tensor<2x4x8xbf16>, %x: tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<1x1x8xf32>) {
  %b = loom.reduce_sum %g [0, 1] keepdims : tensor<2x4x8xbf16> -> tensor<1x1x8xf32>
  %r = loom.reshape %g : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %w = loom.matmul %r, %x transpose_lhs : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %w, %b : tensor<8x16xbf16>, tensor<1x1x8xf32>
}

// -----

// f32, y = x @ w: the weight gradient is x^T g, so the summed gradient is the
// rhs; the sum already has the GEMM's type and shape. Its use before the
// GEMM puts the fused op at the sum (the GEMM's operands are defined there).
// CHECK-LABEL: func.func @f32_rhs_used_early
// CHECK-SAME: (%[[X:[^:]*]]: tensor<6x4xf32>, %[[G:[^:]*]]: tensor<6x3xf32>)
// CHECK-NEXT: %[[W:.*]], %[[B:.*]] = loom.matmul_bias_grad %[[X]], %[[G]] sum rhs : (tensor<6x4xf32>, tensor<6x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
// CHECK-NEXT: %[[E:.*]] = loom.exp %[[B]]
// CHECK-NEXT: return %[[W]], %[[E]]
func.func @f32_rhs_used_early(%x: tensor<6x4xf32>, %g: tensor<6x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>) {
  %b = loom.reduce_sum %g [0] : tensor<6x3xf32> -> tensor<3xf32>
  %e = loom.exp %b : tensor<3xf32>
  %w = loom.matmul %x, %g transpose_lhs : (tensor<6x4xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  return %w, %e : tensor<4x3xf32>, tensor<3xf32>
}

// -----

// The order autodiff leaves: the sum, its reshape to the bias's shape, then
// the GEMM's operands reshaped to matrices and the GEMM. The fused op
// stands at the sum; the two reshapes move up to it, and the reshape back to
// the bias's shape reads the widened vector.
// CHECK-LABEL: func.func @autodiff_order
// CHECK-SAME: (%[[G:[^:]*]]: tensor<2x4x8xbf16>, %[[X:[^:]*]]: tensor<2x4x16xbf16>)
// CHECK-DAG: %[[RG:.*]] = loom.reshape %[[G]] : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-DAG: %[[RX:.*]] = loom.reshape %[[X]] : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
// CHECK: %[[W:.*]], %[[N:.*]] = loom.matmul_bias_grad %[[RG]], %[[RX]] sum lhs
// CHECK-NEXT: %[[C:.*]] = loom.cast %[[N]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NOT: loom.reshape
// CHECK-NEXT: return %[[W]], %[[C]]
func.func @autodiff_order(%g: tensor<2x4x8xbf16>, %x: tensor<2x4x16xbf16>) -> (tensor<8x16xbf16>, tensor<8xf32>) {
  %b = loom.reduce_sum %g [0, 1] keepdims : tensor<2x4x8xbf16> -> tensor<1x1x8xf32>
  %v = loom.reshape %b : tensor<1x1x8xf32> -> tensor<8xf32>
  %rg = loom.reshape %g : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %rx = loom.reshape %x : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
  %w = loom.matmul %rg, %rx transpose_lhs : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %w, %v : tensor<8x16xbf16>, tensor<8xf32>
}

// -----

// The sum after the GEMM: the fused op stands at the GEMM.
// CHECK-LABEL: func.func @sum_after_gemm
// CHECK-NEXT: %[[W:.*]], %[[B:.*]] = loom.matmul_bias_grad %{{.*}}, %{{.*}} sum lhs : (tensor<6x3xf64>, tensor<6x4xf64>) -> (tensor<3x4xf64>, tensor<3xf64>)
// CHECK-NEXT: return %[[W]], %[[B]]
func.func @sum_after_gemm(%g: tensor<6x3xf64>, %x: tensor<6x4xf64>) -> (tensor<3x4xf64>, tensor<3xf64>) {
  %w = loom.matmul %g, %x transpose_lhs : (tensor<6x3xf64>, tensor<6x4xf64>) -> tensor<3x4xf64>
  %b = loom.reduce_sum %g [0] : tensor<6x3xf64> -> tensor<3xf64>
  return %w, %b : tensor<3x4xf64>, tensor<3xf64>
}

// -----

// Left alone: a sum whose gradient only feeds a GEMM that does not contract
// it over its rows (the input gradient, g w); a sum over other axes; a sum
// used before a GEMM whose other operand is only defined after the sum; a
// GEMM that also transposes its rhs.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: loom.matmul_bias_grad
// CHECK-COUNT-4: loom.reduce_sum
// CHECK-NOT: loom.matmul_bias_grad
func.func @not_fused(%g1: tensor<6x3xf32>, %g2: tensor<6x3xf32>, %g3: tensor<6x3xf32>, %g4: tensor<6x3xf32>, %w: tensor<3x4xf32>, %x: tensor<6x4xf32>, %xt: tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<3xf32>, tensor<6xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3x4xf32>) {
  %dx = loom.matmul %g1, %w : (tensor<6x3xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  %b1 = loom.reduce_sum %g1 [0] : tensor<6x3xf32> -> tensor<3xf32>
  %rows = loom.reduce_sum %g2 [1] : tensor<6x3xf32> -> tensor<6xf32>
  %dw2 = loom.matmul %g2, %x transpose_lhs : (tensor<6x3xf32>, tensor<6x4xf32>) -> tensor<3x4xf32>
  %b3 = loom.reduce_sum %g3 [0] : tensor<6x3xf32> -> tensor<3xf32>
  %e = loom.exp %b3 : tensor<3xf32>
  %y = loom.exp %x : tensor<6x4xf32>
  %dw3 = loom.matmul %g3, %y transpose_lhs : (tensor<6x3xf32>, tensor<6x4xf32>) -> tensor<3x4xf32>
  %b4 = loom.reduce_sum %g4 [0] : tensor<6x3xf32> -> tensor<3xf32>
  %dw4 = loom.matmul %g4, %xt transpose_lhs transpose_rhs : (tensor<6x3xf32>, tensor<4x6xf32>) -> tensor<3x4xf32>
  return %dx, %b1, %rows, %dw2, %e, %dw3, %b4, %dw4 : tensor<6x4xf32>, tensor<3xf32>, tensor<6xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3x4xf32>
}
