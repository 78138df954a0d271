// Every verifier error of the plan ops.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

loom.parameter @w : tensor<16x32xf32>
func.func @weight_type() {
  // expected-error @+1 {{'plan.weight' op type 'memref<32x16xf32>' does not match the parameter's 'tensor<16x32xf32>'}}
  %w = plan.weight @w : memref<32x16xf32>
  return
}

// -----

func.func @weight_not_parameter() {
  // expected-error @+1 {{'plan.weight' op 'nothing' is not a loom.parameter}}
  %w = plan.weight @nothing : memref<4xf32>
  return
}

// -----

func.func @view_size(%x: memref<8xf32>) {
  // expected-error @+1 {{'plan.view' op cannot view 'memref<8xf32>' as 'memref<16xf32>': element types must match and the view must fit}}
  %v = plan.view %x : memref<8xf32> to memref<16xf32>
  return
}

// -----

func.func @view_type(%x: memref<8xf32>) {
  // expected-error @+1 {{'plan.view' op cannot view 'memref<8xf32>' as 'memref<8xi32>': element types must match and the view must fit}}
  %v = plan.view %x : memref<8xf32> to memref<8xi32>
  return
}

// -----

func.func @kernel_attr(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op attribute 'axes' must be an integer, float, string, i64 array or a list of i64 arrays}}
  plan.kernel "reduce_sum" ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) attrs {axes = [0]}
  return
}

// -----

func.func @elementwise_without_body(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op 'elementwise' needs a body}}
  plan.kernel "elementwise" ins(%x : memref<8xf32>) outs(%y : memref<8xf32>)
  return
}

// -----

func.func @body_on_other_kernel(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op only 'elementwise' kernels have a body}}
  plan.kernel "softmax" ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @body_argument_type(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op body argument type 'tensor<4xf32>' does not match its input 'memref<8xf32>'}}
  plan.kernel "elementwise" ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %b = loom.broadcast %a : tensor<4xf32> -> tensor<8xf32>
    loom.yield %b : tensor<8xf32>
  }
  return
}

// -----

func.func @yield_count(%x: memref<8xf32>, %y: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op body must end in a loom.yield of one value per output}}
  plan.kernel "elementwise" ins(%x : memref<8xf32>) outs(%y, %y : memref<8xf32>, memref<8xf32>) {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @no_outputs(%x: memref<8xf32>) {
  // expected-error @+1 {{'plan.kernel' op writes no outputs}}
  "plan.kernel"(%x) <{kernel = "copy", kernel_attrs = {}, operandSegmentSizes = array<i32: 1, 0>}> ({}) : (memref<8xf32>) -> ()
  return
}
