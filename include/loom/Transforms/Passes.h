//===- Passes.h - Loom passes -----------------------------------*- C++ -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Passes.h.inc"

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_PASSES_H
