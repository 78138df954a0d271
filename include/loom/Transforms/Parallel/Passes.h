//===- Passes.h - Loom parallelization passes -------------------*- C++ -*-===//
//
// Sharding propagation, SPMD partitioning, ZeRO and pipeline passes live in
// this group (docs/design/passes.md); today it holds the lowering of
// collectives to what the runtime's engines move.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PARALLEL_PASSES_H
#define LOOM_TRANSFORMS_PARALLEL_PASSES_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Parallel/Passes.h.inc"

/// The collectives' lowering in loom-lower-to-plan: every all_gather and
/// reduce_scatter made to move whole blocks (loom-decompose-collectives).
void buildCollectiveLoweringPipeline(OpPassManager &pm);

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Parallel/Passes.h.inc"

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_PARALLEL_PASSES_H
