// Folders and canonicalization patterns of the loom ops.
// RUN: loom-opt %s --split-input-file --canonicalize | FileCheck %s

// CHECK-LABEL: func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<8x128x768xf32>)
// CHECK-NEXT: %[[R:.*]] = loom.reshape %[[X]] : tensor<8x128x768xf32> -> tensor<1024x768xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<8x128x768xf32>) -> tensor<1024x768xf32> {
  %0 = loom.reshape %x : tensor<8x128x768xf32> -> tensor<8x128x12x64xf32>
  %1 = loom.reshape %0 : tensor<8x128x12x64xf32> -> tensor<1024x12x64xf32>
  %2 = loom.reshape %1 : tensor<1024x12x64xf32> -> tensor<1024x768xf32>
  return %2 : tensor<1024x768xf32>
}

// CHECK-LABEL: func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<8x768xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_round_trip(%x: tensor<8x768xf32>) -> tensor<8x768xf32> {
  %0 = loom.reshape %x : tensor<8x768xf32> -> tensor<8x12x64xf32>
  %1 = loom.reshape %0 : tensor<8x12x64xf32> -> tensor<8x768xf32>
  return %1 : tensor<8x768xf32>
}

// CHECK-LABEL: func @reshape_constant
// CHECK-NEXT: %[[C:.*]] = loom.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @reshape_constant() -> tensor<2x2xi64> {
  %c = loom.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = loom.reshape %c : tensor<4xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// CHECK-LABEL: func @transpose_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = loom.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = loom.transpose %x [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = loom.transpose %0 [1, 2, 0] : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// CHECK-LABEL: func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_inverse(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = loom.transpose %x [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = loom.transpose %0 [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = loom.transpose %x [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func @transpose_constant
// CHECK-NEXT: loom.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>
func.func @transpose_constant() -> tensor<3x2xi32> {
  %c = loom.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %0 = loom.transpose %c [1, 0] : tensor<2x3xi32> -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}

// -----

// CHECK-LABEL: func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
    tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = loom.constant dense<0.0> : tensor<8xf32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %0 = loom.add %x, %zero : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = loom.add %zero, %x : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = loom.sub %x, %zero : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = loom.mul %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = loom.mul %one, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = loom.div %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %6 = loom.pow %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
      tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Adding zero still broadcasts x, so the op stays; so does 0 - x.
// CHECK-LABEL: func @not_identities
// CHECK: loom.add
// CHECK: loom.sub
func.func @not_identities(%x: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %zero = loom.constant dense<0.0> : tensor<4x8xf32>
  %z = loom.constant dense<0.0> : tensor<8xf32>
  %0 = loom.add %x, %zero : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = loom.sub %z, %x : tensor<8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func @double_negation
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @double_negation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.neg %x : tensor<4xf32>
  %1 = loom.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func @fold_arith
// CHECK-DAG: %[[A:.*]] = loom.constant dense<[1.100000e+01, 2.200000e+01]> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = loom.constant dense<[3, -2]> : tensor<2xi64>
// CHECK-DAG: %[[C:.*]] = loom.constant dense<{{\[}}[2.000000e+00, 4.000000e+00], [6.000000e+00, 8.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[D:.*]] = loom.constant dense<[1.000000e+00, 8.000000e+00]> : tensor<2xf64>
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @fold_arith() -> (tensor<2xf32>, tensor<2xi64>, tensor<2x2xf32>, tensor<2xf64>) {
  %a = loom.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = loom.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %0 = loom.add %a, %b : tensor<2xf32>
  %i = loom.constant dense<[7, -5]> : tensor<2xi64>
  %j = loom.constant dense<[2, 2]> : tensor<2xi64>
  // Integer division rounds toward zero.
  %1 = loom.div %i, %j : tensor<2xi64>
  %m = loom.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %two = loom.constant dense<2.0> : tensor<f32>
  %2 = loom.mul %m, %two : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %p = loom.constant dense<[1.0, 2.0]> : tensor<2xf64>
  %e = loom.constant dense<[0.5, 3.0]> : tensor<2xf64>
  %3 = loom.pow %p, %e : tensor<2xf64>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xi64>, tensor<2x2xf32>, tensor<2xf64>
}

// Division by zero is the runtime's business, not the folder's.
// CHECK-LABEL: func @no_fold_division_by_zero
// CHECK: loom.div
func.func @no_fold_division_by_zero() -> tensor<2xi32> {
  %i = loom.constant dense<[7, 5]> : tensor<2xi32>
  %z = loom.constant dense<[1, 0]> : tensor<2xi32>
  %0 = loom.div %i, %z : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// CHECK-LABEL: func @fold_unary
// CHECK-DAG: loom.constant dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[1.000000e+00, 2.71828175]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[5.000000e-01, 0.731058597]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[0.000000e+00, 0.841344773]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[0.000000e+00, 8.411920e-01]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[-0.000000e+00, -1.000000e+00]> : tensor<2xf32>
// CHECK-DAG: loom.constant dense<[0x7F800000, 1.000000e+00]> : tensor<2xf32>
func.func @fold_unary() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>,
                            tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %x = loom.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = loom.relu %x : tensor<2xf32>
  %1 = loom.exp %x : tensor<2xf32>
  %2 = loom.sigmoid %x : tensor<2xf32>
  %3 = loom.gelu %x : tensor<2xf32>
  %4 = loom.gelu %x approximate tanh : tensor<2xf32>
  %5 = loom.neg %x : tensor<2xf32>
  %6 = loom.rsqrt %x : tensor<2xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>,
      tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func @fold_compare_select_cast
// CHECK-DAG: %[[M:.*]] = loom.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[S:.*]] = loom.constant dense<[1.000000e+00, -1.000000e+00, -1.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[I:.*]] = loom.constant dense<[1, -2, 3]> : tensor<3xi32>
// CHECK-DAG: %[[H:.*]] = loom.constant dense<[1.500000e+00, -2.500000e+00, 3.000000e+00]> : tensor<3xbf16>
// CHECK: return %[[M]], %[[S]], %[[I]], %[[H]]
func.func @fold_compare_select_cast() -> (tensor<3xi1>, tensor<3xf32>, tensor<3xi32>, tensor<3xbf16>) {
  %x = loom.constant dense<[1.5, -2.5, 3.0]> : tensor<3xf32>
  %lim = loom.constant dense<2.0> : tensor<f32>
  %m = loom.compare lt, %x, %lim : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %p = loom.constant dense<[true, false, true]> : tensor<3xi1>
  %m2 = loom.compare eq, %m, %p : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %one = loom.constant dense<1.0> : tensor<f32>
  %minus = loom.constant dense<-1.0> : tensor<f32>
  %s = loom.select %m2, %one, %minus : (tensor<3xi1>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  // Float to integer rounds toward zero.
  %i = loom.cast %x : tensor<3xf32> -> tensor<3xi32>
  %h = loom.cast %x : tensor<3xf32> -> tensor<3xbf16>
  %h2 = loom.cast %i : tensor<3xi32> -> tensor<3xi32>
  return %m2, %s, %h2, %h : tensor<3xi1>, tensor<3xf32>, tensor<3xi32>, tensor<3xbf16>
}

// CHECK-LABEL: func @select_uniform_condition
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[B]], %[[A]]
func.func @select_uniform_condition(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %f = loom.constant dense<false> : tensor<i1>
  %0 = loom.select %f, %a, %b : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t = loom.constant dense<true> : tensor<4xi1>
  %1 = loom.select %t, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// Splats fold at any size; other constants only while small, so that
// folding never materializes weight-sized tensors.
// CHECK-LABEL: func @fold_limits
// CHECK-DAG: loom.constant dense<3.000000e+00> : tensor<1024x1024xf32>
// CHECK-DAG: loom.constant dense<2.000000e+00> : tensor<4096x4096xf32>
// CHECK: loom.exp
// CHECK-NOT: loom.exp
func.func @fold_limits(%big: tensor<8192xf32>) -> (tensor<1024x1024xf32>, tensor<4096x4096xf32>, tensor<8192xf32>) {
  %one = loom.constant dense<1.0> : tensor<1024x1024xf32>
  %two = loom.constant dense<2.0> : tensor<1024x1024xf32>
  %0 = loom.add %one, %two : tensor<1024x1024xf32>
  %s = loom.constant dense<2.0> : tensor<f32>
  %1 = loom.broadcast %s : tensor<f32> -> tensor<4096x4096xf32>
  %r = loom.reshape %big : tensor<8192xf32> -> tensor<8192xf32>
  %c = loom.constant dense<1.0> : tensor<8192xf32>
  %sum = loom.add %r, %c : tensor<8192xf32>
  %2 = loom.exp %sum : tensor<8192xf32>
  return %0, %1, %2 : tensor<1024x1024xf32>, tensor<4096x4096xf32>, tensor<8192xf32>
}

// Weights held as resources never fold.
// CHECK-LABEL: func @no_fold_resources
// CHECK: loom.exp
func.func @no_fold_resources() -> tensor<2xf32> {
  %w = loom.constant dense_resource<w> : tensor<2xf32>
  %0 = loom.exp %w : tensor<2xf32>
  return %0 : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// CHECK-LABEL: func @shape_identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @shape_identities(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
    tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = loom.broadcast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = loom.slice %x [0:4, 0:8] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = loom.concat %x axis 1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = loom.split %x axis 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = loom.reduce_sum %x [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %5 = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
      tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func @broadcast_chain
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[B:.*]] = loom.broadcast %[[X]] : tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[B]]
func.func @broadcast_chain(%x: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %0 = loom.broadcast %x : tensor<8xf32> -> tensor<4x8xf32>
  %1 = loom.broadcast %0 : tensor<4x8xf32> -> tensor<2x4x8xf32>
  return %1 : tensor<2x4x8xf32>
}

// The shape subgraphs of exported attention fold to constants:
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
// CHECK-LABEL: func @fold_shape_math
// CHECK-DAG: %[[G:.*]] = loom.constant dense<[8, 128]> : tensor<2xi64>
// CHECK-DAG: %[[C:.*]] = loom.constant dense<[8, 128, 12, 64]> : tensor<4xi64>
// CHECK-DAG: %[[S:.*]] = loom.constant dense<[3, 5]> : tensor<2xi64>
// CHECK-DAG: %[[P:.*]] = loom.constant dense<{{\[}}[2, 3]]> : tensor<1x2xi64>
// CHECK-DAG: %[[Q:.*]] = loom.constant dense<[4, 5, 6]> : tensor<3xi64>
// CHECK: return %[[G]], %[[C]], %[[S]], %[[P]], %[[Q]]
func.func @fold_shape_math() -> (tensor<2xi64>, tensor<4xi64>, tensor<2xi64>, tensor<1x2xi64>, tensor<3xi64>) {
  %shape = loom.constant dense<[8, 128, 768]> : tensor<3xi64>
  %idx = loom.constant dense<[0, -2]> : tensor<2xi64>
  %bs = loom.gather %shape[%idx] : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %heads = loom.constant dense<[12, 64]> : tensor<2xi64>
  %full = loom.concat %bs, %heads axis 0 : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %seq = loom.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi64>
  %odd = loom.slice %seq [2:6:2] : tensor<6xi64> -> tensor<2xi64>
  %m = loom.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %part:2 = loom.split %m axis 1 : tensor<2x3xi64> -> tensor<2x1xi64>, tensor<2x2xi64>
  %p = loom.slice %part#1 [0:1, 0:2] : tensor<2x2xi64> -> tensor<1x2xi64>
  %row = loom.constant dense<[1]> : tensor<1xi64>
  %q = loom.gather %m[%row] : (tensor<2x3xi64>, tensor<1xi64>) -> tensor<1x3xi64>
  %qr = loom.reshape %q : tensor<1x3xi64> -> tensor<3xi64>
  return %bs, %full, %odd, %p, %qr : tensor<2xi64>, tensor<4xi64>, tensor<2xi64>, tensor<1x2xi64>, tensor<3xi64>
}

// CHECK-LABEL: func @no_fold_gather_out_of_range
// CHECK: loom.gather
func.func @no_fold_gather_out_of_range() -> tensor<1xi64> {
  %shape = loom.constant dense<[8, 128]> : tensor<2xi64>
  %idx = loom.constant dense<[2]> : tensor<1xi64>
  %0 = loom.gather %shape[%idx] : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// -----

// CHECK-LABEL: func @zero_bias
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @zero_bias(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %b = loom.constant dense<0.0> : tensor<8xf32>
  %0 = loom.bias_add %x, %b : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func @zero_dropout
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[M:.*]] = loom.constant dense<true> : tensor<4x8xi1>
// CHECK-NEXT: return %[[X]], %[[M]]
func.func @zero_dropout(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  %0:2 = loom.dropout %x ratio 0.0 : tensor<4x8xf32>
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xi1>
}

// CHECK-LABEL: func @kept_dropout
// CHECK: loom.dropout
func.func @kept_dropout(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0:2 = loom.dropout %x ratio 0.5 : tensor<4x8xf32>
  return %0#0 : tensor<4x8xf32>
}
