// Every verifier error of the reductions: reduce_sum, reduce_mean, reduce_max
// and cumsum.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @reduce_unsorted(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op axes [1, 0] must be sorted, unique and within [0, 2)}}
  %0 = loom.reduce_sum %x [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

// Only bf16 and f16 sums may widen (to f32).
func.func @reduce_sum_widens_f32(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_sum' op has result type 'tensor<4xf64>' but its operands and attributes give 'tensor<4xf32>'}}
  %0 = loom.reduce_sum %x [1] : tensor<4x8xf32> -> tensor<4xf64>
  return
}

// -----

func.func @reduce_max_widens(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{'loom.reduce_max' op has result type 'tensor<4xf32>' but its operands and attributes give 'tensor<4xbf16>'}}
  %0 = loom.reduce_max %x [1] : tensor<4x8xbf16> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_max' op axes [2] must be sorted, unique and within [0, 2)}}
  %0 = loom.reduce_max %x [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @reduce_keepdims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reduce_mean' op has result type 'tensor<4xf32>' but its operands and attributes give 'tensor<4x1xf32>'}}
  %0 = loom.reduce_mean %x [1] keepdims : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'loom.cumsum' op axis 2 is out of range for 'tensor<4x3xf32>'}}
  %0 = loom.cumsum %x axis 2 : tensor<4x3xf32>
  return
}
