// RUN: loom-opt --loom-fuse-elementwise --split-input-file %s | FileCheck %s

// A bias and activation chain becomes one fusion; the splat constant of the
// scale is copied into the body instead of being an input.
// CHECK-LABEL: func.func @chain
// CHECK:         %[[H:.*]] = loom.matmul
// CHECK-NEXT:    %[[F:.*]] = loom.fusion(%[[H]], %{{.*}}) : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<8x32xf32>, %[[B:.*]]: tensor<32xf32>):
// CHECK-NEXT:      %[[A:.*]] = loom.bias_add %[[X]], %[[B]]
// CHECK-NEXT:      %[[G:.*]] = loom.gelu %[[A]]
// CHECK-NEXT:      %[[C:.*]] = loom.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:      %[[M:.*]] = loom.mul %[[G]], %[[C]]
// CHECK-NEXT:      loom.yield %[[M]] : tensor<8x32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
func.func @chain(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %h = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %0 = loom.bias_add %h, %b : tensor<8x32xf32>, tensor<32xf32>
  %1 = loom.gelu %0 : tensor<8x32xf32>
  %c = loom.constant dense<0.5> : tensor<f32>
  %2 = loom.mul %1, %c : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----

// A value used both inside and after the fusion is one of its results.
// CHECK-LABEL: func.func @two_results
// CHECK:         %[[F:.*]]:2 = loom.fusion(%{{.*}}) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK:           %[[E:.*]] = loom.exp
// CHECK:           %[[N:.*]] = loom.neg %[[E]]
// CHECK:           loom.yield %[[E]], %[[N]]
// CHECK:         loom.reduce_sum %[[F]]#0
// CHECK:         return %{{.*}}, %[[F]]#1
func.func @two_results(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %0 = loom.exp %x : tensor<4xf32>
  %1 = loom.neg %0 : tensor<4xf32>
  %s = loom.reduce_sum %0 [0] : tensor<4xf32> -> tensor<f32>
  return %s, %1 : tensor<f32>, tensor<4xf32>
}

// -----

// The division needs the sum, which is computed after the fusion of the
// exp starts: joining would move a use above its definition, so the
// division starts a fusion of its own.
// CHECK-LABEL: func.func @no_reordering
// CHECK:         %[[E:.*]] = loom.fusion
// CHECK:           loom.exp
// CHECK:         %[[S:.*]] = loom.reduce_sum %[[E]]
// CHECK:         loom.fusion(%[[E]], %[[S]])
// CHECK:           loom.div
func.func @no_reordering(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = loom.exp %x : tensor<4x8xf32>
  %s = loom.reduce_sum %e [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = loom.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Ops over different shapes are different kernels; a broadcast fuses into
// the op that consumes its result as a broadcasting load.
// CHECK-LABEL: func.func @shapes
// CHECK:         %[[A:.*]] = loom.fusion(%{{.*}}) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK:           loom.tanh
// CHECK:         loom.fusion(%[[A]], %{{.*}}) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// CHECK:           loom.broadcast
// CHECK:           loom.compare lt
func.func @shapes(%x: tensor<8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xi1> {
  %0 = loom.tanh %x : tensor<8xf32>
  %1 = loom.broadcast %0 : tensor<8xf32> -> tensor<4x8xf32>
  %2 = loom.compare lt, %1, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  return %2 : tensor<4x8xi1>
}

// -----

// Non-elementwise ops are left alone and dead elementwise ops are erased.
// CHECK-LABEL: func.func @nothing_to_fuse
// CHECK-NOT:     loom.fusion
// CHECK-NOT:     loom.exp
func.func @nothing_to_fuse(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.softmax %x axis 1 : tensor<4x8xf32>
  %1 = loom.exp %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Two independent chains of one shape that meet (an optimizer update: one
// chain per state) merge into a single fusion with two results.
// CHECK-LABEL: func.func @merge_chains
// CHECK-NEXT:    %[[F:.*]]:2 = loom.fusion(%arg1, %arg2, %arg0)
// CHECK-NOT:     loom.fusion
// CHECK:         return %[[F]]#1, %[[F]]#0
func.func @merge_chains(%p: tensor<8xf32>, %m: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c = loom.constant dense<0.9> : tensor<f32>
  %0 = loom.mul %m, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = loom.mul %g, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = loom.add %0, %1 : tensor<8xf32>
  %3 = loom.sub %p, %2 : tensor<8xf32>
  return %3, %2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// The causal mask of attention is computed from a buffer after the scores
// are scaled. The compare (and its constant) move above the scaling, so the
// select joins it: the scaled scores are never stored.
// CHECK-LABEL: func.func @hoist_mask
// CHECK-NEXT:    %[[M:.*]] = loom.fusion(%arg1) : (tensor<4x4xf32>) -> tensor<4x4xi1>
// CHECK:           loom.compare eq
// CHECK:         %[[F:.*]] = loom.fusion(%arg0, %[[M]]) : (tensor<2x4x4xf32>, tensor<4x4xi1>) -> tensor<2x4x4xf32>
// CHECK:           loom.mul
// CHECK:           loom.select
// CHECK-NEXT:      loom.yield
// CHECK-NOT:     loom.fusion
// CHECK:         return %[[F]], %[[M]]
func.func @hoist_mask(%s: tensor<2x4x4xf32>, %buffer: tensor<4x4xf32>) -> (tensor<2x4x4xf32>, tensor<4x4xi1>) {
  %c = loom.constant dense<0.125> : tensor<f32>
  %0 = loom.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %zero = loom.constant dense<0.0> : tensor<f32>
  %m = loom.compare eq, %buffer, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %ninf = loom.constant dense<0xFF800000> : tensor<f32>
  %1 = loom.select %m, %ninf, %0 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %1, %m : tensor<2x4x4xf32>, tensor<4x4xi1>
}

// -----

// A weight's update in bf16 training: its gradient is a bf16 GEMM result
// widened in the backward pass, and the optimizer state is read after it.
// The state's loom.param moves up, so the momentum update joins the fusion
// that widens the gradient and the f32 gradient is never stored.
// CHECK-LABEL: func.func @hoist_param
// CHECK-NEXT:    %[[G:.*]] = loom.matmul
// CHECK-NEXT:    %[[M:.*]] = loom.param @m
// CHECK-NEXT:    %[[F:.*]] = loom.fusion(%[[G]], %[[M]]) : (tensor<4x4xbf16>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK:           loom.cast
// CHECK:           loom.add
// CHECK-NEXT:      loom.yield
// CHECK-NOT:     loom.fusion
// CHECK:         loom.assign @m, %[[F]]
loom.parameter @m : tensor<4x4xf32>
func.func @hoist_param(%x: tensor<4x4xbf16>, %dy: tensor<4x4xbf16>) {
  %gb = loom.matmul %x, %dy transpose_lhs : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %g = loom.cast %gb : tensor<4x4xbf16> -> tensor<4x4xf32>
  %c = loom.constant dense<0.1> : tensor<f32>
  %g1 = loom.mul %g, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %m = loom.param @m : tensor<4x4xf32>
  %b = loom.constant dense<0.9> : tensor<f32>
  %m1 = loom.mul %m, %b : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %m2 = loom.add %m1, %g1 : tensor<4x4xf32>
  loom.assign @m, %m2 : tensor<4x4xf32>
  return
}

// -----

// An activation's backward, after a GEMM: it reads erf(x + b) of the
// forward. Recomputing it from the bf16 x (2 bytes an element; the bias is
// small) costs less than storing and reading the f32 value (4), so the
// backward fusion copies the computation and the forward one keeps a single
// result.
// CHECK-LABEL: func.func @recompute_far_operand
// CHECK:         %[[Y:.*]] = loom.fusion(%arg0, %arg1) : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16> {
// CHECK:         %[[G:.*]] = loom.matmul
// CHECK-NEXT:    %[[D:.*]] = loom.fusion(%[[G]], %arg0, %arg1) : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK:           loom.erf
// CHECK:           loom.mul
// CHECK-NEXT:      loom.yield
// CHECK:         return %[[Y]], %[[D]]
func.func @recompute_far_operand(%a: tensor<4x8xbf16>, %b: tensor<8xf32>, %dy: tensor<4x8xbf16>, %w: tensor<8x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %x = loom.cast %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %h = loom.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %e = loom.erf %h : tensor<4x8xf32>
  %y = loom.cast %e : tensor<4x8xf32> -> tensor<4x8xbf16>
  %g = loom.matmul %dy, %w : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %gw = loom.cast %g : tensor<4x8xbf16> -> tensor<4x8xf32>
  %d = loom.mul %gw, %e : tensor<4x8xf32>
  return %y, %d : tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// The same from two f32 inputs (8 bytes an element against the value's 4):
// the forward fusion stores the value and the backward one reads it.
// CHECK-LABEL: func.func @keep_far_operand
// CHECK:         %[[F:.*]]:2 = loom.fusion(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK:         %[[G:.*]] = loom.matmul
// CHECK-NEXT:    loom.fusion(%[[G]], %[[F]]#0) : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NOT:       loom.erf
// CHECK:           loom.yield
func.func @keep_far_operand(%a: tensor<4x8xf32>, %r: tensor<4x8xf32>, %dy: tensor<4x8xbf16>, %w: tensor<8x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %h = loom.add %a, %r : tensor<4x8xf32>
  %e = loom.erf %h : tensor<4x8xf32>
  %y = loom.cast %e : tensor<4x8xf32> -> tensor<4x8xbf16>
  %g = loom.matmul %dy, %w : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %gw = loom.cast %g : tensor<4x8xbf16> -> tensor<4x8xf32>
  %d = loom.mul %gw, %e : tensor<4x8xf32>
  return %y, %d : tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// Only elementwise ops and constants move: the add's operand from a
// transpose after the exp keeps the add out of the exp's fusion.
// CHECK-LABEL: func.func @no_hoisting_past_the_group
// CHECK:         loom.fusion
// CHECK:           loom.exp
// CHECK:         %[[T:.*]] = loom.transpose
// CHECK:         loom.fusion(%{{.*}}, %[[T]])
// CHECK:           loom.add
func.func @no_hoisting_past_the_group(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = loom.exp %x : tensor<4x4xf32>
  %t = loom.transpose %y [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %a = loom.add %e, %t : tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

// The softmax backward of a bf16 GEMM's gradient: the widened gradient is
// read by the fusion before the row sum and by the one after it. Each
// recomputes the cast from the bf16 value in memory, so no f32 copy of it
// is stored: the first fusion has one result, the product.
// CHECK-LABEL: func.func @recompute_widening_cast
// CHECK:         %[[P:.*]] = loom.fusion(%arg0, %arg1) : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:           loom.cast %{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:           loom.mul
// CHECK:         %[[S:.*]] = loom.reduce_sum %[[P]]
// CHECK:         loom.fusion(%arg0, %[[S]], %arg1) : (tensor<4x8xbf16>, tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xbf16> {
// CHECK:           loom.cast %{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:           loom.sub
// CHECK:           loom.mul
// CHECK:           loom.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NOT:     loom.cast
func.func @recompute_widening_cast(%dy: tensor<4x8xbf16>, %y: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  %d = loom.cast %dy : tensor<4x8xbf16> -> tensor<4x8xf32>
  %0 = loom.mul %d, %y : tensor<4x8xf32>
  %s = loom.reduce_sum %0 [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %1 = loom.sub %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %2 = loom.mul %y, %1 : tensor<4x8xf32>
  %3 = loom.cast %2 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %3 : tensor<4x8xbf16>
}

// -----

// Not recomputed: a narrowing cast (storing the narrow value is cheaper),
// and a widening cast of a value computed inside a fusion (it is not in
// memory to be read again).
// CHECK-LABEL: func.func @keep_casts
// CHECK:         %[[A:.*]]:2 = loom.fusion(%arg0) : (tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
// CHECK:         %[[S:.*]] = loom.reduce_sum %[[A]]#1
// CHECK:         loom.fusion(%[[A]]#1, %[[S]])
// CHECK-NOT:       loom.cast
// CHECK:           loom.sub
func.func @keep_casts(%x: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %n = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %w = loom.cast %n : tensor<4x8xbf16> -> tensor<4x8xf32>
  %s = loom.reduce_sum %w [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %0 = loom.sub %w, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %0 : tensor<4x8xbf16>, tensor<4x8xf32>
}
