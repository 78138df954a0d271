// RUN: loom-opt --loom-narrow-bias-gradients --split-input-file --verify-diagnostics %s | FileCheck %s

// A bias gradient (a sum over every dimension but the last) of an f32
// gradient that is also rounded to bf16 sums the bf16 copy, still into f32;
// a copy made after the sum moves up to it.
// CHECK-LABEL: func.func @bias_gradient
// CHECK:         %[[N:.*]] = loom.cast %arg0 : tensor<4x16x32xf32> -> tensor<4x16x32xbf16>
// CHECK:         %[[B:.*]] = loom.reduce_sum %[[N]] [0, 1] keepdims : tensor<4x16x32xbf16> -> tensor<1x1x32xf32>
// CHECK:         %[[W:.*]] = loom.matmul %[[N]], %arg1
// CHECK:         return %[[B]], %[[W]]
func.func @bias_gradient(%g: tensor<4x16x32xf32>, %w: tensor<32x8xbf16>) -> (tensor<1x1x32xf32>, tensor<4x16x8xbf16>) {
  %b = loom.reduce_sum %g [0, 1] keepdims : tensor<4x16x32xf32> -> tensor<1x1x32xf32>
  %n = loom.cast %g : tensor<4x16x32xf32> -> tensor<4x16x32xbf16>
  %d = loom.matmul %n, %w : (tensor<4x16x32xbf16>, tensor<32x8xbf16>) -> tensor<4x16x8xbf16>
  return %b, %d : tensor<1x1x32xf32>, tensor<4x16x8xbf16>
}

// -----

// Left alone: a sum over another axis (a row sum), a value with no narrow
// copy, and a widening cast.
// CHECK-LABEL: func.func @not_bias_gradients
// CHECK:         loom.reduce_sum %arg0 [2] : tensor<4x16x32xf32> -> tensor<4x16xf32>
// CHECK:         loom.reduce_sum %arg1 [0] : tensor<16x32xf32> -> tensor<32xf32>
// CHECK:         loom.reduce_sum %arg2 [0] : tensor<16x32xf32> -> tensor<32xf32>
func.func @not_bias_gradients(%g: tensor<4x16x32xf32>, %h: tensor<16x32xf32>, %k: tensor<16x32xf32>)
    -> (tensor<4x16xf32>, tensor<4x16x32xbf16>, tensor<32xf32>, tensor<32xf32>, tensor<16x32xf64>) {
  %delta = loom.reduce_sum %g [2] : tensor<4x16x32xf32> -> tensor<4x16xf32>
  %n = loom.cast %g : tensor<4x16x32xf32> -> tensor<4x16x32xbf16>
  %s = loom.reduce_sum %h [0] : tensor<16x32xf32> -> tensor<32xf32>
  %t = loom.reduce_sum %k [0] : tensor<16x32xf32> -> tensor<32xf32>
  %wide = loom.cast %k : tensor<16x32xf32> -> tensor<16x32xf64>
  return %delta, %n, %s, %t, %wide : tensor<4x16xf32>, tensor<4x16x32xbf16>, tensor<32xf32>, tensor<32xf32>, tensor<16x32xf64>
}
