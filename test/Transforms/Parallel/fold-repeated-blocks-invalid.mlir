// RUN: loom-opt "--loom-fold-repeated-blocks=keep=4" --split-input-file --verify-diagnostics %s

// Three blocks (x -> x + x W_i): four cannot be kept.
module {
  loom.parameter @w0 trainable : tensor<8x8xf32>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  loom.parameter @w2 trainable : tensor<8x8xf32>
  // expected-error @+1 {{loom-fold-repeated-blocks: cannot keep 4 of 3 repeated blocks}}
  func.func @forward(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %w0 = loom.param @w0 : tensor<8x8xf32>
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %w2 = loom.param @w2 : tensor<8x8xf32>
    // expected-remark @+1 {{loom-fold-repeated-blocks: 3 repeated blocks of 2 operations start here; keeping 4}}
    %m0 = loom.matmul %x, %w0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a0 = loom.add %x, %m0 : tensor<8x8xf32>
    %m1 = loom.matmul %a0, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a1 = loom.add %a0, %m1 : tensor<8x8xf32>
    %m2 = loom.matmul %a1, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a2 = loom.add %a1, %m2 : tensor<8x8xf32>
    return %a2 : tensor<8x8xf32>
  }
}

// -----

// Two blocks are not a repetition to fold.
module {
  loom.parameter @w0 trainable : tensor<8x8xf32>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  // expected-error @+1 {{loom-fold-repeated-blocks: @forward repeats no block three times or more}}
  func.func @forward(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %w0 = loom.param @w0 : tensor<8x8xf32>
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %m0 = loom.matmul %x, %w0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a0 = loom.add %x, %m0 : tensor<8x8xf32>
    %m1 = loom.matmul %a0, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a1 = loom.add %a0, %m1 : tensor<8x8xf32>
    return %a1 : tensor<8x8xf32>
  }
}

// -----

// Blocks whose wiring differs: the third reads the first block's output,
// not the second's, so only the types repeat.
module {
  loom.parameter @w0 trainable : tensor<8x8xf32>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  loom.parameter @w2 trainable : tensor<8x8xf32>
  // expected-error @+1 {{loom-fold-repeated-blocks: @forward repeats no block three times or more}}
  func.func @forward(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %w0 = loom.param @w0 : tensor<8x8xf32>
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %w2 = loom.param @w2 : tensor<8x8xf32>
    %m0 = loom.matmul %x, %w0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a0 = loom.add %x, %m0 : tensor<8x8xf32>
    %m1 = loom.matmul %a0, %w1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a1 = loom.add %a0, %m1 : tensor<8x8xf32>
    %m2 = loom.matmul %a0, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %a2 = loom.add %a1, %m2 : tensor<8x8xf32>
    return %a2 : tensor<8x8xf32>
  }
}

// -----

// expected-error @+1 {{loom-fold-repeated-blocks: no function @forward}}
module {
  func.func private @other()
}
