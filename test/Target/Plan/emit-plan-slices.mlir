// Sharded parameters in a partitioned (SPMD) module: the parameter keeps
// its global type and sharding, each rank reads its shard, and the plan
// holds one weight per distinct slice (`slice [O] of [G]`, plan format 4),
// sharing the parameter's name. Its bytes are the rank's block of the
// initial value, whatever holds it: dense elements, a splat, i1, a
// dense_resource blob, external data (only the bytes the block spans are
// read), or a bf16 copy (#loom.cast_of, sliced as its source). Running the
// plan returns each rank's blocks, which must be the global value's.
// RUN: rm -rf %t && split-file %s %t
// RUN: %python -c "import numpy as np; np.arange(10, dtype=np.float64).tofile('%t/ext.bin')"
// RUN: sed 's|DATA_FILE|%t/ext.bin|' %t/tp.mlir > %t/tp-data.mlir
// RUN: loom-run %t/tp-data.mlir --ranks 2 --emit-plan %t/tp.plan --output-dir %t/out > /dev/null
// RUN: grep -a -e '^weight' -e '^rank' -e '^output' %t/tp.plan | FileCheck %s --check-prefix=TP
// RUN: %python %t/check.py %t/out | FileCheck %s --check-prefix=VALUES
// RUN: loom-opt --loom-lower-to-plan %t/dptp.mlir | loom-translate --emit-plan | FileCheck %s --check-prefix=DPTP
// RUN: loom-opt --loom-lower-to-plan %t/dptp.mlir | FileCheck %s --check-prefix=LOWERED
// RUN: not loom-run %t/partial.mlir --emit-plan %t/partial.plan 2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: not loom-run %t/outside.mlir --emit-plan %t/outside.plan 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: loom-run %t/copy.mlir --ranks 2 --emit-plan %t/copy.plan --output-dir %t/copy-out > /dev/null
// RUN: grep -a '^weight' %t/copy.plan | FileCheck %s --check-prefix=COPY
// RUN: %python -c "import numpy as np; d = '%t/copy-out/rank'; print('copies', all((np.load(d + str(r) + '/copy.npy') == np.arange(16.0).reshape(4, 4)[:, 2 * r:2 * r + 2]).all() for r in (0, 1)))" | FileCheck %s --check-prefix=COPY-VALUES

//--- tp.mlir
// Mesh tp = 2. Rank r holds rows [2r, 2r+2) of @rows, @res and @rows.bf16,
// columns [2r, 2r+2) of @cols, column r of @ext, elements [2r, 2r+2) of
// @splat and @mask; @whole is replicated: one weight both ranks read.
// TP:      weights 15
// TP-NEXT: weight 0 "rows.bf16" bf16 [2,3] offset 0 bytes 12 cast_of 1 slice [0,0] of [4,3]
// TP-NEXT: weight 1 "rows" f32 [2,3] offset 64 bytes 24 slice [0,0] of [4,3]
// TP-NEXT: weight 2 "cols" f32 [2,2] offset 128 bytes 16 slice [0,0] of [2,4]
// TP-NEXT: weight 3 "whole" f32 [3] offset 192 bytes 12{{$}}
// TP-NEXT: weight 4 "splat" i32 [2] offset 256 bytes 8 slice [0] of [4]
// TP-NEXT: weight 5 "ext" f64 [4,1] offset 320 bytes 32 slice [0,0] of [4,2]
// TP-NEXT: weight 6 "res" f32 [2,2] offset 384 bytes 16 slice [0,0] of [4,2]
// TP-NEXT: weight 7 "mask" i1 [2] offset 448 bytes 2 slice [0] of [4]
// TP-NEXT: weight 8 "rows.bf16" bf16 [2,3] offset 512 bytes 12 cast_of 9 slice [2,0] of [4,3]
// TP-NEXT: weight 9 "rows" f32 [2,3] offset 576 bytes 24 slice [2,0] of [4,3]
// TP-NEXT: weight 10 "cols" f32 [2,2] offset 640 bytes 16 slice [0,2] of [2,4]
// TP-NEXT: weight 11 "splat" i32 [2] offset 704 bytes 8 slice [2] of [4]
// TP-NEXT: weight 12 "ext" f64 [4,1] offset 768 bytes 32 slice [0,1] of [4,2]
// TP-NEXT: weight 13 "res" f32 [2,2] offset 832 bytes 16 slice [2,0] of [4,2]
// TP-NEXT: weight 14 "mask" i1 [2] offset 896 bytes 2 slice [2] of [4]
// TP-NEXT: rank 0 arena
// TP:      output "whole" w3:f32[3]
// TP:      rank 1 arena
// TP:      output "whole" w3:f32[3]
// VALUES: rank 0 and rank 1 hold their blocks of rows, rows.bf16, cols, whole, splat, ext, res, mask
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @rows : tensor<4x3xf32> sharding <@mesh, [{tp}, {}]> = dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]> : tensor<4x3xf32>
  loom.parameter @rows.bf16 : tensor<4x3xbf16> sharding <@mesh, [{tp}, {}]> = #loom.cast_of<@rows>
  loom.parameter @cols : tensor<2x4xf32> sharding <@mesh, [{}, {tp}]> = dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]> : tensor<2x4xf32>
  loom.parameter @whole : tensor<3xf32> = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  loom.parameter @splat : tensor<4xi32> sharding <@mesh, [{tp}]> = dense<7> : tensor<4xi32>
  // Elements 1..8 of the file (it holds 0..9): [[1, 2], [3, 4], [5, 6], [7, 8]].
  loom.parameter @ext : tensor<4x2xf64> sharding <@mesh, [{}, {tp}]> = #loom.external_data<"DATA_FILE", offset = 8, length = 64>
  loom.parameter @res : tensor<4x2xf32> sharding <@mesh, [{tp}, {}]> = dense_resource<res_blob> : tensor<4x2xf32>
  loom.parameter @mask : tensor<4xi1> sharding <@mesh, [{tp}]> = dense<[true, false, false, true]> : tensor<4xi1>
  func.func @read() -> (tensor<2x3xf32> {onnx.name = "rows"}, tensor<2x3xf32> {onnx.name = "rows.bf16"}, tensor<2x2xf32> {onnx.name = "cols"}, tensor<3xf32> {onnx.name = "whole"}, tensor<2xi32> {onnx.name = "splat"}, tensor<4x1xf64> {onnx.name = "ext"}, tensor<2x2xf32> {onnx.name = "res"}, tensor<2xi1> {onnx.name = "mask"}) attributes {loom.ranks = array<i64: 0, 1>} {
    %rows = loom.param @rows : tensor<2x3xf32>
    %copy = loom.param @rows.bf16 : tensor<2x3xbf16>
    %wide = loom.cast %copy : tensor<2x3xbf16> -> tensor<2x3xf32>
    %cols = loom.param @cols : tensor<2x2xf32>
    %whole = loom.param @whole : tensor<3xf32>
    %splat = loom.param @splat : tensor<2xi32>
    %ext = loom.param @ext : tensor<4x1xf64>
    %res = loom.param @res : tensor<2x2xf32>
    %mask = loom.param @mask : tensor<2xi1>
    return %rows, %wide, %cols, %whole, %splat, %ext, %res, %mask : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<2xi32>, tensor<4x1xf64>, tensor<2x2xf32>, tensor<2xi1>
  }
}
{-#
  dialect_resources: {
    builtin: {
      res_blob: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E040"
    }
  }
#-}

//--- check.py
import os
import sys

import numpy as np

out = sys.argv[1]
ranges = {
    "rows": (np.arange(12, dtype=np.float32).reshape(4, 3), 0),
    "rows.bf16": (np.arange(12, dtype=np.float32).reshape(4, 3), 0),
    "cols": (np.arange(8, dtype=np.float32).reshape(2, 4), 1),
    "whole": (np.array([1, 2, 3], np.float32), None),
    "splat": (np.full(4, 7, np.int32), 0),
    "ext": (np.arange(1, 9, dtype=np.float64).reshape(4, 2), 1),
    "res": (np.arange(8, dtype=np.float32).reshape(4, 2), 0),
    "mask": (np.array([True, False, False, True]), 0),
}
for rank in range(2):
    for name, (value, axis) in ranges.items():
        if axis is not None:
            value = np.split(value, 2, axis=axis)[rank]
        got = np.load(os.path.join(out, "rank%d" % rank, name + ".npy"))
        assert got.shape == value.shape, (rank, name, got.shape, value.shape)
        assert np.array_equal(got, value.astype(got.dtype)), (rank, name, got)
print("rank 0 and rank 1 hold their blocks of " + ", ".join(ranges))

//--- dptp.mlir
// Mesh dp = 2, tp = 2 (rank = 2 dp + tp). @w is split over tp only: the
// ranks of one tp coordinate (0 and 2, 1 and 3) hold the same rows and
// share one weight. @v is split over {dp, tp}: rank r holds block
// 2 dp + tp = r, rows [2r, 2r+2). @c is split over dp by columns.
// DPTP:      weights 8
// DPTP-NEXT: weight 0 "w" f32 [4,2] offset 0 bytes 32 slice [0,0] of [8,2]
// DPTP-NEXT: weight 1 "v" f32 [2,2] offset 64 bytes 16 slice [0,0] of [8,2]
// DPTP-NEXT: weight 2 "c" f32 [2,1] offset 128 bytes 8 slice [0,0] of [2,2]
// DPTP-NEXT: weight 3 "w" f32 [4,2] offset 192 bytes 32 slice [4,0] of [8,2]
// DPTP-NEXT: weight 4 "v" f32 [2,2] offset 256 bytes 16 slice [2,0] of [8,2]
// DPTP-NEXT: weight 5 "v" f32 [2,2] offset 320 bytes 16 slice [4,0] of [8,2]
// DPTP-NEXT: weight 6 "c" f32 [2,1] offset 384 bytes 8 slice [0,1] of [2,2]
// DPTP-NEXT: weight 7 "v" f32 [2,2] offset 448 bytes 16 slice [6,0] of [8,2]
// DPTP:      rank 0 arena
// DPTP:      output "w" w0:f32[4,2]
// DPTP-NEXT: output "v" w1:f32[2,2]
// DPTP-NEXT: output "c" w2:f32[2,1]
// DPTP:      rank 1 arena
// DPTP:      output "w" w3:f32[4,2]
// DPTP-NEXT: output "v" w4:f32[2,2]
// DPTP-NEXT: output "c" w2:f32[2,1]
// DPTP:      rank 2 arena
// DPTP:      output "w" w0:f32[4,2]
// DPTP-NEXT: output "v" w5:f32[2,2]
// DPTP-NEXT: output "c" w6:f32[2,1]
// DPTP:      rank 3 arena
// DPTP:      output "w" w3:f32[4,2]
// DPTP-NEXT: output "v" w7:f32[2,2]
// DPTP-NEXT: output "c" w6:f32[2,1]
// Bufferization gives each plan.weight the shard type its loom.param reads.
// LOWERED: plan.weight @w : memref<4x2xf32>
// LOWERED: plan.weight @v : memref<2x2xf32>
// LOWERED: plan.weight @c : memref<2x1xf32>
module attributes {loom.world_size = 4 : i64} {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @w : tensor<8x2xf32> sharding <@mesh, [{tp}, {}]> = dense<1.0> : tensor<8x2xf32>
  loom.parameter @v : tensor<8x2xf32> sharding <@mesh, [{dp, tp}, {}]> = dense<2.0> : tensor<8x2xf32>
  loom.parameter @c : tensor<2x2xf32> sharding <@mesh, [{}, {dp}]> = dense<3.0> : tensor<2x2xf32>
  func.func @read() -> (tensor<4x2xf32> {onnx.name = "w"}, tensor<2x2xf32> {onnx.name = "v"}, tensor<2x1xf32> {onnx.name = "c"}) attributes {loom.ranks = array<i64: 0, 1, 2, 3>} {
    %w = loom.param @w : tensor<4x2xf32>
    %v = loom.param @v : tensor<2x2xf32>
    %c = loom.param @c : tensor<2x1xf32>
    return %w, %v, %c : tensor<4x2xf32>, tensor<2x2xf32>, tensor<2x1xf32>
  }
}

//--- partial.mlir
// PARTIAL: error: 'loom.parameter' op has a partial sharding; a plan holds no pending sum of a weight
module attributes {loom.world_size = 4 : i64} {
  loom.mesh @mesh = <dp = 2, tp = 2>
  loom.parameter @w : tensor<4x2xf32> sharding <@mesh, [{tp}, {}], partial<sum> {dp}> = dense<1.0> : tensor<4x2xf32>
  func.func @read() -> (tensor<2x2xf32> {onnx.name = "w"}) attributes {loom.ranks = array<i64: 0, 1, 2, 3>} {
    %w = loom.param @w : tensor<2x2xf32>
    return %w : tensor<2x2xf32>
  }
}

//--- outside.mlir
// Rank 2 has no coordinates on a mesh of 2 devices.
// OUTSIDE: error: 'plan.weight' op runs on rank 2, which is not a device of mesh @mesh (2 devices)
module attributes {loom.world_size = 3 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w : tensor<4x2xf32> sharding <@mesh, [{tp}, {}]> = dense<1.0> : tensor<4x2xf32>
  func.func @read() -> (tensor<2x2xf32> {onnx.name = "w"}) attributes {loom.ranks = array<i64: 0, 1, 2>} {
    %w = loom.param @w : tensor<2x2xf32>
    return %w : tensor<2x2xf32>
  }
}

//--- copy.mlir
// A bf16 copy split by columns, its source by rows: a copy may be another
// block of its source's tensor (as ZeRO's whole copy of a sharded master),
// and names one weight of that tensor; the runtime assembles each rank's
// copy from both ranks' rows.
// COPY:      weight 0 "w" f32 [2,4] offset 0 bytes 32 slice [0,0] of [4,4]
// COPY-NEXT: weight 1 "w.bf16" bf16 [4,2] offset 64 bytes 16 cast_of 0 slice [0,0] of [4,4]
// COPY-NEXT: weight 2 "w" f32 [2,4] offset 128 bytes 32 slice [2,0] of [4,4]
// COPY-NEXT: weight 3 "w.bf16" bf16 [4,2] offset 192 bytes 16 cast_of 0 slice [0,2] of [4,4]
// COPY-VALUES: copies True
module attributes {loom.world_size = 2 : i64} {
  loom.mesh @mesh = <tp = 2>
  loom.parameter @w : tensor<4x4xf32> sharding <@mesh, [{tp}, {}]> = dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
  loom.parameter @w.bf16 : tensor<4x4xbf16> sharding <@mesh, [{}, {tp}]> = #loom.cast_of<@w>
  func.func @read() -> (tensor<2x4xf32> {onnx.name = "w"}, tensor<4x2xbf16> {onnx.name = "copy"}) attributes {loom.ranks = array<i64: 0, 1>} {
    %w = loom.param @w : tensor<2x4xf32>
    %c = loom.param @w.bf16 : tensor<4x2xbf16>
    return %w, %c : tensor<2x4xf32>, tensor<4x2xbf16>
  }
}
