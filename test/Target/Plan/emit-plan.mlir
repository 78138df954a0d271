// The plan file of a lowered function: one line per input, output and kernel
// (the bias and GELU in the matmul's epilogue), the elementwise body as a
// numbered program, weights in the data section.
// RUN: loom-opt --loom-lower-to-plan --mlir-print-debuginfo %s | loom-translate --emit-plan | FileCheck %s
// RUN: loom-opt --loom-fuse-elementwise %s | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=UNLOWERED

// CHECK:      loom-plan 4
// CHECK-NEXT: weights 2
// CHECK-NEXT: weight 0 "w" f32 [4,8] offset 0 bytes 128
// CHECK-NEXT: weight 1 "b" f32 [8] offset 128 bytes 32
// CHECK-NEXT: rank 0 arena 192
// CHECK-NEXT: input "x" a0:f32[2,4]
// CHECK-NEXT: output "y" a128:f32[2,8]
// CHECK-NEXT: output "mask" a0:i1[2,8]
// CHECK-NEXT: kernel matmul a0:f32[2,4] w0:f32[4,8] w1:f32[8] -> a64:f32[2,8] activation=gelu_tanh transpose_lhs=0 transpose_rhs=0 loc "fc"
// CHECK-NEXT: kernel elementwise a64:f32[2,8] -> a0:i1[2,8] a128:f32[2,8] loc "mask" {
// CHECK-NEXT:   %1 = const f32 value=0.5
// CHECK-NEXT:   %2 = compare i1 %0 %1 direction=gt
// CHECK-NEXT:   %3 = cast f32 %2
// CHECK-NEXT:   %4 = mul f32 %0 %3
// CHECK-NEXT:   yield %2 %4
// CHECK-NEXT: }
// CHECK-NEXT: end
// CHECK-NEXT: #
// CHECK-NEXT: data 160

// UNLOWERED: error: 'func.func' op has no planned arena; run -loom-plan-memory (or the -loom-lower-to-plan pipeline) first

loom.parameter @w : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
loom.parameter @b : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"})
    -> (tensor<2x8xf32> {onnx.name = "y"}, tensor<2x8xi1> {onnx.name = "mask"}) {
  %w = loom.param @w : tensor<4x8xf32>
  %b = loom.param @b : tensor<8xf32>
  %h = loom.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32> loc("fc")
  %0 = loom.bias_add %h, %b : tensor<2x8xf32>, tensor<8xf32> loc("bias")
  %1 = loom.gelu %0 approximate tanh : tensor<2x8xf32> loc("act")
  %half = loom.constant dense<0.5> : tensor<f32>
  %m = loom.compare gt, %1, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1> loc("mask")
  %mf = loom.cast %m : tensor<2x8xi1> -> tensor<2x8xf32>
  %2 = loom.mul %1, %mf : tensor<2x8xf32>
  return %2, %m : tensor<2x8xf32>, tensor<2x8xi1>
}
