// RUN: not loom-opt --loom-select-kernels=target=tpu %s 2>&1 | FileCheck %s

// CHECK: for the --target option: Cannot find option named 'tpu'!
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
