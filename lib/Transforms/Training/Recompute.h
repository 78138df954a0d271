//===- Recompute.h - Activation recompute in the backward pass --*- C++ -*-===//
//
// `loom-autodiff recompute=full` (docs/design/training.md, "Activation
// recompute"): the forward is split into segments at the places where the
// fewest activations are alive (findStageCutPoints: for a transformer, the
// residual stream between sublayers), and every segment but the last keeps
// only its input for the backward pass. The forward values its backward
// ops read are computed again, by clones of the segment's ops placed right
// before the first backward op that reads one, so memory planning frees the
// originals as soon as the forward is done with them. The clones compute
// the same values from the same operands (dropout's mask is a function of
// its seed, step and element indices), so training is unchanged, bit for
// bit.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TRAINING_RECOMPUTE_H
#define LOOM_LIB_TRANSFORMS_TRAINING_RECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace loom {

/// In `gradient`, whose first ops are `forward` (in order) and whose other
/// ops are the backward pass, recomputes the forward values of each segment
/// that ends after forward op `segmentEnds[i]` (increasing; the ops after
/// the last end form the last segment, which is not recomputed). Returns
/// how many ops were cloned.
unsigned recomputeSegments(func::FuncOp gradient, ArrayRef<Operation *> forward,
                           ArrayRef<unsigned> segmentEnds);

/// `loom-autodiff recompute=selective` (Megatron's selective recompute):
/// in `gradient`, whose first ops are `forward`, recomputes each attention
/// core that is not fused: the ops from the scores' matmul (q kᵀ) through
/// their scale, mask, softmax and dropout to the probabilities, but not
/// their product with v, so that the backward keeps q, k and v instead of
/// the [.., S, S] scores and probabilities. A softmax between two matmuls
/// is such a core. Returns how many ops were cloned.
unsigned recomputeAttentionCores(func::FuncOp gradient,
                                 ArrayRef<Operation *> forward);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_TRAINING_RECOMPUTE_H
