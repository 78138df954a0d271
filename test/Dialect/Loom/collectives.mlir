// The communication ops round-trip through their custom assembly and the
// generic form; a module says how many ranks there are, a function which of
// them run it.
// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s
// RUN: loom-opt %s --split-input-file --mlir-print-op-generic | loom-opt --split-input-file | FileCheck %s

// CHECK: module attributes {loom.world_size = 4 : i64}
module attributes {loom.world_size = 4 : i64} {
  // CHECK-LABEL: func.func @spmd
  func.func @spmd(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>) {
    // CHECK: loom.all_reduce sum %{{.*}} groups {{\[}}[0, 1, 2, 3]] : tensor<4x8xf32>
    %0 = loom.all_reduce sum %x groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // CHECK: loom.all_gather %{{.*}} axis 0 groups {{\[}}[0, 1], [2, 3]] : tensor<4x8xf32> -> tensor<8x8xf32>
    %1 = loom.all_gather %x axis 0 groups [[0, 1], [2, 3]] : tensor<4x8xf32> -> tensor<8x8xf32>
    // CHECK: loom.reduce_scatter avg %{{.*}} axis 0 groups {{\[}}[0, 2], [1, 3]] : tensor<4x8xf32> -> tensor<2x8xf32>
    %2 = loom.reduce_scatter avg %x axis 0 groups [[0, 2], [1, 3]] : tensor<4x8xf32> -> tensor<2x8xf32>
    // CHECK: loom.collective_broadcast %{{.*}} root 3 groups {{\[}}[0, 1, 2, 3]] : tensor<4x8xf32>
    %3 = loom.collective_broadcast %x root 3 groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // CHECK: loom.all_to_all %{{.*}} groups {{\[}}[0, 1, 2, 3]] : tensor<4x8xf32>
    %4 = loom.all_to_all %x groups [[0, 1, 2, 3]] : tensor<4x8xf32>
    // CHECK: loom.send %{{.*}} to {{\[}}[0, 1], [1, 2], [2, 3], [3, 0]] tag 5 : tensor<4x8xf32>
    loom.send %x to [[0, 1], [1, 2], [2, 3], [3, 0]] tag 5 : tensor<4x8xf32>
    // CHECK: loom.recv from {{\[}}[0, 1], [1, 2], [2, 3], [3, 0]] tag 5 : tensor<4x8xf32>
    %5 = loom.recv from [[0, 1], [1, 2], [2, 3], [3, 0]] tag 5 : tensor<4x8xf32>
    // CHECK: loom.all_gather %{{.*}} axis 1 groups {{\[}}[0, 1], [2, 3]] : tensor<4x8xf32> -> tensor<4x16xf32>
    %6 = loom.all_gather %x axis 1 groups [[0, 1], [2, 3]] : tensor<4x8xf32> -> tensor<4x16xf32>
    return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>
  }
}

// -----

// Two pipeline stages: rank 0 sends, rank 1 receives.
// CHECK: module attributes {loom.world_size = 2 : i64}
module attributes {loom.world_size = 2 : i64} {
  // CHECK: func.func @stage0({{.*}}) attributes {loom.ranks = array<i64: 0>}
  func.func @stage0(%x: tensor<8xf32>) attributes {loom.ranks = array<i64: 0>} {
    loom.send %x to [[0, 1]] tag 0 : tensor<8xf32>
    return
  }
  // CHECK: func.func @stage1() -> tensor<8xi64> attributes {loom.ranks = array<i64: 1>}
  func.func @stage1() -> tensor<8xi64> attributes {loom.ranks = array<i64: 1>} {
    // CHECK: loom.recv from {{\[}}[0, 1]] tag 0 : tensor<8xi64>
    %y = loom.recv from [[0, 1]] tag 0 : tensor<8xi64>
    return %y : tensor<8xi64>
  }
}
