// Every loom op round-trips through its custom assembly and the generic form.
// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s
// RUN: loom-opt %s --split-input-file --mlir-print-op-generic | loom-opt --split-input-file | FileCheck %s

// CHECK: loom.mesh @mesh = <dp = 2, pp = 2, tp = 4>
loom.mesh @mesh = <dp = 2, pp = 2, tp = 4>
// CHECK: loom.parameter @fc1.weight trainable : tensor<512x2048xf32>{{$}}
loom.parameter @fc1.weight trainable : tensor<512x2048xf32>
// CHECK: loom.parameter @fc1.bias trainable : tensor<2048xf32> sharding <@mesh, [{tp}]> = dense<0.000000e+00> : tensor<2048xf32>
loom.parameter @fc1.bias trainable : tensor<2048xf32> sharding <@mesh, [{tp}]> = dense<0.0> : tensor<2048xf32>
// CHECK: loom.parameter @positions : tensor<4xi64> = dense<[0, 1, 2, 3]> : tensor<4xi64>
loom.parameter @positions : tensor<4xi64> = dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK: loom.parameter @"onnx::MatMul_7" : tensor<2x2xf32>
loom.parameter @"onnx::MatMul_7" : tensor<2x2xf32>
// CHECK: loom.parameter @blob trainable : tensor<2xf32> = dense_resource<blob> : tensor<2xf32>
loom.parameter @blob trainable : tensor<2xf32> = dense_resource<blob> : tensor<2xf32>
// CHECK: loom.parameter @wte trainable : tensor<4x2xf32> = #loom.external_data<"gpt.onnx.data", offset = 64, length = 32>
loom.parameter @wte trainable : tensor<4x2xf32> = #loom.external_data<"gpt.onnx.data", offset = 64, length = 32>

// CHECK-LABEL: func @state
func.func @state(%x: tensor<8x512xf32>) -> tensor<8x512xf32> {
  // CHECK: loom.param @fc1.weight : tensor<512x2048xf32>
  %w = loom.param @fc1.weight : tensor<512x2048xf32>
  // CHECK: loom.param @"onnx::MatMul_7" : tensor<2x2xf32>
  %m = loom.param @"onnx::MatMul_7" : tensor<2x2xf32>
  // CHECK: loom.constant dense<1.000000e+00> : tensor<4xf32>
  %c = loom.constant dense<1.0> : tensor<4xf32>
  // CHECK: loom.constant dense<true> : tensor<2xi1>
  %b = loom.constant dense<true> : tensor<2xi1>
  // CHECK: loom.shard %{{.*}} to <@mesh, [{dp}, {}]> : tensor<8x512xf32>
  %s = loom.shard %x to <@mesh, [{dp}, {}]> : tensor<8x512xf32>
  return %s : tensor<8x512xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// CHECK-LABEL: func @unary
func.func @unary(%x: tensor<8x16xf32>, %i: tensor<4xi64>) {
  // CHECK: loom.sqrt %{{.*}} : tensor<8x16xf32>
  %0 = loom.sqrt %x : tensor<8x16xf32>
  // CHECK: loom.rsqrt %{{.*}} : tensor<8x16xf32>
  %1 = loom.rsqrt %x : tensor<8x16xf32>
  // CHECK: loom.exp %{{.*}} : tensor<8x16xf32>
  %2 = loom.exp %x : tensor<8x16xf32>
  // CHECK: loom.log %{{.*}} : tensor<8x16xf32>
  %3 = loom.log %x : tensor<8x16xf32>
  // CHECK: loom.neg %{{.*}} : tensor<8x16xf32>
  %4 = loom.neg %x : tensor<8x16xf32>
  // CHECK: loom.neg %{{.*}} : tensor<4xi64>
  %5 = loom.neg %i : tensor<4xi64>
  // CHECK: loom.erf %{{.*}} : tensor<8x16xf32>
  %6 = loom.erf %x : tensor<8x16xf32>
  // CHECK: loom.tanh %{{.*}} : tensor<8x16xf32>
  %7 = loom.tanh %x : tensor<8x16xf32>
  // CHECK: loom.sigmoid %{{.*}} : tensor<8x16xf32>
  %8 = loom.sigmoid %x : tensor<8x16xf32>
  // CHECK: loom.relu %{{.*}} : tensor<8x16xf32>
  %9 = loom.relu %x : tensor<8x16xf32>
  // CHECK: loom.reciprocal %{{.*}} : tensor<8x16xf32>
  %10 = loom.reciprocal %x : tensor<8x16xf32>
  // CHECK: loom.abs %{{.*}} : tensor<4xi64>
  %ab = loom.abs %i : tensor<4xi64>
  // CHECK: loom.sin %{{.*}} : tensor<8x16xf32>
  %sn = loom.sin %x : tensor<8x16xf32>
  // CHECK: loom.cos %{{.*}} : tensor<8x16xf32>
  %cs = loom.cos %x : tensor<8x16xf32>
  // CHECK: loom.cumsum %{{.*}} axis 1 : tensor<8x16xf32>
  %cu = loom.cumsum %x axis 1 : tensor<8x16xf32>
  // CHECK: loom.cumsum %{{.*}} axis 0 exclusive reverse : tensor<4xi64>
  %cr = loom.cumsum %i axis 0 exclusive reverse : tensor<4xi64>
  // CHECK: loom.maximum %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %mx = loom.maximum %x, %x : tensor<8x16xf32>
  // CHECK: loom.minimum %{{.*}}, %{{.*}} : tensor<4xi64>
  %mn = loom.minimum %i, %i : tensor<4xi64>
  // CHECK: loom.fmod %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %fm = loom.fmod %x, %x : tensor<8x16xf32>
  // CHECK: loom.gelu %{{.*}} : tensor<8x16xf32>
  %11 = loom.gelu %x : tensor<8x16xf32>
  // CHECK: loom.gelu %{{.*}} approximate tanh : tensor<8x16xf32>
  %12 = loom.gelu %x approximate tanh : tensor<8x16xf32>
  // CHECK: loom.gelu_grad %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %gg = loom.gelu_grad %x, %x : tensor<8x16xf32>
  // CHECK: loom.gelu_grad %{{.*}}, %{{.*}} approximate tanh : tensor<8x16xf32>
  %gt = loom.gelu_grad %x, %x approximate tanh : tensor<8x16xf32>
  // CHECK: loom.cast %{{.*}} : tensor<8x16xf32> -> tensor<8x16xbf16>
  %13 = loom.cast %x : tensor<8x16xf32> -> tensor<8x16xbf16>
  // CHECK: loom.cast %{{.*}} : tensor<4xi64> -> tensor<4xi1>
  %14 = loom.cast %i : tensor<4xi64> -> tensor<4xi1>
  return
}

// -----

// CHECK-LABEL: func @binary
func.func @binary(%a: tensor<8x16xf32>, %b: tensor<16xf32>, %c: tensor<8x1xf32>,
                  %i: tensor<4xi32>, %h: tensor<8x16xf16>) {
  // CHECK: loom.add %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %0 = loom.add %a, %a : tensor<8x16xf32>
  // CHECK: loom.add %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %1 = loom.add %a, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK: loom.sub %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %2 = loom.sub %c, %b : (tensor<8x1xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK: loom.mul %{{.*}}, %{{.*}} : tensor<4xi32>
  %3 = loom.mul %i, %i : tensor<4xi32>
  // CHECK: loom.div %{{.*}}, %{{.*}} : tensor<8x16xf16>
  %4 = loom.div %h, %h : tensor<8x16xf16>
  // CHECK: loom.pow %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %5 = loom.pow %a, %c : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  // CHECK: loom.compare lt, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xi1>
  %6 = loom.compare lt, %a, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xi1>
  // CHECK: loom.compare eq, %{{.*}}, %{{.*}} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %7 = loom.compare eq, %i, %i : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  // CHECK: loom.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xi1>, tensor<8x1xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %8 = loom.select %6, %c, %b : (tensor<8x16xi1>, tensor<8x1xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// CHECK-LABEL: func @linear
func.func @linear(%x: tensor<8x128x768xf32>, %w: tensor<768x3072xf32>, %bias: tensor<3072xf32>,
                  %q: tensor<8x12x128x64xbf16>, %wt: tensor<3072x768xf32>) {
  // CHECK: loom.matmul %{{.*}}, %{{.*}} : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
  %0 = loom.matmul %x, %w : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<8x12x128x64xbf16>, tensor<8x12x128x64xbf16>) -> tensor<8x12x128x128xbf16>
  %1 = loom.matmul %q, %q transpose_rhs : (tensor<8x12x128x64xbf16>, tensor<8x12x128x64xbf16>) -> tensor<8x12x128x128xbf16>
  // CHECK: loom.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<768x3072xf32>, tensor<768x3072xf32>) -> tensor<3072x3072xf32>
  %2 = loom.matmul %w, %w transpose_lhs : (tensor<768x3072xf32>, tensor<768x3072xf32>) -> tensor<3072x3072xf32>
  // CHECK: loom.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : (tensor<3072x768xf32>, tensor<768x3072xf32>) -> tensor<768x768xf32>
  %5 = loom.matmul %wt, %w transpose_lhs transpose_rhs : (tensor<3072x768xf32>, tensor<768x3072xf32>) -> tensor<768x768xf32>
  // CHECK: loom.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<8x128x768xf32>, tensor<3072x768xf32>) -> tensor<8x128x3072xf32>
  %3 = loom.matmul %x, %wt transpose_rhs : (tensor<8x128x768xf32>, tensor<3072x768xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.matmul_bias_grad %{{.*}}, %{{.*}} sum lhs : (tensor<768x3072xf32>, tensor<768x3072xf32>) -> (tensor<3072x3072xf32>, tensor<3072xf32>)
  %mb:2 = loom.matmul_bias_grad %w, %w sum lhs : (tensor<768x3072xf32>, tensor<768x3072xf32>) -> (tensor<3072x3072xf32>, tensor<3072xf32>)
  // CHECK: loom.matmul_bias_grad %{{.*}}, %{{.*}} sum rhs : (tensor<3072x768xf32>, tensor<3072x768xf32>) -> (tensor<768x768xf32>, tensor<768xf32>)
  %mc:2 = loom.matmul_bias_grad %wt, %wt sum rhs : (tensor<3072x768xf32>, tensor<3072x768xf32>) -> (tensor<768x768xf32>, tensor<768xf32>)
  // CHECK: loom.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_rhs : (tensor<8x128x768xf32>, tensor<3072x768xf32>, tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  %mg = loom.matmul_gelu_grad %x, %wt, %0 transpose_rhs : (tensor<8x128x768xf32>, tensor<3072x768xf32>, tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.bias_add %{{.*}}, %{{.*}} : tensor<8x128x3072xf32>, tensor<3072xf32>
  %4 = loom.bias_add %0, %bias : tensor<8x128x3072xf32>, tensor<3072xf32>
  // CHECK: loom.fused_matmul %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<8x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<8x128x3072xf32>
  %6 = loom.fused_matmul %x, %w bias %bias : (tensor<8x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.fused_matmul %{{.*}}, %{{.*}} bias %{{.*}} add %{{.*}} : (tensor<8x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>, tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  %fa = loom.fused_matmul %x, %w bias %bias add %6 : (tensor<8x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>, tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.fused_matmul %{{.*}}, %{{.*}} bias %{{.*}} transpose_rhs activation gelu_tanh : (tensor<8x128x768xf32>, tensor<3072x768xf32>, tensor<3072xf32>) -> (tensor<8x128x3072xf32>, tensor<8x128x3072xf32>)
  %7:2 = loom.fused_matmul %x, %wt bias %bias transpose_rhs activation gelu_tanh : (tensor<8x128x768xf32>, tensor<3072x768xf32>, tensor<3072xf32>) -> (tensor<8x128x3072xf32>, tensor<8x128x3072xf32>)
  // CHECK: loom.fused_matmul %{{.*}}, %{{.*}} activation relu : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
  %8 = loom.fused_matmul %x, %w activation relu : (tensor<8x128x768xf32>, tensor<768x3072xf32>) -> tensor<8x128x3072xf32>
  return
}

// -----

// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<8x128x768xf32>, %qkv: tensor<8x128x2304xf32>, %v: tensor<1x768xf32>,
                  %table: tensor<50257x768xf32>, %ids: tensor<8x128xi64>) {
  // CHECK: loom.reshape %{{.*}} : tensor<8x128x768xf32> -> tensor<8x128x12x64xf32>
  %0 = loom.reshape %x : tensor<8x128x768xf32> -> tensor<8x128x12x64xf32>
  // CHECK: loom.transpose %{{.*}} [0, 2, 1, 3] : tensor<8x128x12x64xf32> -> tensor<8x12x128x64xf32>
  %1 = loom.transpose %0 [0, 2, 1, 3] : tensor<8x128x12x64xf32> -> tensor<8x12x128x64xf32>
  // CHECK: loom.slice %{{.*}} [0:8, 0:128, 768:1536] : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>
  %2 = loom.slice %qkv [0:8, 0:128, 768:1536] : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>
  // CHECK: loom.slice %{{.*}} [0:8:3, 0:128, 1:768:2] : tensor<8x128x768xf32> -> tensor<3x128x384xf32>
  %3 = loom.slice %x [0:8:3, 0:128:1, 1:768:2] : tensor<8x128x768xf32> -> tensor<3x128x384xf32>
  // CHECK: loom.concat %{{.*}}, %{{.*}} axis 2 : (tensor<8x128x768xf32>, tensor<8x128x2304xf32>) -> tensor<8x128x3072xf32>
  %4 = loom.concat %x, %qkv axis 2 : (tensor<8x128x768xf32>, tensor<8x128x2304xf32>) -> tensor<8x128x3072xf32>
  // CHECK: loom.split %{{.*}} axis 2 : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>, tensor<8x128x1536xf32>
  %5:2 = loom.split %qkv axis 2 : tensor<8x128x2304xf32> -> tensor<8x128x768xf32>, tensor<8x128x1536xf32>
  // CHECK: loom.broadcast %{{.*}} : tensor<1x768xf32> -> tensor<8x128x768xf32>
  %6 = loom.broadcast %v : tensor<1x768xf32> -> tensor<8x128x768xf32>
  // CHECK: loom.gather %{{.*}}[%{{.*}}] : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<8x128x768xf32>
  %7 = loom.gather %table[%ids] : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<8x128x768xf32>
  // CHECK: loom.gather %{{.*}}[%{{.*}}] axis 1 : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<50257x8x128xf32>
  %8 = loom.gather %table[%ids] axis 1 : (tensor<50257x768xf32>, tensor<8x128xi64>) -> tensor<50257x8x128xf32>
  return
}

// -----

// CHECK-LABEL: func @reductions
func.func @reductions(%x: tensor<8x16x4xf32>, %i: tensor<8x16xi32>, %bx: tensor<8x16xbf16>) {
  // CHECK: loom.reduce_sum %{{.*}} [1] : tensor<8x16x4xf32> -> tensor<8x4xf32>
  %0 = loom.reduce_sum %x [1] : tensor<8x16x4xf32> -> tensor<8x4xf32>
  // CHECK: loom.reduce_sum %{{.*}} [0, 1] : tensor<8x16xi32> -> tensor<i32>
  %1 = loom.reduce_sum %i [0, 1] : tensor<8x16xi32> -> tensor<i32>
  // CHECK: loom.reduce_sum %{{.*}} [0] : tensor<8x16xbf16> -> tensor<16xf32>
  %bsum = loom.reduce_sum %bx [0] : tensor<8x16xbf16> -> tensor<16xf32>
  // CHECK: loom.reduce_mean %{{.*}} [2] keepdims : tensor<8x16x4xf32> -> tensor<8x16x1xf32>
  %2 = loom.reduce_mean %x [2] keepdims : tensor<8x16x4xf32> -> tensor<8x16x1xf32>
  // CHECK: loom.reduce_max %{{.*}} [0, 2] : tensor<8x16x4xf32> -> tensor<16xf32>
  %3 = loom.reduce_max %x [0, 2] : tensor<8x16x4xf32> -> tensor<16xf32>
  // CHECK: loom.reduce_sum %{{.*}} [] : tensor<8x16x4xf32> -> tensor<8x16x4xf32>
  %4 = loom.reduce_sum %x [] : tensor<8x16x4xf32> -> tensor<8x16x4xf32>
  return
}

// -----

// CHECK-LABEL: func @layers
func.func @layers(%s: tensor<8x12x128x128xf32>, %x: tensor<8x128x768xf32>, %g: tensor<768xf32>,
                  %b: tensor<768xf32>, %logits: tensor<1024x50257xf32>, %labels: tensor<1024xi64>,
                  %logits3: tensor<8x128x50257xf32>, %labels3: tensor<8x128xi32>,
                  %scale: tensor<f32>, %blogits: tensor<1024x50257xbf16>) {
  // CHECK: loom.softmax %{{.*}} axis 3 : tensor<8x12x128x128xf32>
  %0 = loom.softmax %s axis 3 : tensor<8x12x128x128xf32>
  // CHECK: loom.log_softmax %{{.*}} axis 0 : tensor<8x12x128x128xf32>
  %1 = loom.log_softmax %s axis 0 : tensor<8x12x128x128xf32>
  // CHECK: loom.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis 2 : tensor<8x128x768xf32>, tensor<768xf32>
  %2 = loom.layer_norm %x, %g, %b axis 2 : tensor<8x128x768xf32>, tensor<768xf32>
  // CHECK: loom.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis 2 epsilon 9.9999999999999995E-7 : tensor<8x128x768xf32>, tensor<768xf32>
  %3 = loom.layer_norm %x, %g, %b axis 2 epsilon 1.0e-6 : tensor<8x128x768xf32>, tensor<768xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = loom.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} axis 2 epsilon 9.9999999999999995E-7 : tensor<8x128x768xf32>, tensor<768xf32>
  %dx, %dg, %db = loom.layer_norm_grad %x, %g, %x axis 2 epsilon 1.0e-6 : tensor<8x128x768xf32>, tensor<768xf32>
  // Mixed precision: a bf16 result, a bf16 dout.
  // CHECK: %[[LNB:.*]] = loom.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis 2 : tensor<8x128x768xf32>, tensor<768xf32> -> tensor<8x128x768xbf16>
  %lnb = loom.layer_norm %x, %g, %b axis 2 : tensor<8x128x768xf32>, tensor<768xf32> -> tensor<8x128x768xbf16>
  // CHECK: loom.layer_norm_grad %{{.*}}, %{{.*}}, %[[LNB]] axis 2 : tensor<8x128x768xf32>, tensor<768xf32> dout tensor<8x128x768xbf16>
  %dxb:3 = loom.layer_norm_grad %x, %g, %lnb axis 2 : tensor<8x128x768xf32>, tensor<768xf32> dout tensor<8x128x768xbf16>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = loom.fused_layer_norm_grad %{{.*}}, %{{.*}}, %[[LNB]] add %{{.*}} axis 2 : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>, tensor<8x128x768xf32>) -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>)
  %fdx:3 = loom.fused_layer_norm_grad %x, %g, %lnb add %x axis 2 : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>, tensor<8x128x768xf32>) -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>)
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = loom.fused_layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} add %{{.*}} axis 2 epsilon 9.9999999999999995E-7 : {{.*}} -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>)
  %fdxb:4 = loom.fused_layer_norm_grad %x, %g, %x add %x axis 2 epsilon 1.0e-6 : (tensor<8x128x768xf32>, tensor<768xf32>, tensor<8x128x768xf32>, tensor<8x128x768xf32>) -> (tensor<8x128x768xf32>, tensor<768xf32>, tensor<768xf32>, tensor<8x128x768xbf16>)
  // CHECK: %{{.*}}, %{{.*}} = loom.dropout %{{.*}} ratio 1.000000e-01 seed 7 : tensor<8x128x768xf32>
  %4:2 = loom.dropout %x ratio 0.1 seed 7 : tensor<8x128x768xf32>
  // CHECK: loom.dropout %{{.*}} ratio 5.000000e-01 : tensor<8x128x768xf32>
  %5:2 = loom.dropout %x ratio 0.5 : tensor<8x128x768xf32>
  // CHECK: loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<1024x50257xf32>, tensor<1024xi64>) -> tensor<f32>
  %6 = loom.cross_entropy %logits, %labels : (tensor<1024x50257xf32>, tensor<1024xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy %{{.*}}, %{{.*}} reduction none ignore_index -100 : (tensor<8x128x50257xf32>, tensor<8x128xi32>) -> tensor<8x128xf32>
  %7 = loom.cross_entropy %logits3, %labels3 reduction none ignore_index -100 : (tensor<8x128x50257xf32>, tensor<8x128xi32>) -> tensor<8x128xf32>
  // CHECK: loom.cross_entropy %{{.*}}, %{{.*}} reduction sum : (tensor<1024x50257xf32>, tensor<1024xi64>) -> tensor<f32>
  %8 = loom.cross_entropy %logits, %labels reduction sum : (tensor<1024x50257xf32>, tensor<1024xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1024x50257xf32>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xf32>
  %9 = loom.cross_entropy_grad %logits, %labels, %scale : (tensor<1024x50257xf32>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xf32>
  // CHECK: loom.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100 : (tensor<8x128x50257xf32>, tensor<8x128xi32>, tensor<8x128xf32>) -> tensor<8x128x50257xbf16>
  %10 = loom.cross_entropy_grad %logits3, %labels3, %7 ignore_index -100 : (tensor<8x128x50257xf32>, tensor<8x128xi32>, tensor<8x128xf32>) -> tensor<8x128x50257xbf16>
  // bf16 logits give an f32 loss.
  // CHECK: loom.cross_entropy %{{.*}}, %{{.*}} : (tensor<1024x50257xbf16>, tensor<1024xi64>) -> tensor<f32>
  %11 = loom.cross_entropy %blogits, %labels : (tensor<1024x50257xbf16>, tensor<1024xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xbf16>
  %12 = loom.cross_entropy_grad %blogits, %labels, %11 : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xbf16>
  // Padded logits: the first 50000 of the 50257 entries are classes.
  // CHECK: loom.cross_entropy %{{.*}}, %{{.*}} ignore_index -100 classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>) -> tensor<f32>
  %13 = loom.cross_entropy %blogits, %labels ignore_index -100 classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>) -> tensor<f32>
  // CHECK: loom.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xbf16>
  %14 = loom.cross_entropy_grad %blogits, %labels, %13 classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> tensor<1024x50257xbf16>
  // CHECK: loom.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100 classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> (tensor<f32>, tensor<1024x50257xbf16>)
  %fl, %fd = loom.cross_entropy_with_grad %blogits, %labels, %scale ignore_index -100 classes 50000 : (tensor<1024x50257xbf16>, tensor<1024xi64>, tensor<f32>) -> (tensor<f32>, tensor<1024x50257xbf16>)
  // CHECK: loom.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} reduction none : (tensor<8x128x50257xf32>, tensor<8x128xi32>, tensor<8x128xf32>) -> (tensor<8x128xf32>, tensor<8x128x50257xf32>)
  %nl, %nd = loom.cross_entropy_with_grad %logits3, %labels3, %7 reduction none : (tensor<8x128x50257xf32>, tensor<8x128xi32>, tensor<8x128xf32>) -> (tensor<8x128xf32>, tensor<8x128x50257xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @fusion
// CHECK:         %[[F:.*]] = loom.fusion(%{{.*}}, %{{.*}}) : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32> {
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<8x32xf32>, %{{.*}}: tensor<32xf32>):
// CHECK-NEXT:      loom.bias_add
// CHECK-NEXT:      loom.gelu
// CHECK-NEXT:      loom.yield
func.func @fusion(%h: tensor<8x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %0 = loom.fusion(%h, %b) : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %bias: tensor<32xf32>):
    %1 = loom.bias_add %x, %bias : tensor<8x32xf32>, tensor<32xf32>
    %2 = loom.gelu %1 : tensor<8x32xf32>
    loom.yield %2 : tensor<8x32xf32>
  }
  return %0 : tensor<8x32xf32>
}

// -----

// A training step's dropout, and a rank's block of a split one.
func.func @dropout_blocks(%x: tensor<8x128x768xf32>, %step: tensor<f64>, %at: tensor<3xi64>) {
  // CHECK: loom.dropout %{{.*}} ratio 1.000000e-01 seed 7 step %{{.*}} {index_base = 4096 : i64} : tensor<8x128x768xf32>
  %0:2 = loom.dropout %x ratio 0.1 seed 7 step %step {index_base = 4096} : tensor<8x128x768xf32>
  // CHECK: loom.dropout %{{.*}} ratio 1.000000e-01 step %{{.*}} at %{{.*}} of [16, 128, 1536] : tensor<8x128x768xf32>
  %1:2 = loom.dropout %x ratio 0.1 step %step at %at of [16, 128, 1536] : tensor<8x128x768xf32>
  return
}

// -----

// CHECK-LABEL: func.func @training
// CHECK:         loom.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov}
// CHECK:         loom.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {lr = 1.000000e-03 : f64}
// CHECK:         loom.assign @w, %{{.*}} : tensor<4xf32>
loom.parameter @w trainable : tensor<4xf32>
func.func @training(%g: tensor<4xf32>, %step: tensor<f64>, %s: tensor<4xf32>) {
  %w = loom.param @w : tensor<4xf32>
  %0:2 = loom.sgd_update %w, %g, %step, %s {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %1:3 = loom.adamw_update %0#0, %g, %step, %s, %s {lr = 1.0e-3 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  loom.assign @w, %1#0 : tensor<4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @scatter_add
// CHECK: loom.scatter_add %{{.*}}[%{{.*}}] : (tensor<8x128x32xf32>, tensor<8x128xi64>) -> tensor<64x32xf32>
func.func @scatter_add(%dy: tensor<8x128x32xf32>, %ids: tensor<8x128xi64>) -> tensor<64x32xf32> {
  %0 = loom.scatter_add %dy[%ids] : (tensor<8x128x32xf32>, tensor<8x128xi64>) -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK: %{{.*}}, %[[LSE:.*]] = loom.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.250000e-01 : (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>)
// CHECK: loom.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LSE]], %{{.*}} mask %{{.*}} scale 1.250000e-01 mask_value -1.000000e+04 : {{.*}} -> (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>)
// CHECK: loom.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 : (tensor<16x8xf64>, tensor<12x8xf64>, tensor<12x6xf64>) -> (tensor<16x6xf64>, tensor<16xf64>)
func.func @attention(%q: tensor<2x4x16x8xbf16>, %k: tensor<2x4x12x8xbf16>, %v: tensor<2x4x12x6xbf16>, %m: tensor<1x4x16x12xi1>, %d: tensor<2x4x16xf32>,
                     %q2: tensor<16x8xf64>, %k2: tensor<12x8xf64>, %v2: tensor<12x6xf64>) -> (tensor<2x4x16x8xbf16>, tensor<16x6xf64>) {
  %o, %lse = loom.attention %q, %k, %v mask %m scale 0.125
      : (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %o mask %m scale 0.125 mask_value -1.0e+04
      : (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>, tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x6xbf16>, tensor<1x4x16x12xi1>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x12x8xbf16>, tensor<2x4x12x6xbf16>)
  %o2, %lse2 = loom.attention %q2, %k2, %v2 scale 1.0 : (tensor<16x8xf64>, tensor<12x8xf64>, tensor<12x6xf64>) -> (tensor<16x6xf64>, tensor<16xf64>)
  return %dq, %o2 : tensor<2x4x16x8xbf16>, tensor<16x6xf64>
}

// -----

// Packed q, k, v [B, S, 3, H, D]: the output is [B, S, H, D], the
// statistics [B, S, H], the gradient packed like qkv.
// CHECK-LABEL: func.func @packed_attention
// CHECK: %{{.*}}, %[[LSE:.*]] = loom.packed_attention %{{.*}} mask %{{.*}} scale 1.250000e-01 : (tensor<2x16x3x4x8xbf16>, tensor<1x4x16x16xi1>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>)
// CHECK: loom.packed_attention_grad %{{.*}}, %{{.*}}, %[[LSE]], %{{.*}} mask %{{.*}} scale 1.250000e-01 mask_value -1.000000e+04 : {{.*}} -> tensor<2x16x3x4x8xbf16>
func.func @packed_attention(%qkv: tensor<2x16x3x4x8xbf16>, %m: tensor<1x4x16x16xi1>) -> tensor<2x16x3x4x8xbf16> {
  %o, %lse = loom.packed_attention %qkv mask %m scale 0.125
      : (tensor<2x16x3x4x8xbf16>, tensor<1x4x16x16xi1>) -> (tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>)
  %d = loom.packed_attention_grad %qkv, %o, %lse, %o mask %m scale 0.125 mask_value -1.0e+04
      : (tensor<2x16x3x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4xf32>, tensor<2x16x4x8xbf16>, tensor<1x4x16x16xi1>)
      -> tensor<2x16x3x4x8xbf16>
  return %d : tensor<2x16x3x4x8xbf16>
}

// -----

// Seq-major operands [B, S, H, D]: the output is [B, Sq, H, Dv], the
// statistics [B, Sq, H]; the mask stays [B, H, Sq, Sk].
// CHECK-LABEL: func.func @attention_seq_major
// CHECK: %{{.*}}, %[[LSE:.*]] = loom.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.250000e-01 seq_major : (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x16x4x6xbf16>, tensor<2x16x4xf32>)
// CHECK: loom.attention_grad {{.*}}, %[[LSE]], %{{.*}} mask %{{.*}} scale 1.250000e-01 mask_value -1.000000e+04 seq_major : {{.*}} -> (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>)
func.func @attention_seq_major(%q: tensor<2x16x4x8xbf16>, %k: tensor<2x12x4x8xbf16>, %v: tensor<2x12x4x6xbf16>, %m: tensor<1x4x16x12xi1>, %d: tensor<2x16x4xf32>) -> tensor<2x16x4x8xbf16> {
  %o, %lse = loom.attention %q, %k, %v mask %m scale 0.125 seq_major
      : (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>, tensor<1x4x16x12xi1>) -> (tensor<2x16x4x6xbf16>, tensor<2x16x4xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %o mask %m scale 0.125 mask_value -1.0e+04 seq_major
      : (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>, tensor<2x16x4x6xbf16>, tensor<2x16x4xf32>, tensor<2x16x4x6xbf16>, tensor<1x4x16x12xi1>)
      -> (tensor<2x16x4x8xbf16>, tensor<2x12x4x8xbf16>, tensor<2x12x4x6xbf16>)
  return %dq : tensor<2x16x4x8xbf16>
}
