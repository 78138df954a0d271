//===- EmitPlan.h - Lowered loom functions to runtime plans ----*- C++ -*-===//
//
// The compiler's side of the runtime boundary, the plan target: turns a
// function lowered by `loom-lower-to-plan` into the runtime's in-memory Plan
// (the plan-format library, include/loom/Runtime/Plan.h), which
// loomrt::writePlan serializes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TARGET_PLAN_EMITPLAN_H
#define LOOM_TARGET_PLAN_EMITPLAN_H

#include "loom/Runtime/Plan.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace mlir {
namespace loom {

/// Builds the plan of `funcName` (or of the module's only function when
/// empty), which must have been through `loom-lower-to-plan`. Weights are
/// copied from the parameters' values (dense, dense_resource or external
/// files). Errors are emitted at the offending op.
FailureOr<::loomrt::Plan> buildRuntimePlan(ModuleOp module,
                                           StringRef funcName = {});

/// buildRuntimePlan without the weights' values (their parameters may have
/// none: a model imported shapes-only): every weight has offset 0 and the
/// data section is empty. Such a plan cannot run (nor be parsed back); it
/// tells what each rank holds and plans (loomrt::rankUsage), e.g. to size
/// a model and layout before any weight exists.
FailureOr<::loomrt::Plan> buildShapesOnlyPlan(ModuleOp module,
                                              StringRef funcName = {});

/// buildShapesOnlyPlan for the first rank of each function only (a pipeline
/// stage's, or the one function's): every other rank of a function runs
/// the same program on its own blocks, so these programs tell what each
/// rank runs and holds. The other ranks are in the plan without a program;
/// the plan's groups are all there. Its weight slices do not tile their
/// tensors, and it is not checked for communication: the planner's
/// (simulatePlan) for large meshes.
FailureOr<::loomrt::Plan> buildRepresentativePlan(ModuleOp module,
                                                  StringRef funcName = {});

/// Runs `loom-lower-to-plan` on `module` (in place), then buildRuntimePlan.
FailureOr<::loomrt::Plan> lowerToRuntimePlan(ModuleOp module,
                                             StringRef funcName = {});

} // namespace loom
} // namespace mlir

#endif // LOOM_TARGET_PLAN_EMITPLAN_H
