//===- BuildSchedule.cpp - Generate and prove a pipeline schedule ---------===//
//
// The schedule of a pipelined step is data in the module, proved before
// anything runs: a generator's (or a user's file's) per-rank action lists,
// with the sends and receives between neighbouring stages, checked by
// proveSchedule (lib/Analysis/PipelineSchedule.cpp) and stored as the
// module's `loom.pipeline_schedule`.
//
//===----------------------------------------------------------------------===//

#include "ScheduleAttr.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDSCHEDULE
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

struct BuildSchedulePass : impl::LoomBuildScheduleBase<BuildSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      module.emitError() << "loom-build-schedule: " << message;
      signalPassFailure();
    };
    // Far beyond any pipeline, and within what the replay's ints hold.
    if (ranks < 1 || ranks > 4096 || microbatches < 1 ||
        microbatches > 1 << 20 || virtualStages < 1 || virtualStages > 64)
      return fail("needs 1 to 4096 ranks, 1 to 2^20 microbatches and 1 to "
                  "64 virtual stages (has " +
                  Twine(int64_t(ranks)) + ", " + Twine(int64_t(microbatches)) +
                  ", " + Twine(int64_t(virtualStages)) + ")");
    std::string error;
    std::optional<PipelineSchedule> result;
    if (!scheduleFile.empty()) {
      auto buffer = llvm::MemoryBuffer::getFile(scheduleFile);
      if (!buffer)
        return fail("cannot read schedule file '" + scheduleFile +
                    "': " + buffer.getError().message());
      result = parsePipelineSchedule((*buffer)->getBuffer(),
                                     int(ranks * virtualStages),
                                     int(microbatches), error);
      if (result && result->ranks != ranks)
        return fail("schedule file '" + scheduleFile + "' lists " +
                    Twine(result->ranks) + " ranks, not " + Twine(ranks));
    } else {
      result = makePipelineSchedule(schedule, int(ranks), int(microbatches),
                                    int(virtualStages), error);
      if (result)
        addPipelineCommunication(*result);
    }
    if (!result)
      return fail(error);
    if (std::optional<std::string> problem = proveSchedule(*result))
      return fail(*problem);
    module->setAttr(LoomDialect::kPipelineScheduleAttrName,
                    scheduleToAttr(module.getContext(), *result));
  }
};

} // namespace
} // namespace loom
} // namespace mlir
