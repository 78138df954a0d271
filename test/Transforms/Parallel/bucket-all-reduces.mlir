// RUN: loom-opt --loom-bucket-all-reduces --split-input-file %s | FileCheck %s
// RUN: loom-opt "--loom-bucket-all-reduces=bucket-mb=0.0001" --split-input-file %s | FileCheck %s --check-prefix=SMALL
// RUN: loom-opt "--loom-bucket-all-reduces=bucket-mb=0" --split-input-file %s | FileCheck %s --check-prefix=OFF

// Gradients reduced as they are produced, read only at the end: one
// all-reduce of them, flattened and concatenated, at the last one's place
// (after the GEMM between them), split and reshaped back just before the
// first op that reads one (nothing touches the buffer in flight before). With a
// bucket of 104 bytes (bucket-mb=0.0001) they do not fit together (64 + 16
// bytes do, 64 + 16 + 64 do not: the third starts a new bucket).
// CHECK-LABEL: func.func @buckets
// CHECK:         %[[GA:.*]] = loom.matmul
// CHECK-NEXT:    %[[GB:.*]] = loom.matmul
// CHECK-NEXT:    %[[GC:.*]] = loom.reduce_sum
// CHECK-NEXT:    %[[FA:.*]] = loom.reshape %[[GA]] : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT:    %[[FB:.*]] = loom.reshape %[[GB]] : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT:    %[[J:.*]] = loom.concat %[[FA]], %[[FB]], %[[GC]] axis 0 : (tensor<16xf32>, tensor<16xf32>, tensor<4xf32>) -> tensor<36xf32>
// CHECK-NEXT:    %[[R:.*]] = loom.all_reduce sum %[[J]] groups {{\[}}[0, 1]] : tensor<36xf32>
// CHECK-NEXT:    %[[T:.*]] = loom.exp %[[X:.*]] : tensor<4x4xf32>
// CHECK-NEXT:    %[[S:.*]]:3 = loom.split %[[R]] axis 0 : tensor<36xf32> -> tensor<16xf32>, tensor<16xf32>, tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = loom.reshape %[[S]]#0 : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.reshape %[[S]]#1 : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %[[U:.*]] = loom.add %[[A]], %[[T]] : tensor<4x4xf32>
// CHECK-NEXT:    return %[[U]], %[[B]], %[[S]]#2
// SMALL-LABEL: func.func @buckets
// SMALL:         loom.matmul
// SMALL-NEXT:    loom.all_reduce sum %{{.*}} : tensor<4x4xf32>
// SMALL-NEXT:    loom.matmul
// SMALL-NEXT:    loom.reduce_sum
// SMALL-NEXT:    loom.reshape
// SMALL-NEXT:    loom.concat {{.*}} -> tensor<20xf32>
// SMALL-NEXT:    loom.all_reduce sum %{{.*}} : tensor<20xf32>
// OFF-LABEL:   func.func @buckets
// OFF-COUNT-3:   loom.all_reduce
module attributes {loom.world_size = 2 : i64} {
func.func @buckets(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>) {
  %ga = loom.matmul %x, %y transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = loom.all_reduce sum %ga groups [[0, 1]] : tensor<4x4xf32>
  %gb = loom.matmul %y, %x transpose_lhs : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = loom.all_reduce sum %gb groups [[0, 1]] : tensor<4x4xf32>
  %gc = loom.reduce_sum %y [0] : tensor<4x4xf32> -> tensor<4xf32>
  %c = loom.all_reduce sum %gc groups [[0, 1]] : tensor<4xf32>
  %t = loom.exp %x : tensor<4x4xf32>
  %u = loom.add %a, %t : tensor<4x4xf32>
  return %u, %b, %c : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
}
}

// -----

// An all-reduce whose result is read before the next one (a tensor-
// parallel activation) stays alone, and so do all-reduces over other
// groups or with another reduction: each kind fills its own bucket.
// CHECK-LABEL: func.func @alone
// CHECK:         %[[H:.*]] = loom.all_reduce sum %{{.*}} groups {{\[}}[0, 1]] : tensor<4x4xf32>
// CHECK-NEXT:    loom.exp %[[H]]
// CHECK:         loom.all_reduce sum %{{.*}} groups {{\[}}[0], [1]] : tensor<4x4xf32>
// CHECK:         loom.all_reduce max %{{.*}} groups {{\[}}[0, 1]] : tensor<4x4xf32>
// CHECK:         loom.all_reduce sum %{{.*}} groups {{\[}}[0, 1]] : tensor<4x4xf32>
// CHECK-NOT:     loom.concat
module attributes {loom.world_size = 2 : i64} {
func.func @alone(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %h = loom.all_reduce sum %x groups [[0, 1]] : tensor<4x4xf32>
  %e = loom.exp %h : tensor<4x4xf32>
  %o = loom.all_reduce sum %e groups [[0], [1]] : tensor<4x4xf32>
  %m = loom.all_reduce max %e groups [[0, 1]] : tensor<4x4xf32>
  %s = loom.all_reduce sum %e groups [[0, 1]] : tensor<4x4xf32>
  return %o, %m, %s, %h : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
}
