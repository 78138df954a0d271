// RUN: loom-opt --loom-select-kernels --split-input-file --verify-diagnostics %s | FileCheck %s

// Op attributes become kernel attributes: unit flags as 0/1, enums as
// words, arrays as i64 arrays.
// CHECK-LABEL: func.func @kernels
func.func @kernels(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %g: tensor<32xf32>,
                   %ids: tensor<8xi64>, %table: tensor<64x32xf32>) -> (tensor<8x32xf32>, tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<4x32xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  // CHECK: loom.matmul {{.*}} transpose_rhs {plan.kernel = "matmul", plan.kernel_attrs = {transpose_lhs = 0 : i64, transpose_rhs = 1 : i64}}
  %h = loom.matmul %x, %w transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  // A fused matmul is the matmul kernel with a bias input and an activation.
  // CHECK: loom.fused_matmul {{.*}} activation gelu_tanh {plan.kernel = "matmul", plan.kernel_attrs = {activation = "gelu_tanh", transpose_lhs = 0 : i64, transpose_rhs = 1 : i64}}
  %fm = loom.fused_matmul %x, %w bias %g transpose_rhs activation gelu_tanh : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  // CHECK: loom.fused_matmul {{.*}} bias {{.*}} {plan.kernel = "matmul", plan.kernel_attrs = {transpose_lhs = 0 : i64, transpose_rhs = 1 : i64}}
  %fb = loom.fused_matmul %x, %w bias %g transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  // An addend (a residual) is the last input, flagged by accumulate.
  // CHECK: loom.fused_matmul {{.*}} add {{.*}} {plan.kernel = "matmul", plan.kernel_attrs = {accumulate = 1 : i64, transpose_lhs = 0 : i64, transpose_rhs = 1 : i64}}
  %fr = loom.fused_matmul %x, %w bias %g add %h transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  // A weight gradient with its bias gradient is the matmul kernel with a
  // second output, the sum of the operand `bias_grad` names.
  // CHECK: loom.matmul_bias_grad {{.*}} sum rhs {plan.kernel = "matmul", plan.kernel_attrs = {bias_grad = "rhs", transpose_lhs = 1 : i64, transpose_rhs = 0 : i64}}
  %wb:2 = loom.matmul_bias_grad %x, %h sum rhs : (tensor<8x16xf32>, tensor<8x32xf32>) -> (tensor<16x32xf32>, tensor<32xf32>)
  // An input gradient through a tanh GELU is the matmul kernel with the
  // GELU's input as its third input.
  // CHECK: loom.matmul_gelu_grad {{.*}} transpose_rhs {plan.kernel = "matmul", plan.kernel_attrs = {activation_grad = "gelu_tanh", transpose_lhs = 0 : i64, transpose_rhs = 1 : i64}}
  %gg = loom.matmul_gelu_grad %x, %w, %h transpose_rhs : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  // CHECK: loom.cross_entropy {{.*}} {plan.kernel = "cross_entropy", plan.kernel_attrs = {ignore_index = -100 : i64, reduction = "mean"}}
  %l = loom.cross_entropy %h, %ids ignore_index -100 : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy_grad {{.*}} {plan.kernel = "cross_entropy_backward", plan.kernel_attrs = {ignore_index = -100 : i64}}
  %dl = loom.cross_entropy_grad %h, %ids, %l ignore_index -100 : (tensor<8x32xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x32xbf16>
  // CHECK: loom.cross_entropy_grad {{.*}} {plan.kernel = "cross_entropy_backward", plan.kernel_attrs = {}}
  %dl2 = loom.cross_entropy_grad %h, %ids, %l : (tensor<8x32xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x32xf32>
  // CHECK: loom.cross_entropy {{.*}} {plan.kernel = "cross_entropy", plan.kernel_attrs = {classes = 30 : i64, reduction = "sum"}}
  %lp = loom.cross_entropy %h, %ids reduction sum classes 30 : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy_grad {{.*}} {plan.kernel = "cross_entropy_backward", plan.kernel_attrs = {classes = 30 : i64}}
  %dlp = loom.cross_entropy_grad %h, %ids, %lp classes 30 : (tensor<8x32xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x32xf32>
  // A loss with its gradient is the cross_entropy kernel with the scale as a
  // third input and the gradient as a second output.
  // CHECK: loom.cross_entropy_with_grad {{.*}} {plan.kernel = "cross_entropy", plan.kernel_attrs = {classes = 30 : i64, ignore_index = -100 : i64, reduction = "sum"}}
  %lg:2 = loom.cross_entropy_with_grad %h, %ids, %l reduction sum ignore_index -100 classes 30 : (tensor<8x32xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x32xbf16>)
  // CHECK: loom.layer_norm {{.*}} {plan.kernel = "layer_norm", plan.kernel_attrs = {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64}}
  %n = loom.layer_norm %h, %g, %g axis 1 epsilon 1.0e-6 : tensor<8x32xf32>, tensor<32xf32>
  // CHECK: loom.layer_norm_grad {{.*}} {plan.kernel = "layer_norm_backward", plan.kernel_attrs = {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64}}
  %ng:3 = loom.layer_norm_grad %h, %g, %h axis 1 epsilon 1.0e-6 : tensor<8x32xf32>, tensor<32xf32>
  // The fused form is the same kernel with a fourth input (and output).
  // CHECK: loom.fused_layer_norm_grad {{.*}} {plan.kernel = "layer_norm_backward", plan.kernel_attrs = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}}
  %fg:4 = loom.fused_layer_norm_grad %h, %g, %h add %h axis 1 : (tensor<8x32xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<8x32xbf16>)
  // CHECK: loom.transpose {{.*}} {plan.kernel = "transpose", plan.kernel_attrs = {permutation = array<i64: 1, 0>}}
  %t = loom.transpose %h [1, 0] : tensor<8x32xf32> -> tensor<32x8xf32>
  // CHECK: loom.reduce_max {{.*}} {plan.kernel = "reduce_max", plan.kernel_attrs = {axes = array<i64: 1>}}
  %m = loom.reduce_max %h [1] : tensor<8x32xf32> -> tensor<8xf32>
  // CHECK: loom.softmax {{.*}} {plan.kernel = "softmax", plan.kernel_attrs = {axis = 1 : i64}}
  %s = loom.softmax %h axis 1 : tensor<8x32xf32>
  // CHECK: loom.slice {{.*}} {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 1, 0>, strides = array<i64: 2, 1>}}
  %sl = loom.slice %h [1:8:2, 0:32] : tensor<8x32xf32> -> tensor<4x32xf32>
  // CHECK: loom.concat {{.*}} {plan.kernel = "concat", plan.kernel_attrs = {axis = 0 : i64}}
  %c = loom.concat %h, %h axis 0 : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  // CHECK: loom.gather {{.*}} {plan.kernel = "gather", plan.kernel_attrs = {axis = 0 : i64}}
  %e = loom.gather %table[%ids] : (tensor<64x32xf32>, tensor<8xi64>) -> tensor<8x32xf32>
  // CHECK: loom.scatter_add {{.*}} {plan.kernel = "scatter_add", plan.kernel_attrs = {}}
  %sa = loom.scatter_add %e[%ids] : (tensor<8x32xf32>, tensor<8xi64>) -> tensor<64x32xf32>
  // CHECK: loom.dropout {{.*}} {plan.kernel = "dropout", plan.kernel_attrs = {ratio = 1.000000e-01 : f64, seed = 7 : i64}}
  %d, %mask = loom.dropout %h ratio 0.1 seed 7 : tensor<8x32xf32>
  // Reshapes, parameters and constants need no kernel.
  // CHECK: loom.reshape
  // CHECK-NOT: plan.kernel
  %r = loom.reshape %x : tensor<8x16xf32> -> tensor<128xf32>
  return %h, %l, %n, %t, %m, %s, %sl, %c, %e, %d : tensor<8x32xf32>, tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<4x32xf32>, tensor<16x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// CHECK-LABEL: func.func @fusion
// CHECK: loom.fusion{{.*}}plan.kernel = "elementwise", plan.kernel_attrs = {}
func.func @fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = loom.exp %a : tensor<4xf32>
    loom.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @unfused(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.exp' op must be fused before kernel selection; run -loom-fuse-elementwise first}}
  %0 = loom.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gelu_grad(%dy: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.gelu_grad' op must be decomposed before kernel selection; run -loom-decompose-gelu-grad first}}
  %0 = loom.gelu_grad %dy, %x approximate tanh : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @half(%x: tensor<4x4xf16>) -> tensor<4x4xf16> {
  // expected-error @+1 {{'loom.matmul' op computes in 'f16', which the cpu backend does not support (it has f32 and f64 kernels, and bf16 ones for mixed precision)}}
  %0 = loom.matmul %x, %x : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  return %0 : tensor<4x4xf16>
}

// -----

// bf16 runs in the kernels mixed precision needs: GEMMs, elementwise
// (casts included) and data movement.
// CHECK-LABEL: func.func @bf16_kernels
func.func @bf16_kernels(%x: tensor<8x16xf32>, %w: tensor<32x16xbf16>, %ids: tensor<4xi64>) -> (tensor<16x8xbf16>, tensor<4x16xbf16>, tensor<16x16xbf16>, tensor<8x8xbf16>, tensor<4x16xbf16>, tensor<8x32xbf16>) {
  // CHECK: loom.fusion{{.*}}plan.kernel = "elementwise"
  %xl = loom.fusion(%x) : (tensor<8x16xf32>) -> tensor<8x16xbf16> {
  ^bb0(%a: tensor<8x16xf32>):
    %1 = loom.cast %a : tensor<8x16xf32> -> tensor<8x16xbf16>
    loom.yield %1 : tensor<8x16xbf16>
  }
  // CHECK: loom.matmul {{.*}}plan.kernel = "matmul"
  %h = loom.matmul %xl, %w transpose_rhs : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  // CHECK: loom.transpose {{.*}}plan.kernel = "transpose"
  %t = loom.transpose %xl [1, 0] : tensor<8x16xbf16> -> tensor<16x8xbf16>
  // CHECK: loom.slice {{.*}}plan.kernel = "slice"
  %s = loom.slice %xl [0:4, 0:16] : tensor<8x16xbf16> -> tensor<4x16xbf16>
  // CHECK: loom.concat {{.*}}plan.kernel = "concat"
  %c = loom.concat %xl, %xl axis 0 : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<16x16xbf16>
  // CHECK: loom.split {{.*}}plan.kernel = "split"
  %p:2 = loom.split %xl axis 1 : tensor<8x16xbf16> -> tensor<8x8xbf16>, tensor<8x8xbf16>
  // CHECK: loom.gather {{.*}}plan.kernel = "gather"
  %g = loom.gather %xl[%ids] : (tensor<8x16xbf16>, tensor<4xi64>) -> tensor<4x16xbf16>
  return %t, %s, %c, %p#0, %g, %h : tensor<16x8xbf16>, tensor<4x16xbf16>, tensor<16x16xbf16>, tensor<8x8xbf16>, tensor<4x16xbf16>, tensor<8x32xbf16>
}

// -----

// Reductions, normalizations and the loss keep f32: compute them in f32.
func.func @bf16_softmax(%x: tensor<4x4xbf16>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'loom.softmax' op computes in 'bf16', which the cpu backend's 'softmax' kernel does not support (bf16 runs in matmul, attention, cross-entropy, layer-norm, elementwise and data-movement kernels; compute this op in f32)}}
  %0 = loom.softmax %x axis 1 : tensor<4x4xbf16>
  return %0 : tensor<4x4xbf16>
}

// -----

// A bf16 sum into f32 runs (the bias gradient of mixed precision); a bf16
// result does not.
// CHECK-LABEL: func.func @bf16_into_f32_sum
// CHECK: loom.reduce_sum {{.*}} {plan.kernel = "reduce_sum", plan.kernel_attrs = {axes = array<i64: 1>}} : tensor<4x4xbf16> -> tensor<4xf32>
func.func @bf16_into_f32_sum(%x: tensor<4x4xbf16>) -> tensor<4xf32> {
  %0 = loom.reduce_sum %x [1] : tensor<4x4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bf16_reduce(%x: tensor<4x4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'loom.reduce_sum' op computes in 'bf16', which the cpu backend's 'reduce_sum' kernel does not support}}
  %0 = loom.reduce_sum %x [1] : tensor<4x4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

loom.mesh @mesh = <tp = 2>
func.func @sharded(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'loom.shard' op is a sharding annotation; partition the function before lowering it to a plan}}
  %0 = loom.shard %x to <@mesh, [{tp}, {}]> : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Collectives keep their rank lists; the plan resolves them per rank.
// CHECK-LABEL: func.func @collectives
// CHECK: loom.all_reduce {{.*}} {plan.kernel = "all_reduce", plan.kernel_attrs = {groups = {{\[}}array<i64: 0, 1>], op = "avg"}}
// CHECK: loom.all_gather {{.*}} {plan.kernel = "all_gather", plan.kernel_attrs = {groups = {{\[}}array<i64: 0, 1>]}}
// CHECK: loom.reduce_scatter {{.*}} {plan.kernel = "reduce_scatter", plan.kernel_attrs = {groups = {{\[}}array<i64: 0, 1>], op = "sum"}}
// CHECK: loom.collective_broadcast {{.*}} {plan.kernel = "broadcast", plan.kernel_attrs = {groups = {{\[}}array<i64: 0, 1>], root = 1 : i64}}
// CHECK: loom.all_to_all {{.*}} {plan.kernel = "all_to_all", plan.kernel_attrs = {groups = {{\[}}array<i64: 0, 1>]}}
// CHECK: loom.send {{.*}} {plan.kernel = "send", plan.kernel_attrs = {pairs = {{\[}}array<i64: 0, 1>, array<i64: 1, 0>], tag = 3 : i64}}
// CHECK: loom.recv {{.*}} {plan.kernel = "recv", plan.kernel_attrs = {pairs = {{\[}}array<i64: 0, 1>, array<i64: 1, 0>], tag = 3 : i64}}
module attributes {loom.world_size = 2 : i64} {
  func.func @collectives(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
    %0 = loom.all_reduce avg %x groups [[0, 1]] : tensor<4x8xf32>
    %1 = loom.all_gather %x axis 0 groups [[0, 1]] : tensor<4x8xf32> -> tensor<8x8xf32>
    %2 = loom.reduce_scatter sum %x axis 0 groups [[0, 1]] : tensor<4x8xf32> -> tensor<2x8xf32>
    %3 = loom.collective_broadcast %x root 1 groups [[0, 1]] : tensor<4x8xf32>
    %4 = loom.all_to_all %x groups [[0, 1]] : tensor<4x8xf32>
    loom.send %x to [[0, 1], [1, 0]] tag 3 : tensor<4x8xf32>
    %5 = loom.recv from [[0, 1], [1, 0]] tag 3 : tensor<4x8xf32>
    return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  func.func @gather_inner(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
    // expected-error @+1 {{'loom.all_gather' op splits a dim other than the outermost one; run -loom-decompose-collectives first}}
    %0 = loom.all_gather %x axis 1 groups [[0, 1]] : tensor<4x8xf32> -> tensor<4x16xf32>
    return %0 : tensor<4x16xf32>
  }
}

// -----

// The fused attention and its backward, in bf16 too; the scale and the mask
// value become kernel attributes (-inf when the op has the default).
// CHECK-LABEL: func.func @attention
// CHECK: loom.attention {{.*}}plan.kernel = "attention", plan.kernel_attrs = {mask_value = 0xFFF0000000000000 : f64, scale = 1.250000e-01 : f64}
// CHECK: loom.attention_grad {{.*}}plan.kernel = "attention_backward", plan.kernel_attrs = {mask_value = -1.000000e+04 : f64, scale = 1.250000e-01 : f64}
func.func @attention(%q: tensor<2x16x8xbf16>, %m: tensor<1x16x16xi1>, %d: tensor<2x16xf32>) -> tensor<2x16x8xbf16> {
  %o, %lse = loom.attention %q, %q, %q mask %m scale 0.125 : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<1x16x16xi1>) -> (tensor<2x16x8xbf16>, tensor<2x16xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %o, %lse, %o mask %m scale 0.125 mask_value -1.0e+04
      : (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16xf32>, tensor<2x16x8xbf16>, tensor<1x16x16xi1>) -> (tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>)
  return %dq : tensor<2x16x8xbf16>
}

// -----

// seq_major becomes seq_major = 1 on both kernels.
// CHECK-LABEL: func.func @attention_seq_major
// CHECK: loom.attention {{.*}}plan.kernel = "attention", plan.kernel_attrs = {mask_value = 0xFFF0000000000000 : f64, scale = 1.250000e-01 : f64, seq_major = 1 : i64}
// CHECK: loom.attention_grad {{.*}}plan.kernel = "attention_backward", plan.kernel_attrs = {mask_value = 0xFFF0000000000000 : f64, scale = 1.250000e-01 : f64, seq_major = 1 : i64}
func.func @attention_seq_major(%q: tensor<2x16x4x8xbf16>, %d: tensor<2x16x4xf32>) -> tensor<2x16x4x8xbf16> {
  %o, %lse = loom.attention %q, %q, %q scale 0.125 seq_major : (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %q, %q, %o, %lse, %o scale 0.125 seq_major
      : (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>, tensor<2x16x4x8xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>)
  return %dq : tensor<2x16x4x8xbf16>
}

// -----

// The packed forms are the same kernels with packed_qkv = 1 (and
// seq_major = 1: qkv is [B, S, 3, H, D]).
// CHECK-LABEL: func.func @packed_attention
// CHECK: loom.packed_attention {{.*}}plan.kernel = "attention", plan.kernel_attrs = {mask_value = 0xFFF0000000000000 : f64, packed_qkv = 1 : i64, scale = 1.250000e-01 : f64, seq_major = 1 : i64}
// CHECK: loom.packed_attention_grad {{.*}}plan.kernel = "attention_backward", plan.kernel_attrs = {mask_value = -1.000000e+04 : f64, packed_qkv = 1 : i64, scale = 1.250000e-01 : f64, seq_major = 1 : i64}
func.func @packed_attention(%qkv: tensor<2x16x3x4x8xbf16>) -> tensor<2x16x3x4x8xbf16> {
  %o, %lse = loom.packed_attention %qkv scale 0.125 : (tensor<2x16x3x4x8xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>)
  %d = loom.packed_attention_grad %qkv, %o, %lse, %o scale 0.125 mask_value -1.0e+04
      : (tensor<2x16x3x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>, tensor<2x16x4x8xbf16>) -> tensor<2x16x3x4x8xbf16>
  return %d : tensor<2x16x3x4x8xbf16>
}
