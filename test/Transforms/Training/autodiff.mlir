// RUN: loom-opt --loom-autodiff --split-input-file --verify-diagnostics %s | FileCheck %s

// The gradient function returns the forward results, then one gradient per
// trainable parameter the loss depends on, in declaration order. The frozen
// @c and the unused @u get none; integer labels get no adjoint.
// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME:    -> (tensor<f32> {onnx.name = "loss"}, tensor<4x3xf32> {loom.gradient_of = @w, onnx.name = "grad.w"}, tensor<3xf32> {loom.gradient_of = @b, onnx.name = "grad.b"})
// CHECK:         %[[W:.*]] = loom.param @w
// CHECK:         %[[H:.*]] = loom.matmul
// CHECK:         %[[L:.*]] = loom.cross_entropy
// CHECK:         %[[ONE:.*]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[HALF:.*]] = loom.constant dense<5.000000e-01> : tensor<f32>
// CHECK:         %[[SCALE:.*]] = loom.mul %[[ONE]], %[[HALF]] : tensor<f32>
// CHECK:         loom.cross_entropy_grad %{{.*}}, %arg1, %[[SCALE]] : (tensor<2x3xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x3xf32>
// CHECK:         %[[DW:.*]] = loom.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK:         return %[[L]], %[[DW]], %{{.*}} : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
loom.parameter @w trainable : tensor<4x3xf32>
loom.parameter @b trainable : tensor<3xf32>
loom.parameter @c : tensor<3xf32>
loom.parameter @u trainable : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
  %w = loom.param @w : tensor<4x3xf32>
  %b = loom.param @b : tensor<3xf32>
  %c = loom.param @c : tensor<3xf32>
  %h = loom.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %y = loom.bias_add %h, %b : tensor<2x3xf32>, tensor<3xf32>
  %z = loom.bias_add %y, %c : tensor<2x3xf32>, tensor<3xf32>
  %l = loom.cross_entropy %z, %labels : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A mean over the samples whose label is not ignore_index divides by their
// count (counted in the loss type); `none` passes each sample's gradient as
// the scale.
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}, tensor<4x5xf32>
// CHECK:         %[[W:.*]] = loom.param @w
// CHECK:         %[[KEPT:.*]] = loom.compare ne, %arg0, %{{.*}} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK:         %[[WEIGHT:.*]] = loom.cast %[[KEPT]] : tensor<4xi1> -> tensor<4xf32>
// CHECK:         %[[COUNT:.*]] = loom.reduce_sum %[[WEIGHT]] [0] : tensor<4xf32> -> tensor<f32>
// CHECK:         %[[SCALE:.*]] = loom.div %{{.*}}, %[[COUNT]] : tensor<f32>
// CHECK:         loom.cross_entropy_grad %[[W]], %arg0, %[[SCALE]] ignore_index -100 : (tensor<4x5xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x5xf32>
loom.parameter @w trainable : tensor<4x5xf32>
func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
  %z = loom.param @w : tensor<4x5xf32>
  %l = loom.cross_entropy %z, %labels ignore_index -100 : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A GELU's backward is one loom.gelu_grad of the result's gradient at the
// GELU's input, with its approximation (lowering fuses it into a GEMM or
// spells it out; autodiff-gradients.test checks its values).
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<4xi64>)
// CHECK:         %[[W:.*]] = loom.param @w
// CHECK:         %[[Y:.*]] = loom.gelu %[[W]] approximate tanh : tensor<4x5xf32>
// CHECK:         %[[DY:.*]] = loom.cross_entropy_grad %[[Y]], %arg0
// CHECK-NEXT:    %[[DW:.*]] = loom.gelu_grad %[[DY]], %[[W]] approximate tanh : tensor<4x5xf32>
// CHECK:         return %{{.*}}, %[[DW]]
loom.parameter @w trainable : tensor<4x5xf32>
func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
  %z = loom.param @w : tensor<4x5xf32>
  %y = loom.gelu %z approximate tanh : tensor<4x5xf32>
  %l = loom.cross_entropy %y, %labels : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Padded logits: the gradient keeps the loss's classes (and so is 0 in the
// padding).
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}, tensor<4x8xf32>
// CHECK:         %[[W:.*]] = loom.param @w
// CHECK:         loom.cross_entropy_grad %[[W]], %arg0, %{{.*}} classes 5 : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
loom.parameter @w trainable : tensor<4x8xf32>
func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
  %z = loom.param @w : tensor<4x8xf32>
  %l = loom.cross_entropy %z, %labels classes 5 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}, tensor<4x5xf32>
// CHECK:         %[[W:.*]] = loom.param @w
// CHECK:         loom.reduce_sum
// CHECK-NOT:     loom.reduce_sum
// CHECK:         loom.cross_entropy_grad %[[W]], %arg0, %{{.*}} : (tensor<4x5xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x5xf32>
loom.parameter @w trainable : tensor<4x5xf32>
func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {onnx.name = "loss"}) {
  %z = loom.param @w : tensor<4x5xf32>
  %p = loom.cross_entropy %z, %labels reduction none : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<4xf32>
  %l = loom.reduce_sum %p [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

loom.parameter @w trainable : tensor<4xf32>
// expected-error @+1 {{'func.func' op result #0 is the loss and must be a float scalar, got 'tensor<4xf32>'}}
func.func @forward() -> tensor<4xf32> {
  %w = loom.param @w : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

loom.parameter @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op result #0 (the loss) depends on no trainable loom.parameter}}
func.func @forward() -> tensor<f32> {
  %w = loom.param @w : tensor<4xf32>
  %l = loom.reduce_sum %w [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A lookup with padding_idx 1 (PyTorch's nn.Embedding(padding_idx=1)): the
// positions that read row 1 (or -9, the same row) pass no gradient.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[IDS:.*]] = loom.constant dense<{{\[}}1, 3, -9]> : tensor<3xi64>
// CHECK:         %[[ONE:.*]] = loom.constant dense<1> : tensor<i64>
// CHECK:         %[[ROW:.*]] = loom.compare eq, %[[IDS]], %[[ONE]]
// CHECK:         %[[MINUS9:.*]] = loom.constant dense<-9> : tensor<i64>
// CHECK:         %[[WRAPPED:.*]] = loom.compare eq, %[[IDS]], %[[MINUS9]]
// CHECK:         %[[SKIP:.*]] = loom.maximum %[[ROW]], %[[WRAPPED]] : tensor<3xi1>
// CHECK:         %[[SKIP2:.*]] = loom.reshape %[[SKIP]] : tensor<3xi1> -> tensor<3x1xi1>
// CHECK:         %[[KEPT:.*]] = loom.select %[[SKIP2]], %{{.*}}, %{{.*}} : (tensor<3x1xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK:         loom.scatter_add %[[KEPT]][%[[IDS]]] : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
loom.parameter @t trainable : tensor<10x4xf32>
func.func @forward() -> tensor<f32> {
  %t = loom.param @t : tensor<10x4xf32>
  %ids = loom.constant dense<[1, 3, -9]> : tensor<3xi64>
  %e = loom.gather %t[%ids] padding_idx 1 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %l = loom.reduce_sum %e [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A strided slice's gradient: each element followed by stride - 1 zeros,
// cut to the window (1:8 holds 4 elements with stride 2: 7 positions), then
// padded to the input's length.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[COL:.*]] = loom.reshape %{{.*}} : tensor<4xf32> -> tensor<4x1xf32>
// CHECK:         %[[Z:.*]] = loom.constant dense<0.000000e+00> : tensor<4x1xf32>
// CHECK:         %[[SPREAD:.*]] = loom.concat %[[COL]], %[[Z]] axis 1 : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
// CHECK:         %[[FLAT:.*]] = loom.reshape %[[SPREAD]] : tensor<4x2xf32> -> tensor<8xf32>
// CHECK:         %[[CUT:.*]] = loom.slice %[[FLAT]] [0:7] : tensor<8xf32> -> tensor<7xf32>
// CHECK:         %[[HEAD:.*]] = loom.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK:         loom.concat %[[HEAD]], %[[CUT]] axis 0 : (tensor<1xf32>, tensor<7xf32>) -> tensor<8xf32>
loom.parameter @w trainable : tensor<8xf32>
func.func @forward() -> tensor<f32> {
  %w = loom.param @w : tensor<8xf32>
  %s = loom.slice %w [1:8:2] : tensor<8xf32> -> tensor<4xf32>
  %l = loom.reduce_sum %s [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{no function 'forward' to differentiate}}
module {
  func.func @other() {
    return
  }
}

// -----

// Attention's backward is one loom.attention_grad with the forward's mask,
// scale and mask value; it reads the forward's output for its row sums
// (delta), so the graph has no multiply-and-reduce for them.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[O:.*]], %[[LSE:.*]] = loom.attention %[[Q:.*]], %[[Q]], %[[Q]] mask %[[M:[^ ]*]] scale 1.250000e-01 mask_value -1.000000e+04
// CHECK:         %[[DO:.*]] = loom.cast %{{.*}} : tensor<2x8x4xf32> -> tensor<2x8x4xbf16>
// CHECK-NOT:     loom.reduce_sum
// CHECK:         loom.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[DO]], %[[LSE]], %[[O]] mask %[[M]] scale 1.250000e-01 mask_value -1.000000e+04
loom.parameter @x trainable : tensor<2x8x4xf32>
func.func @forward(%m: tensor<1x8x8xi1>) -> tensor<f32> {
  %x = loom.param @x : tensor<2x8x4xf32>
  %q = loom.cast %x : tensor<2x8x4xf32> -> tensor<2x8x4xbf16>
  %o, %lse = loom.attention %q, %q, %q mask %m scale 0.125 mask_value -1.0e+04
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<1x8x8xi1>) -> (tensor<2x8x4xbf16>, tensor<2x8xf32>)
  %w = loom.cast %o : tensor<2x8x4xbf16> -> tensor<2x8x4xf32>
  %l = loom.reduce_sum %w [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A seq-major attention's backward is seq-major too.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[O:.*]], %[[LSE:.*]] = loom.attention %[[Q:.*]], %[[Q]], %[[Q]] scale 5.000000e-01 seq_major
// CHECK:         loom.attention_grad %[[Q]], %[[Q]], %[[Q]], %{{.*}}, %[[LSE]], %[[O]] scale 5.000000e-01 seq_major : {{.*}} -> (tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>)
loom.parameter @x trainable : tensor<2x8x3x4xf32>
func.func @forward() -> tensor<f32> {
  %x = loom.param @x : tensor<2x8x3x4xf32>
  %o, %lse = loom.attention %x, %x, %x scale 0.5 seq_major
      : (tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>) -> (tensor<2x8x3x4xf32>, tensor<2x8x3xf32>)
  %l = loom.reduce_sum %o [0, 1, 2, 3] : tensor<2x8x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Layer norm's backward is one loom.layer_norm_grad with the forward's axis
// and epsilon; its three results are the gradients of x, scale and bias.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[X:.*]] = loom.param @x
// CHECK:         %[[G:.*]] = loom.param @g
// CHECK:         loom.layer_norm %[[X]], %[[G]], %{{.*}} axis 1 epsilon 1.000000e-03
// CHECK:         %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = loom.layer_norm_grad %[[X]], %[[G]], %{{.*}} axis 1 epsilon 1.000000e-03 : tensor<2x8xf32>, tensor<8xf32>
// CHECK:         return %{{.*}}, %[[DX]], %[[DG]], %[[DB]]
loom.parameter @x trainable : tensor<2x8xf32>
loom.parameter @g trainable : tensor<8xf32>
loom.parameter @b trainable : tensor<8xf32>
func.func @forward() -> tensor<f32> {
  %x = loom.param @x : tensor<2x8xf32>
  %g = loom.param @g : tensor<8xf32>
  %b = loom.param @b : tensor<8xf32>
  %y = loom.layer_norm %x, %g, %b axis 1 epsilon 1.0e-3 : tensor<2x8xf32>, tensor<8xf32>
  %l = loom.reduce_sum %y [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The log-sum-exp result is for the backward kernel; nothing differentiates
// through it.
loom.parameter @x trainable : tensor<2x8x4xf32>
func.func @forward() -> tensor<f32> {
  %x = loom.param @x : tensor<2x8x4xf32>
  // expected-error @+1 {{'loom.attention' op has no gradient rule for its logsumexp result}}
  %o, %lse = loom.attention %x, %x, %x scale 0.5 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
  %l = loom.reduce_sum %lse [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An f32 sum of bf16 values passes a bf16 gradient back.
// CHECK-LABEL: func.func @forward_grad() -> (tensor<f32> {onnx.name = "loss"}, tensor<4x3xbf16>
// CHECK:         %[[B:.*]] = loom.broadcast %{{.*}} : tensor<1x1xf32> -> tensor<4x3xf32>
// CHECK:         %[[G:.*]] = loom.cast %[[B]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK:         return %{{.*}}, %[[G]]
loom.parameter @h trainable : tensor<4x3xbf16>
func.func @forward() -> (tensor<f32> {onnx.name = "loss"}) {
  %h = loom.param @h : tensor<4x3xbf16>
  %l = loom.reduce_sum %h [0, 1] : tensor<4x3xbf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A pipeline stage's backward runs on its forward's rank: every op a
// staged op's rule makes gets its stage and is marked loom.backward
// (loom-split-stages schedules them as B and W actions); the seed of the
// loss gradient, made before any rule, is neither.
// CHECK-LABEL: func.func @forward_grad(
// CHECK:         %[[SEED:.*]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         loom.broadcast {{.*}} {loom.backward, loom.stage = 1 : i64}
// CHECK:         loom.matmul {{.*}} transpose_lhs {loom.backward, loom.stage = 0 : i64}
loom.parameter @w trainable : tensor<4x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = loom.param @w {loom.stage = 0 : i64} : tensor<4x4xf32>
  %h = loom.matmul %x, %w {loom.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.reduce_sum %h [0, 1] {loom.stage = 1 : i64} : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
