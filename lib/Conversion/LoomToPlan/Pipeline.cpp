//===- Pipeline.cpp - The loom-lower-to-plan pipeline ---------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Plan/Transforms/Passes.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::loom::buildLowerToPlanPipeline(OpPassManager &pm) {
  pm.nest<func::FuncOp>().addPass(createLoomExpandOptimizers());
  buildCollectiveLoweringPipeline(pm);
  // Per function, so that a pipeline's rank programs are simplified in
  // parallel (a 64-microbatch step's eight programs: 1.9 s on one thread).
  OpPassManager &simplify = pm.nest<func::FuncOp>();
  // Without region simplification: the functions are straight-line blocks,
  // whose dead ops the rewriter erases anyway, and its liveness walk was
  // half of the canonicalizer on a 64-microbatch pipeline (0.49 -> 0.28 s).
  GreedyRewriteConfig config;
  config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
  simplify.addPass(createCanonicalizerPass(config));
  simplify.addPass(createCSEPass());
  OpPassManager &funcs = buildKernelFusionPipeline(pm);
  funcs.addPass(createLoomSelectKernels());
  pm.addPass(createLoomBufferize());
  pm.nest<func::FuncOp>().addPass(plan::createLoomPlanMemory());
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
