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

// -----

// Integer overflow behaves like the runtime: wrap where the result is
// defined, no fold where it is not.
// CHECK-LABEL: func @integer_edges
// CHECK-DAG: %[[N:.*]] = loom.constant dense<[-9223372036854775808, 5]> : tensor<2xi64>
// CHECK-DAG: %[[W:.*]] = loom.constant dense<-2147483648> : tensor<i32>
// CHECK: %[[D:.*]] = loom.div
// CHECK: return %[[N]], %[[W]], %[[D]]
func.func @integer_edges() -> (tensor<2xi64>, tensor<i32>, tensor<i32>) {
  %m = loom.constant dense<[-9223372036854775808, -5]> : tensor<2xi64>
  %0 = loom.neg %m : tensor<2xi64>
  %max = loom.constant dense<2147483647> : tensor<i32>
  %one = loom.constant dense<1> : tensor<i32>
  %1 = loom.add %max, %one : tensor<i32>
  %min = loom.constant dense<-2147483648> : tensor<i32>
  %minus = loom.constant dense<-1> : tensor<i32>
  // INT32_MIN / -1 overflows at 32 bits: left to the runtime.
  %2 = loom.div %min, %minus : tensor<i32>
  return %0, %1, %2 : tensor<2xi64>, tensor<i32>, tensor<i32>
}

// CHECK-LABEL: func @cast_edges
// Integers convert straight to the target format (2^60 + 2^36 + 1 rounds up
// to 2^60 + 2^37 in f32; through double it would become 2^60).
// CHECK-DAG: %[[F:.*]] = loom.constant dense<[1.15292164E+18, -3.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = loom.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xbf16>
// CHECK-DAG: %[[I:.*]] = loom.constant dense<[2147483647, -2147483648]> : tensor<2xi32>
// Out-of-range floats have no defined integer: no fold.
// CHECK: %[[O:.*]] = loom.cast %{{.*}} : tensor<2xf32> -> tensor<2xi32>
// CHECK: return %[[F]], %[[B]], %[[I]], %[[O]]
func.func @cast_edges() -> (tensor<2xf32>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi32>) {
  %i = loom.constant dense<[1152921573326323713, -3]> : tensor<2xi64>
  %0 = loom.cast %i : tensor<2xi64> -> tensor<2xf32>
  %b = loom.constant dense<[true, false]> : tensor<2xi1>
  %1 = loom.cast %b : tensor<2xi1> -> tensor<2xbf16>
  %edge = loom.constant dense<[2147483647.0, -2147483648.0]> : tensor<2xf64>
  %2 = loom.cast %edge : tensor<2xf64> -> tensor<2xi32>
  %big = loom.constant dense<[3.0e9, -3.5e9]> : tensor<2xf32>
  %3 = loom.cast %big : tensor<2xf32> -> tensor<2xi32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi32>
}

// Reshaping a constant copies it, so only small ones fold.
// CHECK-LABEL: func @no_fold_large_reshape
// CHECK: loom.reshape
func.func @no_fold_large_reshape() -> tensor<2x16400xi1> {
  %c = loom.constant dense<"0xA4C123B1612DD272D1371C17149D439536B3216FDAEEB975729FAE923D5A4FD12AABFE228F219E9CB0EB53F16947CCF25EC84D8DBC74254770F58904DBA41ECCCC3FC1626E53A13043B026C48BBF33FEFF9243A8F506B40928B5B7A767C76FB008F86BEBB2737F6A6F0FB23C6F5DA2CEC255404E4FB440034D6608697A8D41BED440E50454F31AF3176813E02EA68EF786E4D3CEA27D26934B484E73CF575DCAD6BA2B0AEE0CA923732881584D8C4FA2815D2802827283E0AD84173581569969E58B081006F7E3DFC967A64CB14028D512C9791E558E08BAA7196B50AC2F86702824C1C099724CAF4941D4072014B3CE107F80E222F828767EFC2F91624A8940F1F836F99EEE3692F09E2E8C662248B483B7FFC050FEC94DBCA3A0AAC36098B2CC2BD818319478DA6BD0C621DE49F145FDA9988C79FC35526F7EAED46725A2A7B860DCD6C8A1F8B46287CCED9041DFF02CEE737443E210471948D33296C87009E8A7F770D9106FD287DB7F1ADBC60926F6967E7893F57FD14C1604D115CEA325A65E19CBAE530282BD36CB9D21F6BE6ABF0D7C1C1E21862AB8A18A8902073FEC8DF4F50947AAEB26C57D21FA5D328263DFE574DE739988B886E7577496A2C8773E130F7EB19731662B5E803B61BA4168160ADB59261FF2D3C425C8D99D19BDD0B6CC60D5D32CBE54014C2B54B95523CF6941FA1C257C6F561C5CB347611A3CE9D97DCBEE500FE7EE5FC324BDB2E1142A21C402364F9572B85A8E48F687AB165C58AC5831BE38CB8CB4BA2E751989A01749DDB14F71010B93B7D946BF54074E3248C801BEF750110C57513064D6D59291F0CDE2E5738713A818D8962058765A6CA7CFF00D796C25410335B400141212B62C376631129F34369AAD80B891BAF90D0D3BF16295D06910BF3F5FB85967F532F3AB3CC2D0B698D5C7E41BA4EA5EE874AE7689447AB57A683536C4499D863386CE10CD79E048C07DD7753EDA83D7C58DFE0D5A0CF318656B3E6F0BADE65C3B188CC102DDB8379C7CE65426F74BDE94FB78C8D5F08B79AFFD2B49C12A4B0062983475EB46C5296F62E338D74FF1FE4F7F505AEF9EBDD25B001A3FF416D4A3BAF69DAD8199BFCA8B6F3A6A9421CC1C93016F1C4261E5351D30B49895D1A0D1F13DCE20C4FD32F640D0032634F087E51B429FE8110102C995F1ABEF543B5DFCE8A981A049D7CCC7E90A88D519448FB2FC6791CE680CE2B27C8AF6666259BBC471FB3BE24A0B80316F688D3E481A65C2011BEF2C328A72C5E5B77518B1018F134A069E3FAB8C3BFC5E740E61572B4E3C02EAA7F3B4A715E4E48DD74089A58F3AEF3416F9386BD8773C9D51940EA4E095BD1D6854575622F856469602D1BA9F20DF4875B15B0BE23B7AC193FE04072755398003680E7E3B35183EF8333C4774EC50CD1C1BAC7ADAC1A4B7D0B352AD6074DCE1118813830D71939B53182E4E349D98729E7C6BE9FF907A76CC0B57AAF89691052BE1CEB374DAB4683F84D30D3FC4D83CEE9B9BCCA0FCE9594DC72AA7A6D0018F99DDCEB1BE0273DBC46DFCEA25BAB29539AD5966D513B1D00909C30065F846D34530325FED10A47B851832B6EC017C1E1777155A0E9D8F27C7D9CF07255BC509CB3ACAC23DB7C6E9B7D180A4742684EE75BB6CC69F67E48EB7C64328C0490C257A632B96292794C9BCE4850BBD0E7CB3593871C15D694C1957F8DB03911731A6B2DC782BDEAE16D4F6185578715BBD26944FF770E4B9447A3D54EC6390BF61189639E35AEEB95210EF2A83FDF6A0B29872400C49B5539AC5BA7B4B87113C16FDF5924754EC21EF66B01D4921DA2E055C90EB6F2AED4C21A9DBF49A067E24BDB7EC83756378368F7E732D2E433EC56F24B1C71B106E934D263B5BA0837BBF1B3BA3178B6E0E30F328549C488E00A4FF1125CF5EC72BA694165BEAECBA0AFA707E1448C828B4136D3B97429AB7BCA1AAFB77B4460ECEC9524998A26259BEBD2FA5880587061CE6936714122A40680A06AA0FCA51D12AFC8E00AA1DA5204642BBDB4A78F19E8B8480F3B47C20431658B4550B7EF6BCE6A0302CB17CDC70808D77B6AD89F65F84992A0F75AE616B1E5D490340494B35EC2DACA1760147D301A233F4D05743BF2B672850882161DB80A1E9AD8CDADC4CCD4078C763211CAEAE0FFAC7CB2C8A2788FBF742B65B754E51ACBD3D48C3BB9E28C9E3EF5404BF7BAC806081598A878E2F264D9B1ECB19DD8B7C46B26A22ECCDF03EEDDF52ECF4076C19ACE327203F26E16AF1D4D14AA605882AC89CD1997CD896416BEF4BA6E1A02DA187E966ECE6615D3142F505F7965463E3621D78ED41415E97A498A647C1AC49726E45DAC31B3629FB0F26F89264F879130B64915ABEF7AB5392E335CE1113D4DB2B5B52A0F94833734F83AE7518B69C64773031F6725480DC3932677172A31659A2E50ADD127454B4667A20F1FA2261BD2B5FF4891E5DC9328776E7F1CCACC27AD909F03FDD9E4A62BCE19A285ED7361C5C8A4B57BC9FA65C00537E8B3C48D2AE89B9C1FFB013CE94E1AF408461C58790DD2CFB8A5F1B461595919CB589F6AEC38BCACF836ED5A148FD28CBC938E019BB8723D39553CCACCFAB54D946A2D207DC684477391C94C8286793B2B023A60E4E81E11E3F79AA766907508DB2823CCD71BA82F4DEE6A63C59620E66869002B6D08B5AB9315BD0E3A34BFF2AAF438C6B8068DC5D44036C002E162AAEF6076BC3346EEE21F5C7FF43FC2770C7173601E1C771D814E0F33545A3C0202219EC0605E636D32B32732B89994FA6022136CED620104D159E8489B0AC35E5FA870D0A7BA07A2531ADAB23E5617D266908D35E59C7A80268422C922202B243F8E5389CD5E3EAA60C736BA80622598514F31C827129084BB54B8BB53759C0767CB7F8013CB790FEF33EF2C3FF57DE13628BEF7A127F6C31D175A632F8EE42EA368B23FF8500F17F4B4CA1B570E2E619E469A62C050BF72FBF666F69E87A1D5AD0B57048EFC48738D444A157D52ED8748D31D3092954D2C93E7FB6D28C587DB821F6A0EFA5EA7D26DC47BBCFB4768314CD2FEABBDA5F05CB39676B9852E160D80205270575870032264FA2BA9DF8A1285822184AAF4614DC90792F3246EE72FD40663E78DA1070796E656984517EA9CA91A291A7457E06A3BF9232CDF287EAFDBEA13E284142E192AD24C3119432A5D575CDAB37E328CF759EC646F3A708F4AA5A6D107B0811A7A8B9BBCC9370D715498ACD947A1B5A41EAFE6AB7233A007B22F16EC9FC9FAB9B32FED0766BB31ED04D259B3717BD5C2D6A9A5F04C5503B11606E4644E0D4887D6E120A578757563E68D1F0E22D4AE56AD7675DBD9956E246A395DFEFF8F6F4572BC2C3BDABC4E01FBCD9504BCA7A5C59340AFEF8B0BAF3A8C80BC2B08A9F5C02661449771D833424D61FCD25491215310A53E5356B6B3DACD8E7F05554B1E1E0EE0AC414F5C500BD6CDAF5AC6860AA8A5F82F14D2D9D0243C83DE82EB31F96288B6D8EACF314914BC781EF02216EF29A54358A557F78817592CE63DFA1C7EF6853AC54FFF8B3FA5A3BC34F9AC5A0A6E39EBBF65B669972D0626373936081D28A0DB506573638ACC02D384DB001DC5BB4BB84554433593FDE017D4707B72FCDAF171E7156282A2A2D92E7459DA3D51F35191A136C576D8E27E07C36D29BA78A71CDD24221683CF863FE92F442FD405123A7178B5BD85EE5042D74833C27041B29AE696FA4BB7840DD51983EBF7C99C18FA6EB9EB2B67D8B081ABD1D97AAF35F3B68F14ADE9D4A455B817A151DD64B338EC80CC5C0B3AA41660793677FA31A2E376E9DB073AC7D7A7C198FFE01CE75FC538E29E602225B0DDE9BB53F3B967CBA892B3BA4A3A5D0B7C056EBC875E5B10C7AC1FF65255845A94F3489967EA4BFE513214825007E2E756AA04AB22031598926E8019792F4CECE6788749C1736EBEBF0BC65BFC54D5F667B388B3F9C6AD09844593DEDD634D54A7DC843565F6EF306E13D6975BB3F2594831167628828F5809E7B7D3703A3EF076B1ACDC79D2EDF85DD616E732BD008F56F49D64C090CEA7A24129199532290B5CD33E9FEC3D7C6AFCC831E864EC8B45D48730D21E9E233C90CB4F20047226249DE87A13D9133D268F95D09EA9823FA7B3A99B7D87DE86440285B86CE53935FD16CCD6B9CCC6C4AE12725B8EFA9B555246FA3447A99286C0D7CE0EC037C8703ED27E961B130F4C4E8BC562AD69A1B31A888DEEEEA35374646FA6AEF1515E22E00FD2D741D7A9FDC10A1D67A0031DFFB3CA0C8D2FC3F3C3FD03F91D80F7BEC391A97C0DE4F91904A170587C7A437ECB4E59B08F1350C2AA24C4913E4F3649701835EA45AC4E8854B47036909A39E5E32BC556202C247E1DE30CA67DBEB4C29D9936DAE96F9C23E2ED8F8C375D60FCAC32C49D49AEE9F4580D08FB6D0ED62279C6DBEDBC37293EDBD57DA8CAFE1F6151B9267F9ED212562C49B24AD7312FA1C8BE785E55EB4C269B873AC7A00EDB9F7796BFBC200CAF6D6F1F6AF0894E69F569CA039B645D93B4398D8E9A807A7A6D8A0990846B3BA35D82EF9B1AD85FFA47837771674FBFB167DF61A128B3F4534C496AF2FAC6B0FF663E73A436AB2D319CEF8A906F526BD622140FE880D8184E6674084FDB0DD13F1C4FF54C4D88273EB356402A7A731D512FF6D964EF51B6A36E33A4180FD14ADD2D7BC4D8B92E0A3CFE53B170419EA177E8FEC375B3BE41D62EF430DD737EA6A2E5A2A038D5A1E3A6594888E498E656E46A5C9CFC4B1D85A6C844BE645A80D5282639FA798B1310582D67FAE1983CB936A9882712CB5DA875953507BF4DE51B20A401549935D49A54E5EC549C4A7CB2AE33834AAD0335D8A1483BBA4EE1A9A3A1BCBBE842926D1195D24734E0717074C45CF807A9F1BD4E4A0F40AFCB0F13F22CA78E2EE9BF6D2D3B4D67777A0C8910D9C95FEE9C13EA50F578B3A0BBC3AAA94502EA730B6D8A8028B2C80BD0980B117E3A28B342EE758AF8D62014EA5DD9D602448E500BA01D8773E6273773E3ADAF5CF5ACE533EF327B42DFFC4DF5E935AB777ECFD467BA2293F5EE0C21D6046BDA6B68607A119030CDEB0E415EA8E09AB022E0D3F2380C27C73A0D5025775AAC1BD4F6906AD6E791AC7DC223393F1216147DC78B4AE5E8E1967F9B04237405F508BC6F087A4D8BAA409F072FE6F43E30A56C2069235EB36C868C3D78CD3D5548446F56754C2FBA27200323B7DABCD519665CE7DF72FDD89D8F1EFB0F5993FF225EEBF8AC4E02B94BAADF0446B7CAC4E17A1429BDF9CB6877F85F36F2D8233BF7F2FB84F4156F47F8E03C8793918574E4F046B991AE27C8E483476E53AEAC5548C0F322D573771A22CB3143FEA2A23C3A1781AB3F7F366404002588633A7056D1337512398CCBF172E1BDECD51AF0408AFE2938407CF7BA849B792009AE895CB72E336819FFDF0B91E1FC0AB620FB752C0BC311CE041B325628EDA45B032E3A5A4E16432CBF2A54FA897E8D97559FBC28F189323F4A1DF652F4993EF4C0BC182B5F79E3589780DBB28FDE21B241F871A0A8633B923E7B81726CD9BBA602F26BF0661A54B4B6E5A2AF69F111EA25BCB26EE8F4642CD11D4148D3EDDAC8164B6B1BB59D6A38FDA97EBDD293F4B55A7775E4822FDE2BFB322C2B9B806427BE5D046B98AD4D4F8638D981264A124F6C596176412FB3FAC1D1CB195C161450C0573D50DF16F263C2E71E5CF2D9E1CB78F134A0FEC9D6107E3421724BD0B3DE5D53E2FBB325BE6F4F56A7ED9FC0DC7FDFBF06B9956226B42418A596E73302E"> : tensor<32800xi1>
  %0 = loom.reshape %c : tensor<32800xi1> -> tensor<2x16400xi1>
  return %0 : tensor<2x16400xi1>
}

// Moving elements of a splat gives a splat, at any size.
// CHECK-LABEL: func @rearrange_splat
// CHECK-DAG: loom.constant dense<5> : tensor<4096x2048xi32>
// CHECK-DAG: loom.constant dense<5> : tensor<1000x2048xi32>
// CHECK-NOT: loom.transpose
// CHECK-NOT: loom.slice
func.func @rearrange_splat() -> (tensor<4096x2048xi32>, tensor<1000x2048xi32>) {
  %c = loom.constant dense<5> : tensor<2048x4096xi32>
  %0 = loom.transpose %c [1, 0] : tensor<2048x4096xi32> -> tensor<4096x2048xi32>
  %1 = loom.slice %0 [0:1000, 0:2048] : tensor<4096x2048xi32> -> tensor<1000x2048xi32>
  return %0, %1 : tensor<4096x2048xi32>, tensor<1000x2048xi32>
}

// -----

// A Linear layer as PyTorch exports it, MatMul(x, Transpose(W)), reads W
// transposed in place; a transpose of the lhs flips the other flag.
// CHECK-LABEL: func @matmul_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<8x16x32xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[Y:.*]]: tensor<8x32x16xf32>)
// CHECK-NEXT: %[[A:.*]] = loom.matmul %[[X]], %[[W]] transpose_rhs : (tensor<8x16x32xf32>, tensor<64x32xf32>) -> tensor<8x16x64xf32>
// CHECK-NEXT: %[[B:.*]] = loom.matmul %[[Y]], %[[W]] transpose_lhs transpose_rhs : (tensor<8x32x16xf32>, tensor<64x32xf32>) -> tensor<8x16x64xf32>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @matmul_of_transpose(%x: tensor<8x16x32xf32>, %w: tensor<64x32xf32>, %y: tensor<8x32x16xf32>)
    -> (tensor<8x16x64xf32>, tensor<8x16x64xf32>) {
  %wt = loom.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %a = loom.matmul %x, %wt : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  %yt = loom.transpose %y [0, 2, 1] : tensor<8x32x16xf32> -> tensor<8x16x32xf32>
  %b = loom.matmul %yt, %wt : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  return %a, %b : tensor<8x16x64xf32>, tensor<8x16x64xf32>
}

// -----

// Other permutations are real data movement and stay.
// CHECK-LABEL: func @matmul_of_other_transpose
// CHECK: loom.transpose
// CHECK: loom.matmul %{{.*}}, %{{.*}} :
func.func @matmul_of_other_transpose(%x: tensor<4x8x16xf32>, %w: tensor<4x16xf32>) -> tensor<8x4x4xf32> {
  %xt = loom.transpose %x [1, 0, 2] : tensor<4x8x16xf32> -> tensor<8x4x16xf32>
  %a = loom.matmul %xt, %w transpose_rhs : (tensor<8x4x16xf32>, tensor<4x16xf32>) -> tensor<8x4x4xf32>
  return %a : tensor<8x4x4xf32>
}

// -----

// The tanh GELU as ONNX exports spell it out (torch: 0.5 * (x * (1 +
// tanh(k * (x + 0.044715 * (x * (x * x))))))) is one loom.gelu; so is the
// (0.5 * x) * (...) order with pow(x, 3).
// CHECK-LABEL: func.func @tanh_gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[G:.*]] = loom.gelu %[[X]] approximate tanh : tensor<2x8xf32>
// CHECK-NEXT:    %[[H:.*]] = loom.gelu %[[X]] approximate tanh : tensor<2x8xf32>
// CHECK-NEXT:    return %[[G]], %[[H]]
func.func @tanh_gelu(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %half = loom.constant dense<0.5> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %k = loom.constant dense<0.797884583> : tensor<f32>
  %c = loom.constant dense<0.044715> : tensor<f32>
  %three = loom.constant dense<3.0> : tensor<f32>
  %sq = loom.mul %x, %x : tensor<2x8xf32>
  %cube = loom.mul %x, %sq : tensor<2x8xf32>
  %0 = loom.mul %c, %cube : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = loom.add %x, %0 : tensor<2x8xf32>
  %2 = loom.mul %k, %1 : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = loom.tanh %2 : tensor<2x8xf32>
  %4 = loom.add %one, %3 : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %5 = loom.mul %x, %4 : tensor<2x8xf32>
  %g = loom.mul %half, %5 : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = loom.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %6 = loom.mul %p, %c : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %7 = loom.add %6, %x : tensor<2x8xf32>
  %8 = loom.mul %7, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %9 = loom.tanh %8 : tensor<2x8xf32>
  %10 = loom.add %9, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %11 = loom.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h = loom.mul %11, %10 : tensor<2x8xf32>
  return %g, %h : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Not the GELU: another cubic coefficient, or the cube of another value.
// CHECK-LABEL: func.func @not_tanh_gelu
// CHECK-NOT:     loom.gelu
// CHECK:         return
func.func @not_tanh_gelu(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %half = loom.constant dense<0.5> : tensor<f32>
  %one = loom.constant dense<1.0> : tensor<f32>
  %k = loom.constant dense<0.797884583> : tensor<f32>
  %c = loom.constant dense<0.05> : tensor<f32>
  %c2 = loom.constant dense<0.044715> : tensor<f32>
  %sq = loom.mul %x, %x : tensor<8xf32>
  %cube = loom.mul %x, %sq : tensor<8xf32>
  %0 = loom.mul %c, %cube : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = loom.add %x, %0 : tensor<8xf32>
  %2 = loom.mul %k, %1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = loom.tanh %2 : tensor<8xf32>
  %4 = loom.add %one, %3 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = loom.mul %x, %4 : tensor<8xf32>
  %g = loom.mul %half, %5 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %ysq = loom.mul %y, %y : tensor<8xf32>
  %ycube = loom.mul %y, %ysq : tensor<8xf32>
  %6 = loom.mul %c2, %ycube : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = loom.add %x, %6 : tensor<8xf32>
  %8 = loom.mul %k, %7 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %9 = loom.tanh %8 : tensor<8xf32>
  %10 = loom.add %one, %9 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %11 = loom.mul %x, %10 : tensor<8xf32>
  %h = loom.mul %half, %11 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  return %g, %h : tensor<8xf32>, tensor<8xf32>
}

// -----

// The head merge of attention under mixed precision: a bf16 product widened
// to f32, reshaped and transposed, then narrowed for the next GEMM. The
// layout ops move to the bf16 side and the round trip folds away.
// CHECK-LABEL: func @layout_in_the_narrow_type
// CHECK-NEXT:    %[[T:.*]] = loom.transpose %arg0 [0, 2, 1, 3] : tensor<2x4x8x16xbf16> -> tensor<2x8x4x16xbf16>
// CHECK-NEXT:    %[[R:.*]] = loom.reshape %[[T]] : tensor<2x8x4x16xbf16> -> tensor<2x8x64xbf16>
// CHECK-NEXT:    return %[[R]]
func.func @layout_in_the_narrow_type(%x: tensor<2x4x8x16xbf16>) -> tensor<2x8x64xbf16> {
  %0 = loom.cast %x : tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xf32>
  %1 = loom.transpose %0 [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %2 = loom.reshape %1 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  %3 = loom.cast %2 : tensor<2x8x64xf32> -> tensor<2x8x64xbf16>
  return %3 : tensor<2x8x64xbf16>
}

// -----

// A narrowing cast moves before a layout op, a widening one after it; not
// when the value they would move past is used elsewhere too (the f32
// transpose stays for its other reader).
// CHECK-LABEL: func @casts_cross_layout_ops
// CHECK-NEXT:    %[[N:.*]] = loom.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[NT:.*]] = loom.transpose %[[N]] [1, 0] : tensor<4x8xbf16> -> tensor<8x4xbf16>
// CHECK-NEXT:    %[[WR:.*]] = loom.reshape %arg1 : tensor<4x8xbf16> -> tensor<32xbf16>
// CHECK-NEXT:    %[[W:.*]] = loom.cast %[[WR]] : tensor<32xbf16> -> tensor<32xf32>
// CHECK-NEXT:    %[[T:.*]] = loom.transpose %arg0 [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[C:.*]] = loom.cast %[[T]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK-NEXT:    return %[[NT]], %[[W]], %[[T]], %[[C]]
func.func @casts_cross_layout_ops(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>) -> (tensor<8x4xbf16>, tensor<32xf32>, tensor<8x4xf32>, tensor<8x4xbf16>) {
  %0 = loom.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = loom.cast %0 : tensor<8x4xf32> -> tensor<8x4xbf16>
  %2 = loom.cast %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  %3 = loom.reshape %2 : tensor<4x8xf32> -> tensor<32xf32>
  %4 = loom.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %5 = loom.cast %4 : tensor<8x4xf32> -> tensor<8x4xbf16>
  return %1, %3, %4, %5 : tensor<8x4xbf16>, tensor<32xf32>, tensor<8x4xf32>, tensor<8x4xbf16>
}

// -----

// A fused QKV projection under mixed precision: the f32 result is split and
// every piece narrowed for attention, so the split moves to bf16; in the
// backward the three widened gradients are concatenated, so the concat
// moves to bf16 and one widening cast follows it.
// CHECK-LABEL: func @split_and_concat_in_the_narrow_type
// CHECK-NEXT:    %[[N:.*]] = loom.cast %arg0 : tensor<2x12xf32> -> tensor<2x12xbf16>
// CHECK-NEXT:    %[[S:.*]]:3 = loom.split %[[N]] axis 1 : tensor<2x12xbf16> -> tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>
// CHECK-NEXT:    %[[C:.*]] = loom.concat %arg1, %arg2, %arg3 axis 1 : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x12xbf16>
// CHECK-NEXT:    %[[W:.*]] = loom.cast %[[C]] : tensor<2x12xbf16> -> tensor<2x12xf32>
// CHECK-NEXT:    return %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[W]]
func.func @split_and_concat_in_the_narrow_type(%x: tensor<2x12xf32>, %a: tensor<2x4xbf16>, %b: tensor<2x4xbf16>, %c: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x12xf32>) {
  %0:3 = loom.split %x axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  %1 = loom.cast %0#0 : tensor<2x4xf32> -> tensor<2x4xbf16>
  %2 = loom.cast %0#1 : tensor<2x4xf32> -> tensor<2x4xbf16>
  %3 = loom.cast %0#2 : tensor<2x4xf32> -> tensor<2x4xbf16>
  %4 = loom.cast %a : tensor<2x4xbf16> -> tensor<2x4xf32>
  %5 = loom.cast %b : tensor<2x4xbf16> -> tensor<2x4xf32>
  %6 = loom.cast %c : tensor<2x4xbf16> -> tensor<2x4xf32>
  %7 = loom.concat %4, %5, %6 axis 1 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  return %1, %2, %3, %7 : tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x12xf32>
}

// -----

// Not when a piece is read in f32 as well, nor when the concat's inputs
// come from different types.
// CHECK-LABEL: func @split_and_concat_stay
// CHECK-NEXT:    %[[S:.*]]:2 = loom.split %arg0 axis 1 : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    loom.cast %[[S]]#0 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT:    loom.cast %[[S]]#1 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK:         loom.concat %{{.*}}, %{{.*}} axis 1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
func.func @split_and_concat_stay(%x: tensor<2x8xf32>, %a: tensor<2x4xbf16>, %b: tensor<2x4xf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2x8xf32>) {
  %0:2 = loom.split %x axis 1 : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  %1 = loom.cast %0#0 : tensor<2x4xf32> -> tensor<2x4xbf16>
  %2 = loom.cast %0#1 : tensor<2x4xf32> -> tensor<2x4xbf16>
  %3 = loom.cast %a : tensor<2x4xbf16> -> tensor<2x4xf32>
  %4 = loom.cast %b : tensor<2x4xf16> -> tensor<2x4xf32>
  %5 = loom.concat %3, %4 axis 1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %1, %2, %0#1, %5 : tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2x8xf32>
}

// -----

// Round trips fold only through a type that holds every value exactly.
// CHECK-LABEL: func @cast_round_trips
// CHECK-DAG:     %[[A:.*]] = loom.cast %arg1 : tensor<4xf32> -> tensor<4xbf16>
// CHECK-DAG:     %[[B:.*]] = loom.cast %[[A]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-DAG:     %[[C:.*]] = loom.cast %arg3 : tensor<4xf16> -> tensor<4xbf16>
// CHECK-DAG:     %[[D:.*]] = loom.cast %[[C]] : tensor<4xbf16> -> tensor<4xf16>
// CHECK-DAG:     %[[E:.*]] = loom.cast %arg1 : tensor<4xf32> -> tensor<4xi32>
// CHECK-DAG:     %[[F:.*]] = loom.cast %[[E]] : tensor<4xi32> -> tensor<4xf32>
// CHECK:         return %arg0, %[[B]], %arg2, %[[D]], %[[F]], %arg4
func.func @cast_round_trips(%h: tensor<4xbf16>, %f: tensor<4xf32>, %i: tensor<4xi32>, %g: tensor<4xf16>, %b: tensor<4xi1>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xi32>, tensor<4xf16>, tensor<4xf32>, tensor<4xi1>) {
  %0 = loom.cast %h : tensor<4xbf16> -> tensor<4xf32>
  %1 = loom.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = loom.cast %f : tensor<4xf32> -> tensor<4xbf16>
  %3 = loom.cast %2 : tensor<4xbf16> -> tensor<4xf32>
  %4 = loom.cast %i : tensor<4xi32> -> tensor<4xi64>
  %5 = loom.cast %4 : tensor<4xi64> -> tensor<4xi32>
  %6 = loom.cast %g : tensor<4xf16> -> tensor<4xbf16>
  %7 = loom.cast %6 : tensor<4xbf16> -> tensor<4xf16>
  %8 = loom.cast %f : tensor<4xf32> -> tensor<4xi32>
  %9 = loom.cast %8 : tensor<4xi32> -> tensor<4xf32>
  %10 = loom.cast %b : tensor<4xi1> -> tensor<4xf32>
  %11 = loom.cast %10 : tensor<4xf32> -> tensor<4xi1>
  return %1, %3, %5, %7, %9, %11 : tensor<4xbf16>, tensor<4xf32>, tensor<4xi32>, tensor<4xf16>, tensor<4xf32>, tensor<4xi1>
}

// -----

// The loss of mixed precision: cross-entropy and its gradient read the bf16
// logits the GEMM wrote (the f32 copy goes), and the gradient is written in
// the bf16 the next GEMM takes.
// CHECK-LABEL: func @cross_entropy_in_bf16
// CHECK-NOT:     loom.cast
// CHECK:         %[[L:.*]] = loom.cross_entropy %arg0, %arg1 : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32>
// CHECK:         %[[G:.*]] = loom.cross_entropy_grad %arg0, %arg1, %[[L]] ignore_index 3 : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
// CHECK-NEXT:    return %[[L]], %[[G]]
func.func @cross_entropy_in_bf16(%h: tensor<4x10xbf16>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xbf16>) {
  %0 = loom.cast %h : tensor<4x10xbf16> -> tensor<4x10xf32>
  %1 = loom.cross_entropy %0, %y : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %2 = loom.cross_entropy_grad %0, %y, %1 ignore_index 3 : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  %3 = loom.cast %2 : tensor<4x10xf32> -> tensor<4x10xbf16>
  return %1, %3 : tensor<f32>, tensor<4x10xbf16>
}

// -----

// What stays: a widening to f64 (the loss would become f32), a gradient with
// another use, and a narrowing of a gradient that was already rounded (f64
// logits, f32 result: bf16 would round twice).
// CHECK-LABEL: func @cross_entropy_casts_that_stay
// CHECK:         %[[W:.*]] = loom.cast %arg0 : tensor<4x10xbf16> -> tensor<4x10xf64>
// CHECK:         loom.cross_entropy %[[W]], %arg1 : (tensor<4x10xf64>, tensor<4xi64>) -> tensor<f64>
// CHECK:         %[[G:.*]] = loom.cross_entropy_grad %arg0, %arg1, %arg3 : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
// CHECK:         loom.cast %[[G]] : tensor<4x10xf32> -> tensor<4x10xbf16>
// CHECK:         %[[G64:.*]] = loom.cross_entropy_grad %arg2, %arg1, %arg4 : (tensor<4x10xf64>, tensor<4xi64>, tensor<f64>) -> tensor<4x10xf32>
// CHECK:         loom.cast %[[G64]] : tensor<4x10xf32> -> tensor<4x10xbf16>
func.func @cross_entropy_casts_that_stay(%h: tensor<4x10xbf16>, %y: tensor<4xi64>, %d: tensor<4x10xf64>, %s: tensor<f32>, %s64: tensor<f64>) -> (tensor<f64>, tensor<4x10xbf16>, tensor<4x10xf32>, tensor<4x10xbf16>) {
  %0 = loom.cast %h : tensor<4x10xbf16> -> tensor<4x10xf64>
  %1 = loom.cross_entropy %0, %y : (tensor<4x10xf64>, tensor<4xi64>) -> tensor<f64>
  %2 = loom.cross_entropy_grad %h, %y, %s : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  %3 = loom.cast %2 : tensor<4x10xf32> -> tensor<4x10xbf16>
  %4 = loom.cross_entropy_grad %d, %y, %s64 : (tensor<4x10xf64>, tensor<4xi64>, tensor<f64>) -> tensor<4x10xf32>
  %5 = loom.cast %4 : tensor<4x10xf32> -> tensor<4x10xbf16>
  return %1, %3, %2, %5 : tensor<f64>, tensor<4x10xbf16>, tensor<4x10xf32>, tensor<4x10xbf16>
}

// -----

// `classes` that cover the whole last dimension say nothing and go; fewer
// stay (they are padding).
// CHECK-LABEL: func @cross_entropy_whole_classes
// CHECK:         %[[L:.*]] = loom.cross_entropy %arg0, %arg1 : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK:         loom.cross_entropy_grad %arg0, %arg1, %[[L]] : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
// CHECK:         %[[P:.*]] = loom.cross_entropy %arg0, %arg1 classes 9 : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK:         loom.cross_entropy_grad %arg0, %arg1, %[[P]] classes 9 : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
func.func @cross_entropy_whole_classes(%h: tensor<4x10xf32>, %y: tensor<4xi64>) -> (tensor<4x10xf32>, tensor<4x10xf32>) {
  %0 = loom.cross_entropy %h, %y classes 10 : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %1 = loom.cross_entropy_grad %h, %y, %0 classes 10 : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  %2 = loom.cross_entropy %h, %y classes 9 : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %3 = loom.cross_entropy_grad %h, %y, %2 classes 9 : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  return %1, %3 : tensor<4x10xf32>, tensor<4x10xf32>
}

// -----

// A narrow gradient result keeps the loss's classes.
// CHECK-LABEL: func @cross_entropy_grad_narrow_keeps_classes
// CHECK:         loom.cross_entropy_grad %arg0, %arg1, %arg2 classes 9 : (tensor<4x16xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xbf16>
func.func @cross_entropy_grad_narrow_keeps_classes(%h: tensor<4x16xbf16>, %y: tensor<4xi64>, %s: tensor<f32>) -> tensor<4x16xbf16> {
  %0 = loom.cross_entropy_grad %h, %y, %s classes 9 : (tensor<4x16xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  %1 = loom.cast %0 : tensor<4x16xf32> -> tensor<4x16xbf16>
  return %1 : tensor<4x16xbf16>
}

// -----

// Mixed precision around a layer norm: the cast before the next GEMM folds
// into the forward's result, the cast of the GEMM's gradient into the
// backward's dout.
// CHECK-LABEL: func @layer_norm_in_bf16
// CHECK-NOT:     loom.cast
// CHECK:         %[[Y:.*]] = loom.layer_norm %arg0, %arg1, %arg1 axis 1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
// CHECK:         loom.layer_norm_grad %arg0, %arg1, %arg2 axis 1 : tensor<4x8xf32>, tensor<8xf32> dout tensor<4x8xbf16>
func.func @layer_norm_in_bf16(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dyb: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %y = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %yb = loom.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  %dy = loom.cast %dyb : tensor<4x8xbf16> -> tensor<4x8xf32>
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf32>, tensor<8xf32>
  return %yb, %dx, %dg, %db : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// What stays: an f32 result with another use, and f64 (no bf16 form).
// CHECK-LABEL: func @layer_norm_casts_that_stay
// CHECK:         %[[Y:.*]] = loom.layer_norm %arg0, %arg1, %arg1 axis 1 : tensor<4x8xf32>, tensor<8xf32>{{$}}
// CHECK:         loom.cast %[[Y]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:         %[[Z:.*]] = loom.layer_norm %arg2, %arg3, %arg3 axis 1 : tensor<4x8xf64>, tensor<8xf64>{{$}}
// CHECK:         loom.cast %[[Z]] : tensor<4x8xf64> -> tensor<4x8xf32>
func.func @layer_norm_casts_that_stay(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %x64: tensor<4x8xf64>, %g64: tensor<8xf64>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = loom.layer_norm %x, %g, %g axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %yb = loom.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  %z = loom.layer_norm %x64, %g64, %g64 axis 1 : tensor<4x8xf64>, tensor<8xf64>
  %zf = loom.cast %z : tensor<4x8xf64> -> tensor<4x8xf32>
  return %yb, %y, %zf : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A bias gradient under mixed precision: the sum reads the bf16 gradient.
// Other widenings stay (an f32 -> f64 sum, an integer cast).
// CHECK-LABEL: func @sum_of_widened
// CHECK:         %[[A:.*]] = loom.reduce_sum %arg0 [0] : tensor<8x4xbf16> -> tensor<4xf32>
// CHECK:         %[[W:.*]] = loom.cast %arg1 : tensor<8x4xf32> -> tensor<8x4xf64>
// CHECK:         loom.reduce_sum %[[W]] [0] : tensor<8x4xf64> -> tensor<4xf64>
// CHECK:         %[[I:.*]] = loom.cast %arg2 : tensor<8x4xi32> -> tensor<8x4xf32>
// CHECK:         loom.reduce_sum %[[I]] [0] : tensor<8x4xf32> -> tensor<4xf32>
func.func @sum_of_widened(%g: tensor<8x4xbf16>, %f: tensor<8x4xf32>, %i: tensor<8x4xi32>) -> (tensor<4xf32>, tensor<4xf64>, tensor<4xf32>) {
  %0 = loom.cast %g : tensor<8x4xbf16> -> tensor<8x4xf32>
  %1 = loom.reduce_sum %0 [0] : tensor<8x4xf32> -> tensor<4xf32>
  %2 = loom.cast %f : tensor<8x4xf32> -> tensor<8x4xf64>
  %3 = loom.reduce_sum %2 [0] : tensor<8x4xf64> -> tensor<4xf64>
  %4 = loom.cast %i : tensor<8x4xi32> -> tensor<8x4xf32>
  %5 = loom.reduce_sum %4 [0] : tensor<8x4xf32> -> tensor<4xf32>
  return %1, %3, %5 : tensor<4xf32>, tensor<4xf64>, tensor<4xf32>
}

// -----

// maximum/minimum fold on constants (NaN wins; on i1 they are or/and) and
// with themselves; abs, sin, cos and fmod fold on constants.
// CHECK-LABEL: func @extrema_and_trig
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-DAG: %[[MAX:.*]] = loom.constant dense<[2.000000e+00, 0x7FC00000, 3.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[MIN:.*]] = loom.constant dense<[1.000000e+00, 0x7FC00000, -4.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[OR:.*]] = loom.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-DAG: %[[AND:.*]] = loom.constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[ABS:.*]] = loom.constant dense<[2, 0, 7]> : tensor<3xi64>
// CHECK-DAG: %[[SINCOS:.*]] = loom.constant dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf64>
// CHECK-DAG: %[[FMOD:.*]] = loom.constant dense<[1.500000e+00, -1.500000e+00]> : tensor<2xf64>
// CHECK: return %[[X]], %[[X]], %[[MAX]], %[[MIN]], %[[OR]], %[[AND]], %[[ABS]], %[[SINCOS]], %[[FMOD]]
func.func @extrema_and_trig(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi1>, tensor<3xi1>, tensor<3xi64>, tensor<2xf64>, tensor<2xf64>) {
  %self_max = loom.maximum %x, %x : tensor<3xf32>
  %self_min = loom.minimum %x, %x : tensor<3xf32>
  %a = loom.constant dense<[1.0, 0x7FC00000, 3.0]> : tensor<3xf32>
  %b = loom.constant dense<[2.0, 5.0, -4.0]> : tensor<3xf32>
  %max = loom.maximum %a, %b : tensor<3xf32>
  %min = loom.minimum %a, %b : tensor<3xf32>
  %p = loom.constant dense<[false, true, true]> : tensor<3xi1>
  %q = loom.constant dense<[false, false, true]> : tensor<3xi1>
  %or = loom.maximum %p, %q : tensor<3xi1>
  %and = loom.minimum %p, %q : tensor<3xi1>
  %i = loom.constant dense<[-2, 0, 7]> : tensor<3xi64>
  %abs = loom.abs %i : tensor<3xi64>
  %zero = loom.constant dense<0.0> : tensor<f64>
  %sin = loom.sin %zero : tensor<f64>
  %cos = loom.cos %zero : tensor<f64>
  %s = loom.reshape %sin : tensor<f64> -> tensor<1xf64>
  %c = loom.reshape %cos : tensor<f64> -> tensor<1xf64>
  %sc = loom.concat %s, %c axis 0 : (tensor<1xf64>, tensor<1xf64>) -> tensor<2xf64>
  %n = loom.constant dense<[5.5, -5.5]> : tensor<2xf64>
  %d = loom.constant dense<[-2.0, 2.0]> : tensor<2xf64>
  %fmod = loom.fmod %n, %d : tensor<2xf64>
  return %self_max, %self_min, %max, %min, %or, %and, %abs, %sc, %fmod : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi1>, tensor<3xi1>, tensor<3xi64>, tensor<2xf64>, tensor<2xf64>
}
