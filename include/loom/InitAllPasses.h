//===- InitAllPasses.h - Register every Loom pass and pipeline --*- C++ -*-===//
//
// What loom-opt registers (upstream's InitAllPasses.h convention): the pass
// groups, each with its own Passes.td, and the pipelines built from them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INITALLPASSES_H
#define LOOM_INITALLPASSES_H

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Plan/Transforms/Passes.h"
#include "loom/Transforms/Fusion/Passes.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "loom/Transforms/Training/Passes.h"

namespace mlir {
namespace loom {

inline void registerAllPasses() {
  registerLoomTrainingPasses();
  registerLoomFusionPasses();
  registerLoomParallelPasses();
  registerLoomConversionPasses();
  plan::registerPlanTransformsPasses();
  registerTrainingPipeline();
  registerLowerToPlanPipeline();
}

} // namespace loom
} // namespace mlir

#endif // LOOM_INITALLPASSES_H
