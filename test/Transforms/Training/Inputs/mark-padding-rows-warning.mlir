// loom-mark-padding-rows with no entries (run from mark-padding-rows.mlir):
// a table with exactly one all-zero row looks like nn.Embedding(padding_idx).

module {
  // expected-warning @+1 {{embedding 'emb.weight': row 1 is all zeros, as nn.Embedding(padding_idx=1) initializes it, and PyTorch never trains that row, which an ONNX export cannot say; pass --padding-idx '^emb\.weight$=1' to train as PyTorch does}}
  loom.parameter @emb.weight trainable : tensor<3x2xf32> = dense<[[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]> : tensor<3x2xf32>
  func.func @forward(%ids: tensor<3xi64>) -> tensor<3x2xf32> {
    %w = loom.param @emb.weight : tensor<3x2xf32>
    %e = loom.gather %w[%ids] : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
    return %e : tensor<3x2xf32>
  }
}

// -----

// Two zero rows, a frozen table, or a marked row: no warning.
module {
  loom.parameter @two trainable : tensor<3x2xf32> = dense<[[0.0, 0.0], [0.0, 0.0], [3.0, 4.0]]> : tensor<3x2xf32>
  loom.parameter @frozen : tensor<3x2xf32> = dense<[[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]> : tensor<3x2xf32>
  loom.parameter @marked trainable : tensor<3x2xf32> = dense<[[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]> : tensor<3x2xf32>
  func.func @forward(%ids: tensor<3xi64>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
    %t = loom.param @two : tensor<3x2xf32>
    %f = loom.param @frozen : tensor<3x2xf32>
    %m = loom.param @marked : tensor<3x2xf32>
    %a = loom.gather %t[%ids] : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
    %b = loom.gather %f[%ids] : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
    %c = loom.gather %m[%ids] padding_idx 1 : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
    return %a, %b, %c : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  }
}
