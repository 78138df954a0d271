// Binary ONNX files: node names become locations and appear in errors;
// truncated or foreign bytes are rejected cleanly.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_model.py named %t/named.onnx
// RUN: not loom-translate --import-onnx %t/named.onnx 2>&1 | FileCheck %s --check-prefix=NAMED
// NAMED: named.onnx: error: node '/encoder/view/Reshape' (Reshape, opset 17): cannot reshape 'tensor<2x3xf32>' (6 elements) to 7 elements

// RUN: %python %S/Inputs/make_model.py external %t/ext.onnx
// RUN: %python %S/Inputs/make_model.py truncate %t/ext.onnx %t/truncated.onnx 40
// RUN: not loom-translate --import-onnx %t/truncated.onnx 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: truncated.onnx: error: not an ONNX model: protobuf parsing failed (truncated file, or not ONNX)
// RUN: not loom-translate --import-onnx %t/ext.onnx.data 2>&1 | FileCheck %s --check-prefix=FOREIGN
// FOREIGN: error: not an ONNX model

// Locations are the ONNX node names.
// RUN: loom-translate --import-onnx %t/ext.onnx --dim batch=2 --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// LOC: loom.matmul {{.*}} loc(#[[FC:loc[0-9]*]])
// LOC: #[[FC]] = loc("fc")
