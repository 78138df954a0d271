// RUN: loom-opt --loom-tensor-parallel --split-input-file --verify-diagnostics %s | FileCheck %s

// Two MLP layers and a head: the tactic annotates the first GEMM of each
// pair (fc1, fc3; a softmax over the features ends a pair as a layer norm
// does) and the head; fc2 and fc4 are found row-split by
// propagation and left alone. Only forward GEMMs count: the backward GEMM
// that reads w2 (%dx) is not one.
// CHECK-LABEL: module
// CHECK: loom.parameter @w1 {{.*}}sharding <@mesh, [{tp}, {}]> priority 1
// CHECK: loom.parameter @w2 trainable : tensor<8x8xf32>{{$}}
// CHECK: loom.parameter @w3 {{.*}}sharding <@mesh, [{tp}, {}]> priority 1
// CHECK: loom.parameter @w4 trainable : tensor<8x8xf32>{{$}}
// CHECK: loom.parameter @head {{.*}}sharding <@mesh, [{tp}, {}]> priority 1
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<8x8xf32>
  loom.parameter @w2 trainable : tensor<8x8xf32>
  loom.parameter @w3 trainable : tensor<8x8xf32>
  loom.parameter @w4 trainable : tensor<8x8xf32>
  loom.parameter @head trainable : tensor<16x8xf32>
  func.func @step(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) -> tensor<2x16xf32> {
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %w2 = loom.param @w2 : tensor<8x8xf32>
    %w3 = loom.param @w3 : tensor<8x8xf32>
    %w4 = loom.param @w4 : tensor<8x8xf32>
    %head = loom.param @head : tensor<16x8xf32>
    %a = loom.matmul %x, %w1 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %b = loom.relu %a : tensor<2x8xf32>
    %c = loom.matmul %b, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %d = loom.softmax %c axis 1 : tensor<2x8xf32>
    %e = loom.matmul %d, %w3 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %f = loom.tanh %e : tensor<2x8xf32>
    %g = loom.matmul %f, %w4 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %h = loom.add %g, %d : tensor<2x8xf32>
    %logits = loom.matmul %h, %head transpose_rhs : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
    %dx = loom.matmul %dy, %w2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %logits : tensor<2x16xf32>
  }
}

// -----

// A user's annotation wins: @w1 annotated on its input features makes fc1
// row-split, and the tactic does not touch it.
// CHECK-LABEL: module
// CHECK: loom.parameter @w1 {{.*}}sharding <@mesh, [{}, {tp}]>{{$}}
// CHECK: loom.parameter @w2 trainable : tensor<8x8xf32> sharding <@mesh, [{tp}, {}]> priority 1
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<8x8xf32> sharding <@mesh, [{}, {tp}]>
  loom.parameter @w2 trainable : tensor<8x8xf32>
  func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w1 = loom.param @w1 : tensor<8x8xf32>
    %w2 = loom.param @w2 : tensor<8x8xf32>
    %a = loom.matmul %x, %w1 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %b = loom.softmax %a axis 1 : tensor<2x8xf32>
    %c = loom.matmul %b, %w2 transpose_rhs : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %c : tensor<2x8xf32>
  }
}

// -----

// Output features that tp does not divide: an error naming the parameter,
// the dimension and tp.
module {
  loom.mesh @mesh = <tp = 4>
  loom.parameter @w trainable : tensor<6x8xf32>
  func.func @f(%x: tensor<2x8xf32>) -> tensor<2x6xf32> {
    %w = loom.param @w : tensor<6x8xf32>
    // expected-error @+1 {{'loom.matmul' op reads @w, whose dimension 0 (output features, 6) tp = 4 does not divide; tensor parallelism needs it to}}
    %a = loom.matmul %x, %w transpose_rhs : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
    return %a : tensor<2x6xf32>
  }
}

// -----

// Grouped-query attention built from primitive ops: the query projection's
// 32 features are 4 heads, which tp 4 splits; the key projection's 16 are 2
// heads of 8, which a 4-way split would cut in halves. The reshape into
// heads cannot keep the split; an error names it (gathering the keys on
// every rank while the queries are split by heads is no tensor
// parallelism).
module {
  loom.mesh @mesh = <tp = 4>
  loom.parameter @wq trainable : tensor<32x32xf32>
  loom.parameter @wk trainable : tensor<16x32xf32>
  func.func @f(%x: tensor<2x4x32xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x2x4x8xf32>) {
    %wq = loom.param @wq : tensor<32x32xf32>
    %q = loom.matmul %x, %wq transpose_rhs : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
    %qh = loom.reshape %q : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
    %wk = loom.param @wk : tensor<16x32xf32>
    %k = loom.matmul %x, %wk transpose_rhs : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
    // expected-error @+1 {{'loom.reshape' op cuts dimension 2 (16, split 4 ways by tp) into 2 heads of 8, and tp = 4 does not divide 2 while it divides the 4 heads cut elsewhere (grouped-query attention): tensor parallelism needs it to divide the key/value heads}}
    %h = loom.reshape %k : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
    %t = loom.transpose %h [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
    return %qh, %t : tensor<2x4x4x8xf32>, tensor<2x2x4x8xf32>
  }
}

// -----

// Fewer heads than tp throughout (2 heads, tp 4): no reshape keeps a head
// split, so attention runs whole on every rank; no error.
// CHECK-LABEL: module
// CHECK: loom.parameter @wq trainable : tensor<16x32xf32> sharding <@mesh, [{tp}, {}]> priority 1
module {
  loom.mesh @mesh = <tp = 4>
  loom.parameter @wq trainable : tensor<16x32xf32>
  func.func @f(%x: tensor<2x4x32xf32>) -> tensor<2x4x2x8xf32> {
    %wq = loom.param @wq : tensor<16x32xf32>
    %q = loom.matmul %x, %wq transpose_rhs : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
    %qh = loom.reshape %q : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
    return %qh : tensor<2x4x2x8xf32>
  }
}

// -----

// A classifier's head (10 classes after 16 features) is no vocabulary: it
// stays whole, while the GEMM before it is split.
// CHECK-LABEL: module
// CHECK: loom.parameter @w1 trainable : tensor<16x16xf32> sharding <@mesh, [{tp}, {}]> priority 1
// CHECK: loom.parameter @head trainable : tensor<10x16xf32>{{$}}
module {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w1 trainable : tensor<16x16xf32>
  loom.parameter @head trainable : tensor<10x16xf32>
  func.func @f(%x: tensor<4x16xf32>, %y: tensor<4xi64>) -> tensor<f32> {
    %w1 = loom.param @w1 : tensor<16x16xf32>
    %a = loom.matmul %x, %w1 transpose_rhs : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    %r = loom.relu %a : tensor<4x16xf32>
    %head = loom.param @head : tensor<10x16xf32>
    %l = loom.matmul %r, %head transpose_rhs : (tensor<4x16xf32>, tensor<10x16xf32>) -> tensor<4x10xf32>
    %loss = loom.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The tactic needs the mesh axis it splits over.
// expected-error @+1 {{'loom.mesh' op has no axis 'tp' to split over}}
loom.mesh @mesh = <dp = 2>
