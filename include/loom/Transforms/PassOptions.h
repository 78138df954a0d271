//===- PassOptions.h - Enumerated options of Loom's passes ------*- C++ -*-===//
//
// The enum-valued options that several pass groups and pipelines share, so
// that `loom-opt` and `loom-run` reject an unknown value when they parse it
// (llvm::cl lists the known ones) instead of each pass checking a string.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PASSOPTIONS_H
#define LOOM_TRANSFORMS_PASSOPTIONS_H

namespace mlir {
namespace loom {

/// The loss loom-attach-loss adds to the model's first result.
enum class LossKind { CrossEntropy, MSE, None };

/// The optimizer update loom-build-train-step emits per parameter.
enum class OptimizerKind { SGD, AdamW };

/// The precision loom-mixed-precision computes GEMMs and attention in.
enum class Precision { F32, BF16 };

/// The runtime backend whose kernels loom-select-kernels chooses from.
enum class KernelTarget { CPU };

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_PASSOPTIONS_H
