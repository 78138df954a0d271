// loom-training-pipeline's padding-idx option as loom-opt parses it: a
// comma-separated list of REGEX=ROW entries applied in order (a later match
// wins), the row after the last '=', commas inside a regex's braces kept.
// RUN: loom-opt --loom-training-pipeline='optimizer=sgd lr=0.1 padding-idx=^emb\.weight$=1' %s | FileCheck %s --check-prefix=ONE
// RUN: loom-opt --loom-training-pipeline='optimizer=sgd lr=0.1 padding-idx=^emb\.weight$=1,emb=2' %s | FileCheck %s --check-prefix=LAST
// RUN: loom-opt --loom-training-pipeline='optimizer=sgd lr=0.1 padding-idx=^e{1,2}mb=3' %s | FileCheck %s --check-prefix=BRACES
// RUN: not loom-opt --loom-training-pipeline='optimizer=sgd lr=0.1 padding-idx=head=0' %s 2>&1 | FileCheck %s --check-prefix=NOLOOKUP

// ONE: loom.gather %{{.*}}[%{{.*}}] padding_idx 1 :
// LAST: loom.gather %{{.*}}[%{{.*}}] padding_idx 2 :
// BRACES: loom.gather %{{.*}}[%{{.*}}] padding_idx 3 :
// The head is a parameter, but no embedding lookup reads it.
// NOLOOKUP: error: --padding-idx 'head' matches no parameter read by an embedding lookup

loom.parameter @emb.weight trainable : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
loom.parameter @head trainable : tensor<3x4xf32> = dense<0.25> : tensor<3x4xf32>
func.func @forward(%ids: tensor<2xi64> {onnx.name = "ids"}) -> tensor<2x3xf32> {
  %w = loom.param @emb.weight : tensor<8x4xf32>
  %h = loom.param @head : tensor<3x4xf32>
  %e = loom.gather %w[%ids] : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %y = loom.matmul %e, %h transpose_rhs : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
