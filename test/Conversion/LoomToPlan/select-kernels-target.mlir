// RUN: not loom-opt --loom-select-kernels=target=tpu %s 2>&1 | FileCheck %s

// CHECK: error: unknown kernel target 'tpu' (known: cpu)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
