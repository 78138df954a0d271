// A two-layer residual model whose head reuses the first layer's weight
// (tied, like GPT-2's embedding and head), for split-stages.mlir.
module {
  loom.parameter @w0 trainable : tensor<8x8xf32>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
    %w0 = loom.param @w0 : tensor<8x8xf32> loc("l0.mm")
    %m0 = loom.matmul %x, %w0 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("l0.mm")
    %r0 = loom.relu %m0 : tensor<2x8xf32> loc("l0.relu")
    %h0 = loom.add %x, %r0 : tensor<2x8xf32> loc("l0.add")
    %w1 = loom.param @w1 : tensor<8x8xf32> loc("l1.mm")
    %m1 = loom.matmul %h0, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("l1.mm")
    %r1 = loom.relu %m1 : tensor<2x8xf32> loc("l1.relu")
    %h1 = loom.add %h0, %r1 : tensor<2x8xf32> loc("l1.add")
    %w0h = loom.param @w0 : tensor<8x8xf32> loc("head")
    %y = loom.matmul %h1, %w0h : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("head")
    %l = loom.reduce_sum %y [0, 1] : tensor<2x8xf32> -> tensor<f32> loc("loss")
    return %l : tensor<f32>
  }
}
