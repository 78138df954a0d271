//===- PrintSchedule.cpp - A pipeline schedule as a table -----------------===//
//
// Prints the module's proved schedule, one line per rank, and what a replay
// with per-stage costs predicts: the step time, each rank's bubble and the
// microbatches each stage holds at most.
//
//===----------------------------------------------------------------------===//

#include "ScheduleAttr.h"

#include "loom/Transforms/Parallel/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPRINTSCHEDULE
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

struct PrintSchedulePass : impl::LoomPrintScheduleBase<PrintSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PipelineSchedule> schedule =
        readSchedule(module, "loom-print-schedule");
    if (failed(schedule))
      return signalPassFailure();
    if (std::optional<std::string> problem = proveSchedule(*schedule)) {
      module.emitError() << "loom-print-schedule: " << *problem;
      return signalPassFailure();
    }
    llvm::raw_ostream &os = llvm::outs();
    os << "schedule " << schedule->kind << ": " << schedule->ranks << " ranks, "
       << schedule->stages << " stages, " << schedule->microbatches
       << " microbatches\n"
       << formatPipelineSchedule(*schedule);
    PipelineSimulation sim = simulateSchedule(
        *schedule, PipelineStageCosts::uniform(schedule->stages, forwardCost,
                                               backwardCost, weightCost));
    auto percent = [&](double fraction) {
      return llvm::format("%.1f%%", 100.0 * fraction);
    };
    auto number = [](double value) { return llvm::format("%g", value); };
    os << "simulated (F " << number(forwardCost) << ", B "
       << number(backwardCost) << ", W " << number(weightCost)
       << " per stage): step " << number(sim.stepTime) << ", bubble "
       << percent(sim.bubbleFraction) << " (";
    for (auto [rank, bubble] : llvm::enumerate(sim.bubble))
      os << (rank ? ", " : "") << "rank " << rank << " " << percent(bubble);
    os << ")\n";
    for (auto [stage, count] : llvm::enumerate(sim.peakMicrobatches))
      os << "stage " << stage << ": at most " << count << " microbatch"
         << (count == 1 ? "" : "es") << " in flight\n";
    os.flush();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
