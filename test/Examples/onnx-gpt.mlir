// PyTorch exports of the GPT example at opsets 14 and 17 import, verify and
// round-trip; the attention's shape subgraphs fold away.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %loom_src/examples/gpt/export_gpt.py --opset 14 --with-loss --out %t/gpt14.onnx 2>/dev/null
// RUN: %python %loom_src/examples/gpt/export_gpt.py --opset 17 --with-loss --out %t/gpt17.onnx 2>/dev/null
// RUN: loom-translate --import-onnx %t/gpt14.onnx --dim batch=2 --dim seq=16 | loom-opt | FileCheck %s --check-prefixes=CHECK,OPSET14
// RUN: loom-translate --import-onnx %t/gpt17.onnx --dim batch=2 --dim seq=16 | loom-opt | FileCheck %s --check-prefixes=CHECK,OPSET17

// The causal mask buffer is only compared: it is not trainable.
// CHECK-DAG: loom.parameter @wte.weight trainable : tensor<64x32xf32>
// CHECK-DAG: loom.parameter @h.0.attn.bias : tensor<1x1x16x16xf32>
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: tensor<2x16xi64> {onnx.name = "idx"}, %{{.+}}: tensor<2x16xi64> {onnx.name = "targets"})
// CHECK-SAME: -> (tensor<2x16x64xf32> {onnx.name = "logits"}, tensor<f32> {onnx.name = "loss"})
// CHECK-NOT: xi64> -> tensor
// CHECK: loom.gather
// OPSET14: loom.reduce_mean
// OPSET17: loom.layer_norm {{.*}} axis 2 : tensor<2x16x32xf32>, tensor<32xf32>
// CHECK: loom.split {{.*}} axis 2 : tensor<2x16x96xf32> -> tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
// CHECK: loom.transpose {{.*}} [0, 2, 1, 3] : tensor<2x16x2x16xf32> -> tensor<2x2x16x16xf32>
// CHECK: loom.select {{.*}} : (tensor<1x1x16x16xi1>, tensor<f32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
// CHECK: loom.softmax {{.*}} axis 3 : tensor<2x2x16x16xf32>
// CHECK: loom.erf
// CHECK: loom.cross_entropy {{.*}} ignore_index -100 : (tensor<32x64xf32>, tensor<32xi64>) -> tensor<f32>
