// Every plan op round-trips through its custom assembly and the generic form.
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// CHECK:       loom.parameter @w
loom.parameter @w : tensor<16x32xf32>

// CHECK-LABEL: func.func @step() attributes {plan.arena_size = 2560 : i64}
// CHECK:         %[[X:.*]] = plan.input "x" offset 0 : memref<8x16xf32>
// CHECK:         %[[W:.*]] = plan.weight @w : memref<16x32xf32>
// CHECK:         %[[H:.*]] = plan.alloc offset 512 : memref<8x32xf32>
// CHECK:         plan.kernel "matmul" ins(%[[X]], %[[W]] : memref<8x16xf32>, memref<16x32xf32>) outs(%[[H]] : memref<8x32xf32>) attrs {transpose_lhs = 0 : i64, transpose_rhs = 0 : i64}
// CHECK:         %[[Y:.*]] = plan.alloc offset 1536 : memref<8x32xf32>
// CHECK:         plan.kernel "elementwise" ins(%[[H]] : memref<8x32xf32>) outs(%[[Y]] : memref<8x32xf32>) {
// CHECK:           loom.gelu
// CHECK:           loom.yield
// CHECK:         %[[V:.*]] = plan.view %[[Y]] : memref<8x32xf32> to memref<256xf32>
// CHECK:         plan.output "y", %[[V]] : memref<256xf32>
func.func @step() attributes {plan.arena_size = 2560 : i64} {
  %x = plan.input "x" offset 0 : memref<8x16xf32>
  %w = plan.weight @w : memref<16x32xf32>
  %h = plan.alloc offset 512 : memref<8x32xf32>
  plan.kernel "matmul" ins(%x, %w : memref<8x16xf32>, memref<16x32xf32>) outs(%h : memref<8x32xf32>) attrs {transpose_lhs = 0 : i64, transpose_rhs = 0 : i64}
  %y = plan.alloc offset 1536 : memref<8x32xf32>
  plan.kernel "elementwise" ins(%h : memref<8x32xf32>) outs(%y : memref<8x32xf32>) {
  ^bb0(%a: tensor<8x32xf32>):
    %g = loom.gelu %a : tensor<8x32xf32>
    loom.yield %g : tensor<8x32xf32>
  }
  %v = plan.view %y : memref<8x32xf32> to memref<256xf32>
  plan.output "y", %v : memref<256xf32>
  return
}

// A data input that holds rows of the step's global batch, one first row per
// rank of the function.
// CHECK-LABEL: func.func @rows
// CHECK:         plan.input "x" offset 0 rows [0, 4] : memref<4x16xf32>
// CHECK:         plan.input "y" rows [2] : memref<4xi64>
func.func @rows() attributes {plan.arena_size = 512 : i64} {
  %x = plan.input "x" offset 0 rows [0, 4] : memref<4x16xf32>
  %y = plan.input "y" rows [2] : memref<4xi64>
  return
}
