//===- CalibrationFits.cpp - Fits of loom-run --calibrate's timings -------===//

#include "CalibrationFits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

using namespace loomrun;

namespace {

/// The x minimizing sum ((overhead + c_i x) / t_i - 1)^2: the time is
/// linear in x once the overhead is set. None where the best x is not
/// positive (the measured times are the overhead's, or under it).
std::optional<double> leastSquaresScale(const std::vector<double> &costs,
                                        const std::vector<double> &seconds,
                                        double overhead) {
  double numerator = 0, denominator = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    double b = costs[i] / seconds[i];
    numerator += b * (1 - overhead / seconds[i]);
    denominator += b * b;
  }
  if (!(numerator > 0) || !(denominator > 0))
    return std::nullopt;
  return numerator / denominator;
}

/// The best measured rate, the launch not taken out: what a fit falls back
/// to when the launch is all it can see.
double bestRate(const std::vector<double> &costs,
                const std::vector<double> &seconds) {
  double best = 0;
  for (size_t i = 0; i < costs.size(); ++i)
    best = std::max(best, costs[i] / seconds[i]);
  return best;
}

} // namespace

AffineFit loomrun::fitAffine(const std::vector<TimedWork> &points,
                             double overhead) {
  AffineFit fit;
  if (points.empty())
    return fit;
  std::vector<double> work, seconds;
  for (const TimedWork &point : points) {
    work.push_back(point.work);
    seconds.push_back(point.seconds);
  }
  // Least squares in (latency, 1 / rate): rows (1 / t, w / t), targets
  // 1 - overhead / t.
  double aa = 0, ab = 0, bb = 0, ay = 0, by = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    double a = 1 / seconds[i], b = work[i] / seconds[i],
           y = 1 - overhead / seconds[i];
    aa += a * a;
    ab += a * b;
    bb += b * b;
    ay += a * y;
    by += b * y;
  }
  double determinant = aa * bb - ab * ab;
  if (points.size() >= 2 && determinant > 1e-12 * aa * bb) {
    double latency = (ay * bb - ab * by) / determinant;
    double inverseRate = (aa * by - ab * ay) / determinant;
    if (latency >= 0 && inverseRate > 0) {
      fit.latency = latency;
      fit.rate = 1 / inverseRate;
      return fit;
    }
  }
  // One size, or a negative latency (no fixed cost to see): the rate alone.
  std::optional<double> inverseRate =
      leastSquaresScale(work, seconds, overhead);
  fit.rate = inverseRate ? 1 / *inverseRate : bestRate(work, seconds);
  return fit;
}

AttentionFit loomrun::fitAttention(const std::vector<TimedAttention> &points) {
  AttentionFit fit;
  if (points.empty())
    return fit;
  // Relative error: rows (cost_k / t) for each term k, targets 1.
  auto row = [](const TimedAttention &p) {
    return std::array<double, 3>{p.flops / p.seconds, p.scores / p.seconds,
                                 p.rowElements / p.seconds};
  };
  double bestError = std::numeric_limits<double>::infinity();
  for (unsigned subset = 1; subset < 8; ++subset) {
    std::vector<int> terms;
    for (int k = 0; k < 3; ++k)
      if (subset & (1u << k))
        terms.push_back(k);
    const size_t n = terms.size();
    if (points.size() < n)
      continue;
    // Normal equations, solved by Gaussian elimination with pivoting.
    double a[3][4] = {};
    for (const TimedAttention &p : points) {
      std::array<double, 3> r = row(p);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j)
          a[i][j] += r[terms[i]] * r[terms[j]];
        a[i][n] += r[terms[i]];
      }
    }
    bool solved = true;
    for (size_t c = 0; c < n && solved; ++c) {
      size_t pivot = c;
      for (size_t i = c + 1; i < n; ++i)
        if (std::fabs(a[i][c]) > std::fabs(a[pivot][c]))
          pivot = i;
      std::swap(a[c], a[pivot]);
      if (!(std::fabs(a[c][c]) > 1e-12 * std::fabs(a[0][0])))
        solved = false;
      for (size_t i = 0; i < n && solved; ++i) {
        if (i == c)
          continue;
        double factor = a[i][c] / a[c][c];
        for (size_t j = c; j <= n; ++j)
          a[i][j] -= factor * a[c][j];
      }
    }
    if (!solved)
      continue;
    double coefficient[3] = {0, 0, 0};
    bool positive = true;
    for (size_t i = 0; i < n; ++i) {
      coefficient[terms[i]] = a[i][n] / a[i][i];
      positive &= coefficient[terms[i]] > 0;
    }
    if (!positive)
      continue;
    double error = 0;
    for (const TimedAttention &p : points) {
      std::array<double, 3> r = row(p);
      double predicted = 0;
      for (int k = 0; k < 3; ++k)
        predicted += r[k] * coefficient[k];
      error += (predicted - 1) * (predicted - 1);
    }
    // (A subset's fit is no worse than its terms allow; more terms win
    // only by erring less.)
    if (error < bestError * (1 - 1e-9)) {
      bestError = error;
      fit.rate = coefficient[0] > 0 ? 1 / coefficient[0] : 0;
      fit.secondsPerScore = coefficient[1];
      fit.secondsPerRowElement = coefficient[2];
    }
  }
  if (std::isfinite(bestError))
    return fit;
  std::vector<double> flops, seconds;
  for (const TimedAttention &p : points) {
    flops.push_back(p.flops);
    seconds.push_back(p.seconds);
  }
  std::optional<double> inverseRate = leastSquaresScale(flops, seconds, 0);
  fit = AttentionFit();
  fit.rate = inverseRate ? 1 / *inverseRate : bestRate(flops, seconds);
  return fit;
}

GemmFit loomrun::fitGemm(const std::vector<TimedGemm> &points,
                         double overhead) {
  GemmFit best;
  double bestError = std::numeric_limits<double>::infinity();
  std::vector<double> seconds;
  for (const TimedGemm &point : points)
    seconds.push_back(point.seconds);
  // Half dimensions 0, then 1 to 16384 in steps of 2^(1/8).
  for (int step = -1; step <= 14 * 8; ++step) {
    double halfDim = step < 0 ? 0 : std::pow(2.0, step / 8.0);
    std::vector<double> costs;
    for (const TimedGemm &point : points) {
      double d = double(std::min({point.m, point.k, point.n}));
      costs.push_back(2.0 * double(point.m) * double(point.k) *
                      double(point.n) * (1 + halfDim / d));
    }
    std::optional<double> inversePeak =
        leastSquaresScale(costs, seconds, overhead);
    if (!inversePeak)
      continue;
    double error = 0;
    for (size_t i = 0; i < costs.size(); ++i) {
      double relative = (overhead + costs[i] * *inversePeak) / seconds[i] - 1;
      error += relative * relative;
    }
    if (error < bestError) {
      bestError = error;
      best.peak = 1 / *inversePeak;
      best.halfDim = halfDim;
    }
  }
  if (best.peak == 0) {
    std::vector<double> flops;
    for (const TimedGemm &point : points)
      flops.push_back(2.0 * double(point.m) * double(point.k) *
                      double(point.n));
    best.peak = bestRate(flops, seconds);
  }
  return best;
}
