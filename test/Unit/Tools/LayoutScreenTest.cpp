// The planner's screen: layouts composed from probes whose figures are made
// up here, worked out by hand (docs/design/planner.md, "Screening").

#include "LayoutScreen.h"

#include "loom/Analysis/Cluster.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace loomrun;

namespace {

// One node of four devices: every group below stays on its links.
const char *kNode = R"({
  "nodes": 1, "devices_per_node": 4,
  "device": {"memory_gib": 80, "peak_tflops": {"f32": 20},
             "memory_gbytes_per_s": 2000},
  "intra_node": {"gbytes_per_s": 100, "latency_us": 0}
})";

mlir::loom::ClusterSpec cluster() {
  std::string error;
  std::optional<mlir::loom::ClusterSpec> spec =
      mlir::loom::parseClusterSpec(kNode, "node.json", error);
  EXPECT_TRUE(spec) << error;
  return spec.value_or(mlir::loom::ClusterSpec());
}

// A model of `kBlocks` blocks whose step, per tp rank, takes
// fixed(k) + M * rows * microbatch(k) seconds with k blocks kept: 1 + 0.1 k
// fixed, 2 + 0.5 k per microbatch row. Its states are 10 + k MB of
// parameters, 20 + 2 k of gradients, 40 + 4 k of optimizer state; a
// microbatch row's activations 3 + k MB; the gradient sums 5 + k MB.
constexpr int kBlocks = 10;
constexpr double MB = 1e6;

struct FakeProbes {
  int calls = 0;
  /// With shapes: the trained parameters are A, [8, 6], of 5 + k MB, and
  /// B, [6, 6], of 5 MB (what ZeRO over 4 ranks shards: A only).
  bool shapes = false;
  std::optional<ProbeFigures> operator()(const Layout &layout, int keep,
                                         std::string &error) {
    ++calls;
    if (layout.tp == 3) {
      error = "tp 3 does not divide the heads";
      return std::nullopt;
    }
    EXPECT_EQ(layout.dp, 1);
    EXPECT_EQ(layout.pp, 1);
    double k = keep, rows = double(layout.microbatchSize);
    double M = layout.microbatches;
    ProbeFigures f;
    f.stepSeconds = (1 + 0.1 * k) + M * rows * (2 + 0.5 * k);
    f.paramBytes = uint64_t((10 + k) * MB);
    f.gradBytes = uint64_t((20 + 2 * k) * MB);
    f.optimizerBytes = uint64_t((40 + 4 * k) * MB);
    double states = (70 + 7 * k) * MB;
    f.peakBytes =
        uint64_t(states + rows * (3 + k) * MB + (M > 1 ? (5 + k) * MB : 0));
    if (shapes)
      f.trainedShapes = {{{8, 6}, uint64_t((5 + k) * MB)},
                         {{6, 6}, uint64_t(5 * MB)}};
    return f;
  }
};

Layout layout(int dp, int tp, int pp, int microbatches, int rows = 1) {
  Layout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.microbatches = microbatches;
  l.microbatchSize = rows;
  if (pp > 1)
    l.schedule = "1f1b";
  return l;
}

/// A screen over the fake probes, counting them.
class LayoutScreenTest : public ::testing::Test {
protected:
  mlir::loom::ClusterSpec spec = cluster();
  FakeProbes probes;
  LayoutScreen screen{spec, kBlocks, std::ref(probes)};
  std::string error;
};

} // namespace

TEST_F(LayoutScreenTest, OneRankIsTheProbesLine) {
  std::optional<LayoutEstimate> e = screen.estimate(layout(1, 1, 1, 4), error);
  ASSERT_TRUE(e) << error;
  // fixed(10) + 4 microbatches of one row: 2 + 4 * 7.
  EXPECT_NEAR(e->stepSeconds, 2 + 4 * 7, 1e-9);
  // States at 10 blocks (140 MB), the sums (15), one row's activations (13).
  EXPECT_NEAR(double(e->peakBytes), (140 + 15 + 13) * MB, 1);
  // One and two blocks at one and two microbatches: four probes.
  EXPECT_EQ(probes.calls, 4);
  EXPECT_EQ(screen.probesCompiled(), 4);
}

TEST_F(LayoutScreenTest, RowsAreProbedAndCached) {
  std::optional<LayoutEstimate> e =
      screen.estimate(layout(1, 1, 1, 2, /*rows=*/3), error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 2 + 2 * 3 * 7, 1e-9);
  EXPECT_NEAR(double(e->peakBytes), (140 + 15 + 3 * 13) * MB, 1);
  // Two more probes for three rows; none again for the same key.
  EXPECT_EQ(probes.calls, 6);
  ASSERT_TRUE(screen.estimate(layout(1, 1, 1, 6, 3), error));
  EXPECT_EQ(probes.calls, 6);
}

TEST_F(LayoutScreenTest, PipelineStagesAndSchedule) {
  // Two stages of five blocks, 1F1B, 8 microbatches: a microbatch through
  // the slowest stage is half the model's 7 s plus half a block (0.25 s),
  // for M + P - 1 = 9 slots; the fixed part is a stage's: base 1 plus five
  // blocks of 0.1.
  std::optional<LayoutEstimate> e = screen.estimate(layout(1, 1, 2, 8), error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 9 * 3.75 + 1.5, 1e-9);
  // A stage holds its base and five blocks of states (105 MB), of sums
  // (10), and min(P, M) = 2 microbatches of activations (2 x 8).
  EXPECT_NEAR(double(e->peakBytes), (105 + 10 + 2 * 8) * MB, 1);

  Layout gpipe = layout(1, 1, 2, 8);
  gpipe.schedule = "gpipe";
  e = screen.estimate(gpipe, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(double(e->peakBytes), (105 + 10 + 8 * 8) * MB, 1);

  Layout zb = layout(1, 1, 2, 8);
  zb.schedule = "zb-h1";
  e = screen.estimate(zb, error);
  ASSERT_TRUE(e) << error;
  // ZB-H1's bubble is a third of 1F1B's: (P - 1) / 3 slots.
  EXPECT_NEAR(e->stepSeconds, (8 + 1.0 / 3) * 3.75 + 1.5, 1e-9);
}

TEST_F(LayoutScreenTest, DataParallelismAndZero) {
  // dp 4 without ZeRO: the all-reduce of 40 MB of gradients, 2 (n-1)/n of
  // them at 100 GB/s = 0.6 ms, hides behind the last backward.
  std::optional<LayoutEstimate> plain =
      screen.estimate(layout(4, 1, 1, 1), error);
  ASSERT_TRUE(plain) << error;
  EXPECT_NEAR(plain->stepSeconds, 2 + 7, 1e-9);
  EXPECT_NEAR(double(plain->peakBytes), (140 + 13) * MB, 1);
  // ZeRO-1 shards the optimizer's work and state over the four ranks, and
  // gathers the 20 MB of updated parameters after it ((n-1)/n at 100
  // GB/s: 0.15 ms).
  Layout zero1 = layout(4, 1, 1, 1);
  zero1.zero = 1;
  std::optional<LayoutEstimate> e = screen.estimate(zero1, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 2.0 / 4 + 7 + 0.75 * 20e6 / 100e9, 1e-9);
  EXPECT_NEAR(double(e->peakBytes), (20 + 40 + 80.0 / 4 + 13) * MB, 1);
  // ZeRO-3 shards the parameters and gradients too.
  Layout zero3 = zero1;
  zero3.zero = 3;
  e = screen.estimate(zero3, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(double(e->peakBytes), (140.0 / 4 + 13) * MB, 1);
}

TEST_F(LayoutScreenTest, AProbeTheCompilerRefusesIsTheLayoutsError) {
  EXPECT_FALSE(screen.estimate(layout(1, 3, 1, 1), error));
  EXPECT_EQ(error, "tp 3 does not divide the heads");
  // Refused once: the next layout of tp 3 is refused without a probe.
  int calls = probes.calls;
  error.clear();
  EXPECT_FALSE(screen.estimate(layout(2, 3, 1, 4), error));
  EXPECT_EQ(error, "tp 3 does not divide the heads");
  EXPECT_EQ(probes.calls, calls);
}

TEST_F(LayoutScreenTest, ZeroLeavesWholeWhatItCannotShard) {
  probes.shapes = true;
  // At ten blocks A is 15 MB of the 20 trained: ZeRO over four ranks
  // shards three quarters of the state and of the optimizer's work, and
  // every rank keeps the rest whole.
  Layout zero1 = layout(4, 1, 1, 1);
  zero1.zero = 1;
  std::optional<LayoutEstimate> e = screen.estimate(zero1, error);
  ASSERT_TRUE(e) << error;
  const double perRank = 0.25 + 0.75 / 4;
  EXPECT_NEAR(e->stepSeconds, 2.0 * perRank + 7 + 0.75 * 20e6 / 100e9, 1e-9);
  EXPECT_NEAR(double(e->peakBytes), (20 + 40 + 80 * perRank + 13) * MB, 1);
  Layout zero3 = zero1;
  zero3.zero = 3;
  e = screen.estimate(zero3, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(double(e->peakBytes), (140 * perRank + 13) * MB, 1);
  // Over three ranks both shard (6 divides by 3).
  Layout three = layout(3, 1, 1, 1);
  three.zero = 3;
  e = screen.estimate(three, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(double(e->peakBytes), (140.0 / 3 + 13) * MB, 1);
}

TEST_F(LayoutScreenTest, PrefetchCompilesWhatEstimatesWouldAsk) {
  std::vector<Layout> layouts = {layout(1, 1, 1, 4), layout(2, 2, 1, 2, 3),
                                 layout(1, 3, 1, 1), layout(4, 1, 2, 8, 2)};
  // One by one.
  for (const Layout &l : layouts)
    screen.estimate(l, error);
  // Prefetched (in rounds, here without threads), then estimated.
  FakeProbes prefetched;
  LayoutScreen other{spec, kBlocks, std::ref(prefetched)};
  int rounds = 0;
  other.setRunner([&](std::vector<std::function<void()>> &tasks) {
    ++rounds;
    for (std::function<void()> &task : tasks)
      task();
  });
  other.prefetch(layouts);
  EXPECT_EQ(prefetched.calls, probes.calls);
  EXPECT_EQ(other.probesCompiled(), screen.probesCompiled());
  // Up to three probes per block count: six rounds.
  EXPECT_EQ(rounds, 6);
  for (const Layout &l : layouts) {
    std::string first, second;
    std::optional<LayoutEstimate> a = screen.estimate(l, first);
    std::optional<LayoutEstimate> b = other.estimate(l, second);
    ASSERT_EQ(bool(a), bool(b));
    EXPECT_EQ(first, second);
    if (a) {
      EXPECT_EQ(a->stepSeconds, b->stepSeconds);
      EXPECT_EQ(a->peakBytes, b->peakBytes);
    }
  }
  // Everything was there already.
  EXPECT_EQ(prefetched.calls, probes.calls);
}

TEST_F(LayoutScreenTest, AModelWithoutBlocksTakesItsSlowestStagesShare) {
  // No repeated blocks: each probe compiles the whole model (fixed 1 s, 2 s
  // per microbatch row). Cut where the compiler would, two stages leave
  // the slowest three quarters of a microbatch (1.5 s) and the other the
  // rest (0.5 s): 1F1B over 8 microbatches takes 8 x 1.5 + 0.5, where an
  // even split would say 9 slots of 1 s. The fixed part is split evenly
  // (0.5 s).
  LayoutScreen whole{spec, /*blocks=*/0, std::ref(probes)};
  std::optional<LayoutEstimate> even =
      whole.estimate(layout(1, 1, 2, 8), error);
  ASSERT_TRUE(even) << error;
  EXPECT_NEAR(even->stepSeconds, 9 * 1.0 + 0.5, 1e-9);
  whole.setSlowestStageShares({{2, 0.75}, {4, 0.5}});
  std::optional<LayoutEstimate> e = whole.estimate(layout(1, 1, 2, 8), error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 8 * 1.5 + 0.5 + 0.5, 1e-9);
  // ZB-H1 fills two thirds of the other stages' time with W.
  Layout zb = layout(1, 1, 2, 8);
  zb.schedule = "zb-h1";
  e = whole.estimate(zb, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 8 * 1.5 + 0.5 / 3 + 0.5, 1e-9);
  // Interleaved, two stages per rank: a rank runs two quarters of a
  // microbatch (at most the slowest's share each), M + (P - 1) / V slots.
  Layout interleaved = layout(1, 1, 2, 8);
  interleaved.schedule = "interleaved";
  interleaved.virtualStages = 2;
  e = whole.estimate(interleaved, error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, (8 + 0.5) * (2 * 0.5 * 2) + 0.5, 1e-9);
}

namespace {

/// A model exported at a fixed batch of four rows, whose kernels cost 1 s
/// per microbatch whatever the rows, plus 1 s per row; its optimizer 1 s.
/// A probe with data parallelism waits 5 s more for its peers. Records
/// the layouts probed.
struct FixedBatchProbes {
  std::vector<Layout> probed;
  std::optional<ProbeFigures> operator()(const Layout &layout, int,
                                         std::string &) {
    probed.push_back(layout);
    double perRank = double(layout.microbatchSize);
    ProbeFigures f;
    f.computeSeconds = 1 + layout.microbatches * (1 + perRank) / layout.tp;
    f.stepSeconds = f.computeSeconds + (layout.dp > 1 ? 5 : 0);
    if (layout.dp == 1)
      f.computeSeconds = -1;
    f.peakBytes = uint64_t(perRank * MB);
    return f;
  }
};

} // namespace

TEST_F(LayoutScreenTest, AFixedBatchRanksRowsAreProbedUnderDataParallelism) {
  FixedBatchProbes fixed;
  LayoutScreen screen4{spec, /*blocks=*/0, std::ref(fixed), /*fixedRows=*/4};
  // dp 4, a row per rank: the rows probe is dp 4 itself, and its first
  // rank's kernels (1 + 1 + 1 s) less the optimizer count, not a quarter
  // of four rows' microbatch (5 s / 4).
  std::optional<LayoutEstimate> e = screen4.estimate(layout(4, 1, 1, 1), error);
  ASSERT_TRUE(e) << error;
  EXPECT_NEAR(e->stepSeconds, 1 + 2, 1e-9);
  ASSERT_FALSE(fixed.probed.empty());
  EXPECT_EQ(fixed.probed.back().dp, 4);
  EXPECT_EQ(fixed.probed.back().microbatchSize, 1);
  EXPECT_NEAR(double(e->peakBytes), 1 * MB, 1);
  // Under tensor parallelism the kernels leave out the tp collectives a
  // microbatch waits for: the probe runs the whole fixed batch on dp 1,
  // and a rank's share is proportional to its rows: half of the four
  // rows' 2.5 s per tp rank, after the optimizer's 1 s.
  fixed.probed.clear();
  e = screen4.estimate(layout(2, 2, 1, 1, /*rows=*/2), error);
  ASSERT_TRUE(e) << error;
  for (const Layout &probe : fixed.probed) {
    EXPECT_EQ(probe.dp, 1);
    EXPECT_EQ(probe.microbatchSize, 4);
  }
  EXPECT_NEAR(e->stepSeconds, 1 + 0.5 * 2.5, 1e-9);
}

// The margin of a family nothing was compiled from, learnt from how far
// each compile's family strays from the correction the others lend it.
TEST(LentCorrectionSpreadTest, NothingBeforeEnoughFamiliesAndCompiles) {
  std::vector<std::pair<std::string, double>> compiles = {
      {"zb-h1/1", std::log(1.1)}, {"zb-h1/1", std::log(1.2)}};
  // One family lends nothing.
  EXPECT_FALSE(lentCorrectionSpread(compiles, 2, 2));
  compiles.push_back({"interleaved/1", std::log(1.0)});
  EXPECT_TRUE(lentCorrectionSpread(compiles, 2, 3));
  EXPECT_FALSE(lentCorrectionSpread(compiles, 2, 4));
  EXPECT_FALSE(lentCorrectionSpread(compiles, 3, 3));
  // (At least two families, whatever is asked.)
  compiles.pop_back();
  EXPECT_FALSE(lentCorrectionSpread(compiles, 0, 0));
}

TEST(LentCorrectionSpreadTest, EachCompileAgainstTheOthersCorrection) {
  // zb-h1 compiled 10% slower than estimated, twice; interleaved as
  // estimated. Each zb-h1 compile is lent interleaved's 1.0 (off by +10%),
  // the interleaved one zb-h1's 1.1 (off by 1/1.1 - 1).
  std::vector<std::pair<std::string, double>> compiles = {
      {"zb-h1/1", std::log(1.1)},
      {"zb-h1/1", std::log(1.1)},
      {"interleaved/1", std::log(1.0)}};
  std::optional<double> spread = lentCorrectionSpread(compiles, 2, 3);
  ASSERT_TRUE(spread);
  double off = 1 / 1.1 - 1;
  EXPECT_NEAR(*spread, std::sqrt((0.01 + 0.01 + off * off) / 3), 1e-12);
  // A family's correction lent from the geometric mean of the others':
  // 1f1b's 0.9 and interleaved's 1.0 lend zb-h1 sqrt(0.9).
  compiles = {{"zb-h1/1", std::log(1.1)},
              {"interleaved/1", std::log(1.0)},
              {"1f1b/1", std::log(0.9)}};
  spread = lentCorrectionSpread(compiles, 2, 3);
  ASSERT_TRUE(spread);
  double zb = 1.1 / std::sqrt(0.9) - 1, il = 1.0 / std::sqrt(1.1 * 0.9) - 1,
         f1 = 0.9 / std::sqrt(1.1 * 1.0) - 1;
  EXPECT_NEAR(*spread, std::sqrt((zb * zb + il * il + f1 * f1) / 3), 1e-12);
}

TEST(LentCorrectionSpreadTest, FamiliesThatAgreeLendExactly) {
  std::vector<std::pair<std::string, double>> compiles = {
      {"zb-h1/1", std::log(1.05)},
      {"interleaved/1", std::log(1.05)},
      {"zb-h1/0", std::log(1.05)}};
  std::optional<double> spread = lentCorrectionSpread(compiles, 2, 3);
  ASSERT_TRUE(spread);
  EXPECT_NEAR(*spread, 0, 1e-12);
}
