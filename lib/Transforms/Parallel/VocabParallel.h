//===- VocabParallel.h - Losses and lookups over a split vocabulary C++ -*-===//
//
// The partitioner's rules for the ops whose classes or table rows are
// split over an axis (Megatron's vocabulary parallelism), built on each
// rank's block: `offset` is the first global class (row) the rank holds, a
// tensor<1xi64>; `groups` the ranks that split them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PARALLEL_VOCABPARALLEL_H
#define LOOM_LIB_TRANSFORMS_PARALLEL_VOCABPARALLEL_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {

/// `op`'s loss from the rank's block of the logits: all-reduces of the row
/// maximum, the exp-sum and the target logit (each one value per sample),
/// never the logits. `info` tags the collectives for loom-explain-sharding.
Value buildVocabParallelCrossEntropy(OpBuilder &builder, CrossEntropyOp op,
                                     Value logits, Value labels, Value offset,
                                     ArrayAttr groups, DictionaryAttr info);

/// `op`'s gradient on the rank's block: (softmax - one-hot) * scale, from
/// the same all-reduced maximum and exp-sum.
Value buildVocabParallelCrossEntropyGrad(OpBuilder &builder,
                                         CrossEntropyGradOp op, Value logits,
                                         Value labels, Value scale,
                                         Value offset, ArrayAttr groups,
                                         DictionaryAttr info);

/// A lookup of the rows the rank holds (`op`'s table split along its axis):
/// the other indices give zero rows, so the result is a partial sum over
/// the splitting ranks.
Value buildVocabParallelLookup(OpBuilder &builder, GatherOp op, Value table,
                               Value indices, Value offset, int64_t globalRows);

/// The adjoint of that lookup: the rank's `rows` rows of `op`'s result,
/// from the updates of the indices that fall in them.
Value buildVocabParallelScatterAdd(OpBuilder &builder, ScatterAddOp op,
                                   Value updates, Value indices, Value offset,
                                   int64_t rows, int64_t globalRows);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_PARALLEL_VOCABPARALLEL_H
