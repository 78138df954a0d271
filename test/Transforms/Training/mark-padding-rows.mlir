// RUN: loom-opt --loom-mark-padding-rows='padding-idx=^emb\.weight$=1' %s | FileCheck %s
// RUN: loom-opt --loom-mark-padding-rows='padding-idx=emb=-1' %s | FileCheck %s --check-prefix=NEGATIVE
// RUN: loom-opt --split-input-file --verify-diagnostics --loom-mark-padding-rows %S/Inputs/mark-padding-rows-warning.mlir
// RUN: loom-opt --verify-diagnostics --loom-mark-padding-rows='padding-idx=nothing=1' %s
// RUN: loom-opt --verify-diagnostics --loom-mark-padding-rows='padding-idx=emb=8' %S/Inputs/mark-padding-rows-range.mlir

// Only axis-0 lookups of parameters take the row: the gather along axis 1
// and the gather of an activation keep theirs.
// CHECK-LABEL: func.func @forward
// CHECK: loom.gather %{{.*}}[%{{.*}}] padding_idx 1 : (tensor<8x4xf32>
// CHECK: loom.gather %{{.*}}[%{{.*}}] axis 1 : (tensor<8x4xf32>
// CHECK-NOT: padding_idx
// NEGATIVE: loom.gather %{{.*}}[%{{.*}}] padding_idx -1 : (tensor<8x4xf32>

// expected-error @+1 {{--padding-idx 'nothing' matches no parameter read by an embedding lookup}}
module {
  loom.parameter @emb.weight trainable : tensor<8x4xf32>
  func.func @forward(%ids: tensor<3xi64>, %cols: tensor<2xi64>) -> (tensor<3x4xf32>, tensor<8x2xf32>, tensor<3x4xf32>) {
    %w = loom.param @emb.weight : tensor<8x4xf32>
    %e = loom.gather %w[%ids] : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %c = loom.gather %w[%cols] axis 1 : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<8x2xf32>
    %a = loom.relu %w : tensor<8x4xf32>
    %f = loom.gather %a[%ids] : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    return %e, %c, %f : tensor<3x4xf32>, tensor<8x2xf32>, tensor<3x4xf32>
  }
}
