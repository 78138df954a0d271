// The MLP example: Gemm layers become matmul + bias_add.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %loom_src/examples/mlp/export_mlp.py --opset 14 --with-loss --batch-dynamic --out %t/mlp.onnx 2>/dev/null
// RUN: loom-translate --import-onnx %t/mlp.onnx --dim batch=8 | loom-opt | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.+]]: tensor<8x32xf32> {onnx.name = "x"}, %[[LABELS:.+]]: tensor<8xi64> {onnx.name = "labels"})
// CHECK: %[[H:.+]] = loom.matmul %[[X]], %{{.+}} transpose_rhs : (tensor<8x32xf32>, tensor<64x32xf32>) -> tensor<8x64xf32>
// CHECK: loom.bias_add %[[H]], %{{.+}} : tensor<8x64xf32>, tensor<64xf32>
// CHECK: loom.relu
// CHECK: loom.cross_entropy %{{.+}}, %[[LABELS]] ignore_index -100 : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
