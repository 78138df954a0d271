// RUN: loom-opt --loom-split-fused-projections --split-input-file %s | FileCheck %s

// GPT-2's fused QKV projection: one GEMM, bias and parameter per piece, each
// a slice of the fused parameter, which is no longer trained.
// CHECK-LABEL: module
// CHECK-DAG: loom.parameter @"w#0" trainable : tensor<4x4xf32> = #loom.slice_of<@w, [0, 0]>
// CHECK-DAG: loom.parameter @"w#1" trainable : tensor<4x4xf32> = #loom.slice_of<@w, [4, 0]>
// CHECK-DAG: loom.parameter @"w#2" trainable : tensor<4x4xf32> = #loom.slice_of<@w, [8, 0]>
// CHECK-DAG: loom.parameter @"b#2" trainable : tensor<4xf32> = #loom.slice_of<@b, [8]>
// CHECK-DAG: loom.parameter @w : tensor<12x4xf32> = dense<1.000000e+00>
// CHECK-DAG: loom.parameter @b : tensor<12xf32> = dense<2.000000e+00>
// CHECK-LABEL: func.func @qkv
// CHECK: %[[W0:.*]] = loom.param @"w#0" : tensor<4x4xf32>
// CHECK: %[[B0:.*]] = loom.param @"b#0" : tensor<4xf32>
// CHECK: %[[P0:.*]] = loom.matmul %{{.*}}, %[[W0]] transpose_rhs : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[Q:.*]] = loom.add %[[B0]], %[[P0]] : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: loom.param @"w#1"
// CHECK: loom.param @"w#2"
// CHECK-NOT: loom.split
// CHECK: return %[[Q]]
module {
  loom.parameter @w trainable : tensor<12x4xf32> = dense<1.0> : tensor<12x4xf32>
  loom.parameter @b trainable : tensor<12xf32> = dense<2.0> : tensor<12xf32>
  func.func @qkv(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = loom.param @w : tensor<12x4xf32>
    %b = loom.param @b : tensor<12xf32>
    %y = loom.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<12x4xf32>) -> tensor<2x12xf32>
    %z = loom.add %b, %y : (tensor<12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
    %q, %k, %v = loom.split %z axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    return %q, %k, %v : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A model imported shapes-only (--no-weights, the planner's candidates) is
// split as its weighted import is: the pieces are slices of the value-less
// fused parameters.
// CHECK-LABEL: module
// CHECK-DAG: loom.parameter @"w#1" trainable : tensor<4x4xf32> = #loom.slice_of<@w, [4, 0]>
// CHECK-DAG: loom.parameter @"b#1" trainable : tensor<4xf32> = #loom.slice_of<@b, [4]>
// CHECK-DAG: loom.parameter @w : tensor<12x4xf32>{{$}}
// CHECK-LABEL: func.func @shapes_only
// CHECK-NOT: loom.split
module {
  loom.parameter @w trainable : tensor<12x4xf32>
  loom.parameter @b trainable : tensor<12xf32>
  func.func @shapes_only(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = loom.param @w : tensor<12x4xf32>
    %b = loom.param @b : tensor<12xf32>
    %y = loom.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<12x4xf32>) -> tensor<2x12xf32>
    %z = loom.add %b, %y : (tensor<12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
    %q, %k, %v = loom.split %z axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    return %q, %k, %v : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A weight with a value and a bias without one is left fused.
// CHECK-LABEL: func.func @half_valued
// CHECK: loom.split
module {
  loom.parameter @w trainable : tensor<12x4xf32> = dense<1.0> : tensor<12x4xf32>
  loom.parameter @b trainable : tensor<12xf32>
  func.func @half_valued(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = loom.param @w : tensor<12x4xf32>
    %b = loom.param @b : tensor<12xf32>
    %y = loom.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<12x4xf32>) -> tensor<2x12xf32>
    %z = loom.add %b, %y : (tensor<12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
    %q, %k, %v = loom.split %z axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    return %q, %k, %v : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A weight read twice (tied) is left fused.
// CHECK-LABEL: func.func @tied
// CHECK: loom.split
module {
  loom.parameter @w trainable : tensor<12x4xf32> = dense<1.0> : tensor<12x4xf32>
  loom.parameter @b trainable : tensor<12xf32> = dense<2.0> : tensor<12xf32>
  func.func @tied(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<12x4xf32>) {
    %w = loom.param @w : tensor<12x4xf32>
    %b = loom.param @b : tensor<12xf32>
    %y = loom.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<12x4xf32>) -> tensor<2x12xf32>
    %z = loom.add %b, %y : (tensor<12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
    %q, %k, %v = loom.split %z axis 1 : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    %w2 = loom.param @w : tensor<12x4xf32>
    return %q, %w2 : tensor<2x4xf32>, tensor<12x4xf32>
  }
}
