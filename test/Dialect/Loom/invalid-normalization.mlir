// Every verifier error of softmax, log_softmax, layer_norm and
// layer_norm_grad.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.softmax' op axis 2 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.softmax %x axis 2 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.log_softmax' op axis -1 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.log_softmax %x axis -1 : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op axis 2 is out of range for 'tensor<4x8xf32>'}}
  %0 = loom.layer_norm %x, %g, %g axis 2 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op scale and bias have shape 4 but the normalized dimensions 1..1 of the input have shape 8}}
  %0 = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op scale and bias have shape 4 but the normalized dimensions 1..1 of the input have shape 8}}
  %0:3 = loom.layer_norm_grad %x, %g, %x axis 1 : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op axis -1 is out of range for 'tensor<4x8xf32>'}}
  %0:3 = loom.layer_norm_grad %x, %g, %x axis -1 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_grad_dout(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf64>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op dout 'tensor<4x8xf64>' must have the input's type 'tensor<4x8xf32>' or be its bf16 form for an f32 input}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %dy) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf64>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_bf16_dout_of_f64(%x: tensor<4x8xf64>, %g: tensor<8xf64>, %dy: tensor<4x8xbf16>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op dout 'tensor<4x8xbf16>' must have the input's type 'tensor<4x8xf64>' or be its bf16 form for an f32 input}}
  %0:3 = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf64>, tensor<8xf64> dout tensor<4x8xbf16>
  return
}

// -----

func.func @layer_norm_grad_scale_type(%x: tensor<4x8xf32>, %g: tensor<8xf64>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op scale 'tensor<8xf64>' must have the input's element type 'f32'}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %x) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf64>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf64>, tensor<8xf64>)
  return
}

// -----

func.func @layer_norm_result(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{'loom.layer_norm' op result 'tensor<4x8xf32>' must have the input's type 'tensor<4x8xbf16>' or be its bf16 form for an f32 input}}
  %0 = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_grad_result(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm_grad' op failed to verify that all of {scale, dscale, dbias} have same type}}
  %0:3 = "loom.layer_norm_grad"(%x, %g, %x) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>)
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op epsilon must be non-negative}}
  %0 = loom.layer_norm %x, %g, %g axis 1 epsilon -1.0 : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_nan_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.layer_norm' op epsilon must be non-negative, got nan}}
  %0 = loom.layer_norm %x, %g, %g axis 1 epsilon 0x7FF8000000000000 : tensor<4x8xf32>, tensor<8xf32>
  return
}
