// RUN: loom-opt --loom-build-train-step="optimizer=sgd lr=0.1 grad-accum=2 gradient-precision=bf16" %s | FileCheck %s
// RUN: not loom-opt --loom-build-train-step="optimizer=sgd lr=0.1 gradient-precision=f16" %s 2>&1 | FileCheck %s --check-prefix=BAD

// Gradients kept in bf16: a bf16 GEMM's gradient is taken before its
// widening, any other f32 gradient (the bias's) is rounded once where it
// is produced; both marked loom.kept_gradient. The microbatches are summed
// in bf16, and the sum is widened (marked too) for the 1/K scaling (in f32,
// where 1/3 would not be rounded) and the f32 update.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[W0:.*]] = loom.matmul {{.*}} -> tensor<4x3xbf16>
// CHECK:         %[[B0:.*]] = loom.cast %{{.*}} {loom.kept_gradient} : tensor<3xf32> -> tensor<3xbf16>
// CHECK:         %[[W1:.*]] = loom.matmul {{.*}} -> tensor<4x3xbf16>
// CHECK:         %[[WS:.*]] = loom.add %[[W0]], %[[W1]] {loom.gradient_accumulation} : tensor<4x3xbf16>
// CHECK:         %[[B1:.*]] = loom.cast %{{.*}} {loom.kept_gradient} : tensor<3xf32> -> tensor<3xbf16>
// CHECK:         %[[BS:.*]] = loom.add %[[B0]], %[[B1]] {loom.gradient_accumulation} : tensor<3xbf16>
// CHECK:         %[[WW:.*]] = loom.cast %[[WS]] {loom.kept_gradient} : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK:         %[[BW:.*]] = loom.cast %[[BS]] {loom.kept_gradient} : tensor<3xbf16> -> tensor<3xf32>
// CHECK:         %[[WG:.*]] = loom.mul %[[WW]], %{{.*}} : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// CHECK:         %[[BG:.*]] = loom.mul %[[BW]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK:         loom.sgd_update %{{.*}}, %[[WG]]
// CHECK:         loom.sgd_update %{{.*}}, %[[BG]]
// BAD: error: gradient-precision must be f32 or bf16, not 'f16'
loom.parameter @w trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
loom.parameter @b trainable : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @forward_loss_grad(%x: tensor<8x4xf32> {onnx.name = "x"},
                             %labels: tensor<8xi64> {onnx.name = "labels"})
    -> (tensor<f32>, tensor<4x3xf32> {loom.gradient_of = @w, onnx.name = "grad.w"},
        tensor<3xf32> {loom.gradient_of = @b, onnx.name = "grad.b"}) {
  %w = loom.param @w : tensor<4x3xf32>
  %xb = loom.cast %x : tensor<8x4xf32> -> tensor<8x4xbf16>
  %wb = loom.cast %w : tensor<4x3xf32> -> tensor<4x3xbf16>
  %yb = loom.matmul %xb, %wb : (tensor<8x4xbf16>, tensor<4x3xbf16>) -> tensor<8x3xbf16>
  %y = loom.cast %yb : tensor<8x3xbf16> -> tensor<8x3xf32>
  %l = loom.cross_entropy %y, %labels : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  %gb = loom.matmul %xb, %yb transpose_lhs : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  %g = loom.cast %gb : tensor<4x3xbf16> -> tensor<4x3xf32>
  %db = loom.reduce_sum %y [0] : tensor<8x3xf32> -> tensor<3xf32>
  return %l, %g, %db : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
}
