// Every verifier error of the shape ops: reshape, transpose, slice, concat,
// split and broadcast.
// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @reshape_count(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.reshape' op cannot reshape 'tensor<4x8xf32>' (32 elements) to 'tensor<4x4xf32>' (16 elements)}}
  %0 = loom.reshape %x : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.transpose' op permutation has 3 entries for an input of rank 2}}
  %0 = loom.transpose %x [0, 1, 2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.transpose' op [1, 1] is not a permutation of 0..1}}
  %0 = loom.transpose %x [1, 1] : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @slice_ranges(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op expected 2 ranges (one per dimension), got 1}}
  %0 = loom.slice %x [0:2] : tensor<4x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op range 2:9 of dimension 1 is not within 0:8 with start <= limit}}
  %0 = loom.slice %x [0:4, 2:9] : tensor<4x8xf32> -> tensor<4x7xf32>
  return
}

// -----

func.func @slice_reversed(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op range 3:1 of dimension 0 is not within 0:4 with start <= limit}}
  %0 = loom.slice %x [3:1, 0:8] : tensor<4x8xf32> -> tensor<0x8xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op stride 0 of dimension 0 must be positive}}
  %0 = loom.slice %x [0:4:0, 0:8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{'loom.concat' op needs at least one input}}
  %0 = loom.concat axis 0 : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.concat' op axis 1 is out of range for inputs of rank 1}}
  %0 = loom.concat %a, %a axis 1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<4xf32>, %b: tensor<4x1xf32>) {
  // expected-error @+1 {{'loom.concat' op input #1 is 'tensor<4x1xf32>' but input #0 is 'tensor<4xf32>'; inputs need one rank and element type}}
  %0 = loom.concat %a, %b axis 0 : (tensor<4xf32>, tensor<4x1xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_other_dims(%a: tensor<4x3xf32>, %b: tensor<5x3xf32>) {
  // expected-error @+1 {{'loom.concat' op input #1 has size 5 in dimension 0 but input #0 has 4; only the axis dimension 1 may differ}}
  %0 = loom.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op axis 2 is out of range for an input of rank 2}}
  %0:2 = loom.split %x axis 2 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result sizes along axis 1 add up to 7 but the input has 8}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @split_other_dims(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result #1 has size 2 in dimension 0 but the input has 4}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @split_element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op result #0 is 'tensor<4x4xbf16>' but the input is 'tensor<4x8xf32>'; pieces keep the rank and element type}}
  %0:2 = loom.split %x axis 1 : tensor<4x8xf32> -> tensor<4x4xbf16>, tensor<4x4xf32>
  return
}

// -----

func.func @split_nothing(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.split' op needs at least one result}}
  "loom.split"(%x) {axis = 1 : i64} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @broadcast_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast 3x4 to 8x5: input dimensions, aligned with the trailing result dimensions, must equal them or be 1}}
  %0 = loom.broadcast %x : tensor<3x4xf32> -> tensor<8x5xf32>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast 2x3x4 to 3x4}}
  %0 = loom.broadcast %x : tensor<2x3x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @concat_overflow(%x: tensor<6917529027641081856xi1>) {
  // expected-error @+1 {{'loom.concat' op concatenated size along axis 0 does not fit in 64 bits}}
  %0 = loom.concat %x, %x axis 0 : (tensor<6917529027641081856xi1>, tensor<6917529027641081856xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @split_overflow(%x: tensor<2xf32>) {
  // expected-error @+1 {{'loom.split' op result sizes along axis 0 add up to more than fits in 64 bits}}
  %0:3 = loom.split %x axis 0 : tensor<2xf32>
      -> tensor<6148914691236517206xf32>, tensor<6148914691236517206xf32>, tensor<6148914691236517206xf32>
  return
}

// -----

func.func @slice_attribute_lengths(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.slice' op expected 2 ranges (one per dimension), got 2 starts, 2 limits and 1 strides}}
  %0 = "loom.slice"(%x) {starts = array<i64: 0, 0>, limits = array<i64: 4, 8>, strides = array<i64: 1>}
      : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}
