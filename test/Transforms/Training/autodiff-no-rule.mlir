// RUN: loom-opt --loom-autodiff --split-input-file --verify-diagnostics %s
// Gradient rules are GradientOpInterface external models that loom-autodiff
// attaches to the context itself: an op without the interface on the loss's
// path is an error at the op, however the tool registered its dialects.

// An op whose gradient is never needed (a backward op) has no rule.
loom.parameter @u trainable : tensor<8x4xf32>
func.func @forward(%ids: tensor<8xi64>) -> tensor<f32> {
  %u = loom.param @u : tensor<8x4xf32>
  // expected-error @+1 {{'loom.scatter_add' op has no gradient rule}}
  %t = loom.scatter_add %u[%ids] : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<16x4xf32>
  %l = loom.reduce_sum %t [0, 1] : tensor<16x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Nor do the collectives.
module attributes {loom.world_size = 2 : i64} {
  loom.parameter @w trainable : tensor<4xf32>
  func.func @forward() -> tensor<f32> {
    %w = loom.param @w : tensor<4xf32>
    // expected-error @+1 {{'loom.all_reduce' op has no gradient rule}}
    %s = loom.all_reduce sum %w groups [[0, 1]] : tensor<4xf32>
    %l = loom.reduce_sum %s [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
