// Pins the factor rule (iterator types + indexing maps) of every loom op.
// RUN: loom-opt %s --loom-test-print-factors --verify-diagnostics -o /dev/null

loom.parameter @w : tensor<768x3072xf32>
func.func @f(%x: tensor<8x128x768xf32>, %w: tensor<768x3072xf32>, %wt: tensor<3072x768xf32>,
             %q: tensor<8x12x128x64xf32>, %a: tensor<2x4x8xf32>, %r: tensor<8xf32>, %c: tensor<4x1xf32>,
             %t: tensor<50257x768xf32>, %ids: tensor<8x128xi64>, %g: tensor<768xf32>,
             %l: tensor<8x128x50257xf32>, %y: tensor<8x128xi64>, %s: tensor<6x4xf32>,
             %m: tensor<2x4x8xi1>, %b: tensor<3072xf32>) {
  // Rank-3 activations times a shared weight: batch, M and N parallel, K contracting.
  // expected-remark @below {{loom.matmul: iterators = [parallel, parallel, parallel, contracting], sizes = [8, 128, 3072, 768], maps = [(d0, d1, d2, d3) -> (d0, d1, d3), (d0, d1, d2, d3) -> (d3, d2), (d0, d1, d2, d3) -> (d0, d1, d2)]}}
  %0 = loom.matmul %x, %w : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
  // transpose_rhs reads the weight as [N, K].
  // expected-remark @below {{loom.matmul: iterators = [parallel, parallel, parallel, contracting], sizes = [8, 128, 3072, 768], maps = [(d0, d1, d2, d3) -> (d0, d1, d3), (d0, d1, d2, d3) -> (d2, d3), (d0, d1, d2, d3) -> (d0, d1, d2)]}}
  %1 = loom.matmul %x, %wt transpose_rhs : (tensor<8x128x768xf32>, tensor<3072x768xf32>) -> tensor<8x128x3072xf32>
  // Attention scores: two batch dims, both operands batched.
  // expected-remark @below {{loom.matmul: iterators = [parallel, parallel, parallel, parallel, contracting], sizes = [8, 12, 128, 128, 64], maps = [(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4), (d0, d1, d2, d3, d4) -> (d0, d1, d3, d4), (d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)]}}
  %2 = loom.matmul %q, %q transpose_rhs : (tensor<8x12x128x64xf32>, tensor<8x12x128x64xf32>) -> tensor<8x12x128x128xf32>
  // Both transposed; the batch dims come from the rhs.
  // expected-remark @below {{loom.matmul: iterators = [parallel, parallel, parallel, contracting], sizes = [8, 3072, 128, 768], maps = [(d0, d1, d2, d3) -> (d3, d1), (d0, d1, d2, d3) -> (d0, d2, d3), (d0, d1, d2, d3) -> (d0, d1, d2)]}}
  %3 = loom.matmul %w, %x transpose_lhs transpose_rhs : (tensor<768x3072xf32>, tensor<8x128x768xf32>) -> tensor<8x3072x128xf32>
  // Elementwise with a broadcast rank-1 operand.
  // expected-remark @below {{loom.add: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %4 = loom.add %a, %r : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // Size-1 broadcast dimensions map to the constant 0.
  // expected-remark @below {{loom.mul: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, 0), (d0, d1) -> (d1), (d0, d1) -> (d0, d1)]}}
  %5 = loom.mul %c, %r : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // expected-remark @below {{loom.exp: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %6 = loom.exp %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.select: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %7 = loom.select %m, %a, %r : (tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // expected-remark @below {{loom.compare: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, 0), (d0, d1) -> (d1), (d0, d1) -> (d0, d1)]}}
  %8 = loom.compare lt, %c, %r : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // expected-remark @below {{loom.cast: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %9 = loom.cast %a : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  // Reductions: reduced dims are reduction factors.
  // expected-remark @below {{loom.reduce_sum: iterators = [parallel, reduction_sum, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d2)]}}
  %10 = loom.reduce_sum %a [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  // A mean is a sum divided by a constant; keepdims maps to 0.
  // expected-remark @below {{loom.reduce_mean: iterators = [parallel, parallel, reduction_sum], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, 0)]}}
  %11 = loom.reduce_mean %a [2] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  // Max reductions leave partial maxima.
  // expected-remark @below {{loom.reduce_max: iterators = [reduction_max, parallel, reduction_max], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d1)]}}
  %12 = loom.reduce_max %a [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
  // Softmax needs its axis whole.
  // expected-remark @below {{loom.softmax: iterators = [parallel, parallel, parallel, need_replication], sizes = [8, 12, 128, 64], maps = [(d0, d1, d2, d3) -> (d0, d1, d2, d3), (d0, d1, d2, d3) -> (d0, d1, d2, d3)]}}
  %13 = loom.softmax %q axis 3 : tensor<8x12x128x64xf32>
  // expected-remark @below {{loom.log_softmax: iterators = [parallel, need_replication, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %14 = loom.log_softmax %a axis 1 : tensor<2x4x8xf32>
  // A cumulative sum needs its axis whole.
  // expected-remark @below {{loom.cumsum: iterators = [parallel, need_replication, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %cs = loom.cumsum %a axis 1 : tensor<2x4x8xf32>
  // expected-remark @below {{loom.maximum: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %mx = loom.maximum %a, %r : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // Layer norm needs the normalized dims whole; scale and bias follow them.
  // expected-remark @below {{loom.layer_norm: iterators = [parallel, parallel, need_replication], sizes = [8, 128, 768], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %15 = loom.layer_norm %x, %g, %g axis 2 : tensor<8x128x768xf32>, tensor<768xf32>
  // Its gradient sums the rows away from dscale and dbias.
  // expected-remark @below {{loom.layer_norm_grad: iterators = [reduction_sum, reduction_sum, need_replication], sizes = [8, 128, 768], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d2)]}}
  %lng:3 = loom.layer_norm_grad %x, %g, %x axis 2 : tensor<8x128x768xf32>, tensor<768xf32>
  // Embedding lookup: the vocabulary dim contracts (one-hot product).
  // expected-remark @below {{loom.gather: iterators = [parallel, parallel, contracting, parallel], sizes = [8, 128, 50257, 768], maps = [(d0, d1, d2, d3) -> (d2, d3), (d0, d1, d2, d3) -> (d0, d1), (d0, d1, d2, d3) -> (d0, d1, d3)]}}
  %16 = loom.gather %t[%ids] : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<8x128x768xf32>
  // Gather along an inner axis: outer, index and inner dims are parallel.
  // expected-remark @below {{loom.gather: iterators = [parallel, parallel, parallel, contracting, parallel], sizes = [2, 8, 128, 4, 8], maps = [(d0, d1, d2, d3, d4) -> (d0, d3, d4), (d0, d1, d2, d3, d4) -> (d1, d2), (d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)]}}
  %17 = loom.gather %a[%ids] axis 1 : (tensor<2x4x8xf32>, tensor<8x128xi64>) -> tensor<2x8x128x8xf32>
  // Splitting heads: D = H x Dh.
  // expected-remark @below {{loom.reshape: iterators = [parallel, parallel, parallel, parallel], sizes = [8, 128, 12, 64], maps = [(d0, d1, d2, d3) -> (d0, d1, d2 * 64 + d3), (d0, d1, d2, d3) -> (d0, d1, d2, d3)]}}
  %18 = loom.reshape %x : tensor<8x128x768xf32> -> tensor<8x128x12x64xf32>
  // Merging batch and sequence.
  // expected-remark @below {{loom.reshape: iterators = [parallel, parallel, parallel], sizes = [8, 128, 768], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0 * 128 + d1, d2)]}}
  %19 = loom.reshape %x : tensor<8x128x768xf32> -> tensor<1024x768xf32>
  // No common refinement: every dim needs replication, on its side only.
  // expected-remark @below {{loom.reshape: iterators = [need_replication, need_replication, need_replication, need_replication], sizes = [6, 4, 4, 6], maps = [(d0, d1, d2, d3) -> (d0, d1), (d0, d1, d2, d3) -> (d2, d3)]}}
  %20 = loom.reshape %s : tensor<6x4xf32> -> tensor<4x6xf32>
  // Unit dims map to no factor.
  // expected-remark @below {{loom.reshape: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (0, (d0 * 4 + d1) * 8 + d2, 0)]}}
  %21 = loom.reshape %a : tensor<2x4x8xf32> -> tensor<1x64x1xf32>
  // Splitting heads: D = H x Dh.
  // expected-remark @below {{loom.transpose: iterators = [parallel, parallel, parallel, parallel], sizes = [8, 12, 128, 64], maps = [(d0, d1, d2, d3) -> (d0, d1, d2, d3), (d0, d1, d2, d3) -> (d0, d2, d1, d3)]}}
  %22 = loom.transpose %q [0, 2, 1, 3] : tensor<8x12x128x64xf32> -> tensor<8x128x12x64xf32>
  // A whole dim stays parallel; a sliced dim needs replication.
  // expected-remark @below {{loom.slice: iterators = [parallel, need_replication, need_replication], sizes = [6, 4, 2], maps = [(d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (d0, d2)]}}
  %23 = loom.slice %s [0:6, 1:3] : tensor<6x4xf32> -> tensor<6x2xf32>
  // Concat: the axis needs replication, one factor per tensor.
  // expected-remark @below {{loom.concat: iterators = [parallel, need_replication, need_replication, need_replication], sizes = [6, 4, 4, 8], maps = [(d0, d1, d2, d3) -> (d0, d1), (d0, d1, d2, d3) -> (d0, d2), (d0, d1, d2, d3) -> (d0, d3)]}}
  %24 = loom.concat %s, %s axis 1 : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
  // Split mirrors concat.
  // expected-remark @below {{loom.split: iterators = [parallel, need_replication, need_replication, need_replication], sizes = [4, 2, 4, 6], maps = [(d0, d1, d2, d3) -> (d3, d0), (d0, d1, d2, d3) -> (d1, d0), (d0, d1, d2, d3) -> (d2, d0)]}}
  %25:2 = loom.split %s axis 0 : tensor<6x4xf32> -> tensor<2x4xf32>, tensor<4x4xf32>
  // Broadcast: new and size-1 dims exist only in the result.
  // expected-remark @below {{loom.broadcast: iterators = [parallel, parallel, parallel], sizes = [3, 4, 8], maps = [(d0, d1, d2) -> (d1, 0), (d0, d1, d2) -> (d0, d1, d2)]}}
  %26 = loom.broadcast %c : tensor<4x1xf32> -> tensor<3x4x8xf32>
  // expected-remark @below {{loom.bias_add: iterators = [parallel, parallel, parallel], sizes = [8, 128, 3072], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %27 = loom.bias_add %0, %b : tensor<8x128x3072xf32>, tensor<3072xf32>
  // expected-remark @below {{loom.dropout: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %28:2 = loom.dropout %a ratio 0.1 : tensor<2x4x8xf32>
  // Mean loss: samples are summed, classes needed whole.
  // expected-remark @below {{loom.cross_entropy: iterators = [reduction_sum, reduction_sum, need_replication], sizes = [8, 128, 50257], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> ()]}}
  %29 = loom.cross_entropy %l, %y : (tensor<8x128x50257xf32>, tensor<8x128xi64>) -> tensor<f32>
  // Per-sample loss: samples stay parallel.
  // expected-remark @below {{loom.cross_entropy: iterators = [parallel, parallel, need_replication], sizes = [8, 128, 50257], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (d0, d1)]}}
  %30 = loom.cross_entropy %l, %y reduction none : (tensor<8x128x50257xf32>, tensor<8x128xi64>) -> tensor<8x128xf32>
  // The gradient: samples parallel whatever the reduction (a mean's count is
  // in the scale), classes needed whole.
  // expected-remark @below {{loom.cross_entropy_grad: iterators = [parallel, parallel, need_replication], sizes = [8, 128, 50257], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (), (d0, d1, d2) -> (d0, d1, d2)]}}
  %grad = loom.cross_entropy_grad %l, %y, %29 : (tensor<8x128x50257xf32>, tensor<8x128xi64>, tensor<f32>) -> tensor<8x128x50257xf32>
  // expected-remark @below {{loom.cross_entropy_grad: iterators = [parallel, parallel, need_replication], sizes = [8, 128, 50257], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (d0, d1, d2)]}}
  %gradEach = loom.cross_entropy_grad %l, %y, %30 : (tensor<8x128x50257xf32>, tensor<8x128xi64>, tensor<8x128xf32>) -> tensor<8x128x50257xbf16>
  // expected-remark @below {{loom.param: iterators = [parallel, parallel], sizes = [768, 3072], maps = [(d0, d1) -> (d0, d1)]}}
  %31 = loom.param @w : tensor<768x3072xf32>
  // Scalars have no factors.
  // expected-remark @below {{loom.constant: iterators = [], sizes = [], maps = [() -> ()]}}
  %32 = loom.constant dense<1.0> : tensor<f32>
  return
}

func.func @attention(%q: tensor<2x4x16x8xbf16>, %k: tensor<2x4x12x8xbf16>, %v: tensor<2x4x12x6xbf16>, %m: tensor<1x4x16x12xi1>, %d: tensor<2x4x16xf32>) {
  // Batch dims (samples, heads), query rows and value columns are parallel;
  // keys and the head dim feed the softmax. The mask's size-1 dim broadcasts.
  // expected-remark @below {{loom.attention: iterators = [parallel, parallel, parallel, need_replication, need_replication, parallel], sizes = [2, 4, 16, 12, 8, 6], maps = [(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d5), (d0, d1, d2, d3, d4, d5) -> (0, d1, d2, d3), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)]}}
  %o, %lse = loom.attention %q, %k, %v mask %m scale 0.125
      : (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>)
  // The backward splits along the batch dims only.
  // expected-remark @below {{loom.attention_grad: iterators = [parallel, parallel, need_replication, need_replication, need_replication, need_replication], sizes = [2, 4, 16, 12, 8, 6], maps = [(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d5)]}}
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %o scale 0.125
      : (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>, tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x6xbf16>) -> (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>)
  return
}

func.func @attention_seq_major(%q: tensor<2x16x4x8xbf16>, %k: tensor<2x12x4x8xbf16>, %v: tensor<2x12x4x6xbf16>, %m: tensor<1x4x16x12xi1>, %d: tensor<2x16x4xf32>) {
  // The same factors as head-major; the heads factor (d1) sits after the
  // rows in the operands and statistics, not in the mask.
  // expected-remark @below {{loom.attention: iterators = [parallel, parallel, parallel, need_replication, need_replication, parallel], sizes = [2, 4, 16, 12, 8, 6], maps = [(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d5), (d0, d1, d2, d3, d4, d5) -> (0, d1, d2, d3), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1)]}}
  %o, %lse = loom.attention %q, %k, %v mask %m scale 0.125 seq_major
      : (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x16x4x6xbf16>, tensor<2x16x4xf32>)
  // expected-remark @below {{loom.attention_grad: iterators = [parallel, parallel, need_replication, need_replication, need_replication, need_replication], sizes = [2, 4, 16, 12, 8, 6], maps = [(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d5), (d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d4), (d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d5)]}}
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %o scale 0.125 seq_major
      : (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>, tensor<2x16x4x6xbf16>, tensor<2x16x4xf32>, tensor<2x16x4x6xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>)
  return
}

// Symbols (loom.mesh, loom.parameter) compute nothing and have no rule.
loom.mesh @mesh = <dp = 2, tp = 2>
loom.parameter @p trainable : tensor<64x32xf32>

func.func @elementwise(%a: tensor<2x4x8xf32>, %r: tensor<8xf32>, %c: tensor<4x1xf32>, %i: tensor<2x4x8xi32>) {
  // Unary and binary elementwise ops: one parallel factor per result dim,
  // operands broadcast against it (see loom.add and loom.mul above).
  // expected-remark @below {{loom.sqrt: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %0 = loom.sqrt %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.rsqrt: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %1 = loom.rsqrt %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.log: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %2 = loom.log %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.neg: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %3 = loom.neg %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.erf: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %4 = loom.erf %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.tanh: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %5 = loom.tanh %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.sigmoid: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %6 = loom.sigmoid %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.relu: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %7 = loom.relu %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.reciprocal: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %8 = loom.reciprocal %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.abs: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %9 = loom.abs %i : tensor<2x4x8xi32>
  // expected-remark @below {{loom.sin: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %10 = loom.sin %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.cos: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %11 = loom.cos %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.gelu: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %12 = loom.gelu %a approximate tanh : tensor<2x4x8xf32>
  // expected-remark @below {{loom.gelu_grad: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %13 = loom.gelu_grad %a, %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.sub: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %14 = loom.sub %a, %r : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // expected-remark @below {{loom.div: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, 0), (d0, d1) -> (d1), (d0, d1) -> (d0, d1)]}}
  %15 = loom.div %c, %r : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // expected-remark @below {{loom.pow: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %16 = loom.pow %a, %a : tensor<2x4x8xf32>
  // expected-remark @below {{loom.fmod: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %17 = loom.fmod %a, %r : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // expected-remark @below {{loom.minimum: iterators = [parallel, parallel, parallel], sizes = [2, 4, 8], maps = [(d0, d1, d2) -> (d2), (d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1, d2)]}}
  %18 = loom.minimum %r, %a : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

func.func @indexing(%s: tensor<4x8xf32>, %u: tensor<8x128x32xf32>, %ids: tensor<8x128xi64>) {
  // A sharding annotation is the identity.
  // expected-remark @below {{loom.shard: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1)]}}
  %0 = loom.shard %s to <@mesh, [{dp}, {}]> : tensor<4x8xf32>
  // The adjoint of gather: the index dims are summed over (contracting), the
  // rows exist in the result only.
  // expected-remark @below {{loom.scatter_add: iterators = [contracting, contracting, parallel, parallel], sizes = [8, 128, 64, 32], maps = [(d0, d1, d2, d3) -> (d0, d1, d3), (d0, d1, d2, d3) -> (d0, d1), (d0, d1, d2, d3) -> (d2, d3)]}}
  %1 = loom.scatter_add %u[%ids] : (tensor<8x128x32xf32>, tensor<8x128xi64>) -> tensor<64x32xf32>
  return
}

func.func @optimizers(%w: tensor<64x32xf32>, %g: tensor<64x32xf32>, %step: tensor<f64>, %m: tensor<64x32xf32>, %v: tensor<64x32xf32>) {
  // Optimizer updates are elementwise over the parameter (what ZeRO shards):
  // every dim parallel, the scalar step maps to no factor.
  // expected-remark @below {{loom.sgd_update: iterators = [parallel, parallel], sizes = [64, 32], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (), (d0, d1) -> (d0, d1)]}}
  %0 = loom.sgd_update %w, %g, %step {lr = 0.1 : f64} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>) -> tensor<64x32xf32>
  // expected-remark @below {{loom.sgd_update: iterators = [parallel, parallel], sizes = [64, 32], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1)]}}
  %1:2 = loom.sgd_update %w, %g, %step, %m {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>)
  // expected-remark @below {{loom.adamw_update: iterators = [parallel, parallel], sizes = [64, 32], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1)]}}
  %2:3 = loom.adamw_update %w, %g, %step, %m, %v {lr = 1.0e-3 : f64} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f64>, tensor<64x32xf32>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>)
  // Each part of the value is stored into the same part of the parameter.
  // expected-remark @below {{loom.assign: iterators = [parallel, parallel], sizes = [64, 32], maps = [(d0, d1) -> (d0, d1)]}}
  loom.assign @p, %2#0 : tensor<64x32xf32>
  return
}

module attributes {loom.world_size = 4 : i64} {
  func.func @collectives(%x: tensor<4x8xf32>) {
    // Collectives: dims other than the collective's axis are parallel. An
    // all_reduce combines each element with the same element of the other
    // ranks only.
    // expected-remark @below {{loom.all_reduce: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1)]}}
    %0 = loom.all_reduce sum %x groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // The gathered axis needs replication, one factor per side.
    // expected-remark @below {{loom.all_gather: iterators = [parallel, need_replication, need_replication], sizes = [4, 8, 16], maps = [(d0, d1, d2) -> (d0, d1), (d0, d1, d2) -> (d0, d2)]}}
    %1 = loom.all_gather %x axis 1 groups [[0, 1], [2, 3]] : tensor<4x8xf32> -> tensor<4x16xf32>
    // So does the scattered one.
    // expected-remark @below {{loom.reduce_scatter: iterators = [need_replication, need_replication, parallel], sizes = [4, 2, 8], maps = [(d0, d1, d2) -> (d0, d2), (d0, d1, d2) -> (d1, d2)]}}
    %2 = loom.reduce_scatter sum %x axis 0 groups [[0, 2], [1, 3]] : tensor<4x8xf32> -> tensor<2x8xf32>
    // expected-remark @below {{loom.collective_broadcast: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0, d1)]}}
    %3 = loom.collective_broadcast %x root 0 groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // Pieces are exchanged along dim 0.
    // expected-remark @below {{loom.all_to_all: iterators = [need_replication, need_replication, parallel], sizes = [4, 4, 8], maps = [(d0, d1, d2) -> (d0, d2), (d0, d1, d2) -> (d1, d2)]}}
    %4 = loom.all_to_all %x groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // Point-to-point: each part goes to the same part of the target.
    // expected-remark @below {{loom.send: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, d1)]}}
    loom.send %x to [[0, 1], [1, 2], [2, 3], [3, 0]] tag 0 : tensor<4x8xf32>
    // expected-remark @below {{loom.recv: iterators = [parallel, parallel], sizes = [4, 8], maps = [(d0, d1) -> (d0, d1)]}}
    %5 = loom.recv from [[0, 1], [1, 2], [2, 3], [3, 0]] tag 0 : tensor<4x8xf32>
    return
  }
}
