//===- Passes.h - Loom fusion passes and pipelines --------------*- C++ -*-===//
//
// The rewrites that turn graph ops into kernel-sized ops: attention and
// mixed precision on the forward model, and the epilogue, gradient and
// elementwise fusions of loom-lower-to-plan.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_FUSION_PASSES_H
#define LOOM_TRANSFORMS_FUSION_PASSES_H

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/PassOptions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Fusion/Passes.h.inc"

/// The forward model's rewrites, run before the training step is derived
/// from it (autodiff then differentiates the fused, bf16 forward):
/// loom-fuse-attention when `fuseAttention`, then loom-mixed-precision
/// unless `precision` is f32.
void buildForwardFusionPipeline(OpPassManager &pm, bool fuseAttention,
                                Precision precision);

/// The kernel fusions of loom-lower-to-plan, in order: packed attention,
/// GEMM epilogues, the GELU, layer-norm, bias and cross-entropy gradients,
/// bf16 parameter copies, then elementwise fusion. Returns the function
/// pass manager that ends with elementwise fusion, so that the caller's
/// next function passes (kernel selection) share its walk.
OpPassManager &buildKernelFusionPipeline(OpPassManager &pm);

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Fusion/Passes.h.inc"

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_FUSION_PASSES_H
