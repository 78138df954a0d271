//===- Pipeline.cpp - The loom-lower-to-plan pipeline ---------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::loom::buildLowerToPlanPipeline(OpPassManager &pm) {
  pm.nest<func::FuncOp>().addPass(createLoomExpandOptimizers());
  pm.nest<func::FuncOp>().addPass(createLoomDecomposeCollectives());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
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
  funcs.addPass(createLoomSelectKernels());
  pm.addPass(createLoomBufferize());
  pm.nest<func::FuncOp>().addPass(createLoomPlanMemory());
}

void mlir::loom::registerLowerToPlanPipeline() {
  PassPipelineRegistration<>(
      "loom-lower-to-plan",
      "Lower loom functions to the plan dialect: expand optimizer updates, "
      "decompose collectives, canonicalize, let attention read the fused "
      "QKV projection, fold bias, activation, GELU and bias gradients into "
      "GEMM epilogues (spelling out the other GELU gradients), keep bf16 "
      "copies of the parameters bf16 GEMMs read, fuse "
      "elementwise chains, select kernels, bufferize, plan memory",
      buildLowerToPlanPipeline);
}
