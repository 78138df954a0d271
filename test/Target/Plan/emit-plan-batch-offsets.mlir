// `loom.batch_offsets` on a function's arguments: which rows of a training
// step's global batch each rank's input holds, one offset per rank that runs
// the function (in loom.ranks order), written as `rows=OFFSET` on the plan's
// input lines. Bufferization carries them onto the function's plan.input
// (`rows [...]`), so loom-run and loom-opt | loom-translate write the same.
// RUN: split-file %s %t
// RUN: loom-run %t/stages.mlir --emit-plan %t/stages.plan
// RUN: grep -a -e '^rank' -e '^input' %t/stages.plan | FileCheck %s --check-prefix=STAGES
// RUN: loom-opt %t/stages.mlir --loom-lower-to-plan | FileCheck %s --check-prefix=LOWERED
// RUN: loom-opt %t/stages.mlir --loom-lower-to-plan | loom-translate --emit-plan -o %t/translated.plan
// RUN: grep -a -e '^rank' -e '^input' %t/translated.plan | FileCheck %s --check-prefix=STAGES
// RUN: loom-run %t/spmd.mlir --emit-plan %t/spmd.plan
// RUN: grep -a -e '^rank' -e '^input' %t/spmd.plan | FileCheck %s --check-prefix=SPMD
// RUN: not loom-run %t/count.mlir --emit-plan %t/count.plan 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not loom-run %t/scalar.mlir --emit-plan %t/scalar.plan 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not loom-translate --emit-plan %t/lowered.mlir 2>&1 | FileCheck %s --check-prefix=LOWERED-COUNT

//--- stages.mlir
// Two functions: rank 1's input holds rows [4, 6), rank 2's [6, 8); rank 0's
// input has no offsets (the whole batch), rank 0's "y" none either.
// STAGES:      rank 0 arena
// STAGES-NEXT: input "a" a{{[0-9]+}}:f32[8,2]{{$}}
// STAGES-NEXT: rank 1 arena
// STAGES-NEXT: input "b" a{{[0-9]+}}:f32[2,2] rows=4
// STAGES-NEXT: input "c" a{{[0-9]+}}:f32[2]{{$}}
// STAGES-NEXT: rank 2 arena
// STAGES-NEXT: input "b" a{{[0-9]+}}:f32[2,2] rows=6
// STAGES-NEXT: input "c" a{{[0-9]+}}:f32[2]{{$}}
// LOWERED-LABEL: func.func @halves
// LOWERED: plan.input "b" offset {{[0-9]+}} rows [4, 6] : memref<2x2xf32>
// LOWERED: plan.input "c" offset {{[0-9]+}} : memref<2xf32>
module attributes {loom.world_size = 3 : i64} {
  func.func @whole(%a: tensor<8x2xf32> {onnx.name = "a"}) -> (tensor<8x2xf32> {onnx.name = "y"}) attributes {loom.ranks = array<i64: 0>} {
    %0 = loom.relu %a : tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
  func.func @halves(%b: tensor<2x2xf32> {onnx.name = "b", loom.batch_offsets = array<i64: 4, 6>}, %c: tensor<2xf32> {onnx.name = "c"}) -> (tensor<2x2xf32> {onnx.name = "y"}) attributes {loom.ranks = array<i64: 1, 2>} {
    %0 = loom.bias_add %b, %c : tensor<2x2xf32>, tensor<2xf32>
    return %0 : tensor<2x2xf32>
  }
}

//--- spmd.mlir
// A function without loom.ranks runs on every rank; an unnamed argument is
// "arg0".
// SPMD:      rank 0 arena
// SPMD-NEXT: input "arg0" a{{[0-9]+}}:f32[3] rows=0
// SPMD-NEXT: rank 1 arena
// SPMD-NEXT: input "arg0" a{{[0-9]+}}:f32[3] rows=3
module attributes {loom.world_size = 2 : i64} {
  func.func @step(%x: tensor<3xf32> {loom.batch_offsets = array<i64: 0, 3>}) -> tensor<3xf32> {
    %0 = loom.relu %x : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

//--- count.mlir
// COUNT: count.mlir:{{[0-9]+}}:{{[0-9]+}}: error: argument #0 has 1 batch row offset(s) ('loom.batch_offsets'), but @step runs on 2 rank(s): give one per rank, in loom.ranks order
module attributes {loom.world_size = 2 : i64} {
  func.func @step(%x: tensor<4xf32> {loom.batch_offsets = array<i64: 0>}) -> tensor<4xf32> attributes {loom.ranks = array<i64: 0, 1>} {
    %0 = loom.relu %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

//--- scalar.mlir
// SCALAR: error: argument #0 has 'loom.batch_offsets', but a scalar has no batch rows
func.func @step(%x: tensor<f32> {loom.batch_offsets = array<i64: 0>}) -> tensor<f32> {
  %0 = loom.relu %x : tensor<f32>
  return %0 : tensor<f32>
}

//--- lowered.mlir
// Plan-dialect IR written by hand: the emitter checks the rows against the
// ranks too.
// LOWERED-COUNT: error: 'plan.input' op has 1 batch row offset(s) but @step runs on 2 rank(s)
module attributes {loom.world_size = 2 : i64} {
  func.func @step() attributes {plan.arena_size = 64 : i64} {
    %x = plan.input "x" offset 0 rows [0] : memref<2xf32>
    plan.output "y", %x : memref<2xf32>
    return
  }
}
