// The step built with 3 of its 5 microbatches, partitioned or not, then
// unrolled, is the step built with all 5: the same module, op for op.
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=5 erase-sources=true" %S/Inputs/split-stages-model.mlir -o %t.all
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=5 microbatch-copies=3 erase-sources=true" --loom-unroll-microbatches %S/Inputs/split-stages-model.mlir -o %t.unrolled
// RUN: diff %t.all %t.unrolled
// Under ZeRO-2 over dp 2, partitioning reduces and scatters each
// microbatch's gradient inside the microbatch.
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=5 erase-sources=true" --loom-annotate-shardings=mesh=dp=2 --loom-data-parallel=axis=dp --loom-propagate-sharding=zero=2 --loom-partition %S/Inputs/split-stages-model.mlir -o %t.zero-all
// RUN: loom-opt "--loom-cut-stages=function=forward stages=2 stage-cuts=l0.add" --loom-autodiff=function=forward "--loom-build-train-step=function=forward_grad optimizer=sgd lr=0.1 grad-accum=5 microbatch-copies=3 erase-sources=true" --loom-annotate-shardings=mesh=dp=2 --loom-data-parallel=axis=dp --loom-propagate-sharding=zero=2 --loom-partition --loom-unroll-microbatches %S/Inputs/split-stages-model.mlir -o %t.zero-unrolled
// RUN: diff %t.zero-all %t.zero-unrolled
// RUN: FileCheck %s --check-prefix=ZERO < %t.zero-unrolled
// RUN: loom-opt --loom-unroll-microbatches %s | FileCheck %s

// Each of the 5 microbatches reduces and scatters its own gradient shares.
// ZERO-COUNT-10: loom.reduce_scatter sum

// Microbatch 2 is made again before the original, whose ops and sums
// become microbatch 3's (its slice of the arguments and its dropout's
// elements numbered after microbatch 2's; microbatch 0's index_base is
// left at its default, as a printed step has it): each sum gets the new
// term, and the return reads the last sum.
// CHECK-LABEL: func.func @step
// CHECK-NOT:     loom.microbatches
// CHECK:         %[[X2:.*]] = loom.slice %arg0 [4:6]
// CHECK:         %[[Y2:.*]], %{{.*}} = loom.dropout %[[X2]] ratio 5.000000e-01 seed 7 step %{{.*}} {index_base = 4 : i64, loom.microbatch = 2 : i64, loom.stage = 0 : i64}
// CHECK-NEXT:    %[[S2:.*]] = loom.add %[[S1:.*]], %[[Y2]]
// CHECK-NEXT:    %[[X3:.*]] = loom.slice %arg0 [6:8]
// CHECK-NEXT:    %[[Y3:.*]], %{{.*}} = loom.dropout %[[X3]] ratio 5.000000e-01 seed 7 step %{{.*}} {index_base = 6 : i64, loom.microbatch = 3 : i64, loom.stage = 0 : i64}
// CHECK-NEXT:    %[[S3:.*]] = loom.add %[[S2]], %[[Y3]]
// CHECK-NEXT:    return %[[S3]]
func.func @step(%x: tensor<8xf32>, %step: tensor<f64>) -> tensor<2xf32> attributes {loom.microbatches = 4 : i64} {
  %x0 = loom.slice %x [0:2] : tensor<8xf32> -> tensor<2xf32>
  %y0, %m0 = loom.dropout %x0 ratio 0.5 seed 7 step %step {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %x1 = loom.slice %x [2:4] : tensor<8xf32> -> tensor<2xf32>
  %y1, %m1 = loom.dropout %x1 ratio 0.5 seed 7 step %step {index_base = 2 : i64, loom.microbatch = 1 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s1 = loom.add %y0, %y1 : tensor<2xf32>
  %x2 = loom.slice %x [4:6] : tensor<8xf32> -> tensor<2xf32>
  %y2, %m2 = loom.dropout %x2 ratio 0.5 seed 7 step %step {index_base = 4 : i64, loom.microbatch = 2 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  %s2 = loom.add %s1, %y2 : tensor<2xf32>
  return %s2 : tensor<2xf32>
}

// A function without loom.microbatches stays as it is.
// CHECK-LABEL: func.func @whole
// CHECK-NEXT:    loom.exp
// CHECK-NEXT:    return
func.func @whole(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = loom.exp %x {loom.microbatch = 0 : i64, loom.stage = 0 : i64} : tensor<2xf32>
  return %y : tensor<2xf32>
}
