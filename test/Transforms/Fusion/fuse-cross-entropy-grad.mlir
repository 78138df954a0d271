// RUN: loom-opt --loom-fuse-cross-entropy-grad --split-input-file --verify-diagnostics %s | FileCheck %s

// The training step's form: bf16 logits padded to 64 of which 61 are
// classes, the scale a constant (the loss seed over the 64 samples). One op
// at the loss computes both; its uses read its results.
// CHECK-LABEL: func.func @training_step
// CHECK-SAME: (%[[L:[^:]*]]: tensor<64x64xbf16>, %[[Y:[^:]*]]: tensor<64xi64>)
// CHECK-NEXT: %[[S:.*]] = loom.constant dense<1.562500e-02> : tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]], %[[D:.*]] = loom.cross_entropy_with_grad %[[L]], %[[Y]], %[[S]] ignore_index -100 classes 61 : (tensor<64x64xbf16>, tensor<64xi64>, tensor<f32>) -> (tensor<f32>, tensor<64x64xbf16>)
// CHECK-NEXT: %[[E:.*]] = loom.exp %[[LOSS]]
// CHECK-NOT: loom.cross_entropy
// CHECK: return %[[E]], %[[D]]
func.func @training_step(%l: tensor<64x64xbf16>, %y: tensor<64xi64>) -> (tensor<f32>, tensor<64x64xbf16>) {
  %s = loom.constant dense<1.562500e-02> : tensor<f32>
  %loss = loom.cross_entropy %l, %y ignore_index -100 classes 61 : (tensor<64x64xbf16>, tensor<64xi64>) -> tensor<f32>
  %e = loom.exp %loss : tensor<f32>
  %d = loom.cross_entropy_grad %l, %y, %s ignore_index -100 classes 61 : (tensor<64x64xbf16>, tensor<64xi64>, tensor<f32>) -> tensor<64x64xbf16>
  return %e, %d : tensor<f32>, tensor<64x64xbf16>
}

// -----

// Per-sample losses and a per-sample scale (an argument); the gradient comes
// first, so the fused op stands there, before the loss's use.
// CHECK-LABEL: func.func @gradient_first
// CHECK-SAME: (%[[L:[^:]*]]: tensor<2x3x5xf32>, %[[Y:[^:]*]]: tensor<2x3xi32>, %[[S:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[LOSS:.*]], %[[D:.*]] = loom.cross_entropy_with_grad %[[L]], %[[Y]], %[[S]] reduction none : (tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3x5xf32>)
// CHECK-NEXT: %[[N:.*]] = loom.neg %[[D]]
// CHECK-NEXT: return %[[N]], %[[LOSS]]
func.func @gradient_first(%l: tensor<2x3x5xf32>, %y: tensor<2x3xi32>, %s: tensor<2x3xf32>) -> (tensor<2x3x5xf32>, tensor<2x3xf32>) {
  %d = loom.cross_entropy_grad %l, %y, %s : (tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
  %n = loom.neg %d : tensor<2x3x5xf32>
  %loss = loom.cross_entropy %l, %y reduction none : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return %n, %loss : tensor<2x3x5xf32>, tensor<2x3xf32>
}

// -----

// A scale computed from the loss (dynamic loss scaling) is not known before
// it: both ops stay.
// CHECK-LABEL: func.func @scale_from_loss
// CHECK-NEXT: loom.cross_entropy %
// CHECK-NEXT: loom.exp
// CHECK-NEXT: loom.cross_entropy_grad
// CHECK-NOT: loom.cross_entropy_with_grad
func.func @scale_from_loss(%l: tensor<4x8xf32>, %y: tensor<4xi64>) -> tensor<4x8xf32> {
  %loss = loom.cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %s = loom.exp %loss : tensor<f32>
  %d = loom.cross_entropy_grad %l, %y, %s : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// Losses that are not the gradient's: other labels, another ignored label,
// other classes. Nothing is fused.
// CHECK-LABEL: func.func @different_losses
// CHECK-NOT: loom.cross_entropy_with_grad
// CHECK-COUNT-3: loom.cross_entropy %
// CHECK: loom.cross_entropy_grad
// CHECK-NOT: loom.cross_entropy_with_grad
func.func @different_losses(%l: tensor<4x8xf32>, %y: tensor<4xi64>, %z: tensor<4xi64>, %s: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<4x8xf32>) {
  %a = loom.cross_entropy %l, %z : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %b = loom.cross_entropy %l, %y ignore_index 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %c = loom.cross_entropy %l, %y classes 7 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %d = loom.cross_entropy_grad %l, %y, %s : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return %a, %b, %c, %d : tensor<f32>, tensor<f32>, tensor<f32>, tensor<4x8xf32>
}

// -----

// Two gradients of one loss: the first takes it, the second stays alone.
// CHECK-LABEL: func.func @two_gradients
// CHECK-SAME: (%[[L:[^:]*]]: tensor<4x8xf32>, %[[Y:[^:]*]]: tensor<4xi64>, %[[S:[^:]*]]: tensor<f32>, %[[T:[^:]*]]: tensor<f32>)
// CHECK-NEXT: %[[LOSS:.*]], %[[D:.*]] = loom.cross_entropy_with_grad %[[L]], %[[Y]], %[[S]] :
// CHECK-NEXT: %[[E:.*]] = loom.cross_entropy_grad %[[L]], %[[Y]], %[[T]] :
// CHECK-NEXT: return %[[LOSS]], %[[D]], %[[E]]
func.func @two_gradients(%l: tensor<4x8xf32>, %y: tensor<4xi64>, %s: tensor<f32>, %t: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %loss = loom.cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %d = loom.cross_entropy_grad %l, %y, %s : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %e = loom.cross_entropy_grad %l, %y, %t : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return %loss, %d, %e : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// With ignore_index and a mean, the scale is the seed over the counted
// labels, which autodiff computes after the loss. It does not depend on the
// loss: those ops move up and the two ops fuse at the loss.
// CHECK-LABEL: func.func @ignored_labels_mean
// CHECK-SAME: (%[[L:[^:]*]]: tensor<4x8xbf16>, %[[Y:[^:]*]]: tensor<4xi64>)
// CHECK-DAG: %[[SEED:.*]] = loom.constant dense<1.000000e+00>
// CHECK-DAG: %[[IGNORED:.*]] = loom.constant dense<-100>
// CHECK: %[[KEPT:.*]] = loom.compare ne, %[[Y]], %[[IGNORED]]
// CHECK-NEXT: %[[K:.*]] = loom.cast %[[KEPT]]
// CHECK-NEXT: %[[N:.*]] = loom.reduce_sum %[[K]]
// CHECK-NEXT: %[[S:.*]] = loom.div %[[SEED]], %[[N]]
// CHECK-NEXT: %[[LOSS:.*]], %[[D:.*]] = loom.cross_entropy_with_grad %[[L]], %[[Y]], %[[S]] ignore_index -100 :
// CHECK-NEXT: %[[E:.*]] = loom.exp %[[LOSS]]
// CHECK-NEXT: return %[[E]], %[[D]]
func.func @ignored_labels_mean(%l: tensor<4x8xbf16>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x8xbf16>) {
  %seed = loom.constant dense<1.000000e+00> : tensor<f32>
  %ignored = loom.constant dense<-100> : tensor<i64>
  %loss = loom.cross_entropy %l, %y ignore_index -100 : (tensor<4x8xbf16>, tensor<4xi64>) -> tensor<f32>
  %e = loom.exp %loss : tensor<f32>
  %kept = loom.compare ne, %y, %ignored : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %k = loom.cast %kept : tensor<4xi1> -> tensor<4xf32>
  %n = loom.reduce_sum %k [0] : tensor<4xf32> -> tensor<f32>
  %s = loom.div %seed, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = loom.cross_entropy_grad %l, %y, %s ignore_index -100 : (tensor<4x8xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xbf16>
  return %e, %d : tensor<f32>, tensor<4x8xbf16>
}

// -----

// The pass cannot fail, but its input is verified first: a fused op whose
// loss does not match its reduction is reported where it stands.
func.func @invalid_input(%l: tensor<4x8xf32>, %y: tensor<4xi64>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'loom.cross_entropy_with_grad' op loss 'tensor<f32>' must be 'tensor<4xf32>' for reduction none}}
  %loss, %d = loom.cross_entropy_with_grad %l, %y, %s reduction none : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>)
  return %loss : tensor<f32>
}
