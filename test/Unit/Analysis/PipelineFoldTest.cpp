// A pipeline's programs written out at many microbatches from a plan of
// five (PipelineFold.h), on hand-made plans: each action runs the
// instructions of the compiled microbatch it stands for, what no action
// tags goes with the action whose results it reads (the replay of the
// copies: PlanSimulationTest.CopiesWaitOnlyForTheirOwnMicrobatchsTransfers).

#include "loom/Analysis/PipelineFold.h"

#include <gtest/gtest.h>

using namespace mlir::loom;
using loomrt::Instruction;
using loomrt::TensorRef;

namespace {

TensorRef buffer(uint64_t offset) {
  TensorRef ref;
  ref.offset = offset;
  ref.shape = {250};
  return ref;
}

Instruction kernel(const std::string &action, uint64_t in, uint64_t out) {
  Instruction inst;
  inst.kernel = "elementwise";
  inst.inputs = {buffer(in)};
  inst.outputs = {buffer(out)};
  inst.action = action;
  return inst;
}

PipelineSchedule schedule(int microbatches, int ranks = 2) {
  std::string error;
  std::optional<PipelineSchedule> made =
      makePipelineSchedule("1f1b", ranks, microbatches, 1, error);
  EXPECT_TRUE(made) << error;
  return *made;
}

/// 1F1B as `compiled` orders it: each forward reads an input of the step
/// and writes its microbatch's activation (1000 bytes), which its
/// backward reads; after each backward but the first, an untagged
/// gradient sum reads what the backward wrote.
loomrt::Plan compiledPlan(const PipelineSchedule &compiled) {
  loomrt::Plan plan;
  plan.ranks.resize(compiled.ranks);
  for (int rank = 0; rank < compiled.ranks; ++rank) {
    plan.ranks[rank].rank = rank;
    for (const PipelineAction &action : compiled.actions[rank]) {
      if (!action.isCompute())
        continue;
      uint64_t activation = 10000 * uint64_t(action.microbatch + 1);
      uint64_t gradient = activation + 5000;
      std::string name = formatPipelineAction(action);
      if (action.kind == PipelineActionKind::Forward) {
        plan.ranks[rank].instructions.push_back(
            kernel(name, 800000, activation));
        continue;
      }
      plan.ranks[rank].instructions.push_back(
          kernel(name, activation, gradient));
      if (action.microbatch > 0)
        plan.ranks[rank].instructions.push_back(kernel("", gradient, 900000));
    }
  }
  return plan;
}

TEST(PipelineFoldTest, ActionsRunTheirMicrobatchsCompiledInstructions) {
  PipelineSchedule compiled = schedule(pipelineFoldMicrobatches("1f1b", 2));
  ASSERT_EQ(compiled.microbatches, 5);
  PipelineSchedule target = schedule(12);
  loomrt::Plan plan = compiledPlan(compiled);
  std::string error;
  std::optional<PipelineFold> fold =
      foldPipeline(plan, compiled, target, error);
  ASSERT_TRUE(fold) << error;
  for (int rank = 0; rank < 2; ++rank) {
    // Every action of the target's order, each once, copied from its
    // stand-in: microbatches 0 and 1 from themselves, 10 and 11 from 3
    // and 4, the rest from 2.
    std::vector<std::string> expected;
    for (const PipelineAction &action : target.actions[rank]) {
      if (!action.isCompute())
        continue;
      int k = action.microbatch;
      int from = k < 2 ? k : k >= 10 ? k - 7 : 2;
      PipelineAction copy = action;
      copy.microbatch = from;
      expected.push_back(formatPipelineAction(copy));
      if (action.kind == PipelineActionKind::Backward && k > 0)
        expected.push_back("");
    }
    std::vector<std::string> written;
    for (const Instruction *inst : fold->programs[rank])
      written.push_back(inst->action);
    EXPECT_EQ(written, expected) << "rank " << rank;
    ASSERT_EQ(fold->copies[rank].size(), written.size());
    // Eleven gradient sums, each with its backward's microbatch.
    int sums = 0;
    for (size_t i = 0; i < written.size(); ++i)
      if (written[i].empty()) {
        ++sums;
        EXPECT_EQ(fold->copies[rank][i].microbatch,
                  fold->copies[rank][i - 1].microbatch);
      }
    EXPECT_EQ(sums, 11);
  }
}

TEST(PipelineFoldTest, ActivationsOfTheExtraMicrobatchesInFlight) {
  // Eight stages: at five microbatches stage s holds min(8 - s, 5) of
  // them at once, at forty min(8 - s, 40), each 1000 bytes.
  PipelineSchedule compiled = schedule(5, 8), target = schedule(40, 8);
  loomrt::Plan plan = compiledPlan(compiled);
  std::string error;
  std::optional<PipelineFold> fold =
      foldPipeline(plan, compiled, target, error);
  ASSERT_TRUE(fold) << error;
  EXPECT_EQ(fold->extraActivationBytes,
            (std::vector<int64_t>{3000, 2000, 1000, 0, 0, 0, 0, 0}));
}

TEST(PipelineFoldTest, RefusesAProgramOutOfItsSchedule) {
  PipelineSchedule compiled = schedule(5);
  loomrt::Plan plan = compiledPlan(compiled);
  std::swap(plan.ranks[0].instructions[0], plan.ranks[0].instructions[1]);
  std::string error;
  EXPECT_FALSE(foldPipeline(plan, compiled, schedule(12), error));
  EXPECT_NE(error.find("rank 0's program does not run its actions in the "
                       "schedule's order"),
            std::string::npos)
      << error;
  EXPECT_FALSE(foldPipeline(plan, schedule(3), schedule(12), error));
}

} // namespace
