//===- Passes.h - Plan dialect passes ---------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_H
#define LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_H

#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {
namespace plan {

#define GEN_PASS_DECL
#include "loom/Dialect/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Dialect/Plan/Transforms/Passes.h.inc"

} // namespace plan
} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_PLAN_TRANSFORMS_PASSES_H
