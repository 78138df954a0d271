// Every verifier error of `loom.cross_entropy` and `loom.cross_entropy_grad`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

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
