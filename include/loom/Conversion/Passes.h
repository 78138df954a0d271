//===- Passes.h - Lowering of loom functions to runtime plans ---*- C++ -*-===//

#ifndef LOOM_CONVERSION_PASSES_H
#define LOOM_CONVERSION_PASSES_H

#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Transforms/PassOptions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Conversion/Passes.h.inc"

/// Adds `loom-lower-to-plan`: fusion, kernel selection, bufferization and
/// memory planning, with canonicalization and CSE first.
void buildLowerToPlanPipeline(OpPassManager &pm);

/// Registers the `loom-lower-to-plan` pipeline (the passes themselves are
/// registered by registerLoomConversionPasses()).
void registerLowerToPlanPipeline();

} // namespace loom
} // namespace mlir

#endif // LOOM_CONVERSION_PASSES_H
