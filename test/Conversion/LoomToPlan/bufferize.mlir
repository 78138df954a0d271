// RUN: loom-opt --loom-bufferize --split-input-file --verify-diagnostics %s | FileCheck %s

// Arguments and results become named inputs and outputs, each kernel result
// a fresh buffer, a reshape a view of its input's buffer, and a non-splat
// constant a frozen parameter.
// CHECK:       loom.parameter @constant : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-LABEL: func.func @forward() {
// CHECK-NEXT:    %[[X:.*]] = plan.input "x" : memref<4x2xf32>
// CHECK-NEXT:    %[[B:.*]] = plan.input "arg1" : memref<2xf32>
// CHECK-NEXT:    %[[W:.*]] = plan.weight @w : memref<2x2xf32>
// CHECK-NEXT:    %[[C:.*]] = plan.weight @constant : memref<2xf32>
// CHECK-NEXT:    %[[H:.*]] = plan.alloc : memref<4x2xf32>
// CHECK-NEXT:    plan.kernel "matmul" ins(%[[X]], %[[W]] : memref<4x2xf32>, memref<2x2xf32>) outs(%[[H]] : memref<4x2xf32>) attrs {transpose_lhs = 0 : i64, transpose_rhs = 0 : i64}
// CHECK-NEXT:    %[[Y:.*]] = plan.alloc : memref<4x2xf32>
// CHECK-NEXT:    plan.kernel "elementwise" ins(%[[H]], %[[C]], %[[B]] : memref<4x2xf32>, memref<2xf32>, memref<2xf32>) outs(%[[Y]] : memref<4x2xf32>) {
// CHECK-NEXT:    ^bb0(%[[A0:.*]]: tensor<4x2xf32>, %[[A1:.*]]: tensor<2xf32>, %[[A2:.*]]: tensor<2xf32>):
// CHECK-NEXT:      %[[S:.*]] = loom.add %[[A0]], %[[A1]]
// CHECK-NEXT:      %[[T:.*]] = loom.mul %[[S]], %[[A2]]
// CHECK-NEXT:      loom.yield %[[T]] : tensor<4x2xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[V:.*]] = plan.view %[[Y]] : memref<4x2xf32> to memref<8xf32>
// CHECK-NEXT:    plan.output "y", %[[V]] : memref<8xf32>
// CHECK-NEXT:    plan.output "result1", %[[X]] : memref<4x2xf32>
// CHECK-NEXT:    return
loom.parameter @w : tensor<2x2xf32> = dense<1.0> : tensor<2x2xf32>
func.func @forward(%x: tensor<4x2xf32> {onnx.name = "x"}, %b: tensor<2xf32>)
    -> (tensor<8xf32> {onnx.name = "y"}, tensor<4x2xf32>) {
  %w = loom.param @w : tensor<2x2xf32>
  %c = loom.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %h = loom.matmul %x, %w {plan.kernel = "matmul", plan.kernel_attrs = {transpose_lhs = 0 : i64, transpose_rhs = 0 : i64}} : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %y = loom.fusion(%h, %c, %b) {plan.kernel = "elementwise", plan.kernel_attrs = {}} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2xf32> {
  ^bb0(%a0: tensor<4x2xf32>, %a1: tensor<2xf32>, %a2: tensor<2xf32>):
    %s = loom.add %a0, %a1 : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    %t = loom.mul %s, %a2 : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    loom.yield %t : tensor<4x2xf32>
  }
  %r = loom.reshape %y : tensor<4x2xf32> -> tensor<8xf32>
  return %r, %x : tensor<8xf32>, tensor<4x2xf32>
}

// -----

func.func @unselected(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'loom.softmax' op has no kernel selected; run -loom-select-kernels first}}
  %0 = loom.softmax %x axis 1 : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// loom.assign: the kernel computing the new value writes the weight in place
// when nothing reads the old value after it (an elementwise kernel may read
// it itself); otherwise the new value is copied in at the end of the step.
// CHECK-LABEL: func.func @assign() {
// CHECK-NEXT:    %[[SNEW:.*]] = plan.weight @s : memref<4xf32>
// CHECK-NEXT:    %[[WNEW:.*]] = plan.weight @w : memref<4xf32>
// CHECK-NEXT:    plan.input "arg0"
// CHECK-NEXT:    %[[W:.*]] = plan.weight @w : memref<4xf32>
// CHECK-NEXT:    plan.kernel "elementwise" ins(%[[W]], %{{.*}} : memref<4xf32>, memref<4xf32>) outs(%[[WNEW]] : memref<4xf32>)
// CHECK:         %[[S:.*]] = plan.weight @s : memref<4xf32>
// CHECK-NEXT:    %[[T:.*]] = plan.alloc : memref<4xf32>
// CHECK:         plan.kernel "elementwise" ins(%[[S]], %{{.*}} : memref<4xf32>, memref<4xf32>) outs(%[[T]] : memref<4xf32>)
// CHECK:         plan.kernel "elementwise" ins(%[[S]], %[[T]] : memref<4xf32>, memref<4xf32>)
// CHECK:         plan.kernel "copy" ins(%[[T]] : memref<4xf32>) outs(%[[SNEW]] : memref<4xf32>)
// CHECK-NEXT:    return
loom.parameter @w trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
loom.parameter @s trainable : tensor<4xf32> = dense<1.0> : tensor<4xf32>
func.func @assign(%g: tensor<4xf32>) -> tensor<4xf32> {
  %w = loom.param @w : tensor<4xf32>
  %w1 = loom.fusion(%w, %g) {plan.kernel = "elementwise"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %0 = loom.sub %a, %b : tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  %s = loom.param @s : tensor<4xf32>
  %s1 = loom.fusion(%s, %g) {plan.kernel = "elementwise"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %0 = loom.sub %a, %b : tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  // Reads the old @s after its new value was computed.
  %r = loom.fusion(%s, %s1) {plan.kernel = "elementwise"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %0 = loom.mul %a, %b : tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  loom.assign @w, %w1 : tensor<4xf32>
  loom.assign @s, %s1 : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A slice keeping its input's leading bytes (a padded dimension cut back,
// leading size-1 dimensions allowed) is a view of the kernel result's
// buffer, not a copy. A slice of a weight (which the runtime refers to
// whole), a strided or offset one, and one that cuts a later dimension stay
// kernels.
// CHECK-LABEL: func.func @prefix_slices
// CHECK:         %[[H:.*]] = plan.alloc : memref<1x64x32xf32>
// CHECK-NEXT:    plan.kernel "exp"
// CHECK-NEXT:    %[[V:.*]] = plan.view %[[H]] : memref<1x64x32xf32> to memref<1x61x32xf32>
// CHECK-NEXT:    %[[W:.*]] = plan.weight @p : memref<64x32xf32>
// CHECK-NEXT:    %[[S1:.*]] = plan.alloc : memref<61x32xf32>
// CHECK-NEXT:    plan.kernel "slice" ins(%[[W]] : memref<64x32xf32>) outs(%[[S1]] : memref<61x32xf32>)
// CHECK-COUNT-3: plan.kernel "slice"
// CHECK:         plan.output "result0", %[[V]] : memref<1x61x32xf32>
loom.parameter @p : tensor<64x32xf32> = dense<1.0> : tensor<64x32xf32>
func.func @prefix_slices(%x: tensor<1x64x32xf32>) -> (tensor<1x61x32xf32>, tensor<61x32xf32>, tensor<1x30x32xf32>, tensor<1x61x32xf32>, tensor<1x64x16xf32>) {
  %h = loom.exp %x {plan.kernel = "exp", plan.kernel_attrs = {}} : tensor<1x64x32xf32>
  %a = loom.slice %h [0:1, 0:61, 0:32] {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>}} : tensor<1x64x32xf32> -> tensor<1x61x32xf32>
  %w = loom.param @p : tensor<64x32xf32>
  %b = loom.slice %w [0:61, 0:32] {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>}} : tensor<64x32xf32> -> tensor<61x32xf32>
  %c = loom.slice %h [0:1, 0:60:2, 0:32] {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 2, 1>}} : tensor<1x64x32xf32> -> tensor<1x30x32xf32>
  %d = loom.slice %h [0:1, 3:64, 0:32] {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 0, 3, 0>, strides = array<i64: 1, 1, 1>}} : tensor<1x64x32xf32> -> tensor<1x61x32xf32>
  %e = loom.slice %h [0:1, 0:64, 0:16] {plan.kernel = "slice", plan.kernel_attrs = {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>}} : tensor<1x64x32xf32> -> tensor<1x64x16xf32>
  return %a, %b, %c, %d, %e : tensor<1x61x32xf32>, tensor<61x32xf32>, tensor<1x30x32xf32>, tensor<1x61x32xf32>, tensor<1x64x16xf32>
}

// -----

// An argument's batch rows (one first row per rank of the function) travel
// onto its plan.input.
// CHECK-LABEL: func.func @rows()
// CHECK:         plan.input "x" rows [0, 2] : memref<2x4xf32>
// CHECK:         plan.input "n" : memref<4xf32>
module attributes {loom.world_size = 2 : i64} {
  func.func @rows(%x: tensor<2x4xf32> {onnx.name = "x", loom.batch_offsets = array<i64: 0, 2>}, %n: tensor<4xf32> {onnx.name = "n"}) -> (tensor<2x4xf32> {onnx.name = "y"}, tensor<4xf32> {onnx.name = "m"}) {
    return %x, %n : tensor<2x4xf32>, tensor<4xf32>
  }
}

// -----

module attributes {loom.world_size = 2 : i64} {
  // expected-error @+1 {{argument #0 has 1 batch row offset(s) ('loom.batch_offsets'), but @short runs on 2 rank(s): give one per rank, in loom.ranks order}}
  func.func @short(%x: tensor<2x4xf32> {loom.batch_offsets = array<i64: 0>}) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

// -----

// expected-error @+1 {{argument #0 has 'loom.batch_offsets', but a scalar has no batch rows}}
func.func @scalar(%x: tensor<f32> {loom.batch_offsets = array<i64: 0>}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// An all-reduce of a value nothing else reads, in a buffer of its own, runs
// in place; one whose input is read again after it gets a buffer of its own.
// CHECK-LABEL: func.func @all_reduce_in_place() {
// CHECK:         %[[H:.*]] = plan.alloc : memref<4xf32>
// CHECK-NEXT:    plan.kernel "exp" ins(%{{.*}} : memref<4xf32>) outs(%[[H]] : memref<4xf32>)
// CHECK-NEXT:    plan.kernel "all_reduce" ins(%[[H]] : memref<4xf32>) outs(%[[H]] : memref<4xf32>)
// CHECK-NEXT:    %[[K:.*]] = plan.alloc : memref<4xf32>
// CHECK-NEXT:    plan.kernel "exp" ins(%[[H]] : memref<4xf32>) outs(%[[K]] : memref<4xf32>)
// CHECK-NEXT:    %[[R:.*]] = plan.alloc : memref<4xf32>
// CHECK-NEXT:    plan.kernel "all_reduce" ins(%[[K]] : memref<4xf32>) outs(%[[R]] : memref<4xf32>)
module attributes {loom.world_size = 2 : i64} {
func.func @all_reduce_in_place(%x: tensor<4xf32> {onnx.name = "x"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %h = loom.exp %x {plan.kernel = "exp"} : tensor<4xf32>
  %s = loom.all_reduce sum %h groups [[0, 1]] {plan.kernel = "all_reduce", plan.kernel_attrs = {groups = [array<i64: 0, 1>], op = "sum"}} : tensor<4xf32>
  %k = loom.exp %s {plan.kernel = "exp"} : tensor<4xf32>
  %r = loom.all_reduce sum %k groups [[0, 1]] {plan.kernel = "all_reduce", plan.kernel_attrs = {groups = [array<i64: 0, 1>], op = "sum"}} : tensor<4xf32>
  return %s, %r, %k : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
}
