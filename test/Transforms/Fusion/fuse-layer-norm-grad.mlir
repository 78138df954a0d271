// RUN: loom-opt --loom-fuse-layer-norm-grad --split-input-file %s | FileCheck %s

// The mixed-precision pre-norm pattern: the layer norm's input gradient plus
// the residual branch's, and the bf16 copy of the sum for the GEMMs below.
// One fused op takes all three; the sum keeps its other uses.
// CHECK-LABEL: func.func @residual_and_narrow_copy
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[DY:[^:]*]]: tensor<4x8xbf16>, %[[R:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[S:.*]], %[[DG:.*]], %[[DB:.*]], %[[C:.*]] = loom.fused_layer_norm_grad %[[X]], %[[G]], %[[DY]] add %[[R]] axis 1 epsilon 9.9999999999999995E-7 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>)
// CHECK-NEXT: return %[[S]], %[[C]], %[[DG]], %[[DB]]
func.func @residual_and_narrow_copy(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xbf16>, %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 epsilon 1.0e-6 : tensor<4x8xf32>, tensor<8xf32> dout tensor<4x8xbf16>
  %s = loom.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = loom.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %s, %c, %dg, %db : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The addend on either side, no cast (f64: no bf16 copy to make). A chain
// of two layers: the second addend is the first fused op's sum.
// CHECK-LABEL: func.func @chain_without_cast
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf64>, %[[G:[^:]*]]: tensor<8xf64>, %[[DY:[^:]*]]: tensor<4x8xf64>, %[[R:[^:]*]]: tensor<4x8xf64>)
// CHECK-NEXT: %[[S1:.*]], %{{.*}}, %{{.*}} = loom.fused_layer_norm_grad %[[X]], %[[G]], %[[DY]] add %[[R]] axis 1 : {{.*}} -> (tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>)
// CHECK-NEXT: %[[S2:.*]], %{{.*}}, %{{.*}} = loom.fused_layer_norm_grad %[[X]], %[[G]], %[[S1]] add %[[S1]] axis 1 : {{.*}} -> (tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>)
// CHECK-NOT: loom.add
// CHECK: return %[[S2]]
func.func @chain_without_cast(%x: tensor<4x8xf64>, %g: tensor<8xf64>, %dy: tensor<4x8xf64>, %r: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf64>, tensor<8xf64>
  %s = loom.add %dx, %r : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %dx2, %dg2, %db2 = loom.layer_norm_grad %x, %g, %s axis 1 : tensor<4x8xf64>, tensor<8xf64>
  %s2 = loom.add %s, %dx2 : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  return %s2 : tensor<4x8xf64>
}

// -----

// An addend computed after the layer norm's backward: the fused op stands
// at the add, since dscale and dbias are only used after it.
// CHECK-LABEL: func.func @late_addend
// CHECK: %[[R:.*]] = loom.mul
// CHECK-NEXT: %[[S:.*]], %[[DG:.*]], %{{.*}} = loom.fused_layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} add %[[R]] axis 1
// CHECK-NEXT: return %[[S]], %[[DG]]
func.func @late_addend(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %r = loom.mul %dy, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = loom.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %dg : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Left alone: the addend is defined after dscale is used, so no position
// has every operand before it and every use after it.
// CHECK-LABEL: func.func @late_addend_early_use
// CHECK: loom.layer_norm_grad
// CHECK: loom.add
// CHECK-NOT: loom.fused_layer_norm_grad
func.func @late_addend_early_use(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %u = loom.mul %dg, %dg : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = loom.mul %dy, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = loom.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %u : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Left alone: dinput has a use besides the add (the kernel no longer
// stores it alone), and an add that broadcasts its other operand.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: loom.fused_layer_norm_grad
// CHECK: return
func.func @not_fused(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %r: tensor<4x8xf32>, %v: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %dy axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %s = loom.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %dx2, %dg2, %db2 = loom.layer_norm_grad %x, %g, %r axis 1 : tensor<4x8xf32>, tensor<8xf32>
  %b = loom.add %v, %dx2 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %dx, %b : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
