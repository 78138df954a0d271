// RUN: loom-opt "--loom-cut-stages=stages=3" --split-input-file --verify-diagnostics %s

// Two GEMMs in a row: one cut point (between them), so two stages are the
// most; three are an error at the function.
// expected-error @+1 {{loom-cut-stages: cannot cut @forward into 3 stages: it has 1 cut points (places where the fewest activations are alive)}}
func.func @forward(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %h = loom.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %y = loom.matmul %h, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// No function to cut.
// expected-error @+1 {{loom-cut-stages: no function @forward to cut}}
module {
  func.func private @other()
}
