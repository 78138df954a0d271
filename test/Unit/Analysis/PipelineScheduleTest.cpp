//===- PipelineScheduleTest.cpp - Schedule generators, proof, simulation --===//
//
// The generators' schedules are proved and simulated with equal stage
// costs; their step times, bubbles and in-flight microbatches must equal
// the closed forms (docs/design/pipeline.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/PipelineSchedule.h"

#include "gtest/gtest.h"

using namespace mlir::loom;

namespace {

PipelineSchedule make(const std::string &kind, int P, int M, int V = 1) {
  std::string error;
  std::optional<PipelineSchedule> schedule =
      makePipelineSchedule(kind, P, M, V, error);
  EXPECT_TRUE(schedule) << error;
  addPipelineCommunication(*schedule);
  std::optional<std::string> problem = proveSchedule(*schedule);
  EXPECT_FALSE(problem) << kind << " P=" << P << " M=" << M << ": "
                        << problem.value_or("");
  return *schedule;
}

TEST(PipelineSchedule, OneFOneBAndGPipeBubble) {
  // F = 1, B = 2 (W inside B): the step is (M + P - 1)(F + B) and every
  // rank idles (P - 1)(F + B).
  for (std::string kind : {"gpipe", "1f1b"})
    for (auto [P, M] : {std::pair{2, 1}, {2, 4}, {4, 2}, {4, 8}, {8, 16}}) {
      PipelineSchedule schedule = make(kind, P, M);
      PipelineSimulation sim =
          simulateSchedule(schedule, PipelineStageCosts::uniform(P, 1, 1, 1));
      EXPECT_DOUBLE_EQ(sim.stepTime, (M + P - 1) * 3.0) << kind << P << M;
      EXPECT_NEAR(sim.bubbleFraction, double(P - 1) / (M + P - 1), 1e-12);
      for (int s = 0; s < P; ++s)
        EXPECT_EQ(sim.peakMicrobatches[s],
                  kind == "gpipe" ? M : std::min(P - s, M))
            << kind << " stage " << s;
      // As a trace measures it, from the rank's first action to its last:
      // GPipe's stage s waits 3 (P - 1 - s) between its forwards and its
      // backwards, so the last stage has no bubble.
      if (kind == "gpipe")
        for (int s = 0; s < P; ++s)
          EXPECT_NEAR(sim.actionBubble[s], double(P - 1 - s) / (P - 1 - s + M),
                      1e-12)
              << "stage " << s;
    }
}

TEST(PipelineSchedule, RanksSharingCores) {
  // On one core, some rank always computes until the step ends (a rank
  // only ever waits for one that computes): the step is all the work, and
  // no schedule has an idle core. On two cores, 4 ranks take at least half
  // the work; with a core each, the step is the unshared one.
  for (auto [kind, V] : {std::pair<std::string, int>{"gpipe", 1},
                         {"1f1b", 1},
                         {"interleaved", 2},
                         {"zb-h1", 1}}) {
    int P = 4, M = 8;
    PipelineSchedule schedule = make(kind, P, M, V);
    PipelineStageCosts costs = PipelineStageCosts::uniform(P * V, 1, 1.5, 0.5);
    double work = M * P * V * 3.0;
    PipelineSimulation alone = simulateSchedule(schedule, costs);
    costs.cores = 1;
    PipelineSimulation one = simulateSchedule(schedule, costs);
    EXPECT_NEAR(one.stepTime, work, 1e-9) << kind;
    costs.cores = 2;
    PipelineSimulation two = simulateSchedule(schedule, costs);
    EXPECT_GE(two.stepTime, work / 2 - 1e-9) << kind;
    EXPECT_GE(two.stepTime, alone.stepTime - 1e-9) << kind;
    EXPECT_LE(two.stepTime, one.stepTime + 1e-9) << kind;
    costs.cores = P;
    EXPECT_DOUBLE_EQ(simulateSchedule(schedule, costs).stepTime, alone.stepTime)
        << kind;
    // Every action ran once, and a time-sliced action spans longer than its
    // work.
    size_t computed = 0;
    for (const PipelineSimulation::Event &event : two.events)
      if (event.action.isCompute()) {
        ++computed;
        EXPECT_GE(event.end - event.start, 0.5 - 1e-9);
      }
    EXPECT_EQ(computed, size_t(M * P * V * (kind == "zb-h1" ? 3 : 2)));
  }
}

TEST(PipelineSchedule, InterleavedBubble) {
  // Megatron's interleaved bubble: (P - 1) / (V M + P - 1) with each
  // chunk costing 1/V of a stage.
  for (auto [P, V, M] :
       {std::tuple{4, 2, 8}, {4, 2, 4}, {4, 3, 8}, {2, 2, 4}, {2, 4, 6}}) {
    PipelineSchedule schedule = make("interleaved", P, M, V);
    EXPECT_EQ(schedule.stages, P * V);
    PipelineSimulation sim = simulateSchedule(
        schedule,
        PipelineStageCosts::uniform(P * V, 1.0 / V, 1.0 / V, 1.0 / V));
    EXPECT_NEAR(sim.bubbleFraction, double(P - 1) / (V * M + P - 1), 1e-9)
        << P << " " << V << " " << M;
  }
}

TEST(PipelineSchedule, ZeroBubbleH1) {
  // F = B = W = 1: ZB-H1's step is 3M + (P - 1)(F + B - W) for M >= P, where
  // 1F1B's is 3M + (P - 1)(F + B + W), with at most min(P, M) microbatches
  // in flight per stage.
  for (auto [P, M] : {std::pair{2, 4}, {3, 7}, {4, 4}, {4, 8}, {8, 8}}) {
    PipelineSchedule schedule = make("zb-h1", P, M);
    EXPECT_TRUE(schedule.splitsBackward());
    PipelineSimulation sim =
        simulateSchedule(schedule, PipelineStageCosts::uniform(P, 1, 1, 1));
    EXPECT_DOUBLE_EQ(sim.stepTime, 3.0 * M + (P - 1)) << P << " " << M;
    for (int s = 0; s < P; ++s)
      EXPECT_EQ(sim.peakMicrobatches[s], std::min(P, M));
  }
  // Fewer microbatches than stages still proves and runs.
  make("zb-h1", 4, 2);
}

TEST(PipelineSchedule, EveryGeneratorProvesForManyShapes) {
  for (int P = 1; P <= 6; ++P)
    for (int M = 1; M <= 12; ++M) {
      for (std::string kind : {"gpipe", "1f1b", "zb-h1"})
        make(kind, P, M);
      for (int V : {2, 3})
        if (M % P == 0)
          make("interleaved", P, M, V);
    }
}

TEST(PipelineSchedule, TextRoundTrips) {
  PipelineSchedule schedule = make("1f1b", 2, 2);
  std::string text = formatPipelineSchedule(schedule);
  EXPECT_EQ(text, "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1\n");
  std::string error;
  std::optional<PipelineSchedule> parsed =
      parsePipelineSchedule(text, 2, 2, error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(formatPipelineSchedule(*parsed), text);
}

TEST(PipelineSchedule, RejectsDeadlock) {
  // Rank 0 waits for microbatch 0's gradient before sending microbatch
  // 1's activation; rank 1 waits for that activation before sending the
  // gradient.
  std::string error;
  std::optional<PipelineSchedule> schedule = parsePipelineSchedule(
      "rank 0: F0.0 SF0.0 F0.1 RB0.0 B0.0 SF0.1 RB0.1 B0.1\n"
      "rank 1: RF1.0 F1.0 RF1.1 F1.1 B1.0 SB1.0 B1.1 SB1.1\n",
      2, 2, error);
  ASSERT_TRUE(schedule) << error;
  EXPECT_EQ(proveSchedule(*schedule).value_or(""),
            "deadlock: rank 0 waits at RB0.0 (its action #3) for SB1.0 from "
            "rank 1, which waits at RF1.1 (its action #2) for SF0.1 from rank "
            "0: the ranks wait on each other");
}

TEST(PipelineSchedule, RejectsBadLists) {
  std::string error;
  auto problem = [&](const char *text) {
    std::optional<PipelineSchedule> schedule =
        parsePipelineSchedule(text, 2, 1, error);
    EXPECT_TRUE(schedule) << error;
    return proveSchedule(*schedule).value_or("proved");
  };
  EXPECT_EQ(problem("rank 0: F0.0 B0.0\nrank 1: F1.0\n"),
            "rank 1 never runs B1.0");
  EXPECT_EQ(problem("rank 0: B0.0 F0.0\nrank 1: F1.0 B1.0\n"),
            "B0.0 on rank 0 runs before F0.0");
  EXPECT_EQ(problem("rank 0: F0.0 B0.0\nrank 1: F0.0 B1.0\n"),
            "rank 1 runs F0.0, but stage 0 is rank 0's");
  EXPECT_EQ(problem("rank 0: F0.0 F0.0 B0.0\nrank 1: F1.0 B1.0\n"),
            "rank 0 runs F0.0 twice");
  // Given sends and receives are taken as they are.
  EXPECT_EQ(problem("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                    "rank 1: F1.0 B1.0 SB1.0\n"),
            "F1.0 on rank 1 has no RF1.0");
  EXPECT_FALSE(parsePipelineSchedule("rank 1: F0.0\n", 2, 1, error));
  EXPECT_EQ(error, "line 1: expected 'rank 0: ACTIONS'");
  EXPECT_FALSE(parsePipelineSchedule("rank 0: X0.0\n", 2, 1, error));
  EXPECT_EQ(error,
            "line 1: 'X0.0' is no action (F, B, W, SF, RF, SB or RB, then "
            "STAGE.MB)");
}

TEST(PipelineSchedule, GeneratorErrors) {
  std::string error;
  EXPECT_FALSE(makePipelineSchedule("interleaved", 4, 6, 2, error));
  EXPECT_EQ(error, "'interleaved' runs microbatches in groups of the 4 ranks, "
                   "which do not divide 6 microbatches");
  EXPECT_FALSE(makePipelineSchedule("1f1b", 4, 8, 2, error));
  EXPECT_FALSE(makePipelineSchedule("chimera", 4, 8, 1, error));
  EXPECT_EQ(error, "unknown schedule 'chimera' (gpipe, 1f1b, interleaved, "
                   "zb-h1)");
}

} // namespace
