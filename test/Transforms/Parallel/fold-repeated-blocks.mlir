// RUN: loom-opt --loom-fold-repeated-blocks=keep=1 %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: loom-opt --loom-fold-repeated-blocks=keep=1 %s 2>/dev/null | FileCheck %s --check-prefix=ONE
// RUN: loom-opt --loom-fold-repeated-blocks=keep=2 %s 2>/dev/null | FileCheck %s --check-prefix=TWO
// RUN: loom-opt --loom-fold-repeated-blocks=keep=4 %s 2>/dev/null | FileCheck %s --check-prefix=ALL

// An embedding, four residual layers (h + relu(h W_i) * s, where s is one
// scale computed before the layers and read by all of them; dropout seeds
// differ by layer), a head that reads the last layer. Folded to one layer
// the head reads layer 0; the parameters of the other layers are gone.
// REMARK: remark: loc("l0.mm"): loom-fold-repeated-blocks: 4 repeated blocks of 5 operations start here; keeping 1
// ONE-NOT: loom.parameter @w1
// ONE-NOT: loom.parameter @w2
// ONE-NOT: loom.parameter @w3
// ONE-LABEL: func.func @forward
// ONE: %[[S:.*]] = loom.constant
// ONE: %[[W0:.*]] = loom.param @w0
// ONE: %[[M0:.*]] = loom.matmul %[[H:.*]], %[[W0]]
// ONE: loom.mul %{{.*}}, %[[S]]
// ONE: %[[H0:.*]] = loom.add %[[H]], %{{.*}}
// ONE-NEXT: %[[WO:.*]] = loom.param @wo
// ONE-NEXT: %[[Y:.*]] = loom.matmul %[[H0]], %[[WO]]
// ONE-NEXT: return %[[Y]]
// TWO: loom.parameter @w1
// TWO-NOT: loom.parameter @w2
// TWO-COUNT-2: loom.relu
// TWO-NOT: loom.relu
// ALL: loom.parameter @w3
// ALL-COUNT-4: loom.relu
module {
  loom.parameter @we trainable : tensor<64x64xf32>
  loom.parameter @w0 trainable : tensor<64x64xf32>
  loom.parameter @w1 trainable : tensor<64x64xf32>
  loom.parameter @w2 trainable : tensor<64x64xf32>
  loom.parameter @w3 trainable : tensor<64x64xf32>
  loom.parameter @wo trainable : tensor<64x64xf32>
  func.func @forward(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
    %we = loom.param @we : tensor<64x64xf32> loc("embed")
    %h = loom.matmul %x, %we : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("embed")
    %s = loom.constant dense<0.5> : tensor<f32> loc("scale")
    %w0 = loom.param @w0 : tensor<64x64xf32> loc("l0.mm")
    %m0 = loom.matmul %h, %w0 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l0.mm")
    %r0 = loom.relu %m0 : tensor<8x64xf32> loc("l0.relu")
    %d0, %k0 = loom.dropout %r0 ratio 0.0 seed 11 : tensor<8x64xf32> loc("l0.dropout")
    %t0 = loom.mul %d0, %s : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32> loc("l0.scale")
    %h0 = loom.add %h, %t0 : tensor<8x64xf32> loc("l0.add")
    %w1 = loom.param @w1 : tensor<64x64xf32> loc("l1.mm")
    %m1 = loom.matmul %h0, %w1 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l1.mm")
    %r1 = loom.relu %m1 : tensor<8x64xf32> loc("l1.relu")
    %d1, %k1 = loom.dropout %r1 ratio 0.0 seed 12 : tensor<8x64xf32> loc("l1.dropout")
    %t1 = loom.mul %d1, %s : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32> loc("l1.scale")
    %h1 = loom.add %h0, %t1 : tensor<8x64xf32> loc("l1.add")
    %w2 = loom.param @w2 : tensor<64x64xf32> loc("l2.mm")
    %m2 = loom.matmul %h1, %w2 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l2.mm")
    %r2 = loom.relu %m2 : tensor<8x64xf32> loc("l2.relu")
    %d2, %k2 = loom.dropout %r2 ratio 0.0 seed 13 : tensor<8x64xf32> loc("l2.dropout")
    %t2 = loom.mul %d2, %s : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32> loc("l2.scale")
    %h2 = loom.add %h1, %t2 : tensor<8x64xf32> loc("l2.add")
    %w3 = loom.param @w3 : tensor<64x64xf32> loc("l3.mm")
    %m3 = loom.matmul %h2, %w3 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l3.mm")
    %r3 = loom.relu %m3 : tensor<8x64xf32> loc("l3.relu")
    %d3, %k3 = loom.dropout %r3 ratio 0.0 seed 14 : tensor<8x64xf32> loc("l3.dropout")
    %t3 = loom.mul %d3, %s : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32> loc("l3.scale")
    %h3 = loom.add %h2, %t3 : tensor<8x64xf32> loc("l3.add")
    %wo = loom.param @wo : tensor<64x64xf32> loc("head")
    %y = loom.matmul %h3, %wo : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("head")
    return %y : tensor<8x64xf32>
  }
}
