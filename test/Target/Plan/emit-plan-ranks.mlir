// Multi-rank plans: one stream per world rank. Each rank's collectives name
// the plan group holding it (groups are numbered as first met), sends and
// receives their peer.
// RUN: split-file %s %t
// RUN: loom-opt --loom-lower-to-plan %t/spmd.mlir | loom-translate --emit-plan | FileCheck %s --check-prefix=SPMD
// RUN: loom-opt --loom-lower-to-plan %t/stages.mlir | loom-translate --emit-plan | FileCheck %s --check-prefix=STAGES
// RUN: loom-opt --loom-lower-to-plan %t/uncovered.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=UNCOVERED
// RUN: loom-opt --loom-lower-to-plan %t/overlap.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: loom-opt --loom-lower-to-plan %t/several.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=SEVERAL
// RUN: loom-opt --loom-lower-to-plan %t/mismatch.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: loom-opt --loom-lower-to-plan %t/missing.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: loom-opt --loom-lower-to-plan %t/transfer.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=TRANSFER
// RUN: loom-opt --loom-lower-to-plan %t/unreceived.mlir | not loom-translate --emit-plan 2>&1 | FileCheck %s --check-prefix=UNRECEIVED

//--- spmd.mlir
// SPMD: loom-plan 4
// SPMD:      groups 4
// SPMD-NEXT: group 0 [0,1]
// SPMD-NEXT: group 1 [0,2]
// SPMD-NEXT: group 2 [1,3]
// SPMD-NEXT: group 3 [2,3]
// SPMD:      rank 0 arena
// SPMD:      collective all_reduce a{{[0-9]+}}:f32[4] -> a{{[0-9]+}}:f32[4] group=0 op=sum
// SPMD-NEXT: collective reduce_scatter a{{[0-9]+}}:f32[4] -> a{{[0-9]+}}:f32[2] group=1 op=max
// SPMD-NEXT: collective send a{{[0-9]+}}:f32[4] -> peer=1 tag=0
// SPMD-NEXT: collective recv -> a{{[0-9]+}}:f32[4] peer=3 tag=0
// SPMD:      rank 1 arena
// SPMD:      collective all_reduce {{.*}} group=0 op=sum
// SPMD-NEXT: collective reduce_scatter {{.*}} group=2 op=max
// SPMD-NEXT: collective send {{.*}} peer=2 tag=0
// SPMD-NEXT: collective recv {{.*}} peer=0 tag=0
// SPMD:      rank 2 arena
// SPMD:      collective all_reduce {{.*}} group=3 op=sum
// SPMD:      rank 3 arena
// SPMD:      collective all_reduce {{.*}} group=3 op=sum
// SPMD-NEXT: collective reduce_scatter {{.*}} group=2 op=max
// SPMD-NEXT: collective send {{.*}} peer=0 tag=0
// SPMD-NEXT: collective recv {{.*}} peer=2 tag=0
// SPMD:      end
// SPMD:      data 0
module attributes {loom.world_size = 4 : i64} {
  func.func @step(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>, tensor<4xf32>) {
    %0 = loom.all_reduce sum %x groups [[0, 1], [2, 3]] : tensor<4xf32>
    %1 = loom.reduce_scatter max %x axis 0 groups [[0, 2], [1, 3]] : tensor<4xf32> -> tensor<2xf32>
    loom.send %x to [[0, 1], [1, 2], [2, 3], [3, 0]] tag 0 : tensor<4xf32>
    %2 = loom.recv from [[0, 1], [1, 2], [2, 3], [3, 0]] tag 0 : tensor<4xf32>
    return %0, %1, %2 : tensor<4xf32>, tensor<2xf32>, tensor<4xf32>
  }
}

//--- stages.mlir
// Two pipeline stages, each its own function and arena (the second's tanh
// writes its result in place of what it received).
// STAGES:      rank 0 arena 128
// STAGES-NEXT: input "x" a0:f32[16]
// STAGES-NEXT: kernel elementwise a0:f32[16] -> a64:f32[16]
// STAGES:      collective send a64:f32[16] -> peer=1 tag=4
// STAGES-NEXT: end
// STAGES-NEXT: rank 1 arena 64
// STAGES-NEXT: output "y" a0:f32[16]
// STAGES-NEXT: collective recv -> a0:f32[16] peer=0 tag=4
// STAGES-NEXT: kernel elementwise a0:f32[16] -> a0:f32[16]
module attributes {loom.world_size = 2 : i64} {
  func.func @first(%x: tensor<16xf32> {onnx.name = "x"}) attributes {loom.ranks = array<i64: 0>} {
    %h = loom.relu %x : tensor<16xf32>
    loom.send %h to [[0, 1]] tag 4 : tensor<16xf32>
    return
  }
  func.func @second() -> (tensor<16xf32> {onnx.name = "y"}) attributes {loom.ranks = array<i64: 1>} {
    %h = loom.recv from [[0, 1]] tag 4 : tensor<16xf32>
    %y = loom.tanh %h : tensor<16xf32>
    return %y : tensor<16xf32>
  }
}

//--- uncovered.mlir
// UNCOVERED: error: no function runs on rank 2 of the module's loom.world_size 3
module attributes {loom.world_size = 3 : i64} {
  func.func @a() attributes {loom.ranks = array<i64: 0>} { return }
  func.func @b() attributes {loom.ranks = array<i64: 1>} { return }
}

//--- overlap.mlir
// OVERLAP: error: 'func.func' op runs on rank 1, which @a runs too
module attributes {loom.world_size = 2 : i64} {
  func.func @a() attributes {loom.ranks = array<i64: 0, 1>} { return }
  func.func @b() attributes {loom.ranks = array<i64: 1>} { return }
}

//--- several.mlir
// SEVERAL: error: the module has several functions; name the one to run, or give each the ranks that run it (loom.ranks)
module {
  func.func @a() { return }
  func.func @b() { return }
}

//--- mismatch.mlir
// Stages whose collectives on one group disagree would fail (or hang) at run
// time; the plan is refused when it is written.
// MISMATCH: error: the ranks' communication does not match: mismatched collectives #0 on group 0: rank 0 instruction 0 ({{.*}}) calls all_reduce(4 x f32, sum), rank 1 instruction 0 ({{.*}}) calls all_reduce(4 x f32, max)
module attributes {loom.world_size = 2 : i64} {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.ranks = array<i64: 0>} {
    %0 = loom.all_reduce sum %x groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.ranks = array<i64: 1>} {
    %0 = loom.all_reduce max %x groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

//--- missing.mlir
// MISSING: error: the ranks' communication does not match: rank 1 instruction 1 ({{.*}}): all_gather(4 x f32) is #1 on group 0, but rank 0 issues only 1 collective(s) there: it would wait forever
module attributes {loom.world_size = 2 : i64} {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.ranks = array<i64: 0>} {
    %0 = loom.all_reduce sum %x groups [[0, 1]] : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) attributes {loom.ranks = array<i64: 1>} {
    %0 = loom.all_reduce sum %x groups [[0, 1]] : tensor<4xf32>
    %1 = loom.all_gather %x axis 0 groups [[0, 1]] : tensor<4xf32> -> tensor<8xf32>
    return %0, %1 : tensor<4xf32>, tensor<8xf32>
  }
}

//--- transfer.mlir
// TRANSFER: error: the ranks' communication does not match: transfer #0 from rank 0 to rank 1 with tag 4: rank 0 instruction 0 ({{.*}}) sends (16 x f32), rank 1 instruction 0 ({{.*}}) receives (16 x i32)
module attributes {loom.world_size = 2 : i64} {
  func.func @first(%x: tensor<16xf32>) attributes {loom.ranks = array<i64: 0>} {
    loom.send %x to [[0, 1]] tag 4 : tensor<16xf32>
    return
  }
  func.func @second() -> tensor<16xi32> attributes {loom.ranks = array<i64: 1>} {
    %h = loom.recv from [[0, 1]] tag 4 : tensor<16xi32>
    return %h : tensor<16xi32>
  }
}

//--- unreceived.mlir
// UNRECEIVED: error: the ranks' communication does not match: 1 send(s) but 0 receive(s) from rank 0 to rank 1 with tag 4 (rank 0 instruction 0 ({{.*}})): a transfer would wait forever
module attributes {loom.world_size = 2 : i64} {
  func.func @first(%x: tensor<16xf32>) attributes {loom.ranks = array<i64: 0>} {
    loom.send %x to [[0, 1]] tag 4 : tensor<16xf32>
    return
  }
  func.func @second() -> tensor<16xf32> attributes {loom.ranks = array<i64: 1>} {
    %h = loom.recv from [[0, 1]] tag 5 : tensor<16xf32>
    return %h : tensor<16xf32>
  }
}
