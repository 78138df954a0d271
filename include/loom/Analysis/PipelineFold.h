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
  /// Per rank: the bytes the target's extra microbatches in flight add to
  /// the compiled plan's peak (each stage's in-flight count, from the
  /// schedules, times the bytes one microbatch's forward leaves alive
  /// for its backward in the compiled program).
  std::vector<int64_t> extraActivationBytes;
};

/// The microbatches a plan is compiled at to fold `kind`'s schedule on
/// `ranks` ranks (five; interleaved runs microbatches in groups of the
/// ranks).
int pipelineFoldMicrobatches(llvm::StringRef kind, int ranks);

/// Writes out `compiled` (a plan of `compiledSchedule`, whose programs tag
/// their instructions with their pipeline action) at `target`'s
/// microbatches: the same generator, ranks and stages. Nothing, with
/// `error` set, when the plan's programs do not follow its schedule.
std::optional<PipelineFold>
foldPipeline(const loomrt::Plan &compiled,
             const PipelineSchedule &compiledSchedule,
             const PipelineSchedule &target, std::string &error);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_PIPELINEFOLD_H
