// RUN: loom-opt "--loom-pad-vocabulary=ways=2" --split-input-file %s | FileCheck %s
// RUN: loom-opt "--loom-pad-vocabulary=ways=1" --split-input-file %s | FileCheck %s --check-prefix=ONE

// GPT's untied layout: a 61-row embedding table and a [61, 16] LM head read
// transposed. The head is padded to 64 rows (a multiple of 8 * 2), the table
// to 62 (a multiple of 2); the sources keep the weights and stop training.
// CHECK-LABEL: module @untied
// CHECK:       loom.parameter @wte : tensor<61x16xf32> = dense<1.000000e+00>
// CHECK:       loom.parameter @"wte#padded" trainable : tensor<62x16xf32> = #loom.slice_of<@wte, [0, 0]>
// CHECK:       loom.parameter @head : tensor<61x16xf32> = dense<2.000000e+00>
// CHECK:       loom.parameter @"head#padded" trainable : tensor<64x16xf32> = #loom.slice_of<@head, [0, 0]>
// CHECK:       func.func @forward_loss
// CHECK:         %[[T:.*]] = loom.param @"wte#padded" : tensor<62x16xf32>
// CHECK-NOT:     loom.slice
// CHECK:         %[[E:.*]] = loom.gather %[[T]][%{{.*}}] : (tensor<62x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
// CHECK:         %[[H:.*]] = loom.param @"head#padded" : tensor<64x16xf32>
// CHECK:         %[[L:.*]] = loom.matmul %[[E]], %[[H]] transpose_rhs : (tensor<2x4x16xf32>, tensor<64x16xf32>) -> tensor<2x4x64xf32>
// CHECK:         loom.cross_entropy %[[L]], %{{.*}} classes 61 : (tensor<2x4x64xf32>, tensor<2x4xi64>) -> tensor<f32>
// ONE-LABEL:   module @untied
// ONE-NOT:     padded
// ONE:         loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x61xf32>
module @untied {
  loom.parameter @wte trainable : tensor<61x16xf32> = dense<1.0> : tensor<61x16xf32>
  loom.parameter @head trainable : tensor<61x16xf32> = dense<2.0> : tensor<61x16xf32>
  func.func @forward_loss(%idx: tensor<2x4xi64>, %y: tensor<2x4xi64>) -> tensor<f32> {
    %t = loom.param @wte : tensor<61x16xf32>
    %e = loom.gather %t[%idx] : (tensor<61x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
    %h = loom.param @head : tensor<61x16xf32>
    %l = loom.matmul %e, %h transpose_rhs : (tensor<2x4x16xf32>, tensor<61x16xf32>) -> tensor<2x4x61xf32>
    %loss = loom.cross_entropy %l, %y : (tensor<2x4x61xf32>, tensor<2x4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// GPT-2's tied weight, read once by the lookup and once (through a bf16
// cast) by the head: padded once, as the head (64 rows), and both read the
// padded rows; the cast follows the padded width. Another use of the
// weight (returned here) reads a slice of the real rows.
// CHECK-LABEL: module @tied
// CHECK:       loom.parameter @"wte#padded" trainable : tensor<64x16xf32> = #loom.slice_of<@wte, [0, 0]>
// CHECK-NOT:   loom.parameter @"wte#padded#padded"
// CHECK:       func.func @forward_loss
// CHECK:         %[[T:.*]] = loom.param @"wte#padded" : tensor<64x16xf32>
// CHECK:         %[[S:.*]] = loom.slice %[[T]] [0:61, 0:16] : tensor<64x16xf32> -> tensor<61x16xf32>
// CHECK:         loom.gather %[[T]][%{{.*}}] : (tensor<64x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
// CHECK:         %[[T2:.*]] = loom.param @"wte#padded" : tensor<64x16xf32>
// CHECK:         %[[C:.*]] = loom.cast %[[T2]] : tensor<64x16xf32> -> tensor<64x16xbf16>
// CHECK:         loom.matmul %{{.*}}, %[[C]] transpose_rhs : (tensor<2x4x16xbf16>, tensor<64x16xbf16>) -> tensor<2x4x64xbf16>
// CHECK:         loom.cross_entropy %{{.*}}, %{{.*}} classes 61 : (tensor<2x4x64xbf16>, tensor<2x4xi64>) -> tensor<f32>
// CHECK:         return %{{.*}}, %[[S]]
module @tied {
  loom.parameter @wte trainable : tensor<61x16xf32> = dense<1.0> : tensor<61x16xf32>
  func.func @forward_loss(%idx: tensor<2x4xi64>, %y: tensor<2x4xi64>) -> (tensor<f32>, tensor<61x16xf32>) {
    %t = loom.param @wte : tensor<61x16xf32>
    %e = loom.gather %t[%idx] : (tensor<61x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
    %eb = loom.cast %e : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
    %h = loom.param @wte : tensor<61x16xf32>
    %hb = loom.cast %h : tensor<61x16xf32> -> tensor<61x16xbf16>
    %l = loom.matmul %eb, %hb transpose_rhs : (tensor<2x4x16xbf16>, tensor<61x16xbf16>) -> tensor<2x4x61xbf16>
    %loss = loom.cross_entropy %l, %y : (tensor<2x4x61xbf16>, tensor<2x4xi64>) -> tensor<f32>
    return %loss, %t : tensor<f32>, tensor<61x16xf32>
  }
}

// -----

// A head [4, 10] with a [10] bias parameter (10 classes after 4 features:
// a vocabulary): the weight's columns and the bias are padded (to 16), the
// bias_add follows.
// CHECK-LABEL: module @bias
// CHECK:       loom.parameter @"w#padded" trainable : tensor<4x16xf32> = #loom.slice_of<@w, [0, 0]>
// CHECK:       loom.parameter @"b#padded" trainable : tensor<16xf32> = #loom.slice_of<@b, [0]>
// CHECK:         %[[L:.*]] = loom.matmul %{{.*}}, %{{.*}} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK:         %[[B:.*]] = loom.param @"b#padded" : tensor<16xf32>
// CHECK:         %[[A:.*]] = loom.bias_add %[[L]], %[[B]] : tensor<8x16xf32>, tensor<16xf32>
// CHECK:         loom.cross_entropy %[[A]], %{{.*}} classes 10 : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
module @bias {
  loom.parameter @w trainable : tensor<4x10xf32> = dense<1.0> : tensor<4x10xf32>
  loom.parameter @b trainable : tensor<10xf32> = dense<0.5> : tensor<10xf32>
  func.func @forward_loss(%x: tensor<8x4xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w = loom.param @w : tensor<4x10xf32>
    %l = loom.matmul %x, %w : (tensor<8x4xf32>, tensor<4x10xf32>) -> tensor<8x10xf32>
    %b = loom.param @b : tensor<10xf32>
    %a = loom.bias_add %l, %b : tensor<8x10xf32>, tensor<10xf32>
    %loss = loom.cross_entropy %a, %y : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Left alone: a vocabulary 8 * 2 divides, a table 2 divides, logits that
// no parameter GEMM makes (loom-pad-classes may still align them), and a
// classifier's head (10 classes after 16 features: no vocabulary).
// CHECK-LABEL: module @nothing
// CHECK-NOT:   padded
// CHECK:       loom.gather %{{.*}} : (tensor<16x16xf32>
// CHECK:       loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x64xf32>
// CHECK:       loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x61xf32>
// CHECK:       loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xf32>
module @nothing {
  loom.parameter @table trainable : tensor<16x16xf32> = dense<1.0> : tensor<16x16xf32>
  loom.parameter @w trainable : tensor<16x64xf32> = dense<1.0> : tensor<16x64xf32>
  loom.parameter @c trainable : tensor<16x10xf32> = dense<1.0> : tensor<16x10xf32>
  func.func @forward_loss(%idx: tensor<8xi64>, %y: tensor<8xi64>, %z: tensor<8x16xf32>, %v: tensor<16x61xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
    %t = loom.param @table : tensor<16x16xf32>
    %x = loom.gather %t[%idx] : (tensor<16x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
    %w = loom.param @w : tensor<16x64xf32>
    %l = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %loss = loom.cross_entropy %l, %y : (tensor<8x64xf32>, tensor<8xi64>) -> tensor<f32>
    %m = loom.matmul %z, %v : (tensor<8x16xf32>, tensor<16x61xf32>) -> tensor<8x61xf32>
    %other = loom.cross_entropy %m, %y : (tensor<8x61xf32>, tensor<8xi64>) -> tensor<f32>
    %c = loom.param @c : tensor<16x10xf32>
    %n = loom.matmul %z, %c : (tensor<8x16xf32>, tensor<16x10xf32>) -> tensor<8x10xf32>
    %third = loom.cross_entropy %n, %y : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss, %other, %third : tensor<f32>, tensor<f32>, tensor<f32>
  }
}
