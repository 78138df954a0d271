// loom-expand-optimizers trusts the update ops' verifiers: hyper-parameters
// torch rejects never reach the expansion.

func.func @negative_lr(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{lr -1.000000e-01 must be >= 0}}
  %0 = loom.sgd_update %p, %p, %step {lr = -0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @missing_moments(%p: tensor<4xf32>, %step: tensor<f64>) -> tensor<4xf32> {
  // expected-error @+1 {{takes 2 state operand(s) (the first and second moments) with these hyper-parameters, got 0}}
  %0 = loom.adamw_update %p, %p, %step {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
