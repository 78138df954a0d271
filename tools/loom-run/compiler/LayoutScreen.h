//===- LayoutScreen.h - Estimating layouts from a few probes ----*- C++ -*-===//
//
// The planner's screen (docs/design/planner.md, "Screening"): every layout
// of the search is estimated from a handful of small compiles (probes), so
// that only the promising ones are compiled whole, best first. The estimate
// orders the search and never stands for a prediction: what loom-plan
// reports comes from the compiled plan.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_LAYOUTSCREEN_H
#define LOOM_TOOLS_LOOM_RUN_LAYOUTSCREEN_H

#include "../Planner.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mlir {
namespace loom {
struct ClusterSpec;
} // namespace loom
} // namespace mlir

namespace loomrun {

/// What a probe's replay gives for its first rank.
struct ProbeFigures {
  double stepSeconds = 0;
  /// The first rank's kernels alone, without waiting for its peers (a
  /// probe with data parallelism: see probeLayout); stepSeconds if unset.
  double computeSeconds = -1;
  uint64_t peakBytes = 0, paramBytes = 0, gradBytes = 0, optimizerBytes = 0;
  /// Trained parameters (tensors): each is reduced (and under ZeRO
  /// gathered) by a collective of its own.
  uint64_t trainedCount = 0;
  /// Each trained parameter's local shape and bytes: ZeRO shards one over
  /// S ranks only where some dimension of its block divides by S.
  std::vector<std::pair<std::vector<int64_t>, uint64_t>> trainedShapes;
};

struct LayoutEstimate {
  double stepSeconds = 0;
  /// The fullest rank's parameters, gradients, optimizer state and the
  /// activations its schedule keeps alive.
  uint64_t peakBytes = 0;
};

class LayoutScreen {
public:
  /// Compiles and replays `layout` (no dp, no pp) with the model folded to
  /// `keepBlocks` repeated blocks (0: whole); nothing, with `error`, if the
  /// compiler refuses it.
  using ProbeFn = std::function<std::optional<ProbeFigures>(
      const Layout &layout, int keepBlocks, std::string &error)>;

  /// `blocks`: how many times the model repeats its block (0: it does not,
  /// and each probe compiles the whole model).
  /// `fixedRows`: the rows of every microbatch of a model exported at a
  /// fixed batch (0: any rows), which the probes then use, scaling a
  /// microbatch's time and activations to the layout's rows per rank.
  LayoutScreen(const mlir::loom::ClusterSpec &cluster, int blocks,
               ProbeFn probe, int64_t fixedRows = 0)
      : cluster(cluster), blocks(blocks), fixedRows(fixedRows),
        probe(std::move(probe)) {}

  /// Runs independent tasks, possibly at once (the planner's compile
  /// pool); they must all be done when it returns.
  using RunFn = std::function<void(std::vector<std::function<void()>> &)>;
  /// How prefetch() runs its probes (by default one after the other).
  void setRunner(RunFn run) { runner = std::move(run); }

  /// Compiles the probes that estimate() asks for on each of `layouts`
  /// (the same ones, the same count), those that do not wait on each
  /// other's outcome at once: in rounds, the k-th probe of each layout in
  /// round k, where its earlier probes compiled (estimate() stops at a
  /// probe the compiler refuses). `probe` must then be safe to call from
  /// several threads.
  void prefetch(const std::vector<Layout> &layouts);

  /// Data parallelism's gradient buckets without a pipeline (loom-run's
  /// --bucket-mb; 0: one all-reduce per gradient).
  void setBucketBytes(double bytes) { bucketBytes = bytes; }

  /// Per stage count, the slowest stage's share of a microbatch's work
  /// where the compiler would cut the model (ModelOutline): a model that
  /// repeats no block has no line of blocks to spread over the stages, and
  /// its few cut points may leave one stage most of the work.
  void setSlowestStageShares(std::map<int, double> shares) {
    slowestStageShares = std::move(shares);
  }

  /// The rows of the probes of one row's worth of work.
  int64_t probeRows() const { return fixedRows > 0 ? fixedRows : 1; }

  /// The estimate of `layout`, or nothing with `error` (a probe that does
  /// not compile: the same tp, sequence parallelism or recompute would not).
  std::optional<LayoutEstimate> estimate(const Layout &layout,
                                         std::string &error);

  int probesCompiled() const { return compiled; }

  /// The figures of `layout`'s tp, sequence parallelism and recompute
  /// alone (dp = pp = 1) on `keep` blocks, `microbatches` of `rows` rows:
  /// compiled once, then remembered (the planner's floor of model states
  /// reads the same probes).
  std::optional<ProbeFigures> figures(const Layout &layout, int keep,
                                      int microbatches, int64_t rows,
                                      std::string &error);

private:
  /// tp, sequence parallel, recompute, blocks kept, microbatches, rows.
  using ProbeKey = std::tuple<int, bool, std::string, int, int, int64_t>;

  /// The probes estimate() asks for on `layout`, in its order.
  std::vector<ProbeKey> probeSequence(const Layout &layout) const;
  /// The layout a probe compiles (dp = pp = 1) and its blocks kept.
  std::pair<Layout, int> probeLayout(const ProbeKey &key) const;
  /// The rows of the probe of a microbatch of `layout`: its own, but for a
  /// model exported at a fixed batch under tensor parallelism (all of them;
  /// probeLayout).
  int64_t probedRows(const Layout &layout) const {
    return fixedRows > 0 && layout.tp > 1 ? fixedRows : layout.microbatchSize;
  }

  const mlir::loom::ClusterSpec &cluster;
  int blocks;
  int64_t fixedRows = 0;
  double bucketBytes = 25.0 * 1024 * 1024;
  std::map<int, double> slowestStageShares;
  ProbeFn probe;
  RunFn runner;
  std::map<ProbeKey, std::optional<ProbeFigures>> probes;
  std::map<ProbeKey, std::string> errors;
  int compiled = 0;
};

/// How far the step correction the other families lend a family strays
/// from its own, from the compiles a search made (`compiles`: each one's
/// family and log compiled-to-estimated step): the RMS over the compiles
/// of each one's error against the others' correction (the geometric
/// mean of the other families' ratios), as a fraction. Nothing before
/// `minCompiles` compiles of `minFamilies` families (the planner's margin
/// for a family nothing was compiled from: docs/design/planner.md,
/// "Screening").
std::optional<double> lentCorrectionSpread(
    const std::vector<std::pair<std::string, double>> &compiles,
    size_t minFamilies, size_t minCompiles);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOM_RUN_LAYOUTSCREEN_H
