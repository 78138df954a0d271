// RUN: loom-opt --split-input-file --verify-diagnostics --loom-unroll-microbatches %s
// RUN: not loom-opt --loom-build-train-step="function=f_grad grad-accum=4 microbatch-copies=2" %s --split-input-file 2>&1 | FileCheck %s --check-prefix=COPIES

// COPIES: microbatch-copies must be 0 (all) or at least 3

// Two microbatches built are too few to tell how the others differ.
// expected-error @+1 {{has 2 microbatches built of its loom.microbatches = 4: loom-unroll-microbatches needs at least 3}}
func.func @two(%x: tensor<8xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  return %s1 : tensor<2xf32>
}

// -----

// Slices that do not step evenly (0, 2, 6) say nothing of microbatch 3's.
func.func @uneven(%x: tensor<10xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<10xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<10xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  // expected-error @+1 {{'loom.slice' op of microbatch 2 (op #0 of each microbatch): its attribute 'limits' is 2, 4, 8 in microbatches 0 to 2, which does not step evenly}}
  %x2 = loom.slice %x [6:8] : tensor<10xf32> -> tensor<2xf32>
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}

// -----

// Microbatch 1 runs another op than microbatch 2.
func.func @unlike(%x: tensor<8xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  // expected-note @+1 {{the counterpart}}
  %y1 = loom.neg %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  // expected-error @+1 {{'loom.exp' op of microbatch 2 is unlike its counterpart in microbatch 1 (op #1 of each): 'loom.neg' against 'loom.exp'}}
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}

// -----

// What reads microbatch 2's value after it is no sum over microbatches:
// its counterparts for microbatch 3 would be unknown.
func.func @not_a_sum(%x: tensor<8xf32>) -> (tensor<2xf32>, tensor<2xf32>) attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  // expected-note @+1 {{the value}}
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  // expected-error @+1 {{'loom.mul' op reads a value of microbatch 2 but is no sum over the microbatches}}
  %p = loom.mul %s2, %y2 : tensor<2xf32>
  return %s2, %p : tensor<2xf32>, tensor<2xf32>
}

// -----

// A sum whose earlier terms are not the other microbatches' counterparts.
func.func @wrong_terms(%x: tensor<8xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y1, %y0 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'loom.add' op adds microbatch 2's value to what is not the sum of the earlier microbatches' counterparts}}
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}

// -----

// Microbatch 1's sum comes after microbatch 2 began: the new microbatches,
// which go before microbatch 2, could not add to it.
func.func @late_sum(%x: tensor<8xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  // expected-note @+1 {{the value}}
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'loom.add' op reads a value made after microbatch 2 began}}
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}

// -----

// A gradient sum over microbatches that is no chain over their values
// would miss the new microbatches' terms.
func.func @stray_sum(%x: tensor<8xf32>, %a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  // expected-error @+1 {{'loom.add' op sums gradients over microbatches, but not as a sum loom-unroll-microbatches extends}}
  %t = loom.add %a, %a {loom.gradient_accumulation} : tensor<2xf32>
  return %s2, %t : tensor<2xf32>, tensor<2xf32>
}

// -----

// Microbatch 1's exp is not microbatch 2's: an attribute that is no
// integer differs, and the error names the microbatch that differs.
func.func @other_attribute(%x: tensor<8xf32>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0 = loom.exp %x0 {loom.microbatch = 0 : i64, loom.stage = 0 : i64, tag = "a"} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  // expected-note @+1 {{the counterpart}}
  %y1 = loom.exp %x1 {loom.microbatch = 1 : i64, loom.stage = 0 : i64, tag = "b"} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  // expected-error @+1 {{'loom.exp' op of microbatch 2 is unlike its counterpart in microbatch 1 (op #1 of each): attribute 'tag' differs, and not as an integer}}
  %y2 = loom.exp %x2 {loom.microbatch = 2 : i64, loom.stage = 0 : i64, tag = "a"} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}
