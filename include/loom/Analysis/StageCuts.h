//===- StageCuts.h - Cutting a model into pipeline stages -------*- C++ -*-===//
//
// Pipeline parallelism runs consecutive slices of the model on different
// ranks. Where to cut is a cost question (docs/design/pipeline.md): each
// stage's forward and backward time, from the ops' FLOPs and bytes
// (OpCost.h) with a per-kind rate, should be even, and each stage's memory
// under a cap. A cut may only fall where the model is narrow: between ops
// where the fewest activation elements are alive (for a transformer, the
// residual stream between layers), since they cross to the next rank for
// every microbatch, both ways. Elements, not bytes: under mixed precision
// the bf16 cast feeding the head is no narrower a place than the layers'
// boundaries.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_STAGECUTS_H
#define LOOM_ANALYSIS_STAGECUTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace loom {

/// How fast each kind of work runs, for balancing: GEMM FLOPs at
/// `gemmFlopsPerSecond`, every other op by the bytes it moves at
/// `bytesPerSecond`; a backward costs `backwardFactor` forwards.
struct StageCostRates {
  double gemmFlopsPerSecond = 1e11;
  double bytesPerSecond = 2e10;
  double backwardFactor = 2.0;
};

/// `bytes` as the pipeline passes' remarks print them: `2.0 KiB`,
/// `96.0 MiB`, `64 B`.
std::string formatBytes(double bytes);

/// The seconds `op` takes at `rates`: its GEMM FLOPs at the GEMM rate, or
/// for any other op the bytes it moves (backwardFactor not applied).
double estimateOpSeconds(Operation *op, const StageCostRates &rates);

/// A place the forward function may be cut: after op `afterOp` (its index
/// among the function's ops), where `crossingBytes` of activations are
/// alive on both sides.
struct StageCutPoint {
  unsigned afterOp;
  /// The ONNX node the op came from (its location's name), if any.
  std::string node;
  double crossingBytes;
};

struct StagePlan {
  /// Per op of the function (terminator excluded), its stage.
  std::vector<int> stageOfOp;
  /// The chosen cuts (stages - 1 of them).
  std::vector<StageCutPoint> cuts;
  /// Per stage: forward + backward seconds of one microbatch, bytes of the
  /// parameters it reads, bytes of the activations one microbatch keeps
  /// (results of its ops), and bytes it sends to the next stage.
  std::vector<double> seconds, parameterBytes, activationBytes, sendBytes;
};

/// The ONNX node a location names (the name a user cut gives), or "".
std::string stageCutNodeName(Location loc);

/// The places `forward` may be cut, in order.
std::vector<StageCutPoint> findStageCutPoints(func::FuncOp forward);

/// Cuts `forward` into `stages` stages: at `userCuts` (ONNX node names,
/// each cut after the last op of that node; stages - 1 of them, in order)
/// when given, else at the cut points that minimize the slowest stage
/// under `rates`, keeping each stage's parameters and activations (times
/// `inFlight[s]` microbatches, when given) under `memoryCapBytes` (0: no
/// cap). Errors (too many stages for the cut points, a node that names no
/// op, cuts out of order, no cut under the cap) set `error`.
std::optional<StagePlan> cutIntoStages(func::FuncOp forward, int stages,
                                       const StageCostRates &rates,
                                       const std::vector<std::string> &userCuts,
                                       double memoryCapBytes,
                                       std::string &error);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_STAGECUTS_H
