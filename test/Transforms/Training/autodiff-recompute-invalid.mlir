// RUN: loom-opt --loom-autodiff='recompute=selective' --verify-diagnostics %s

// Selective recompute (the attention core) is what loom-fuse-attention
// already gives: a mode the pass does not know is an error.
// expected-error @+1 {{loom-autodiff: recompute=selective is not a recompute mode (none, full; selective recompute of the attention core is what loom-fuse-attention already does: its [.., S, S] scores are never stored)}}
module {
  loom.parameter @w trainable : tensor<4xf32> = dense<0.1> : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = loom.param @w : tensor<4xf32>
    %y = loom.mul %x, %w : tensor<4xf32>
    %l = loom.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
