// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-explain-sharding -o /dev/null

// loom-explain-sharding reads what loom-partition records: a module whose
// annotations nothing has propagated and partitioned is an error, not an
// empty report.
// expected-error @+1 {{'loom.mesh' op is a mesh of a module that is not partitioned (no loom.world_size); loom-explain-sharding explains a partitioned module (run loom-propagate-sharding and loom-partition first)}}
loom.mesh @mesh = <tp = 2>
loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %w = loom.param @w : tensor<8x4xf32>
  %y = loom.matmul %x, %w transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Shardings propagated but not partitioned: the first op that still
// carries one is named.
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
  func.func @f(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
    %w = loom.param @w : tensor<8x4xf32>
    // expected-error @+1 {{'loom.matmul' op still carries shardings to partition; loom-explain-sharding explains a partitioned module (run loom-partition first)}}
    %y = loom.matmul %x, %w transpose_rhs {loom.sharding = #loom.sharding<@mesh, [{}, {tp}]>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// A pinned value (loom.shard) is the partitioner's to move.
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{'loom.shard' op still carries shardings to partition}}
    %y = loom.shard %x to <@mesh, [{tp}, {}]> : tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// The link must move bytes.
// RUN: not loom-opt %s --split-input-file '--loom-explain-sharding=link-gbps=0' -o /dev/null 2>&1 | FileCheck %s --check-prefix=LINK
// LINK: error: loom-explain-sharding needs link-gbps > 0 and link-latency-us >= 0, got 0 and 5
func.func @g(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
