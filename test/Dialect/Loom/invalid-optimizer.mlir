// Every verifier error of the optimizer updates, `loom.sgd_update` and
// `loom.adamw_update`.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @sgd_missing_buffer(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{takes 1 state operand(s) (the momentum buffer) with these hyper-parameters, got 0}}
  %0 = loom.sgd_update %p, %p, %step {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sgd_nesterov_without_momentum(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{nesterov needs a momentum and zero dampening}}
  %0 = loom.sgd_update %p, %p, %step {lr = 0.1 : f64, nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sgd_grad_type(%p: tensor<4xf32>, %g: tensor<4xf64>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{has gradient type 'tensor<4xf64>' but parameter type 'tensor<4xf32>'}}
  %0 = loom.sgd_update %p, %g, %step {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf64>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @adamw_betas(%p: tensor<4xf32>, %step: tensor<f64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{betas (9.000000e-01, 1.000000e+00) must lie in [0, 1)}}
  %0:3 = loom.adamw_update %p, %p, %step, %p, %p {lr = 0.1 : f64, beta2 = 1.0 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @adamw_negative_lr(%p: tensor<4xf32>, %step: tensor<f64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{lr -1.000000e-01 must be >= 0}}
  %0:3 = loom.adamw_update %p, %p, %step, %p, %p {lr = -0.1 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
