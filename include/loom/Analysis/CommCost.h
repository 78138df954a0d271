//===- CommCost.h - What a loom collective sends ----------------*- C++ -*-===//
//
// The link model (LinkModel.h) applied to the loom dialect's collectives:
// an op's kind, group size and full buffer bytes, the bytes each rank of
// its group sends and the estimated time. `loom-explain-sharding` reports
// it for every collective of a partitioned step; the planner and the
// simulator are to use the same numbers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_COMMCOST_H
#define LOOM_ANALYSIS_COMMCOST_H

#include "loom/Analysis/LinkModel.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace mlir {
namespace loom {

struct CollectiveCost {
  loomcost::CollectiveKind kind = loomcost::CollectiveKind::AllReduce;
  /// Ranks per group (2 for send and recv: a pair).
  int64_t groupSize = 1;
  /// S: the full buffer's bytes (an all_gather's result, a reduce_scatter's
  /// input, the tensor of the others), as one rank holds it.
  uint64_t fullBytes = 0;
  /// What each rank sends (loomcost::ringBytesSent).
  uint64_t bytesSent = 0;
  /// loomcost::LinkModel::seconds.
  double seconds = 0;
};

/// The cost of `op` when it is a collective (loom.all_reduce, all_gather,
/// reduce_scatter, all_to_all, collective_broadcast, send, recv) with a
/// statically shaped tensor; std::nullopt for any other op.
std::optional<CollectiveCost>
estimateCollectiveCost(Operation *op, const loomcost::LinkModel &link);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_COMMCOST_H
