//===- Planner.h - Choosing a parallel layout -------------------*- C++ -*-===//
//
// The automatic planner (docs/design/planner.md) behind `loom-plan` and, to
// come, `loom-run --parallel auto`: it enumerates layouts (dp, tp, pp, ZeRO
// stage, sequence parallelism, microbatches, schedule), prunes those that
// cannot be built, estimates the rest from a few small compiles
// (LayoutScreen), compiles the promising ones best first with the compiler
// itself (shapes only: the plan each rank would run, memory planned),
// replays each plan on the described cluster (mlir::loom::simulatePlan)
// and keeps the fastest that fits in memory. Plain C++: loom-run includes
// it without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_PLANNER_H
#define LOOM_TOOLS_LOOM_RUN_PLANNER_H

#include "ModelCompiler.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loomrun {

/// One way to run the step on the cluster's devices.
struct Layout {
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;
  /// With ZeRO: shard within groups of this many adjacent dp ranks and
  /// replicate across the groups (hybrid sharding, --zero-shard-group);
  /// 0 shards over all of dp.
  int zeroShardGroup = 0;
  bool sequenceParallel = false;
  /// Rows of one microbatch on one dp rank, and microbatches per step (the
  /// pipeline's, or gradient accumulation without one).
  int64_t microbatchSize = 0;
  int microbatches = 1;
  /// With pp > 1: gpipe, 1f1b, interleaved, zb-h1 ("" without a pipeline).
  std::string schedule;
  int virtualStages = 1;
  /// Activation recompute: `none` or `full` (loom-autodiff recompute).
  std::string recompute = "none";

  int devices() const { return dp * tp * pp; }
  /// `dp=2,tp=2,pp=1,zero=1,sp=0,mbs=4,M=2`, plus the schedule with pp.
  std::string str() const {
    std::string text =
        "dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp) +
        ",pp=" + std::to_string(pp) + ",zero=" + std::to_string(zero) +
        (zeroShardGroup > 0 ? ",group=" + std::to_string(zeroShardGroup)
                            : std::string()) +
        ",sp=" + (sequenceParallel ? "1" : "0") +
        ",mbs=" + std::to_string(microbatchSize) +
        ",M=" + std::to_string(microbatches);
    if (recompute != "none")
      text += ",recompute=" + recompute;
    if (pp > 1) {
      text += ",schedule=" + schedule;
      if (virtualStages > 1)
        text += ",V=" + std::to_string(virtualStages);
    }
    return text;
  }
};

/// Sets the training step's parallel options (--dp, --tp, --pp, --zero,
/// --sequence-parallel, --recompute, the microbatches, the schedule) to
/// `layout`'s: what the planner compiles and loom-run --parallel trains.
inline void applyLayout(const Layout &layout, TrainCompileOptions &train) {
  train.dp = layout.dp;
  train.tp = layout.tp;
  train.pp = layout.pp;
  train.zero = layout.zero;
  train.zeroShardGroup = layout.zero > 0 ? layout.zeroShardGroup : 0;
  train.sequenceParallel = layout.sequenceParallel;
  train.recompute = layout.recompute;
  train.gradAccum = layout.microbatches;
  train.microbatches = layout.pp > 1 ? layout.microbatches : 0;
  if (layout.pp > 1) {
    train.schedule = layout.schedule;
    train.virtualStages = layout.virtualStages;
  }
}

/// A partial layout (`--evaluate 'tp=8,pp=8,dp=24'`): the keys given are
/// fixed, the rest searched. Keys: dp, tp, pp, zero, group (or
/// zero_shard_group), sp, mbs, M (or microbatches), schedule, V (or
/// virtual_stages), recompute.
struct LayoutConstraint {
  std::map<std::string, std::string> fixed;
  bool allows(const Layout &layout) const;
};
std::optional<LayoutConstraint> parseLayoutConstraint(const std::string &text,
                                                      std::string &error);

struct Prediction {
  /// Compiled, and every rank fits in the device's memory.
  bool feasible = false;
  /// Why not: the compiler's error, or which rank runs out of memory by
  /// how much.
  std::string reason;
  /// Bytes over the device's memory on the worst rank (infeasible by
  /// memory only).
  uint64_t shortfallBytes = 0;
  double stepSeconds = 0;
  double tflopsPerDevice = 0;
  double mfu = 0;
  /// The ranks the figures below are of: the first of each pipeline stage
  /// (of the one function without a pipeline); every other rank runs a
  /// copy of its stage's program on its own blocks.
  std::vector<int> ranks;
  /// Per rank: the planned peak (arena plus held weights), parameters,
  /// gradients, optimizer state, and bytes sent per step.
  std::vector<uint64_t> peakBytes, paramBytes, gradBytes, optimizerBytes,
      commBytes;
  /// Per rank: predicted compute and waiting seconds.
  std::vector<double> computeSeconds, waitSeconds;
  /// The microbatch counts whose replays these figures are extrapolated
  /// from ({0, 0}: compiled as is).
  std::pair<int, int> foldedFrom{0, 0};
  /// The microbatch count of the compile a pipeline's programs were written
  /// out from (0: they were compiled).
  int pipelineFoldedFrom = 0;
  /// The stages of the compile a pipeline's stages were written out from
  /// (0: every stage was compiled).
  int stagesFoldedFrom = 0;
  /// For a written-out pipeline whose peaks were then taken from a compile
  /// past its depth (near the device's memory, or the choice): that
  /// compile's microbatch count, and the written-out peak it replaced.
  int peakConfirmedFrom = 0;
  uint64_t writtenOutPeakBytes = 0;
  /// The repeated-block counts the figures are extrapolated from ({0, 0}:
  /// the whole model was compiled).
  std::pair<int, int> blocksFoldedFrom{0, 0};
  /// The screen's estimate that ordered this layout's compile (0: it was
  /// compiled without screening).
  double estimatedStepSeconds = 0;
  uint64_t estimatedPeakBytes = 0;
  uint64_t maxPeakBytes() const;
  /// The index (in the lists above) of the rank with the highest peak, and
  /// that rank.
  size_t worstIndex() const;
  int worstRank() const;
};

struct Candidate {
  Layout layout;
  Prediction predicted;
};

struct PlanRequest {
  std::string modelPath;
  std::string clusterPath;
  int64_t globalBatch = 0;
  /// The symbolic dimension of the inputs that is the batch.
  std::string batchDim = "batch";
  /// Other symbolic dimensions (--dim NAME=SIZE).
  std::map<std::string, int64_t> dims;
  /// The rows of each microbatch (over all dp ranks) when the model's
  /// inputs declare a fixed batch (an export without dynamic axes); 0 when
  /// the batch is symbolic. planLayout reads it off the model.
  int64_t fixedBatch = 0;
  /// Shapes of inputs by name (loom-run's data), whose first dimension is
  /// the batch: each layout replaces it by its microbatch's rows.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  std::string precision = "f32";
  /// The training step's options (loss, optimizer...); its parallel fields
  /// are the planner's to set.
  TrainCompileOptions train;
  /// 0: every device of the cluster.
  int64_t devices = 0;
  /// Keys fixed by --evaluate.
  LayoutConstraint constraint;
  /// Compile every candidate instead of skipping those the search can tell
  /// lose (higher ZeRO stages once one fits, ...).
  bool exhaustive = false;
  /// Predict layouts of many microbatches from two smaller counts (the
  /// replay is affine in the count), instead of compiling them unrolled.
  bool foldMicrobatches = true;
  /// Predict pipelines of many microbatches by writing their programs out
  /// from a compile of five (PipelineFold.h) instead of from two
  /// compiles past the pipeline's depth.
  bool foldPipelines = true;
  /// Predict models of many repeated blocks (layers) from the model folded
  /// to one and two blocks per pipeline chunk.
  bool foldLayers = true;
  /// Predict deep pipelines too shallow per stage for layer folding by
  /// writing their stages out from a compile of one stage of each kind
  /// (PipelineFold.h, StageFold).
  bool foldStages = true;
  /// Stop searching after this many seconds (0: no limit) and choose among
  /// the layouts compiled so far.
  double timeLimitSeconds = 0;
  /// Compiles run at once on this many threads (0: one per core, at most
  /// eight). The first search of the process sets it.
  int threads = 0;
  int topK = 5;
};

struct PlanResult {
  /// Every candidate compiled (or refused), best first: feasible ones by
  /// step time, then infeasible ones by shortfall.
  std::vector<Candidate> candidates;
  /// Layouts skipped before compiling, with why (divisibility).
  std::vector<std::pair<Layout, std::string>> pruned;
  int compiled = 0;
  /// Of those, how many were extrapolated from two smaller microbatch
  /// counts.
  int folded = 0;
  /// Of those, how many pipelines were written out from a compile of a few
  /// microbatches.
  int pipelineFolded = 0;
  /// Of those, how many were compiled again for their peaks before being
  /// chosen.
  int confirmed = 0;
  /// Of those, how many were extrapolated from the model folded to fewer
  /// repeated blocks.
  int layerFolded = 0;
  /// Of the pipelines written out, how many from a compile of fewer
  /// stages.
  int stageFolded = 0;
  /// Of those, how many from two compiles of fewer repeated blocks per
  /// chunk, a block apart, and extrapolated.
  int stagesShortened = 0;
  /// Layouts not compiled because a probe of their memory put them over
  /// the device's.
  int probedOverMemory = 0;
  /// Compiles started on threads the search left idle, for the layouts it
  /// expected to compile next, and how many of them it then used (these
  /// vary from run to run with the compiles' times; the search's decisions
  /// do not).
  int compiledAhead = 0, compiledAheadUsed = 0;
  /// Layouts the screen estimated, the probes it compiled for that, and the
  /// estimated layouts it did not compile (slower or larger than the
  /// compiled ones by more than its margin).
  int screened = 0, probes = 0, screenedOut = 0;
  /// The search hit PlanRequest::timeLimitSeconds.
  bool stoppedEarly = false;
  double searchSeconds = 0;
  /// The cluster, described in a line.
  std::string clusterSummary;
  int64_t devices = 0;
  double peakFlopsPerDevice = 0;
  uint64_t deviceMemoryBytes = 0;

  /// The best feasible candidate, if any (they are sorted best first).
  const Candidate *choice() const {
    if (!candidates.empty() && candidates.front().predicted.feasible)
      return &candidates.front();
    return nullptr;
  }
};

/// Searches (docs/design/planner.md). Errors: an unreadable model or
/// cluster file, a global batch that no layout divides.
loomrt::StatusOr<PlanResult> planLayout(const PlanRequest &request);

/// The report `loom-plan` prints: the choice, its prediction, and the top
/// alternatives with why each lost or could not run.
std::string formatPlanReport(const PlanRequest &request,
                             const PlanResult &result);

/// `loom-plan --simulate`: the candidate's replay rank by rank (each
/// compiled rank: the first of its pipeline stage).
std::string formatSimulation(const Candidate &candidate);

/// `loom-plan --memory`: what the fullest rank of `candidate` holds at its
/// arena's fullest (loomrt::arenaPeak), the candidate compiled again with
/// every layer (and the larger microbatch count its peak was taken at).
loomrt::StatusOr<std::string> formatArenaPeak(const PlanRequest &request,
                                              const Candidate &candidate);

/// The same as JSON (`--json`): `choice`, `predicted`, `alternatives`.
std::string formatPlanJson(const PlanRequest &request,
                           const PlanResult &result);

/// The layout a `loom-plan --json` file chose (its `choice`), for
/// `loom-run --parallel FILE.json`; errors name the file and the key.
loomrt::StatusOr<Layout> readPlannedLayout(const std::string &path);

/// Compiles `layout` and replays its plan on the request's cluster with
/// every kernel and transfer recorded: a Chrome/Perfetto trace (JSON), one
/// process per compiled rank with a compute and a communication track and
/// a counter of its memory (the arena's live bytes, the weights it holds).
loomrt::StatusOr<std::string> simulateTrace(const PlanRequest &request,
                                            const Layout &layout);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOM_RUN_PLANNER_H
