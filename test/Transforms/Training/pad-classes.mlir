// RUN: loom-opt --loom-pad-classes --split-input-file %s | FileCheck %s
// RUN: loom-opt "--loom-pad-classes=multiple=64" --split-input-file %s | FileCheck %s --check-prefix=M64

// A bf16 LM head straight into the loss: the weight gets 6 zero columns,
// the logits 56 entries of which the loss counts the first 50.
// CHECK-LABEL: func.func @lm_head
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xbf16>, %[[W:.*]]: tensor<16x50xbf16>, %[[Y:.*]]: tensor<8xi64>)
// CHECK:         %[[Z:.*]] = loom.constant dense<0.000000e+00> : tensor<16x6xbf16>
// CHECK:         %[[P:.*]] = loom.concat %[[W]], %[[Z]] axis 1 : (tensor<16x50xbf16>, tensor<16x6xbf16>) -> tensor<16x56xbf16>
// CHECK:         %[[L:.*]] = loom.matmul %[[X]], %[[P]] : (tensor<8x16xbf16>, tensor<16x56xbf16>) -> tensor<8x56xbf16>
// CHECK:         %[[LOSS:.*]] = loom.cross_entropy %[[L]], %[[Y]] classes 50 : (tensor<8x56xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK:         return %[[LOSS]]
// M64-LABEL:   func.func @lm_head
// M64:           loom.concat %{{.*}}, %{{.*}} axis 1 : (tensor<16x50xbf16>, tensor<16x14xbf16>) -> tensor<16x64xbf16>
// M64:           loom.cross_entropy %{{.*}}, %{{.*}} classes 50 : (tensor<8x64xbf16>, tensor<8xi64>) -> tensor<f32>
func.func @lm_head(%x: tensor<8x16xbf16>, %w: tensor<16x50xbf16>, %y: tensor<8xi64>) -> tensor<f32> {
  %l = loom.matmul %x, %w : (tensor<8x16xbf16>, tensor<16x50xbf16>) -> tensor<8x50xbf16>
  %loss = loom.cross_entropy %l, %y : (tensor<8x50xbf16>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// What loom-mixed-precision and loom-attach-loss make of GPT's head: a
// [V, d] weight read transposed, a widening cast, and the logits also
// returned. The returned logits are a slice of the padded ones.
// CHECK-LABEL: func.func @transposed_weight_and_returned_logits
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x16xbf16>, %[[W:.*]]: tensor<50x16xbf16>, %[[Y:.*]]: tensor<2x4xi64>)
// CHECK:         %[[P:.*]] = loom.concat %[[W]], %{{.*}} axis 0 : (tensor<50x16xbf16>, tensor<6x16xbf16>) -> tensor<56x16xbf16>
// CHECK:         %[[L:.*]] = loom.matmul %[[X]], %[[P]] transpose_rhs : (tensor<2x4x16xbf16>, tensor<56x16xbf16>) -> tensor<2x4x56xbf16>
// CHECK:         %[[F:.*]] = loom.cast %[[L]] : tensor<2x4x56xbf16> -> tensor<2x4x56xf32>
// CHECK:         %[[S:.*]] = loom.slice %[[F]] [0:2, 0:4, 0:50] : tensor<2x4x56xf32> -> tensor<2x4x50xf32>
// CHECK:         %[[LOSS:.*]] = loom.cross_entropy %[[F]], %[[Y]] classes 50 : (tensor<2x4x56xf32>, tensor<2x4xi64>) -> tensor<f32>
// CHECK:         return %[[LOSS]], %[[S]]
func.func @transposed_weight_and_returned_logits(%x: tensor<2x4x16xbf16>, %w: tensor<50x16xbf16>, %y: tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x50xf32>) {
  %l = loom.matmul %x, %w transpose_rhs : (tensor<2x4x16xbf16>, tensor<50x16xbf16>) -> tensor<2x4x50xbf16>
  %f = loom.cast %l : tensor<2x4x50xbf16> -> tensor<2x4x50xf32>
  %loss = loom.cross_entropy %f, %y : (tensor<2x4x50xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss, %f : tensor<f32>, tensor<2x4x50xf32>
}

// -----

// A classifier with a bias (both the importer's bias_add and a broadcast
// add), flattened before the loss: biases get zeros, the reshape keeps the
// padded last dimension, and the matmul result's other use reads a slice.
// CHECK-LABEL: func.func @biases_and_reshape
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4x10xf32>, %[[B:.*]]: tensor<10xf32>, %[[C:.*]]: tensor<10xf32>, %[[Y:.*]]: tensor<6xi64>)
// CHECK:         %[[P:.*]] = loom.concat %[[W]], %{{.*}} axis 1 : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<4x16xf32>
// CHECK:         %[[L:.*]] = loom.matmul %[[X]], %[[P]] : (tensor<2x3x4xf32>, tensor<4x16xf32>) -> tensor<2x3x16xf32>
// CHECK:         %[[LS:.*]] = loom.slice %[[L]] [0:2, 0:3, 0:10] : tensor<2x3x16xf32> -> tensor<2x3x10xf32>
// CHECK:         %[[PB:.*]] = loom.concat %[[B]], %{{.*}} axis 0 : (tensor<10xf32>, tensor<6xf32>) -> tensor<16xf32>
// CHECK:         %[[BA:.*]] = loom.bias_add %[[L]], %[[PB]] : tensor<2x3x16xf32>, tensor<16xf32>
// CHECK:         %[[PC:.*]] = loom.concat %[[C]], %{{.*}} axis 0 : (tensor<10xf32>, tensor<6xf32>) -> tensor<16xf32>
// CHECK:         %[[A:.*]] = loom.add %[[PC]], %[[BA]] : (tensor<16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
// CHECK:         %[[R:.*]] = loom.reshape %[[A]] : tensor<2x3x16xf32> -> tensor<6x16xf32>
// CHECK:         %[[LOSS:.*]] = loom.cross_entropy %[[R]], %[[Y]] classes 10 : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK:         return %[[LOSS]], %[[LS]]
func.func @biases_and_reshape(%x: tensor<2x3x4xf32>, %w: tensor<4x10xf32>, %b: tensor<10xf32>, %c: tensor<10xf32>, %y: tensor<6xi64>) -> (tensor<f32>, tensor<2x3x10xf32>) {
  %l = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x10xf32>) -> tensor<2x3x10xf32>
  %ba = loom.bias_add %l, %b : tensor<2x3x10xf32>, tensor<10xf32>
  %a = loom.add %c, %ba : (tensor<10xf32>, tensor<2x3x10xf32>) -> tensor<2x3x10xf32>
  %r = loom.reshape %a : tensor<2x3x10xf32> -> tensor<6x10xf32>
  %loss = loom.cross_entropy %r, %y : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x3x10xf32>
}

// -----

// Left alone: classes already a multiple of 8; logits that are not a
// matmul's; an add of something other than a bias (padding it would need
// its padding too); a reshape that moves the classes; a loss already told
// its classes.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     loom.concat
// CHECK-NOT:     classes
// CHECK:         loom.cross_entropy %{{.*}} classes 40 :
// CHECK-NOT:     loom.concat
// CHECK:         return
func.func @left_alone(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>, %v: tensor<16x50xf32>, %t: tensor<8x50xf32>, %y: tensor<8xi64>, %p: tensor<8x50xf32>, %y4: tensor<4xi64>, %y40: tensor<8xi64>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %a = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %la = loom.cross_entropy %a, %y : (tensor<8x64xf32>, tensor<8xi64>) -> tensor<f32>
  %lb = loom.cross_entropy %p, %y : (tensor<8x50xf32>, tensor<8xi64>) -> tensor<f32>
  %c = loom.matmul %x, %v : (tensor<8x16xf32>, tensor<16x50xf32>) -> tensor<8x50xf32>
  %d = loom.add %c, %t : tensor<8x50xf32>
  %lc = loom.cross_entropy %d, %y : (tensor<8x50xf32>, tensor<8xi64>) -> tensor<f32>
  %e = loom.reshape %c : tensor<8x50xf32> -> tensor<4x100xf32>
  %ld = loom.cross_entropy %e, %y4 : (tensor<4x100xf32>, tensor<4xi64>) -> tensor<f32>
  %le = loom.cross_entropy %c, %y40 classes 40 : (tensor<8x50xf32>, tensor<8xi64>) -> tensor<f32>
  return %la, %lb, %lc, %ld, %le : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}
