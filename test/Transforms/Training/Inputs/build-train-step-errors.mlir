// Gradient functions loom-build-train-step cannot build a step from.

loom.parameter @w : tensor<4xf32> = dense<0.5> : tensor<4xf32>
// expected-error @+1 {{returns no gradients: the model has no trainable parameter the loss depends on}}
func.func @forward_loss_grad(%x: tensor<4xf32>) -> tensor<f32> {
  %l = loom.reduce_sum %x [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

loom.parameter @w trainable : tensor<4xf32> = dense<0.5> : tensor<4xf32>
// expected-error @+1 {{result #0 must be the scalar loss}}
func.func @forward_loss_grad(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32> {loom.gradient_of = @w}) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

