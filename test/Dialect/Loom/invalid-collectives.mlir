// Every verifier error of the communication ops and of the rank attributes.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

module attributes {loom.world_size = 4 : i64} {
  func.func @unequal_groups(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{groups must all have the same size, got 3 and 1}}
    %0 = loom.all_reduce sum %x groups [[0, 1, 2], [3]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 4 : i64} {
  func.func @unsorted(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{groups must list ranks in increasing order}}
    %0 = loom.all_reduce sum %x groups [[1, 0], [2, 3]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 4 : i64} {
  func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{puts rank 1 in two groups}}
    %0 = loom.all_reduce sum %x groups [[0, 1], [1, 2]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @outside_world(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{names rank 2, outside the world of 2 rank(s) (the module's loom.world_size)}}
    %0 = loom.all_reduce sum %x groups [[0, 1, 2]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 4 : i64} {
  func.func @uncovered(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{runs on rank 2, which is in none of its groups}}
    %0 = loom.all_reduce sum %x groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----


func.func @no_groups(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs at least one group}}
  %0 = loom.all_reduce sum %x groups [] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @avg_int(%x: tensor<4xi32>) -> tensor<4xi32> {
    // expected-error @+1 {{averages only floats}}
    %0 = loom.all_reduce avg %x groups [[0, 1]] : tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @gather_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{result must be 'tensor<8x8xf32>' for groups of 2, got 'tensor<4x8xf32>'}}
    %0 = loom.all_gather %x axis 0 groups [[0, 1]] : tensor<4x8xf32> -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @gather_axis(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
    // expected-error @+1 {{axis 2 is out of range for rank 2}}
    %0 = loom.all_gather %x axis 2 groups [[0, 1]] : tensor<4x8xf32> -> tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @gather_type(%x: tensor<4x8xf32>) -> tensor<8x8xf64> {
    // expected-error @+1 {{result element type 'f64' differs from the input's 'f32'}}
    %0 = loom.all_gather %x axis 0 groups [[0, 1]] : tensor<4x8xf32> -> tensor<8x8xf64>
    return %0 : tensor<8x8xf64>
  }
}

// -----

module attributes {loom.world_size = 4 : i64} {
  func.func @scatter_uneven(%x: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{dim 0 (6) does not split evenly over groups of 4}}
    %0 = loom.reduce_scatter sum %x axis 0 groups [[0, 1, 2, 3]] : tensor<6xf32> -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @root(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{root 2 is not a group rank (groups of 2)}}
    %0 = loom.collective_broadcast %x root 2 groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @negative_root(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{root -1 is not a group rank (groups of 2)}}
    %0 = loom.collective_broadcast %x root -1 groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 4 : i64} {
  func.func @all_to_all(%x: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{dim 0 must split evenly over groups of 4}}
    %0 = loom.all_to_all %x groups [[0, 1, 2, 3]] : tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @self(%x: tensor<4xf32>) {
    // expected-error @+1 {{pairs must be [source, target] of two different ranks}}
    loom.send %x to [[0, 0], [1, 0]] tag 0 : tensor<4xf32>
    return
  }
}

// -----

module attributes {loom.world_size = 3 : i64} {
  func.func @sends_twice(%x: tensor<4xf32>) {
    // expected-error @+1 {{rank 0 sends twice}}
    loom.send %x to [[0, 1], [0, 2]] tag 0 : tensor<4xf32>
    return
  }
}

// -----

module attributes {loom.world_size = 3 : i64} {
  func.func @receives_twice() -> tensor<4xf32> {
    // expected-error @+1 {{rank 2 receives twice}}
    %0 = loom.recv from [[0, 2], [1, 2]] tag 0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @not_a_source(%x: tensor<4xf32>) {
    // expected-error @+1 {{runs on rank 1, which is the source of none of its pairs}}
    loom.send %x to [[0, 1]] tag 0 : tensor<4xf32>
    return
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @tag(%x: tensor<4xf32>) attributes {loom.ranks = array<i64: 0>} {
    // expected-error @+1 {{tag -1 must be in [0, 2^31)}}
    loom.send %x to [[0, 1]] tag -1 : tensor<4xf32>
    return
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @pair_size() -> tensor<4xf32> attributes {loom.ranks = array<i64: 1>} {
    // expected-error @+1 {{pairs must be [source, target] of two different ranks}}
    %0 = loom.recv from [[0, 1, 1]] tag 0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{'loom.world_size' must be a positive integer on a module}}
module attributes {loom.world_size = 0 : i64} {
}

// -----

module attributes {loom.world_size = 2 : i64} {
  // expected-error @+1 {{'loom.ranks' must list ranks in [0, 2) (the module's loom.world_size) in increasing order}}
  func.func @ranks() attributes {loom.ranks = array<i64: 1, 2>} {
    return
  }
}

// -----

// expected-error @+1 {{'loom.ranks' must be a non-empty array<i64> of world ranks on a function}}
func.func @ranks_type() attributes {loom.ranks = [0, 1]} {
  return
}
