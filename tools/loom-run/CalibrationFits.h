//===- CalibrationFits.h - Fits of loom-run --calibrate's timings -*- C++
//-*-===//
//
// The models the cost model times kernels with (lib/Analysis/Cluster.cpp),
// fitted to measured times by least squares of the relative error, so that
// a kernel of 10 us and one of 10 ms weigh alike:
//   - a kernel of a kind: t = overhead + latency + work / rate (work in
//     FLOPs or bytes);
//   - a GEMM: t = overhead + 2 m k n / (peak d / (d + halfDim)), d the
//     smallest of m, k and n.
// The launch overhead is measured on its own and is not fitted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_CALIBRATIONFITS_H
#define LOOM_TOOLS_LOOMRUN_CALIBRATIONFITS_H

#include <cstdint>
#include <vector>

namespace loomrun {

/// A kernel's measured seconds at one amount of work (FLOPs or bytes).
struct TimedWork {
  double work = 0;
  double seconds = 0;
};

struct AffineFit {
  /// Work per second.
  double rate = 0;
  /// Seconds on top of the launch overhead, whatever the work (>= 0).
  double latency = 0;
};

/// Fits `overhead + latency + work / rate` to `points` (one point: no
/// latency). Where the times are the overhead's alone, the rate is the best
/// measured one, the overhead not taken out.
AffineFit fitAffine(const std::vector<TimedWork> &points, double overhead);

/// An attention's measured seconds at its FLOPs, (query, key) scores and
/// query-row elements (rows x head dimension).
struct TimedAttention {
  double flops = 0;
  double scores = 0;
  double rowElements = 0;
  double seconds = 0;
};

struct AttentionFit {
  /// FLOP/s of the products (0: the FLOPs cost nothing beside the rest).
  double rate = 0;
  /// Seconds per score and per row element (each >= 0).
  double secondsPerScore = 0;
  double secondsPerRowElement = 0;
};

/// Fits `flops / rate + scores * secondsPerScore + rowElements *
/// secondsPerRowElement` to `points` by least squares of the relative
/// error, every term non-negative: of the fits of each subset of the terms
/// whose coefficients are all positive, the one that errs least. The
/// shapes must vary the head dimension, the sequence and the rows apart.
/// Without such a fit (or with fewer points than terms), the rate alone.
AttentionFit fitAttention(const std::vector<TimedAttention> &points);

/// A GEMM of [m, k] x [k, n] and its measured seconds.
struct TimedGemm {
  int64_t m = 0, k = 0, n = 0;
  double seconds = 0;
};

struct GemmFit {
  /// FLOP/s of a GEMM whose every dimension is large.
  double peak = 0;
  /// The smallest dimension at which a GEMM reaches half the peak.
  double halfDim = 0;
};

/// Fits the GEMM model to `points`: for each half dimension of a grid from
/// 0 to 16384, the peak by least squares; the half dimension whose fit errs
/// least. Where the times are the overhead's alone, the best measured rate
/// and no half dimension.
GemmFit fitGemm(const std::vector<TimedGemm> &points, double overhead);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOMRUN_CALIBRATIONFITS_H
