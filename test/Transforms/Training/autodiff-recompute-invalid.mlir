// RUN: loom-opt --loom-autodiff='recompute=some' --verify-diagnostics %s

// A mode the pass does not know is an error.
// expected-error @+1 {{loom-autodiff: recompute=some is not a recompute mode (none, selective: the attention cores that are not fused, full: every segment between the cut points but the last)}}
module {
  loom.parameter @w trainable : tensor<4xf32> = dense<0.1> : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = loom.param @w : tensor<4xf32>
    %y = loom.mul %x, %w : tensor<4xf32>
    %l = loom.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
