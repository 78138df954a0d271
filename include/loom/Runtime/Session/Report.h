//===- Report.h - What each rank holds and sends ----------------*- C++ -*-===//
//
// `loom-run --report-json FILE`: per rank, the bytes of the parameters,
// gradients and optimizer state it holds, its planned and measured peak
// memory, and the bytes its collectives send per step (ring-counted, as
// include/loom/Analysis/LinkModel.h counts them). Other tools read the
// file, so its keys are fixed:
//
//   {"ranks": [{"rank": 0, "param_bytes": ..., "grad_bytes": ...,
//               "optimizer_bytes": ..., "planned_peak_bytes": ...,
//               "measured_peak_bytes": ...,
//               "comm_bytes": {"all_reduce": ..., "all_gather": ...,
//                              "reduce_scatter": ..., "all_to_all": ...,
//                              "broadcast": ..., "send": ...},
//               "bubble_fraction": ...}, ...]}
//
// (`bubble_fraction` only in pipelines, where it is measured.)
// What each field counts is documented in docs/design/training.md.
// Plain C++17 on the runtime: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_REPORT_H
#define LOOM_RUNTIME_SESSION_REPORT_H

#include "loom/Runtime/ArenaTensors.h"
#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loomrt {

struct RankUsage {
  int rank = 0;
  /// The parameters the step computes with that the rank holds (its
  /// slices of sharded ones): the trained state weights that are not
  /// optimizer state (`optimizer.*`) and have no bf16 copy, and the bf16
  /// copies (`cast_of`) of those that have one (mixed precision, counted as
  /// ZeRO counts it: the copies are the parameters, the f32 masters
  /// optimizer state).
  uint64_t paramBytes = 0;
  /// Their gradients: the plan's `gradients` of the rank, else one per
  /// trained parameter (the masters), of its dtype and (local) shape.
  uint64_t gradBytes = 0;
  /// How many trained parameters (tensors) the rank holds: data
  /// parallelism reduces (and ZeRO gathers) each on its own.
  uint64_t trainedCount = 0;
  /// Each trained parameter's (local) shape and bytes, as the rank holds
  /// it: what ZeRO can shard over a given number of ranks (the planner's
  /// screen).
  std::vector<std::pair<std::vector<int64_t>, uint64_t>> trainedShapes;
  /// The optimizer state the rank holds: the state weights named
  /// `optimizer.*` (moments, momentum buffers, and the step counter) and
  /// the f32 masters of parameters that have a bf16 copy.
  uint64_t optimizerBytes = 0;
  /// The rank's arena plus the weights it holds (RunReport::heldWeightBytes).
  uint64_t plannedPeakBytes = 0;
  /// RunReport::measuredPeakBytes.
  uint64_t measuredPeakBytes = 0;
  /// Bytes sent per step by collective kind (RunReport::commBytesSent of
  /// the last step); every kind that sends is listed, 0 when it did not run.
  std::map<std::string, uint64_t> commBytes;
  /// In a pipeline, the rank's measured bubble in the last step
  /// (Trace.h's measuredBubble); -1 (not reported) otherwise.
  double bubbleFraction = -1;
};

/// The kinds `comm_bytes` lists, in order: every collective that sends
/// (a recv's bytes are its sender's).
const std::vector<std::string> &reportedCollectiveKinds();

/// Rank `rank`'s usage in `plan`, with what its executor measured.
RankUsage rankUsage(const Plan &plan, int rank, const RunReport &report);

/// The bytes rank `rank`'s program sends per run by collective kind, as
/// the executor counts them (RunReport::commBytesSent), from the plan
/// alone: what a run would measure, before (or without) running it.
std::map<std::string, uint64_t> plannedCommBytes(const Plan &plan, int rank);

/// The bytes one run of `inst` (an instruction of `plan`) sends, as
/// plannedCommBytes counts them; 0 for a kernel.
uint64_t plannedBytesSent(const Plan &plan, const Instruction &inst);

/// What a rank's arena holds when the most of it is alive (the tensors
/// above): the first instruction at which they add up to the most bytes,
/// that sum, and the largest of them. The arena itself may be larger where
/// its placement leaves gaps. For users asking why a rank needs what it
/// needs (`loom-plan --memory`).
struct ArenaPeak {
  size_t instruction = 0;
  uint64_t liveBytes = 0;
  size_t liveTensors = 0;
  std::vector<ArenaTensor> largest;
};
ArenaPeak arenaPeak(const Plan &plan, int rank, size_t largest = 8);

/// The JSON document above, for `ranks` in the given order.
std::string formatReportJson(const std::vector<RankUsage> &ranks);

/// RankUsage as a fixed-size array of integers, to send between processes,
/// and back.
std::vector<int64_t> packUsage(const RankUsage &usage);
RankUsage unpackUsage(const int64_t *values);
/// The array's length.
size_t packedUsageSize();

} // namespace loomrt

#endif // LOOM_RUNTIME_SESSION_REPORT_H
