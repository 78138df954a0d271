//===- PipelineFold.h - A pipeline's step at M from a compile at fewer -*-===//
//
// A pipelined step runs, on each stage, the same forward, backward and
// weight-gradient work for every microbatch; only the schedule's order and
// the first and last microbatch (which start and finish the gradient sums)
// differ. So the programs of M microbatches can be written out from a plan
// compiled at five (for `interleaved`, at a multiple of the ranks): each
// action of M's schedule runs the instructions the compiled plan ran for
// the same action of the same one of its first two, a middle one or the
// same one of its last two microbatches
// (docs/design/planner.md, "Folding a pipeline's microbatches"). The
// planner replays those programs (simulatePrograms) instead of compiling
// deep pipelines at P + 1 and P + 3 microbatches.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_PIPELINEFOLD_H
#define LOOM_ANALYSIS_PIPELINEFOLD_H

#include "loom/Analysis/PipelineSchedule.h"
#include "loom/Analysis/PlanSimulation.h"

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace loom {

struct PipelineFold {
  /// Per rank of the compiled plan, the program at the target's
  /// microbatches (empty where the plan holds no program).
  std::vector<InstructionSequence> programs;
  /// Per rank, per instruction of `programs`: the microbatch it runs for
  /// and the compiled microbatch it was copied from.
  std::vector<std::vector<ProgramCopy>> copies;
  /// Per rank: the bytes the target's schedule adds to the compiled
  /// plan's peak: the most alive at any of its actions (what the
  /// microbatches in flight by then keep for their later actions, from the
  /// bytes one microbatch's actions keep alive in the compiled program,
  /// plus the action's own working set there) less the same over the
  /// compiled schedule.
  std::vector<int64_t> extraActivationBytes;
};

/// The microbatches a plan is compiled at to fold `kind`'s schedule on
/// `ranks` ranks (five; interleaved runs microbatches in groups of the
/// ranks).
int pipelineFoldMicrobatches(llvm::StringRef kind, int ranks);

/// The microbatches a pipeline written out from `ranks` compiled ranks
/// (foldPipelineStages) is compiled at: past their depth, 2 ranks + 1 for
/// 1F1B and ZB-H1 and three groups of the ranks for interleaved, so that
/// each compiled rank's memory plan packs its steady state as the whole
/// pipeline's does (at five microbatches it packed a rank's buffers up to
/// 6% tighter).
int stageFoldMicrobatches(llvm::StringRef kind, int ranks);

/// Writes out `compiled` (a plan of `compiledSchedule`, whose programs tag
/// their instructions with their pipeline action) at `target`'s
/// microbatches: the same generator, ranks and stages. Nothing, with
/// `error` set, when the plan's programs do not follow its schedule.
std::optional<PipelineFold>
foldPipeline(const loomrt::Plan &compiled,
             const PipelineSchedule &compiledSchedule,
             const PipelineSchedule &target, std::string &error);

/// A pipeline of more ranks written out from a compile of fewer
/// (docs/design/planner.md, "Writing stages out"): a deep pipeline's
/// ranks repeat a few kinds (the first, holding the embedding; the last,
/// the head and the loss; between them ranks of the same layers), so a
/// plan compiled with one rank of each kind is written out to all of
/// them, each running its kind's program with its own peers and groups.
struct StageFold {
  /// The target's world (no programs of its own) and the groups the
  /// written-out collectives name.
  loomrt::Plan plan;
  /// Per rank of `plan`: the program (empty but for each stage's first
  /// rank, its representative), and where each instruction was copied
  /// from (PipelineFold::copies).
  std::vector<InstructionSequence> programs;
  std::vector<std::vector<ProgramCopy>> copies;
  /// Per rank of `plan`: the compiled rank its program was written from
  /// (-1: none), and the bytes its place in the target's schedule adds to
  /// that rank's compiled peak (PipelineFold::extraActivationBytes).
  std::vector<int> templateRank;
  std::vector<int64_t> extraActivationBytes;
  /// The transfers rewritten for their stage (peers, groups): the
  /// programs point into it.
  std::deque<loomrt::Instruction> rewritten;
};

/// Writes out `compiled` (a plan of `compiledSchedule`, its ranks
/// pipeline-rank-major, one program per pipeline rank) at `target`'s
/// pipeline ranks and microbatches (the same chunks per rank): target
/// pipeline rank r runs what compiled rank rankTemplate[r] runs for the
/// same pass's chunk (the first rank the first's, the last the last's),
/// its transfers to the neighbouring ranks going to its own neighbours.
/// A middle microbatch of the target runs the compiled middle one's
/// instructions (compiled at stageFoldMicrobatches, in every compiled
/// rank's steady state). Nothing, with `error` set, where the programs do
/// not follow their schedule or a transfer would meet no match.
std::optional<StageFold>
foldPipelineStages(const loomrt::Plan &compiled,
                   const PipelineSchedule &compiledSchedule,
                   const PipelineSchedule &target,
                   const std::vector<int> &rankTemplate, std::string &error);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_PIPELINEFOLD_H
