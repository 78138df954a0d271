//===- Pipeline.cpp - The fusion group's pipelines ------------------------===//

#include "loom/Transforms/Fusion/Passes.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::buildForwardFusionPipeline(OpPassManager &pm,
                                            bool fuseAttention,
                                            Precision precision) {
  if (fuseAttention)
    pm.addNestedPass<func::FuncOp>(createLoomFuseAttention());
  // f32 keeps the model as it is (the fused attention included).
  if (precision == Precision::F32)
    return;
  LoomMixedPrecisionOptions mixed;
  mixed.precision = precision;
  pm.addNestedPass<func::FuncOp>(createLoomMixedPrecision(mixed));
}

OpPassManager &mlir::loom::buildKernelFusionPipeline(OpPassManager &pm) {
  OpPassManager &fuseOps = pm.nest<func::FuncOp>();
  fuseOps.addPass(createLoomPackAttention());
  fuseOps.addPass(createLoomFuseMatmulEpilogue());
  fuseOps.addPass(createLoomDecomposeGeluGrad());
  fuseOps.addPass(createLoomFuseLayerNormGrad());
  fuseOps.addPass(createLoomFuseBiasGrad());
  fuseOps.addPass(createLoomFuseCrossEntropyGrad());
  // After the epilogue fusion, which adds the bf16 bias casts, and before
  // elementwise fusion puts the casts into kernels.
  pm.addPass(createLoomCacheParameterCasts());
  OpPassManager &funcs = pm.nest<func::FuncOp>();
  funcs.addPass(createLoomFuseElementwise());
  return funcs;
}
