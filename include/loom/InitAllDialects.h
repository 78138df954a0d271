//===- InitAllDialects.h - Loom's dialects and interfaces -------*- C++ -*-===//
//
// One call that gives a registry everything Loom's tools parse and run
// passes on: the dialects, and the external models that attach rules to
// their ops (the gradient rules; the partition rules, when they come, the
// same way). Tools build their MLIRContext from it instead of listing
// dialects themselves, so a new interface implementation cannot be
// forgotten in one of them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INITALLDIALECTS_H
#define LOOM_INITALLDIALECTS_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Plan/IR/PlanDialect.h"
#include "loom/Transforms/Training/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

namespace mlir {
namespace loom {

/// Inserts the loom, plan and func dialects and the external models of the
/// loom ops' interfaces.
inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<LoomDialect, plan::PlanDialect, func::FuncDialect>();
  registerGradientExternalModels(registry);
}

/// The same, appended to an existing context.
inline void registerAllDialects(MLIRContext &context) {
  DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
}

} // namespace loom
} // namespace mlir

#endif // LOOM_INITALLDIALECTS_H
