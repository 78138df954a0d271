// A gradient function loom-build-train-step cannot split into microbatches.

loom.parameter @w trainable : tensor<4xf32> = dense<0.5> : tensor<4xf32>
// expected-error @+1 {{argument #0 is a scalar and cannot be split into 2 microbatches}}
func.func @forward_loss_grad(%x: tensor<f32>) -> (tensor<f32>, tensor<4xf32> {loom.gradient_of = @w}) {
  %w = loom.param @w : tensor<4xf32>
  return %x, %w : tensor<f32>, tensor<4xf32>
}
