//===- CalibrationFitsTest.cpp - loom-run --calibrate's fits --------------===//
//
// Times made from known models, which the fits must recover.
//
//===----------------------------------------------------------------------===//

#include "CalibrationFits.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <tuple>

using namespace loomrun;

namespace {

TEST(CalibrationFitsTest, AffineRecoversRateAndLatency) {
  // 50 TFLOP/s, 120 us on top of a 5 us launch: an attention whose one
  // sequence leaves most of a GPU idle.
  const double rate = 50e12, latency = 120e-6, overhead = 5e-6;
  std::vector<TimedWork> points;
  for (double work : {3e9, 6e9, 12e9, 24e9})
    points.push_back({work, overhead + latency + work / rate});
  AffineFit fit = fitAffine(points, overhead);
  EXPECT_NEAR(fit.rate / rate, 1, 1e-9);
  EXPECT_NEAR(fit.latency, latency, 1e-12);
}

TEST(CalibrationFitsTest, AffineWithoutFixedCostHasNoLatency) {
  // Time a little more than proportional to the work: a negative latency
  // fits best, which no kernel has, so the rate is fitted alone.
  std::vector<TimedWork> points = {{1e6, 1.0e-3}, {2e6, 2.1e-3}};
  AffineFit fit = fitAffine(points, 0);
  EXPECT_EQ(fit.latency, 0);
  EXPECT_GT(fit.rate, 0.95e9);
  EXPECT_LT(fit.rate, 1e9);
  // One size: its rate, after the launch.
  AffineFit one = fitAffine({{1e9, 2e-3 + 4e-6}}, 4e-6);
  EXPECT_NEAR(one.rate, 0.5e12, 1e3);
  EXPECT_EQ(one.latency, 0);
}

/// An attention probe of `batch` x `heads` sequences of `seq` positions
/// and head dimension `d`, as InstructionWork counts it, timed by a model.
TimedAttention attentionPoint(double batch, double seq, double heads, double d,
                              double rate, double perScore,
                              double perRowElement) {
  double rows = batch * heads * seq, scores = rows * seq;
  double flops = 2 * scores * 2 * d, rowElements = rows * d;
  return {flops, scores, rowElements,
          (rate > 0 ? flops / rate : 0) + scores * perScore +
              rowElements * perRowElement};
}

const double kShapes[][4] = {{2, 128, 4, 64}, {8, 64, 4, 32},  {2, 128, 4, 32},
                             {4, 64, 4, 64},  {2, 256, 4, 64}, {16, 32, 4, 32},
                             {8, 64, 8, 16},  {2, 128, 4, 128}};

TEST(CalibrationFitsTest, AttentionRecoversEveryTerm) {
  // A CPU attention: 25 GFLOP/s for its products, 10 ns per score and
  // 30 ns per query-row element.
  std::vector<TimedAttention> points;
  for (const auto &shape : kShapes)
    points.push_back(attentionPoint(shape[0], shape[1], shape[2], shape[3],
                                    25e9, 10e-9, 30e-9));
  AttentionFit fit = fitAttention(points);
  EXPECT_NEAR(fit.rate / 25e9, 1, 1e-6);
  EXPECT_NEAR(fit.secondsPerScore / 10e-9, 1, 1e-6);
  EXPECT_NEAR(fit.secondsPerRowElement / 30e-9, 1, 1e-6);
}

TEST(CalibrationFitsTest, AttentionDropsTermsThatDoNotFit) {
  // Time proportional to the FLOPs: the rate alone.
  std::vector<TimedAttention> flops, noFlops;
  for (const auto &shape : kShapes) {
    flops.push_back(
        attentionPoint(shape[0], shape[1], shape[2], shape[3], 25e9, 0, 0));
    noFlops.push_back(
        attentionPoint(shape[0], shape[1], shape[2], shape[3], 0, 8e-9, 40e-9));
  }
  AttentionFit rateOnly = fitAttention(flops);
  EXPECT_NEAR(rateOnly.rate / 25e9, 1, 1e-6);
  EXPECT_EQ(rateOnly.secondsPerScore, 0);
  EXPECT_EQ(rateOnly.secondsPerRowElement, 0);
  // Time that follows scores and rows only: no rate (the FLOPs are free
  // beside them), rather than a negative one.
  AttentionFit perUnit = fitAttention(noFlops);
  EXPECT_EQ(perUnit.rate, 0);
  EXPECT_NEAR(perUnit.secondsPerScore / 8e-9, 1, 1e-6);
  EXPECT_NEAR(perUnit.secondsPerRowElement / 40e-9, 1, 1e-6);
  // One point: one term at most; the rate alone when no fit is positive.
  AttentionFit one = fitAttention({{1e6, 1e4, 1e3, 2e-3}});
  EXPECT_GT(one.rate + one.secondsPerScore + one.secondsPerRowElement, 0);
}

TEST(CalibrationFitsTest, GemmRecoversPeakAndHalfDimension) {
  // 800 TFLOP/s, half of it at a smallest dimension of 256 (a grid
  // point: 2^8), 5 us launches; square and rectangular GEMMs.
  const double peak = 800e12, half = 256, overhead = 5e-6;
  std::vector<TimedGemm> points;
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{512, 1024, 1024},
                         {2048, 768, 3072},
                         {8192, 3072, 768},
                         {4096, 4096, 4096},
                         {1024, 1024, 1024}}) {
    double d = double(std::min({m, k, n}));
    double flops = 2.0 * double(m * k * n);
    points.push_back({m, k, n, overhead + flops / (peak * d / (d + half))});
  }
  GemmFit fit = fitGemm(points, overhead);
  EXPECT_NEAR(fit.peak / peak, 1, 1e-6);
  EXPECT_NEAR(fit.halfDim, half, 1e-6);
}

TEST(CalibrationFitsTest, GemmWithoutSizeEffectHasNoHalfDimension) {
  // Every GEMM at the peak after its launch: the smallest dimension costs
  // nothing, so no half dimension (a median of rates would make one of
  // the largest size's noise).
  const double peak = 500e12, overhead = 4e-6;
  std::vector<TimedGemm> points;
  for (int64_t d : {512, 1024, 2048, 4096})
    points.push_back({d, d, d, overhead + 2.0 * double(d * d * d) / peak});
  GemmFit fit = fitGemm(points, overhead);
  EXPECT_EQ(fit.halfDim, 0);
  EXPECT_NEAR(fit.peak / peak, 1, 1e-9);
}

TEST(CalibrationFitsTest, TimesOfTheLaunchAloneGiveTheBestMeasuredRate) {
  // An emulator (or a tiny size): every GEMM takes the launch's time or
  // less, so no positive peak fits; the best measured rate stands in, not
  // an infinite one.
  std::vector<TimedGemm> points = {{16, 16, 16, 150e-6}, {32, 32, 32, 160e-6}};
  GemmFit fit = fitGemm(points, 164e-6);
  EXPECT_NEAR(fit.peak, 2.0 * 32 * 32 * 32 / 160e-6, 1);
  EXPECT_EQ(fit.halfDim, 0);
  AffineFit kind = fitAffine({{1e6, 150e-6}}, 164e-6);
  EXPECT_NEAR(kind.rate, 1e6 / 150e-6, 1);
  EXPECT_EQ(kind.latency, 0);
}

} // namespace
