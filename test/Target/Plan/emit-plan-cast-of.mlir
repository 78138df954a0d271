// A `#loom.cast_of` parameter (loom-cache-parameter-casts' bf16 copies)
// holds its source's value rounded as the `cast` kernel rounds it: to
// nearest, ties to even, beyond the largest bf16 to infinity, NaN kept, and
// from f64 in one rounding (1.00390625 + 1e-12 is just above a tie, which a
// detour through f32 would lose). The source may be external data. The run
// widens the copies back to f32.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.array([1.00390625 + 1e-12, 1.00390625, -3.0, 1e300]).tofile('%t/d.bin'); np.save('%t/x.npy', np.zeros(7, np.float32))"
// RUN: sed 's|DATA_FILE|%t/d.bin|' %s > %t/model.mlir
// RUN: loom-run %t/model.mlir --input x=%t/x.npy --output-dir %t/out --emit-plan %t/model.plan
// RUN: FileCheck %s --check-prefix=PLAN < %t/model.plan
// RUN: %python -c "import numpy as np; print(np.load('%t/out/w.npy').tolist(), np.load('%t/out/d.npy').tolist())" | FileCheck %s
// RUN: sed 's|DATA_FILE|%t/missing.bin|' %s > %t/missing.mlir
// RUN: not loom-run %t/missing.mlir --input x=%t/x.npy 2>&1 | FileCheck %s --check-prefix=MISSING

// Only the copies are weights: nothing reads the sources.
// PLAN:      weights 2
// PLAN-NEXT: weight 0 "w.bf16" bf16 [7] offset 0 bytes 14
// PLAN-NEXT: weight 1 "d.bf16" bf16 [4] offset 64 bytes 8

// CHECK: [1.0, 1.0, 1.015625, 1.0078125, inf, -2.5, nan] [1.0078125, 1.0, -3.0, inf]

// MISSING: error: 'loom.parameter' op cannot read external data '{{.*}}missing.bin'

loom.parameter @w : tensor<7xf32> = dense<[1.0, 1.00390625, 1.01171875, 1.0039064, 3.4e38, -2.5, 0x7FC00000]> : tensor<7xf32>
loom.parameter @w.bf16 : tensor<7xbf16> = #loom.cast_of<@w>
loom.parameter @d : tensor<4xf64> = #loom.external_data<"DATA_FILE", offset = 0, length = 32>
loom.parameter @d.bf16 : tensor<4xbf16> = #loom.cast_of<@d>
func.func @forward(%x: tensor<7xf32> {onnx.name = "x"})
    -> (tensor<7xf32> {onnx.name = "w"}, tensor<4xf32> {onnx.name = "d"}) {
  %w = loom.param @w.bf16 : tensor<7xbf16>
  %d = loom.param @d.bf16 : tensor<4xbf16>
  %wide = loom.cast %w : tensor<7xbf16> -> tensor<7xf32>
  %y = loom.add %wide, %x : tensor<7xf32>
  %dwide = loom.cast %d : tensor<4xbf16> -> tensor<4xf32>
  return %y, %dwide : tensor<7xf32>, tensor<4xf32>
}
