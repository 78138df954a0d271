// ONNX external data: referenced in place by default, mapped into blobs with
// --external-weights=load, skipped with --no-weights; broken references are
// errors.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_model.py external %t/ext.onnx
// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 | FileCheck %s --check-prefix=REF
// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 | loom-opt | FileCheck %s --check-prefix=REF
// REF: loom.parameter @w trainable : tensor<4x8xf32> = #loom.external_data<"{{.*}}/ext.onnx.data", offset = 0, length = 128>
// REF: loom.parameter @b trainable : tensor<8xf32> = #loom.external_data<"{{.*}}/ext.onnx.data", offset = 128, length = 32>

// The w values are 0, 1/8, ..., 31/8; b is linspace(-1, 1, 8).
// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 --external-weights=load | FileCheck %s --check-prefix=LOAD
// LOAD: loom.parameter @w trainable : tensor<4x8xf32> = dense<{{\[\[}}0.000000e+00, 1.250000e-01,
// LOAD-SAME: 3.875000e+00]]>
// LOAD: loom.parameter @b trainable : tensor<8xf32> = dense<[-1.000000e+00, {{.*}}, 1.000000e+00]>
// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 --external-weights=load --inline-limit=0 --emit-bytecode -o %t/ext.mlirbc
// RUN: loom-opt %t/ext.mlirbc | FileCheck %s --check-prefix=BYTECODE
// BYTECODE: loom.parameter @w trainable : tensor<4x8xf32> = dense_resource<w>
// BYTECODE: w: "0x04000000000000000000003E{{.*}}00007840"

// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 --no-weights | FileCheck %s --check-prefix=SHAPES
// SHAPES: loom.parameter @w trainable : tensor<4x8xf32>{{$}}

// A data file too short for the tensors is an error, as is a missing one.
// RUN: %python %S/Inputs/make_model.py truncate %t/ext.onnx.data %t/short.data 140
// RUN: mv %t/short.data %t/ext.onnx.data
// RUN: not loom-translate --import-onnx %t/ext.onnx --dim batch=2 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: error: tensor 'b' needs bytes [128, 160) of '{{.*}}ext.onnx.data', which has only 140
// RUN: rm %t/ext.onnx.data
// RUN: not loom-translate --import-onnx %t/ext.onnx --dim batch=2 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: cannot read external data file '{{.*}}ext.onnx.data' of tensor 'w': No such file or directory
