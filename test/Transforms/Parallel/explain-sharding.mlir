// RUN: loom-opt %s --split-input-file --loom-propagate-sharding --loom-partition --loom-explain-sharding -o /dev/null | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-propagate-sharding --loom-partition '--loom-explain-sharding=link-gbps=0.001 link-latency-us=0' -o /dev/null | FileCheck %s --check-prefix=SLOW
// RUN: loom-opt %s --split-input-file --loom-propagate-sharding --loom-partition '--loom-explain-sharding=report-file=%t.txt' -o /dev/null | FileCheck %s --check-prefix=QUIET --allow-empty
// RUN: FileCheck %s --check-prefix=FILE < %t.txt

// With report-file the report goes to the file (each module's replaces the
// one before: the file holds the last module's), and nothing to stdout.
// QUIET-NOT: loom-explain-sharding
// FILE: loom-explain-sharding: @single on 1 rank

// Megatron's MLP on tp = 2, its hidden activation also returned: the
// row-split second GEMM's partial sum is all-reduced before its bias
// (an all_reduce of 2x4 f32, 32 bytes: each rank sends 2(n-1)/n of it,
// 32 bytes, in 2 latency steps), and the column-split hidden activation
// is gathered whole where it is returned (an all_gather into 2x8 f32, 64
// bytes: each rank sends (n-1)/n of it, 32 bytes, in 1 step). The ops
// name their ONNX-like nodes, which the report quotes.
// CHECK-LABEL: loom-explain-sharding: @mlp on 2 ranks; link 100 GB/s, 5 us per step
// CHECK-NEXT:    #1 all_reduce sum over 2 ranks at '/fc2/Add'
// CHECK-NEXT:       value: tensor<2x4xf32> [{}, {}] partial<sum> {tp} -> [{}, {}]
// CHECK-NEXT:       origin: summed over a split from @w1 annotated [{tp}, {}] (priority 0), via loom.relu at '/act/Relu'
// CHECK-NEXT:       sends 32 bytes per rank (2(n-1)/n of 32) in 2 steps: 10.00 us
// CHECK-NEXT:    #2 all_gather along dim 1 over 2 ranks at '/output'
// CHECK-NEXT:       value: tensor<2x8xf32> [{}, {tp}] -> [{}, {}]
// CHECK-NEXT:       origin: @w1 annotated [{tp}, {}] (priority 0), via loom.relu at '/act/Relu'
// CHECK-NEXT:       sends 32 bytes per rank ((n-1)/n of 64) in 1 step: 5.00 us
// CHECK-NEXT:    totals for @mlp (one step):
// CHECK-NEXT:       all_reduce       1 op            32 bytes per rank        10.00 us
// CHECK-NEXT:       all_gather       1 op            32 bytes per rank         5.00 us
// CHECK-NEXT:       all kinds        2 ops           64 bytes per rank        15.00 us
// A slow link without latency: the times are the bytes at 10^6 bytes/s.
// SLOW-LABEL: loom-explain-sharding: @mlp on 2 ranks; link 0.001 GB/s, 0 us per step
// SLOW:         sends 32 bytes per rank (2(n-1)/n of 32) in 2 steps: 32.00 us
// SLOW:         sends 32 bytes per rank ((n-1)/n of 64) in 1 step: 32.00 us
// SLOW:         all kinds        2 ops           64 bytes per rank        64.00 us
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>
  loom.parameter @b1 trainable : tensor<8xf32>
  loom.parameter @w2 trainable : tensor<4x8xf32>
  loom.parameter @b2 trainable : tensor<4xf32>
  func.func @mlp(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
    %w1 = loom.param @w1 : tensor<8x4xf32>
    %b1 = loom.param @b1 : tensor<8xf32>
    %w2 = loom.param @w2 : tensor<4x8xf32>
    %b2 = loom.param @b2 : tensor<4xf32>
    %h0 = loom.matmul %x, %w1 transpose_rhs : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32> loc("/fc1/MatMul")
    %h1 = loom.bias_add %h0, %b1 : tensor<2x8xf32>, tensor<8xf32> loc("/fc1/Add")
    %h = loom.relu %h1 : tensor<2x8xf32> loc("/act/Relu")
    %y0 = loom.matmul %h, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32> loc("/fc2/MatMul")
    %y = loom.bias_add %y0, %b2 : tensor<2x4xf32>, tensor<4xf32> loc("/fc2/Add")
    return %y, %h : tensor<2x4xf32>, tensor<2x8xf32> loc("/output")
  }
}

// -----

// A module without a mesh runs on one rank and has nothing to explain.
// CHECK-LABEL: loom-explain-sharding: @single on 1 rank; link 100 GB/s, 5 us per step
// CHECK-NEXT:    no collectives
// CHECK-NOT:   totals
func.func @single(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = loom.relu %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
