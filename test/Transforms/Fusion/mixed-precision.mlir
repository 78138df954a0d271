// RUN: loom-opt %s --split-input-file --loom-mixed-precision | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-mixed-precision=precision=f32 | FileCheck %s --check-prefix=F32
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-mixed-precision=precision=bf16 -o /dev/null
// RUN: not loom-opt %s --loom-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// A linear layer: both operands cast to bf16, the GEMM in bf16 (flags
// kept), its result cast back so the bias add stays f32.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<8x32xf32>, %[[W:.*]]: tensor<16x32xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[XL:.*]] = loom.cast %[[X]] : tensor<8x32xf32> -> tensor<8x32xbf16>
// CHECK-NEXT: %[[WL:.*]] = loom.cast %[[W]] : tensor<16x32xf32> -> tensor<16x32xbf16>
// CHECK-NEXT: %[[P:.*]] = loom.matmul %[[XL]], %[[WL]] transpose_rhs : (tensor<8x32xbf16>, tensor<16x32xbf16>) -> tensor<8x16xbf16>
// CHECK-NEXT: %[[Y:.*]] = loom.cast %[[P]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = loom.bias_add %[[Y]], %[[B]] : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: return %[[R]]
// F32-LABEL: func.func @linear
// F32-NOT: bf16
// F32: loom.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
func.func @linear(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %0 = loom.matmul %x, %w transpose_rhs : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  %1 = loom.bias_add %0, %b : tensor<8x16xf32>, tensor<16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

// Attention: both batched GEMMs, softmax in between stays f32.
// CHECK-LABEL: func.func @attention
// CHECK: loom.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
// CHECK: %[[S:.*]] = loom.cast %{{.*}} : tensor<2x4x8x8xbf16> -> tensor<2x4x8x8xf32>
// CHECK: %[[P:.*]] = loom.softmax %[[S]] axis 3 : tensor<2x4x8x8xf32>
// CHECK: %[[PL:.*]] = loom.cast %[[P]] : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xbf16>
// CHECK: loom.matmul %[[PL]], %{{.*}} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// CHECK: loom.cast %{{.*}} : tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xf32>
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = loom.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = loom.softmax %s axis 3 : tensor<2x4x8x8xf32>
  %y = loom.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}

// -----

// Matmuls already in bf16 are left as they are, without casts.
// CHECK-LABEL: func.func @already_bf16
// CHECK-NOT: loom.cast
// CHECK: loom.matmul %{{.*}}, %{{.*}} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// CHECK-NOT: loom.cast
func.func @already_bf16(%a: tensor<4x4xbf16>) -> tensor<4x4xbf16> {
  %0 = loom.matmul %a, %a : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  return %0 : tensor<4x4xbf16>
}

// -----

// f64 matmuls stay f64, with a remark (torch.autocast leaves f64 alone too).
// CHECK-LABEL: func.func @double
// CHECK-NOT: loom.cast
// CHECK: loom.matmul %{{.*}}, %{{.*}} : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
func.func @double(%a: tensor<4x4xf64>) -> tensor<4x4xf64> {
  // expected-remark @+1 {{stays in 'f64': precision=bf16 converts f32 matmuls only}}
  %0 = loom.matmul %a, %a : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  return %0 : tensor<4x4xf64>
}

// The precision is an enum option: an unknown one is rejected when the
// pipeline is parsed.
// UNKNOWN: for the --precision option: Cannot find option named 'fp8'!

// -----

// A fused attention runs in bf16 as a whole: q, k and v are cast down, the
// output back up; the log-sum-exp is f32 either way.
// CHECK-LABEL: func.func @fused_attention
// CHECK-DAG:     %[[Q:.*]] = loom.cast %arg0 : tensor<2x16x8xf32> -> tensor<2x16x8xbf16>
// CHECK-DAG:     %[[K:.*]] = loom.cast %arg1 : tensor<2x16x8xf32> -> tensor<2x16x8xbf16>
// CHECK-DAG:     %[[V:.*]] = loom.cast %arg2 : tensor<2x16x8xf32> -> tensor<2x16x8xbf16>
// CHECK:         %[[O:.*]], %[[LSE:.*]] = loom.attention %[[Q]], %[[K]], %[[V]] mask %arg3 scale 5.000000e-01 : {{.*}} -> (tensor<2x16x8xbf16>, tensor<2x16xf32>)
// CHECK:         %[[W:.*]] = loom.cast %[[O]] : tensor<2x16x8xbf16> -> tensor<2x16x8xf32>
// CHECK:         return %[[W]], %[[LSE]]
// F32-LABEL: func.func @fused_attention
// F32:         loom.attention %arg0, %arg1, %arg2 mask %arg3 scale 5.000000e-01 : {{.*}} -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
func.func @fused_attention(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %m: tensor<1x16x16xi1>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>) {
  %o, %lse = loom.attention %q, %k, %v mask %m scale 0.5 : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<1x16x16xi1>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return %o, %lse : tensor<2x16x8xf32>, tensor<2x16xf32>
}

// -----

// It stays seq-major.
// CHECK-LABEL: func.func @fused_attention_seq_major
// CHECK:         loom.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 seq_major : {{.*}} -> (tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>)
func.func @fused_attention_seq_major(%q: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %o, %lse = loom.attention %q, %q, %q scale 0.5 seq_major : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4xf32>)
  return %o : tensor<2x16x4x8xf32>
}
