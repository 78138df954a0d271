//===- Pipeline.cpp - The parallel group's pipelines ----------------------===//

#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::buildCollectiveLoweringPipeline(OpPassManager &pm) {
  pm.nest<func::FuncOp>().addPass(createLoomDecomposeCollectives());
}
