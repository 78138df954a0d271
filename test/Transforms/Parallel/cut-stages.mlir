// RUN: loom-opt --loom-cut-stages=stages=2 %s 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: loom-opt --loom-cut-stages=stages=3 %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: loom-opt "--loom-cut-stages=stages=2 stage-cuts=l2.add" %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=USER
// RUN: not loom-opt --loom-cut-stages=stages=7 %s 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not loom-opt "--loom-cut-stages=stages=2 stage-cuts=l9.add" %s 2>&1 | FileCheck %s --check-prefix=NONODE
// RUN: not loom-opt "--loom-cut-stages=stages=3 stage-cuts=l2.add,l0.add" %s 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not loom-opt "--loom-cut-stages=stages=2 memory-cap-mb=0.001" %s 2>&1 | FileCheck %s --check-prefix=CAP

// An embedding GEMM, four residual layers (x + relu(x W)), a head. The
// model is narrowest (one [8, 64] activation alive) after the embedding
// and after each residual add: five cut points. Two stages of even cost
// (three GEMMs each) cut after the second layer (l1), three after l0 and
// l2; parameter reads go with their reader. --stage-cuts picks the cut.
// TWO:       remark: loc("l1.add"): pipeline stage 0 ends here ({{.*}} ms forward and backward per microbatch, 48.0 KiB of parameters); 2.0 KiB of activations cross to stage 1
// TWO-LABEL: func.func @forward
// TWO:       loom.matmul {{.*}} {loom.stage = 0 : i64}
// TWO:       loom.param @w1 {loom.stage = 0 : i64}
// TWO:       loom.add {{.*}} {loom.stage = 0 : i64}
// TWO-NEXT:  loom.param @w2 {loom.stage = 1 : i64}
// TWO:       loom.matmul {{.*}} {loom.stage = 1 : i64}
// THREE: remark: loc("l0.add"): pipeline stage 0 ends here
// THREE: remark: loc("l2.add"): pipeline stage 1 ends here
// USER: remark: loc("l2.add"): pipeline stage 0 ends here ({{.*}} ms forward and backward per microbatch, 64.0 KiB of parameters); 2.0 KiB of activations cross to stage 1
// TOOMANY: error: loom-cut-stages: cannot cut @forward into 7 stages: it has 5 cut points (places where the fewest activations are alive)
// NONODE: error: loom-cut-stages: stage cut 'l9.add' names no node of @forward
// ORDER: error: loom-cut-stages: stage cut 'l0.add' does not come after the previous cut and before the function's last op
// CAP: error: loom-cut-stages: no cut of @forward into 2 stages keeps every stage under 1048 bytes
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
    %w0 = loom.param @w0 : tensor<64x64xf32> loc("l0.mm")
    %m0 = loom.matmul %h, %w0 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l0.mm")
    %r0 = loom.relu %m0 : tensor<8x64xf32> loc("l0.relu")
    %h0 = loom.add %h, %r0 : tensor<8x64xf32> loc("l0.add")
    %w1 = loom.param @w1 : tensor<64x64xf32> loc("l1.mm")
    %m1 = loom.matmul %h0, %w1 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l1.mm")
    %r1 = loom.relu %m1 : tensor<8x64xf32> loc("l1.relu")
    %h1 = loom.add %h0, %r1 : tensor<8x64xf32> loc("l1.add")
    %w2 = loom.param @w2 : tensor<64x64xf32> loc("l2.mm")
    %m2 = loom.matmul %h1, %w2 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l2.mm")
    %r2 = loom.relu %m2 : tensor<8x64xf32> loc("l2.relu")
    %h2 = loom.add %h1, %r2 : tensor<8x64xf32> loc("l2.add")
    %w3 = loom.param @w3 : tensor<64x64xf32> loc("l3.mm")
    %m3 = loom.matmul %h2, %w3 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l3.mm")
    %r3 = loom.relu %m3 : tensor<8x64xf32> loc("l3.relu")
    %h3 = loom.add %h2, %r3 : tensor<8x64xf32> loc("l3.add")
    %wo = loom.param @wo : tensor<64x64xf32> loc("head")
    %y = loom.matmul %h3, %wo : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("head")
    return %y : tensor<8x64xf32>
  }
}
