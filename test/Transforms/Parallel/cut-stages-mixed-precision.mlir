// RUN: loom-opt --loom-cut-stages=stages=3 %s -o /dev/null 2>&1 | FileCheck %s

// Under mixed precision the head's GEMM reads a bf16 cast of the residual
// stream: half the bytes, the same elements. Cut points are where the
// fewest *elements* are alive, so the places between the layers stay cut
// points (in bytes, the cast would be the only one: three stages would be
// an error, and two would put every layer on stage 0). The input is a
// function argument, not counted, so the first GEMM's result is narrow too.
// CHECK: remark: loc("l0.mm"): pipeline stage 0 ends here
// CHECK: remark: loc("l1.add"): pipeline stage 1 ends here
module {
  loom.parameter @w0 trainable : tensor<64x64xf32>
  loom.parameter @w1 trainable : tensor<64x64xf32>
  loom.parameter @w2 trainable : tensor<64x64xf32>
  loom.parameter @wo trainable : tensor<64x64xbf16>
  func.func @forward(%x: tensor<8x64xf32>) -> tensor<8x64xbf16> {
    %w0 = loom.param @w0 : tensor<64x64xf32> loc("l0.mm")
    %m0 = loom.matmul %x, %w0 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l0.mm")
    %r0 = loom.relu %m0 : tensor<8x64xf32> loc("l0.relu")
    %h0 = loom.add %x, %r0 : tensor<8x64xf32> loc("l0.add")
    %w1 = loom.param @w1 : tensor<64x64xf32> loc("l1.mm")
    %m1 = loom.matmul %h0, %w1 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l1.mm")
    %r1 = loom.relu %m1 : tensor<8x64xf32> loc("l1.relu")
    %h1 = loom.add %h0, %r1 : tensor<8x64xf32> loc("l1.add")
    %w2 = loom.param @w2 : tensor<64x64xf32> loc("l2.mm")
    %m2 = loom.matmul %h1, %w2 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc("l2.mm")
    %r2 = loom.relu %m2 : tensor<8x64xf32> loc("l2.relu")
    %h2 = loom.add %h1, %r2 : tensor<8x64xf32> loc("l2.add")
    %c = loom.cast %h2 : tensor<8x64xf32> -> tensor<8x64xbf16> loc("head.cast")
    %wo = loom.param @wo : tensor<64x64xbf16> loc("head")
    %y = loom.matmul %c, %wo : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16> loc("head")
    return %y : tensor<8x64xbf16>
  }
}
