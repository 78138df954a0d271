// RUN: loom-opt --loom-pack-attention --split-input-file %s | FileCheck %s

// The GPT pattern: the QKV projection split into q, k, v for the forward,
// the three gradients concatenated for the backward. Both copies go: the
// attention reads the projection reshaped to [B, S, 3, H, D], and its
// gradient is the projection's gradient.
// CHECK-LABEL: func.func @forward_and_backward
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x16x96xbf16>, %[[M:[^:]*]]: tensor<1x1x16x16xi1>, %[[D:[^:]*]]: tensor<2x16x2x16xbf16>)
// CHECK-NOT: loom.split
// CHECK: %[[QKV:.*]] = loom.reshape %[[X]] : tensor<2x16x96xbf16> -> tensor<2x16x3x2x16xbf16>
// CHECK: %[[O:.*]], %[[L:.*]] = loom.packed_attention %[[QKV]] mask %[[M]] scale 2.500000e-01 : (tensor<2x16x3x2x16xbf16>, tensor<1x1x16x16xi1>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2xf32>)
// CHECK: %[[G:.*]] = loom.packed_attention_grad %[[QKV]], %[[D]], %[[L]], %[[O]] mask %[[M]] scale 2.500000e-01 : {{.*}} -> tensor<2x16x3x2x16xbf16>
// CHECK: %[[DX:.*]] = loom.reshape %[[G]] : tensor<2x16x3x2x16xbf16> -> tensor<2x16x96xbf16>
// CHECK-NOT: loom.concat
// CHECK: return %[[O]], %[[DX]]
func.func @forward_and_backward(%x: tensor<2x16x96xbf16>, %m: tensor<1x1x16x16xi1>, %d: tensor<2x16x2x16xbf16>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x96xbf16>) {
  %p:3 = loom.split %x axis 2 : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>
  %q = loom.reshape %p#0 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %k = loom.reshape %p#1 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %v = loom.reshape %p#2 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %o, %l = loom.attention %q, %k, %v mask %m scale 2.500000e-01 seq_major : (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<1x1x16x16xi1>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %d, %l, %o mask %m scale 2.500000e-01 seq_major : (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2xf32>, tensor<2x16x2x16xbf16>, tensor<1x1x16x16xi1>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>)
  %rq = loom.reshape %dq : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %rk = loom.reshape %dk : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %rv = loom.reshape %dv : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %dx = loom.concat %rq, %rk, %rv axis 2 : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> tensor<2x16x96xbf16>
  return %o, %dx : tensor<2x16x2x16xbf16>, tensor<2x16x96xbf16>
}

// -----

// A gradient that is not (only) concatenated stays as it is, on the
// split's parts; the forward is packed all the same.
// CHECK-LABEL: func.func @gradient_used_elsewhere
// CHECK: %[[P:.*]]:3 = loom.split
// CHECK: loom.packed_attention
// CHECK: loom.attention_grad
// CHECK: loom.concat
func.func @gradient_used_elsewhere(%x: tensor<2x16x96xf32>, %d: tensor<2x16x2x16xf32>) -> (tensor<2x16x96xf32>, tensor<2x16x2x16xf32>) {
  %p:3 = loom.split %x axis 2 : tensor<2x16x96xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %q = loom.reshape %p#0 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %k = loom.reshape %p#1 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %v = loom.reshape %p#2 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %o, %l = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %d, %l, %o scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>)
  %rq = loom.reshape %dq : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %rk = loom.reshape %dk : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %rv = loom.reshape %dv : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %dx = loom.concat %rq, %rk, %rv axis 2 : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x96xf32>
  return %dx, %dk : tensor<2x16x96xf32>, tensor<2x16x2x16xf32>
}

// -----

// Gradients concatenated in another order are not the projection's
// gradient: that attention_grad stays.
// CHECK-LABEL: func.func @concat_in_another_order
// CHECK: loom.packed_attention
// CHECK: loom.attention_grad
// CHECK: loom.concat
func.func @concat_in_another_order(%x: tensor<2x16x96xf32>, %d: tensor<2x16x2x16xf32>) -> tensor<2x16x96xf32> {
  %p:3 = loom.split %x axis 2 : tensor<2x16x96xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %q = loom.reshape %p#0 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %k = loom.reshape %p#1 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %v = loom.reshape %p#2 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %o, %l = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %d, %l, %o scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>)
  %rq = loom.reshape %dq : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %rk = loom.reshape %dk : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %rv = loom.reshape %dv : tensor<2x16x2x16xf32> -> tensor<2x16x32xf32>
  %dx = loom.concat %rk, %rq, %rv axis 2 : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x96xf32>
  return %dx : tensor<2x16x96xf32>
}

// -----

// q, k and v from the parts in another order are not a packed operand.
// CHECK-LABEL: func.func @parts_in_another_order
// CHECK-NOT: loom.packed_attention
// CHECK: loom.split
// CHECK: loom.attention
func.func @parts_in_another_order(%x: tensor<2x16x96xf32>) -> tensor<2x16x2x16xf32> {
  %p:3 = loom.split %x axis 2 : tensor<2x16x96xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %q = loom.reshape %p#1 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %k = loom.reshape %p#0 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %v = loom.reshape %p#2 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %o, %l = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2xf32>)
  return %o : tensor<2x16x2x16xf32>
}

// -----

// A split along another axis, and head-major operands (whose rows are not
// the projection's), are left alone.
// CHECK-LABEL: func.func @other_layouts
// CHECK-NOT: loom.packed_attention
// CHECK: loom.attention
// CHECK: loom.attention
func.func @other_layouts(%x: tensor<6x16x32xf32>, %y: tensor<2x16x96xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x2x16x16xf32>) {
  %p:3 = loom.split %x axis 0 : tensor<6x16x32xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %q = loom.reshape %p#0 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %k = loom.reshape %p#1 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %v = loom.reshape %p#2 : tensor<2x16x32xf32> -> tensor<2x16x2x16xf32>
  %o, %l = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>) -> (tensor<2x16x2x16xf32>, tensor<2x16x2xf32>)
  %s:3 = loom.split %y axis 2 : tensor<2x16x96xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
  %hq = loom.reshape %s#0 : tensor<2x16x32xf32> -> tensor<2x2x16x16xf32>
  %hk = loom.reshape %s#1 : tensor<2x16x32xf32> -> tensor<2x2x16x16xf32>
  %hv = loom.reshape %s#2 : tensor<2x16x32xf32> -> tensor<2x2x16x16xf32>
  %ho, %hl = loom.attention %hq, %hk, %hv scale 2.500000e-01 : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> (tensor<2x2x16x16xf32>, tensor<2x2x16xf32>)
  return %o, %ho : tensor<2x16x2x16xf32>, tensor<2x2x16x16xf32>
}

// -----

// Unequal parts (a grouped-query projection: 2 query heads, 1 key/value
// head) are not one [B, S, 3, H, D] tensor.
// CHECK-LABEL: func.func @unequal_parts
// CHECK-NOT: loom.packed_attention
// CHECK: loom.attention
func.func @unequal_parts(%x: tensor<2x16x64xf32>) -> tensor<2x16x1x32xf32> {
  %p:3 = loom.split %x axis 2 : tensor<2x16x64xf32> -> tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x32xf32>
  %q = loom.reshape %p#0 : tensor<2x16x16xf32> -> tensor<2x16x1x16xf32>
  %k = loom.reshape %p#1 : tensor<2x16x16xf32> -> tensor<2x16x1x16xf32>
  %v = loom.reshape %p#2 : tensor<2x16x32xf32> -> tensor<2x16x1x32xf32>
  %o, %l = loom.attention %q, %k, %v scale 2.500000e-01 seq_major : (tensor<2x16x1x16xf32>, tensor<2x16x1x16xf32>, tensor<2x16x1x32xf32>) -> (tensor<2x16x1x32xf32>, tensor<2x16x1xf32>)
  return %o : tensor<2x16x1x32xf32>
}
