// The bundled example stays valid: it verifies, its causal mask folds to a
// constant, and every op has a consistent factor rule.
// RUN: loom-opt %loom_src/examples/gpt-block/gpt_block.mlir --canonicalize | FileCheck %s
// RUN: loom-opt %loom_src/examples/gpt-block/gpt_block.mlir --loom-test-print-factors -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULES

// CHECK-LABEL: func @train_loss
// CHECK: loom.constant dense<"0x0100030007000F001F003F007F00FF00FF01FF03FF07FF0FFF1FFF3FFF7FFFFF"> : tensor<16x16xi1>
// CHECK-NOT: loom.compare
// CHECK: loom.cross_entropy

// RULES: loom.gather: iterators = [parallel, parallel, contracting, parallel]
// RULES: loom.matmul: iterators = [parallel, parallel, parallel, contracting], sizes = [2, 16, 192, 64]
// RULES: loom.cross_entropy: iterators = [reduction_sum, reduction_sum, need_replication]
