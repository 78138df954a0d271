// RUN: loom-opt --loom-freeze-parameters='freeze=^emb' %s | FileCheck %s
// RUN: loom-opt --loom-freeze-parameters %s | FileCheck %s --check-prefix=NONE
// RUN: loom-opt --split-input-file --verify-diagnostics --loom-freeze-parameters='freeze=.' %S/Inputs/freeze-parameters-errors.mlir
// RUN: loom-opt --verify-diagnostics --loom-freeze-parameters='freeze=(' %S/Inputs/freeze-parameters-regex.mlir

// The pattern is searched anywhere in the name (std::regex_search).
// CHECK: loom.parameter @emb.weight : tensor<8x4xf32>
// CHECK: loom.parameter @fc.emb trainable : tensor<4x4xf32>
// NONE: loom.parameter @emb.weight trainable : tensor<8x4xf32>
// NONE: loom.parameter @fc.emb trainable : tensor<4x4xf32>
loom.parameter @emb.weight trainable : tensor<8x4xf32>
loom.parameter @fc.emb trainable : tensor<4x4xf32>
