//===- Planner.cpp - Choosing a parallel layout ---------------------------===//
//
// Enumerate, prune, screen, compile, replay, rank (docs/design/planner.md).
// Every figure of a prediction comes from the plan the compiler builds for
// the layout: memory from its memory planner (loomrt::rankUsage), time from
// replaying its instruction streams on the cluster (simulatePlan), so the
// planner cannot drift from what runs; the screen (LayoutScreen) only
// decides which layouts are compiled, and in what order.
//
//===----------------------------------------------------------------------===//

#include "../Planner.h"
#include "LayoutScreen.h"

#include "loom/Analysis/Cluster.h"
#include "loom/Analysis/PipelineFold.h"
#include "loom/Analysis/PlanSimulation.h"
#include "loom/Import/ONNX/ImportONNX.h"
#include "loom/Runtime/Session/Report.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

using namespace loomrun;
namespace rt = loomrt;

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      result.push_back(d);
  return result;
}

std::string gib(double bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes >= double(1ull << 30))
    os << llvm::format("%.2f GiB", bytes / double(1ull << 30));
  else
    os << llvm::format("%.1f MiB", bytes / double(1ull << 20));
  return text;
}

std::string milliseconds(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds >= 1)
    os << llvm::format("%.3f s", seconds);
  else
    os << llvm::format("%.3f ms", seconds * 1e3);
  return text;
}

const char *kConstraintKeys[] = {"dp",       "tp", "pp",       "zero",
                                 "group",    "sp", "mbs",      "M",
                                 "schedule", "V",  "recompute"};

std::string canonicalKey(const std::string &key) {
  if (key == "microbatches")
    return "M";
  if (key == "virtual_stages")
    return "V";
  if (key == "microbatch_size")
    return "mbs";
  if (key == "sequence_parallel")
    return "sp";
  if (key == "zero_shard_group")
    return "group";
  return key;
}

std::string layoutValue(const Layout &layout, const std::string &key) {
  if (key == "dp")
    return std::to_string(layout.dp);
  if (key == "tp")
    return std::to_string(layout.tp);
  if (key == "pp")
    return std::to_string(layout.pp);
  if (key == "zero")
    return std::to_string(layout.zero);
  if (key == "group")
    return std::to_string(layout.zeroShardGroup);
  if (key == "sp")
    return layout.sequenceParallel ? "1" : "0";
  if (key == "mbs")
    return std::to_string(layout.microbatchSize);
  if (key == "M")
    return std::to_string(layout.microbatches);
  if (key == "schedule")
    return layout.schedule.empty() ? "none" : layout.schedule;
  if (key == "V")
    return std::to_string(layout.virtualStages);
  return layout.recompute;
}

/// Bytes as the report prints them, with a sign.
std::string shortfall(uint64_t bytes) { return gib(double(bytes)); }

/// The compile options of `layout`; `keepBlocks`: the model folded to its
/// first that many repeated blocks (0: whole).
ModelCompileOptions layoutOptions(const PlanRequest &request,
                                  const Layout &layout, int keepBlocks = 0) {
  ModelCompileOptions options;
  options.keepRepeatedBlocks = keepBlocks;
  options.dims = request.dims;
  int64_t rows = layout.microbatchSize * int64_t(layout.dp);
  // (A model of a fixed batch declares its rows; the search gives every
  // microbatch that many.)
  if (request.inputShapes.empty() && request.fixedBatch == 0)
    options.dims[request.batchDim] = rows;
  for (const auto &[name, shape] : request.inputShapes) {
    std::vector<int64_t> microbatch = shape;
    if (!microbatch.empty())
      microbatch[0] = rows;
    options.inputShapes[name] = microbatch;
  }
  options.precision = request.precision;
  options.train = request.train;
  options.train.enabled = true;
  applyLayout(layout, options.train);
  // One program per pipeline stage (or one without a pipeline): the other
  // ranks run copies of them, which the replay need not repeat.
  options.representativeRanks = true;
  return options;
}

/// The plan of shapes only that the compiler builds for `layout`.
rt::StatusOr<rt::Plan> compileLayout(const PlanRequest &request,
                                     const Layout &layout, int keepBlocks = 0) {
  return compileShapesOnly(request.modelPath,
                           layoutOptions(request, layout, keepBlocks));
}

/// The planner's compiles run on a pool of `threads` threads (0: one per
/// core, at most eight: each compile of a deep pipeline of a large model
/// holds a module of a few hundred MB while it runs); the first call makes
/// it. Each thread compiles in an MLIR context of its own (ModelCompiler
/// keeps its imports per thread), so compiles that do not depend on each
/// other (a layout's folded counts, the screen's probes) run at once; the
/// decisions between them stay in order.
llvm::ThreadPoolInterface &compilePool(int threads = 0) {
  static llvm::StdThreadPool pool(llvm::hardware_concurrency(
      threads > 0
          ? unsigned(threads)
          : std::min(8u, llvm::hardware_concurrency().compute_thread_count())));
  return pool;
}

/// Runs `tasks` on the compile pool and waits for all of them.
void runAtOnce(std::vector<std::function<void()>> &tasks) {
  llvm::ThreadPoolTaskGroup group(compilePool());
  for (std::function<void()> &task : tasks)
    group.async(task);
  group.wait();
}

/// What the replay of one compiled layout gives, per compiled rank.
struct Replay {
  std::vector<int> ranks;
  std::vector<uint64_t> peakBytes, paramBytes, gradBytes, optimizerBytes,
      commBytes, trainedCount;
  /// The first compiled rank's trained parameters: local shape and bytes.
  std::vector<std::pair<std::vector<int64_t>, uint64_t>> trainedShapes;
  /// The step's inputs and outputs the rank holds (the batch's rows).
  std::vector<uint64_t> ioBytes;
  std::vector<double> computeSeconds, waitSeconds, modelFlops;
  double stepSeconds = 0;
};

/// The two microbatch counts a layout with many microbatches is
/// extrapolated from (nothing: it is compiled as is). The step unrolls its
/// microbatches, so compiling M of them costs M times one; but once every
/// pipeline stage runs its steady state, each further microbatch adds the
/// same instructions, transfers and waits, and the replay's time is
/// affine in M: from pp + 1 on for 1F1B and ZB-H1 (ZB-H1 fills its
/// bubble with W from the second microbatch past pp), in groups of pp
/// from 2 pp on for interleaved, from 2 on for GPipe and gradient
/// accumulation. The two counts are two apart: data parallelism's
/// overlap can alternate between two step lengths. Folding saves work only
/// when the two compile fewer microbatches than M.
std::optional<std::pair<int, int>> foldPoints(const Layout &layout) {
  int first = 4, second = 6;
  if (layout.pp > 1 && layout.schedule == "interleaved") {
    first = 2 * layout.pp;
    second = 3 * layout.pp;
  } else if (layout.pp > 1 && layout.schedule != "gpipe") {
    first = layout.pp + 1;
    second = layout.pp + 3;
  }
  if (layout.microbatches <= first + second)
    return std::nullopt;
  return std::make_pair(first, second);
}

/// The replay at `m` microbatches (or blocks) on the line through the
/// replays at `m1` and `m2`. The time, bytes sent and FLOPs are affine in
/// the count; so is the peak where all microbatches' activations are alive
/// at once (`growsWithMicrobatches`: GPipe; and every layout's, per
/// repeated block). Elsewhere the schedule bounds the microbatches in
/// flight, and the memory planner's first fit packs a bounded set a little
/// tighter or looser from one count to the next: the peak is the larger
/// count's, plus the growth of the step's inputs.
std::optional<Replay> extrapolate(const Replay &a, const Replay &b, double m1,
                                  double m2, double m,
                                  bool growsWithMicrobatches,
                                  std::string &error) {
  if (a.ranks != b.ranks) {
    error = "the replays at " + llvm::formatv("{0}", m1).str() + " and " +
            llvm::formatv("{0}", m2).str() + " compiled different ranks";
    return std::nullopt;
  }
  double t = (m - m1) / (m2 - m1);
  auto line = [&](double x, double y) {
    return std::max(0.0, x + (y - x) * t);
  };
  auto bytes = [&](const std::vector<uint64_t> &x,
                   const std::vector<uint64_t> &y) {
    std::vector<uint64_t> out(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      out[i] = uint64_t(std::llround(line(double(x[i]), double(y[i]))));
    return out;
  };
  auto seconds = [&](const std::vector<double> &x,
                     const std::vector<double> &y) {
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      out[i] = line(x[i], y[i]);
    return out;
  };
  Replay out;
  out.ranks = a.ranks;
  out.ioBytes = bytes(a.ioBytes, b.ioBytes);
  if (growsWithMicrobatches) {
    out.peakBytes = bytes(a.peakBytes, b.peakBytes);
  } else {
    // The peak of the larger count plus the step's inputs and outputs
    // (each microbatch's rows): past it, activations of no more
    // microbatches are alive at once.
    out.peakBytes.resize(b.peakBytes.size());
    for (size_t i = 0; i < b.peakBytes.size(); ++i)
      out.peakBytes[i] = b.peakBytes[i] + out.ioBytes[i] - b.ioBytes[i];
  }
  out.paramBytes = bytes(a.paramBytes, b.paramBytes);
  out.gradBytes = bytes(a.gradBytes, b.gradBytes);
  out.optimizerBytes = bytes(a.optimizerBytes, b.optimizerBytes);
  out.trainedCount = bytes(a.trainedCount, b.trainedCount);
  out.commBytes = bytes(a.commBytes, b.commBytes);
  out.computeSeconds = seconds(a.computeSeconds, b.computeSeconds);
  out.waitSeconds = seconds(a.waitSeconds, b.waitSeconds);
  out.modelFlops = seconds(a.modelFlops, b.modelFlops);
  out.stepSeconds = line(a.stepSeconds, b.stepSeconds);
  return out;
}

/// How a replay's error starts when a pipeline's programs could not be
/// written out from its compile (PipelineFold.h).
constexpr const char *kNotWrittenOut = "not written out: ";
/// ... and when its ranks could not be written out from a compile of
/// fewer (StageFold).
constexpr const char *kStagesNotWrittenOut = "stages not written out: ";

/// A pipeline written out from a compile of one rank of each kind
/// (StageFold): the pipeline ranks compiled, the model's repeated blocks
/// they hold, where their chunks are cut (ONNX nodes, as --stage-cuts),
/// and per pipeline rank of the layout the compiled rank it runs.
struct StageWriteOut {
  int ranks = 0, keepBlocks = 0;
  std::vector<std::string> cuts;
  std::vector<int> rankTemplate;
};

/// The pipeline ranks a pipeline of `ranks` ranks, `virtualStages` chunks
/// each, cut as `outline` says, is written out from: the first, the last,
/// and between them one rank of each kind (its chunks as many ops from
/// the same places in a block), taken in the pipeline's order so that
/// each chunk starts where the one before it ends. Nothing where that
/// compiles as many ranks, a cut falls outside the blocks, or a cut of the
/// compile would fall where no node ends.
///
/// With `shift` > 0 each compiled chunk holds that many repeated blocks
/// fewer than the whole model's (from the same place in a block): two such
/// compiles, one block per chunk apart, give the line each figure follows
/// to the whole chunks (shiftedStageWriteOut). Every rank may then be
/// compiled, since each holds fewer blocks.
std::optional<StageWriteOut>
chooseTemplateRanks(const loomrun::StageOutline &outline, int ranks,
                    int virtualStages, int shift = 0) {
  const int64_t period = int64_t(outline.period);
  const int64_t last = int64_t(outline.count) * period - 1;
  const std::vector<int64_t> &cuts = outline.cuts;
  const int v = std::max(1, virtualStages), chunks = ranks * v;
  if (ranks < 3 || period == 0 || int(cuts.size()) != chunks - 1)
    return std::nullopt;
  for (int64_t cut : cuts)
    if (cut < 0 || cut >= last)
      return std::nullopt;
  // Chunk k (0 < k < chunks - 1) runs ops cuts[k - 1] + 1 ... cuts[k]; its
  // kind is where in a block it starts and how many ops it runs. A rank's
  // kind is its chunks' (chunk k runs on rank k % ranks).
  auto startOf = [&](int k) { return (cuts[k - 1] + 1) % period; };
  using Kind = std::vector<std::pair<int64_t, int64_t>>;
  auto kindOf = [&](int r) {
    Kind kind;
    for (int pass = 0; pass < v; ++pass) {
      int k = pass * ranks + r;
      kind.push_back(k == 0 || k == chunks - 1
                         ? std::make_pair(int64_t(-1), int64_t(k))
                         : std::make_pair(startOf(k), cuts[k] - cuts[k - 1]));
    }
    return kind;
  };
  // Whether rank r's chunks each start where the chunk before them in the
  // compile (`next`, per pass) ends.
  std::vector<int64_t> next(size_t(v), -1);
  auto follows = [&](int r) {
    for (int pass = 0; pass < v; ++pass) {
      int k = pass * ranks + r;
      if (k > 0 && next[size_t(pass)] >= 0 && startOf(k) != next[size_t(pass)])
        return false;
    }
    return true;
  };
  std::vector<int> chosen, skipped;
  std::set<Kind> kinds;
  // Takes rank r, and the shortest run of the ranks skipped just before it
  // whose first follows the last one taken.
  auto take = [&](int r) {
    size_t from = skipped.size();
    if (!follows(r))
      for (size_t j = skipped.size(); j-- > 0;)
        if (follows(skipped[j])) {
          from = j;
          break;
        }
    for (size_t j = from; j < skipped.size(); ++j)
      chosen.push_back(skipped[j]);
    skipped.clear();
    chosen.push_back(r);
    kinds.insert(kindOf(r));
    for (int pass = 0; pass < v; ++pass) {
      int k = pass * ranks + r;
      if (k < chunks - 1)
        next[size_t(pass)] = (cuts[k] + 1) % period;
    }
  };
  take(0);
  for (int r = 1; r < ranks - 1; ++r) {
    if (kinds.count(kindOf(r)))
      skipped.push_back(r);
    else
      take(r);
  }
  take(ranks - 1);
  StageWriteOut out;
  out.ranks = int(chosen.size());
  if (out.ranks > ranks || (out.ranks == ranks && shift == 0))
    return std::nullopt;
  // The compile's chunks in its order (pass by pass, its ranks in order),
  // one after the other from the first's, each `shift` blocks short of its
  // own; the last runs to the blocks' end.
  const int64_t removed = int64_t(shift) * period;
  int64_t at = cuts[0] - removed;
  if (at < 0)
    return std::nullopt;
  std::vector<int64_t> positions = {at};
  for (int pass = 0; pass < v; ++pass)
    for (int r : chosen) {
      int k = pass * ranks + r;
      if (k == 0 || k == chunks - 1)
        continue;
      if (cuts[k] - cuts[k - 1] <= removed)
        return std::nullopt;
      at += cuts[k] - cuts[k - 1] - removed;
      positions.push_back(at);
    }
  if (last - cuts[chunks - 2] <= removed)
    return std::nullopt;
  int64_t end = at + (last - cuts[chunks - 2]) - removed;
  if ((end + 1) % period != 0 || end > last)
    return std::nullopt;
  out.keepBlocks = int((end + 1) / period);
  for (int64_t position : positions) {
    const std::string &name = outline.cutNames[size_t(position)];
    if (name.empty())
      return std::nullopt;
    out.cuts.push_back(name);
  }
  out.rankTemplate.assign(size_t(ranks), -1);
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < chosen.size(); ++i)
      if (kindOf(chosen[i]) == kindOf(r)) {
        out.rankTemplate[size_t(r)] = int(i);
        break;
      }
  return out;
}

/// At most this many layouts are compiled without screening them first.
constexpr size_t kCompileWithoutScreen = 4;
/// How much slower than the fastest compiled step a layout may be
/// estimated and still be compiled, before compiles have measured the
/// screen's error (docs/design/planner.md, "Screening").
constexpr double kScreenTimeMargin = 0.15;
/// The bounds of the margin once compiles have measured the screen's
/// error.
constexpr double kScreenMinMargin = 0.03, kScreenMaxMargin = 0.25;
/// How far over the device's memory an estimate may be and still count
/// as fitting.
constexpr double kScreenMemoryMargin = 0.1;
/// How near the device's memory a pipeline written out from one rank of
/// each kind must come for its peaks to be compiled past those ranks'
/// depth before the search goes on (docs/design/planner.md, "Writing
/// stages out"): at five microbatches its fullest rank came up to 6.5%
/// short, interleaved's at two groups of the ranks up to 1.2%; past the
/// depth, within 0.4%.
constexpr double kWrittenOutPeakMargin = 0.08;
constexpr double kInterleavedPeakMargin = 0.02;
/// How far beyond that margin the screen's estimate of an interleaved
/// pipeline's peak may be and its ranks still be compiled past their depth
/// at once (pastDepthAtOnce): its corrected estimates of interleaved peaks
/// on Megatron's rows were within 7% but for one layout well over the
/// memory.
constexpr double kPastDepthAtOnceBand = 0.07;
/// How far over the device's memory a memory probe (probedPeak) may put a
/// layout and still have it compiled: the probes' fullest ranks came within
/// -3.3 to +3% of whole compiles, some over by up to 10% (interleaved's,
/// the last rank of a short ZB-H1 pipeline: docs/design/planner.md,
/// "Probing a pipeline's memory").
constexpr double kProbedPeakMargin = 0.1;
/// How near the device's memory (as a fraction of it) a layout's screened
/// peak, corrected by its peak family's compiles and probes, must come for
/// its memory to be probed before it is compiled (always, before any of
/// that family); below it, the probe compiles beside the layout.
constexpr double kProbeFirstFraction = 0.9;
/// How much less than another schedule's peak correction a schedule's
/// pipelines are lent before their own is known (Search::correction).
constexpr double kLentPeakDiscount = 0.1;
/// How long past the compiles the search waits on a compile started in a
/// thread's idle time may be expected to run, seconds: most such compiles
/// are the ones the search makes next (a later start would only delay
/// them), and a wrong guess delays the search's next compiles by at most
/// this much on one thread.
constexpr double kSpeculationOverrun = 0.1;
/// How many layouts past the one compiled the search compiles ahead.
constexpr size_t kLayoutsAhead = 3;
/// How many pipelines' stage outlines the search makes at once before
/// compiling any (Search::outlineAhead).
constexpr size_t kOutlinesAhead = 8;
/// How many families, and compiles of them, there must be before the
/// margin of a family nothing was compiled from is learnt from every
/// compile's error against the correction the others lend it
/// (lentCorrectionSpread).
constexpr size_t kLentSpreadFamilies = 2, kLentSpreadCompiles = 3;
/// How many of the layouts the screen skipped the pruned list names.
constexpr size_t kNamedScreenedOut = 20;

class Search {
public:
  Search(const PlanRequest &request, const mlir::loom::ClusterSpec &cluster,
         PlanResult &result)
      : request(request), cluster(cluster), result(result) {}
  /// (The compiles started ahead read the search: they end first.)
  ~Search() {
    std::unique_lock<std::mutex> lock(poolMutex);
    poolChanged.wait(lock, [&] { return poolRunning == 0; });
  }

  void run() {
    compilePool(request.threads);
    int64_t devices = result.devices;
    int64_t batch = request.globalBatch;
    // The stage counts a layout may cut the model into (interleaved: two
    // per rank).
    std::vector<int> stageCounts;
    for (int64_t pp : divisors(devices))
      if (pp > 1)
        stageCounts.insert(stageCounts.end(), {int(pp), int(2 * pp)});
    Layout one;
    one.microbatchSize = request.fixedBatch > 0 ? request.fixedBatch : 1;
    rt::StatusOr<ModelOutline> outline = outlineModel(
        request.modelPath, layoutOptions(request, one), stageCounts);
    blocks = outline && request.foldLayers ? outline->repeatedBlocks : 0;
    screen.emplace(
        cluster, blocks,
        [this](const Layout &layout, int keep,
               std::string &error) -> std::optional<ProbeFigures> {
          std::optional<Replay> replay =
              replayLayout({layout, keep, 0, 0}, error);
          if (!replay || replay->ranks.empty())
            return std::nullopt;
          ProbeFigures figures;
          figures.stepSeconds = replay->stepSeconds;
          if (layout.dp > 1 && !replay->computeSeconds.empty())
            figures.computeSeconds = replay->computeSeconds[0];
          figures.peakBytes = replay->peakBytes[0];
          figures.paramBytes = replay->paramBytes[0];
          figures.gradBytes = replay->gradBytes[0];
          figures.optimizerBytes = replay->optimizerBytes[0];
          figures.trainedCount = replay->trainedCount[0];
          figures.trainedShapes = replay->trainedShapes;
          return figures;
        },
        request.fixedBatch);
    screen->setBucketBytes(request.train.bucketMB * 1024 * 1024);
    if (outline)
      screen->setSlowestStageShares(outline->slowestStageShare);
    screen->setRunner(runAtOnce);
    if (!request.exhaustive)
      measureModelStates();
    for (int64_t tp : divisors(devices)) {
      for (int64_t pp : divisors(devices / tp)) {
        int64_t dp = devices / tp / pp;
        Layout base;
        base.dp = int(dp);
        base.tp = int(tp);
        base.pp = int(pp);
        if (tp > cluster.devicesPerNode) {
          prune(base, "tensor parallelism across nodes (tp " +
                          std::to_string(tp) + " > " +
                          std::to_string(cluster.devicesPerNode) +
                          " devices per node)");
          continue;
        }
        if (batch % dp) {
          prune(base, "the global batch " + std::to_string(batch) +
                          " does not split over dp " + std::to_string(dp));
          continue;
        }
        enumerateMicrobatches(base, batch / dp);
      }
    }
    // A handful of layouts (--evaluate fixing most keys) are compiled as
    // they are; more are screened first.
    if (request.exhaustive || pending.size() <= kCompileWithoutScreen) {
      for (const Layout &layout : pending) {
        if (outOfTime())
          break;
        if (std::optional<std::string> why = dominated(layout))
          prune(layout, *why);
        else
          evaluate(layout);
      }
    } else {
      screenAndEvaluate();
    }
    // Nothing fits: the layout whose model states came closest is compiled,
    // so that the report names its real shortfall.
    bool anyFits = llvm::any_of(result.candidates, [](const Candidate &c) {
      return c.predicted.feasible;
    });
    // (Unless a compiled layout came closer than it could: its bytes are
    // a floor of its model states, or its memory probe's peak.)
    auto closest = std::min_element(
        overMemory.begin(), overMemory.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    bool compiledCloser =
        closest != overMemory.end() &&
        llvm::any_of(result.candidates, [&](const Candidate &c) {
          return !c.predicted.peakBytes.empty() &&
                 c.predicted.maxPeakBytes() <= closest->first;
        });
    if (!anyFits && closest != overMemory.end() && !compiledCloser)
      evaluate(closest->second);
    confirmChoice();
  }

private:
  /// A pipeline's programs written out from a compile of a few microbatches
  /// give its step time (the schedule at its own microbatch count), but
  /// not all of its peak: over a long steady state the memory planner
  /// packs its stages' buffers less tightly than over a few microbatches.
  /// So the fastest feasible layout takes its peaks from a compile past
  /// the pipeline's depth (the larger of the two counts the two-count fold
  /// compiles: every stage then holds as many microbatches as at the full
  /// count) before it is chosen, until the fastest feasible one has: a
  /// layout that does not fit after all is never the choice.
  void confirmChoice() {
    while (true) {
      // The fastest feasible layout; when none fits, the one that came
      // closest (the report names its shortfall).
      std::optional<size_t> best;
      for (size_t i = 0; i < result.candidates.size(); ++i) {
        const Prediction &p = result.candidates[i].predicted;
        if (p.feasible &&
            (!best ||
             p.stepSeconds < result.candidates[*best].predicted.stepSeconds))
          best = i;
      }
      for (size_t i = 0; i < result.candidates.size() && !best; ++i) {
        const Prediction &p = result.candidates[i].predicted;
        if (!p.peakBytes.empty() &&
            llvm::none_of(result.candidates, [&](const Candidate &other) {
              return !other.predicted.peakBytes.empty() &&
                     other.predicted.shortfallBytes < p.shortfallBytes;
            }))
          best = i;
      }
      if (!best)
        return;
      Candidate &candidate = result.candidates[*best];
      Prediction &p = candidate.predicted;
      // (A pipeline written out from one rank of each kind had its peaks
      // compiled past their depth as the search went where it came near
      // the device's memory: evaluate.)
      if (!p.pipelineFoldedFrom || p.peakConfirmedFrom || p.stagesFoldedFrom)
        return;
      std::string error;
      ++result.confirmed;
      p.writtenOutPeakBytes = p.maxPeakBytes();
      std::optional<std::pair<int, int>> points = foldPoints(candidate.layout);
      Layout compiled = candidate.layout;
      if (points && points->second < compiled.microbatches)
        compiled.microbatches = points->second;
      p.peakConfirmedFrom = compiled.microbatches;
      std::optional<Replay> replay =
          replayFolded(compiled, candidate.layout.microbatches, error);
      if (!replay) {
        p.feasible = false;
        p.reason = error;
        continue;
      }
      p.peakBytes = replay->peakBytes;
      judgeMemory(p);
    }
  }

  /// `layout` compiled as it is, but for its layers (folded to one and two
  /// repeated blocks per pipeline chunk where there are many), the inputs
  /// grown to `rowsOf` microbatches.
  std::optional<Replay> replayFolded(const Layout &layout, int rowsOf,
                                     std::string &error) const {
    int chunks = layout.pp * std::max(1, layout.virtualStages);
    std::optional<std::pair<int, int>> blockPoints = layerFoldPoints(chunks);
    std::vector<ReplayJob> jobs;
    if (blockPoints)
      for (int keep : {blockPoints->first, blockPoints->second})
        jobs.push_back({layout, keep, 0, rowsOf});
    else
      jobs.push_back({layout, 0, 0, rowsOf});
    std::optional<std::vector<Replay>> replays = replayEach(jobs, error);
    if (!replays || !blockPoints)
      return replays ? std::optional<Replay>((*replays)[0]) : std::nullopt;
    return extrapolate((*replays)[0], (*replays)[1], 1, 2,
                       double(blocks) / chunks,
                       /*growsWithMicrobatches=*/true, error);
  }

  /// `layout`'s pipeline written out (to every rank and microbatch, memory
  /// only) from the ranks the search wrote it out from, compiled past their
  /// depth; nothing, with `error` set, where it has no such ranks.
  std::optional<Replay> replayStagesPastDepth(const Layout &layout,
                                              std::string &error) const {
    const ShiftedStages *shifted = shiftedStageWriteOut(layout);
    std::vector<std::shared_ptr<const StageWriteOut>> ranks = {
        stageWriteOut(layout)};
    if (shifted)
      ranks = {shifted->fewer, shifted->more};
    std::vector<ReplayJob> jobs;
    for (const std::shared_ptr<const StageWriteOut> &stages : ranks) {
      if (!stages) {
        error = "not written out from fewer ranks";
        return std::nullopt;
      }
      ReplayJob job;
      job.layout = layout;
      job.layout.microbatches = stageCompileCount(layout, stages->ranks, true);
      job.writeOutTo = layout.microbatches;
      job.stages = stages;
      job.memoryOnly = true;
      job.pastDepth = true;
      jobs.push_back(job);
    }
    std::optional<std::vector<Replay>> replays = replayEach(jobs, error);
    if (!replays || !shifted)
      return replays ? std::optional<Replay>((*replays)[0]) : std::nullopt;
    return extrapolate((*replays)[0], (*replays)[1], 0, 1, shifted->shift,
                       /*growsWithMicrobatches=*/true, error);
  }

  /// The ZeRO shard groups searched at `zero`: all of dp (0), and with
  /// dp spanning nodes, the dp ranks of one node (hybrid sharding, FSDP's
  /// HSDP: gathers and reduce-scatters stay on the node's links, the
  /// groups replicate and all-reduce across nodes).
  std::vector<int> shardGroups(const Layout &layout, int zero) const {
    std::vector<int> groups = {0};
    int64_t perNode = cluster.devicesPerNode / layout.tp;
    if (zero > 0 && cluster.devicesPerNode % layout.tp == 0 && perNode > 1 &&
        perNode < layout.dp && layout.dp % perNode == 0)
      groups.push_back(int(perNode));
    return groups;
  }

  /// Whether the search has used up --time-limit (then it stops, and the
  /// report says so); never before one layout is compiled.
  bool outOfTime() {
    if (request.timeLimitSeconds <= 0 || result.candidates.empty())
      return false;
    double spent = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
    if (spent > request.timeLimitSeconds)
      result.stoppedEarly = true;
    return result.stoppedEarly;
  }

  /// The model's parameters, gradients and optimizer state as one rank
  /// holds them (the bytes the memory planner gives the plan of dp = tp =
  /// pp = 1 and one microbatch of one row): no layout holds less than its
  /// share of them, which prunes layouts before they are compiled.
  void measureModelStates() {
    Layout one;
    one.microbatchSize = screen->probeRows();
    // The screen's probe of tp 1 (the same compile; the screen reuses it).
    auto measure = [&](int keep) -> std::optional<ModelStates> {
      std::string error;
      std::optional<ProbeFigures> probe =
          screen->figures(one, keep, 1, one.microbatchSize, error);
      if (!probe)
        return std::nullopt; // The search reports the compiler's error.
      return ModelStates{probe->paramBytes, probe->gradBytes,
                         probe->optimizerBytes};
    };
    if (!layerFoldPoints(1)) {
      states = measure(0);
      return;
    }
    // Per repeated block, from one block and two.
    std::optional<ModelStates> a = measure(1), b = measure(2);
    if (!a || !b)
      return;
    auto line = [&](uint64_t x, uint64_t y) {
      return uint64_t(std::max<double>(0, double(x) + (double(y) - double(x)) *
                                                          double(blocks - 1)));
    };
    states = {line(a->params, b->params), line(a->grads, b->grads),
              line(a->optimizer, b->optimizer)};
  }

  /// The block counts a layout of `chunks` pipeline chunks (pp x virtual
  /// stages) is extrapolated from: one and two blocks per chunk, when the
  /// model repeats a block (a layer) at least six times per chunk, so that
  /// the two compiles cost at most half of the whole one (docs/design/
  /// planner.md, "Folding layers").
  std::optional<std::pair<int, int>> layerFoldPoints(int chunks) const {
    if (!request.foldLayers || blocks < 6 * chunks)
      return std::nullopt;
    return std::make_pair(chunks, 2 * chunks);
  }

  /// A lower bound of the model-state bytes of `layout`'s fullest rank: the
  /// average over its ranks. tp and pp split at most every parameter
  /// (layer norms and biases stay whole under tp; a tied embedding lives on
  /// two stages); ZeRO shards the optimizer state over dp from stage 1, the
  /// gradients from 2, the parameters at 3 (stages 1 and 2 keep f32-read
  /// masters whole). 0 before the states are measured.
  uint64_t modelStatesFloor(const Layout &layout) const {
    if (!states)
      return 0;
    double split = double(layout.tp) * double(layout.pp);
    double dp = double(layout.dp);
    double bytes = double(states->params) / (layout.zero >= 3 ? dp : 1) +
                   double(states->grads) / (layout.zero >= 2 ? dp : 1) +
                   double(states->optimizer) / (layout.zero >= 1 ? dp : 1);
    return uint64_t(bytes / split);
  }

  void prune(const Layout &layout, const std::string &why) {
    if (request.constraint.allows(layout) || request.exhaustive)
      result.pruned.push_back({layout, why});
  }

  void enumerateMicrobatches(Layout base, int64_t perReplica) {
    // A model of a fixed batch: microbatches of its rows over dp, as many
    // as the global batch holds.
    std::vector<int64_t> counts = divisors(perReplica);
    if (int64_t fixed = request.fixedBatch) {
      if (fixed % base.dp) {
        prune(base, "the model's inputs are exported at a fixed batch of " +
                        std::to_string(fixed) + " rows, which dp " +
                        std::to_string(base.dp) + " does not split");
        return;
      }
      counts = {perReplica / (fixed / base.dp)};
    }
    bool splitsIntoPP =
        llvm::any_of(counts, [&](int64_t count) { return count >= base.pp; });
    for (int64_t microbatches : counts) {
      Layout layout = base;
      layout.microbatches = int(microbatches);
      layout.microbatchSize = perReplica / microbatches;
      if (layout.pp == 1) {
        enumerateSharding(layout);
      } else if (microbatches < base.pp && splitsIntoPP &&
                 !request.exhaustive) {
        // Fewer microbatches than stages leave stages idle through most
        // of the step; a split into at least pp exists.
        prune(layout, "fewer microbatches (" + std::to_string(microbatches) +
                          ") than pipeline stages");
      } else {
        for (const char *schedule : {"1f1b", "zb-h1", "interleaved", "gpipe"}) {
          Layout pipelined = layout;
          pipelined.schedule = schedule;
          // GPipe runs 1F1B's bubble with every microbatch in flight (1F1B
          // holds at most pp): searched only when asked for (--exhaustive
          // compiles it too, and the brute-force test checks the choice
          // does not change).
          if (pipelined.schedule == "gpipe" && !request.exhaustive &&
              !request.constraint.fixed.count("schedule")) {
            prune(pipelined, "GPipe runs 1F1B's bubble with all " +
                                 std::to_string(microbatches) +
                                 " microbatches in flight (1F1B holds at "
                                 "most pp)");
            continue;
          }
          if (pipelined.schedule == "interleaved") {
            pipelined.virtualStages = 2;
            if (microbatches % base.pp) {
              prune(pipelined, "interleaved needs the microbatches (" +
                                   std::to_string(microbatches) +
                                   ") a multiple of pp");
              continue;
            }
          }
          enumerateSharding(pipelined);
        }
      }
    }
  }

  /// Activation recompute, sequence parallelism, the ZeRO stages and their
  /// shard groups: each layout the constraint allows and whose model states
  /// can fit joins `pending`.
  void enumerateSharding(const Layout &layout) {
    // Selective recompute only when asked for: it recomputes the attention
    // cores Loom did not fuse, and the attention it recognizes is fused, so
    // for most models it plans what none does.
    auto fixed = request.constraint.fixed.find("recompute");
    bool selective =
        fixed != request.constraint.fixed.end() && fixed->second == "selective";
    for (const char *recompute : {"none", "selective", "full"}) {
      if (llvm::StringRef(recompute) == "selective" && !selective)
        continue;
      for (int sp = 0; sp <= (layout.tp > 1 ? 1 : 0); ++sp) {
        for (int zero = 0; zero <= (layout.dp > 1 ? 3 : 0); ++zero) {
          for (int group : shardGroups(layout, zero)) {
            Layout candidate = layout;
            candidate.sequenceParallel = sp;
            candidate.zero = zero;
            candidate.zeroShardGroup = group;
            candidate.recompute = recompute;
            if (!request.constraint.allows(candidate))
              continue;
            if (uint64_t floor = modelStatesFloor(candidate);
                floor > cluster.memoryBytes()) {
              overMemory.push_back({floor, candidate});
              prune(candidate, "its parameters, gradients and optimizer state "
                               "alone need at least " +
                                   gib(double(floor)) + " per rank");
              continue;
            }
            pending.push_back(candidate);
          }
        }
      }
    }
  }

  /// Why `layout` cannot beat a layout already compiled and feasible, if it
  /// cannot (never with --exhaustive, which checks these claims): the same
  /// layout recomputing activations where one without recompute fits;
  /// without a pipeline, more and smaller microbatches where fewer fit
  /// (smaller GEMMs, as many rows). (A higher ZeRO stage can win: ZeRO-1
  /// shards the optimizer's work over dp for the same traffic.) Or why it
  /// cannot fit where a layout already compiled does not (holdsAtLeast).
  std::optional<std::string> dominated(const Layout &layout) const {
    if (request.exhaustive)
      return std::nullopt;
    for (const Layout &o : probedOut)
      if (holdsAtLeast(layout, o))
        return "holds at least what " + o.str() +
               " holds, which its memory probe puts over the device's memory";
    for (const Candidate &c : result.candidates) {
      const Layout &o = c.layout;
      if (!c.predicted.feasible && c.predicted.shortfallBytes > 0 &&
          holdsAtLeast(layout, o))
        return "holds at least what " + o.str() + " holds, which does not fit";
      if (!c.predicted.feasible || o.dp != layout.dp || o.tp != layout.tp ||
          o.pp != layout.pp)
        continue;
      bool sameSchedule = o.schedule == layout.schedule &&
                          o.virtualStages == layout.virtualStages;
      if (layout.recompute != "none" && o.recompute == "none" && sameSchedule &&
          o.microbatches == layout.microbatches)
        return "recomputes activations where " + o.str() + " fits without";
      if (layout.pp == 1 && o.microbatches < layout.microbatches)
        return "more microbatches where " + o.str() + " fits";
    }
    return std::nullopt;
  }

  /// Whether every rank of `layout` holds at least what the same rank of
  /// `other` holds: the same layout but for a lower ZeRO stage than 1 or 2
  /// (over the same group, or none), or for a schedule that keeps more
  /// microbatches in flight than `other`'s 1F1B (ZB-H1 keeps 1F1B's and defers
  /// weight gradients; GPipe keeps all of them).
  static bool holdsAtLeast(const Layout &layout, const Layout &other) {
    if (layout.dp != other.dp || layout.tp != other.tp ||
        layout.pp != other.pp ||
        layout.microbatchSize != other.microbatchSize ||
        layout.microbatches != other.microbatches ||
        layout.recompute != other.recompute ||
        layout.sequenceParallel != other.sequenceParallel ||
        layout.virtualStages != other.virtualStages)
      return false;
    // (ZeRO-3 gathers each parameter into a buffer of its own before its
    // use: it is not compared.)
    bool zero = layout.zero == other.zero
                    ? layout.zeroShardGroup == other.zeroShardGroup
                    : layout.zero < other.zero && other.zero <= 2 &&
                          (layout.zero == 0 ||
                           layout.zeroShardGroup == other.zeroShardGroup);
    bool schedule =
        layout.schedule == other.schedule ||
        (layout.pp > 1 && other.schedule == "1f1b" &&
         (layout.schedule == "zb-h1" || layout.schedule == "gpipe"));
    return zero && schedule;
  }

  /// Estimates every pending layout from the probes (LayoutScreen), then
  /// compiles them best first until the next estimate is slower than the
  /// fastest compiled step by more than the screen's margin: the layouts
  /// after it would have to beat their estimates by more than the
  /// estimates err (docs/design/planner.md, "Screening").
  void screenAndEvaluate() {
    LayoutScreen &screen = *this->screen;
    std::vector<Screened> order;
    // A probe the compiler refuses refuses every layout of its tp,
    // sequence parallelism and recompute (what the compiler refuses there,
    // a head count or a sequence that tp does not divide, does not depend
    // on dp, pp, ZeRO or the microbatches): the first such layout is
    // infeasible with the compiler's message, the others are pruned with
    // it. (It was compiled again for the message: 0.1 to 0.25 s of each
    // big row's search, for the same message.)
    std::map<std::string, bool> refusedOnce;
    screen.prefetch(pending);
    for (const Layout &layout : pending) {
      std::string error;
      std::optional<LayoutEstimate> estimate = screen.estimate(layout, error);
      if (!estimate) {
        if (!refusedOnce[error]) {
          refusedOnce[error] = true;
          Candidate refused;
          refused.layout = layout;
          refused.predicted.reason = error;
          result.candidates.push_back(std::move(refused));
        } else {
          prune(layout, "its probe does not compile: " + error);
        }
        continue;
      }
      order.push_back({layout, *estimate});
    }
    result.screened = int(order.size());
    result.probes = screen.probesCompiled();
    // Best first by the calibrated estimate: those that fit, fastest
    // first; then the others, closest to fitting first.
    auto before = [&](const Screened &a, const Screened &b) {
      LayoutEstimate x = calibrated(a), y = calibrated(b);
      bool xf = fits(x), yf = fits(y);
      if (xf != yf)
        return xf;
      if (!xf)
        return x.peakBytes < y.peakBytes;
      return x.stepSeconds < y.stepSeconds;
    };
    std::sort(order.begin(), order.end(), before);
    outlineAhead(order);
    std::optional<double> best;
    // Whether `entry` is still worth compiling: it fits and is estimated
    // within the margin of the fastest compiled step. The estimates of a
    // family nothing was compiled from yet carry only the other families'
    // correction, and families err differently (a pipeline's transfers,
    // ZeRO's collectives): they get a margin of their own (lentMargin).
    auto promising = [&](const Screened &entry) {
      LayoutEstimate estimate = calibrated(entry);
      if (!best)
        return true;
      double allowed =
          ratios.count(family(entry.layout)) ? margin() : lentMargin();
      return fits(estimate) && estimate.stepSeconds <= *best * (1 + allowed);
    };
    while (!order.empty()) {
      std::sort(order.begin(), order.end(), before);
      auto next = llvm::find_if(order, promising);
      if (next == order.end())
        break;
      LayoutEstimate estimate = calibrated(*next);
      if (outOfTime())
        break;
      Screened entry = *next;
      order.erase(next);
      // The next few that would be compiled were this one's figures to
      // change nothing, compiled ahead where its compiles leave a thread
      // idle.
      std::vector<std::pair<Layout, LayoutEstimate>> ahead;
      for (const Screened &other : order) {
        if (ahead.size() == kLayoutsAhead)
          break;
        if (promising(other) && !dominated(other.layout))
          ahead.push_back({other.layout, calibrated(other)});
      }
      expectNext(std::move(ahead));
      if (std::optional<std::string> why = dominated(entry.layout)) {
        prune(entry.layout, *why);
        continue;
      }
      estimates[entry.layout.str()] = estimate;
      // A deep pipeline whose estimate comes near the device's memory (or
      // whose peak family no compile or probe has corrected yet) has its
      // memory probed first: a layout well over it is not compiled (nor
      // are those that hold at least what it holds). Its family's
      // estimates learn from the probe. (A pipeline whose chunks hold
      // three or more blocks is not probed: its own compile, with fewer
      // blocks per chunk, costs what the probe would.)
      std::optional<uint64_t> probed;
      if (!peakRatios.count(peakFamily(entry.layout)) ||
          double(estimate.peakBytes) >
              double(cluster.memoryBytes()) * kProbeFirstFraction)
        probed = probedPeak(entry.layout);
      if (probed) {
        learnPeak(entry, *probed);
        if (double(*probed) >
            double(cluster.memoryBytes()) * (1 + kProbedPeakMargin)) {
          ++result.probedOverMemory;
          overMemory.push_back({*probed, entry.layout});
          probedOut.push_back(entry.layout);
          prune(entry.layout, "its memory probe puts its fullest rank at " +
                                  gib(double(*probed)) +
                                  " (one pipeline rank of each kind, one and "
                                  "two blocks per chunk; not compiled)");
          continue;
        }
      }
      bool feasible = evaluate(entry.layout);
      const Prediction &p = result.candidates.back().predicted;
      if (!p.peakBytes.empty()) {
        // (The margin of calibrated families is learnt from the errors of
        // estimates made with their family's correction, that of the
        // others from those made with the other families'.)
        if (p.stepSeconds > 0 && estimate.stepSeconds > 0) {
          double error = p.stepSeconds / estimate.stepSeconds - 1;
          if (ratios.count(family(entry.layout))) {
            squaredErrors += error * error;
            ++errors;
          } else if (allRatios.count) {
            lentSquaredErrors += error * error;
            ++lentErrors;
          }
        }
        learn(entry, p);
      }
      if (feasible)
        best = best ? std::min(*best, p.stepSeconds) : p.stepSeconds;
    }
    expectNext({});
    // What was not compiled, best estimate first: the closest few are
    // named in the report's pruned list, the rest counted.
    std::stable_sort(order.begin(), order.end(), before);
    for (size_t i = 0; i < order.size(); ++i) {
      LayoutEstimate estimate = calibrated(order[i]);
      ++result.screenedOut;
      if (i >= kNamedScreenedOut)
        continue;
      std::string why =
          !fits(estimate)
              ? "estimated to need " + gib(double(estimate.peakBytes)) +
                    " per rank (not compiled)"
          : best
              ? "estimated step " + milliseconds(estimate.stepSeconds) + ", " +
                    llvm::formatv("{0:F0}%",
                                  100 * (estimate.stepSeconds / *best - 1))
                        .str() +
                    " slower than the fastest compiled (not compiled)"
              : "not compiled before the time limit";
      result.pruned.push_back({order[i].layout, why});
    }
  }

  /// How much slower than the fastest compiled step a layout of a
  /// calibrated family may be estimated and still be compiled: twice the
  /// RMS error of such estimates so far (they were off by that much before
  /// each compile), within bounds. Until three tell, the margin of the
  /// estimates lent another family's correction where three of those
  /// told (a family's own correction errs no more than one lent it),
  /// else kScreenTimeMargin.
  double margin() const {
    if (errors < 3)
      return lentMargin();
    return std::clamp(2 * std::sqrt(squaredErrors / errors), kScreenMinMargin,
                      kScreenMaxMargin);
  }
  double squaredErrors = 0;
  int errors = 0;

  /// The same for a family nothing was compiled from, whose estimates
  /// carry the other families' correction: twice the RMS error of the
  /// corrections the others lend (lentCorrectionSpread) once three compiles of
  /// two families tell, else of such estimates so far; at most
  /// kScreenTimeMargin (until three tell).
  double lentMargin() const {
    if (std::optional<double> spread = lentCorrectionSpread(
            stepLogs, kLentSpreadFamilies, kLentSpreadCompiles))
      return std::clamp(2 * *spread, kScreenMinMargin, kScreenTimeMargin);
    if (lentErrors < 3)
      return kScreenTimeMargin;
    return std::clamp(2 * std::sqrt(lentSquaredErrors / lentErrors),
                      kScreenMinMargin, kScreenTimeMargin);
  }
  double lentSquaredErrors = 0;
  int lentErrors = 0;

  /// Each compiled layout's family and log compiled-to-estimated step.
  std::vector<std::pair<std::string, double>> stepLogs;

  /// The screen's estimate of a layout and the layout.
  struct Screened {
    Layout layout;
    LayoutEstimate estimate;
  };

  /// Layouts alike in what the probes cannot see (the pipeline schedule's
  /// buffers, ZeRO's collectives) share a correction.
  static std::string family(const Layout &layout) {
    return (layout.pp > 1 ? layout.schedule : std::string("none")) + "/" +
           std::to_string(layout.zero);
  }

  /// Peaks are corrected per family and sequence parallelism: without it
  /// a stage holds its activations whole on every tp rank, which the
  /// screen's pipeline-free probes see only in part.
  static std::string peakFamily(const Layout &layout) {
    return family(layout) + (layout.sequenceParallel ? "/sp" : "");
  }

  /// The geometric mean of the compiled-to-estimated ratios of step time
  /// in `layout`'s family (or over every family), and of peaks in its peak
  /// family (from compiles and memory probes); 1 before any.
  std::pair<double, double> correction(const Layout &layout) const {
    double step = 1, peak = 1;
    // A family nothing was compiled from takes the others' time
    // correction, but not their memory's: what the probes miss in memory
    // (ZeRO's shards, sequence parallelism's activations) differs most
    // between families, and a peak wrongly corrected up would rule the
    // family out before any of it is compiled or probed. Only another
    // schedule's of the same ZeRO stage and sequence parallelism lends
    // it a peak correction, the least of them, and less by
    // kLentPeakDiscount (their corrections differed by up to 9% on
    // Megatron's models: the screen's margin on memory then still admits
    // every layout that fits).
    if (auto it = ratios.find(family(layout)); it != ratios.end())
      step = std::exp(it->second.logStep / it->second.count);
    else if (allRatios.count)
      step = std::exp(allRatios.logStep / allRatios.count);
    if (auto it = peakRatios.find(peakFamily(layout)); it != peakRatios.end())
      peak = std::exp(it->second.logPeak / it->second.count);
    else if (std::optional<double> lent = lentPeakCorrection(layout))
      peak = std::max(1.0, *lent * (1 - kLentPeakDiscount));
    return {step, peak};
  }

  /// The least peak correction of the pipelines that differ from `layout`
  /// only in their schedule (by ZeRO stage and sequence parallelism);
  /// nothing where none was corrected yet.
  std::optional<double> lentPeakCorrection(const Layout &layout) const {
    if (layout.pp == 1)
      return std::nullopt;
    const std::string own = peakFamily(layout);
    const std::string rest = own.substr(own.find('/'));
    std::optional<double> least;
    for (const auto &[key, r] : peakRatios) {
      size_t slash = key.find('/');
      if (key.substr(0, slash) == "none" || key.substr(slash) != rest)
        continue;
      double ratio = std::exp(r.logPeak / r.count);
      least = least ? std::min(*least, ratio) : ratio;
    }
    return least;
  }

  /// The screen's estimate corrected by what the compiled layouts of its
  /// family (or all of them) showed: the screen is calibrated against the
  /// compiler's plans as the search goes.
  LayoutEstimate calibrated(const Screened &entry) const {
    auto [step, peak] = correction(entry.layout);
    LayoutEstimate out = entry.estimate;
    out.stepSeconds *= step;
    out.peakBytes = uint64_t(double(out.peakBytes) * peak);
    return out;
  }

  bool fits(const LayoutEstimate &estimate) const {
    return double(estimate.peakBytes) <=
           double(cluster.memoryBytes()) * (1 + kScreenMemoryMargin);
  }

  /// `p`'s step and peak against the screen's estimate.
  void learn(const Screened &entry, const Prediction &p) {
    if (entry.estimate.stepSeconds <= 0 || entry.estimate.peakBytes == 0 ||
        p.stepSeconds <= 0)
      return;
    double logStep = std::log(p.stepSeconds / entry.estimate.stepSeconds);
    for (Ratios *r : {&ratios[family(entry.layout)], &allRatios}) {
      r->logStep += logStep;
      ++r->count;
    }
    stepLogs.push_back({family(entry.layout), logStep});
    learnPeak(entry, p.maxPeakBytes());
  }

  /// A compiled or probed peak against the screen's estimate.
  void learnPeak(const Screened &entry, uint64_t peak) {
    if (entry.estimate.peakBytes == 0 || peak == 0)
      return;
    Ratios &r = peakRatios[peakFamily(entry.layout)];
    r.logPeak += std::log(double(peak) / double(entry.estimate.peakBytes));
    ++r.count;
  }

  struct Ratios {
    double logStep = 0, logPeak = 0;
    int count = 0;
  };
  /// Step ratios by family and over all (logPeak unused), peak ratios by
  /// peak family (logStep unused).
  std::map<std::string, Ratios> ratios, peakRatios;
  Ratios allRatios;

  bool evaluate(const Layout &layout) {
    Candidate candidate;
    candidate.layout = layout;
    Prediction &p = candidate.predicted;
    if (auto it = estimates.find(layout.str()); it != estimates.end()) {
      p.estimatedStepSeconds = it->second.stepSeconds;
      p.estimatedPeakBytes = it->second.peakBytes;
    }
    ++result.compiled;
    std::string error;
    std::optional<Replay> replay;
    int chunks = layout.pp * std::max(1, layout.virtualStages);
    // Each repeated block adds the same compute, memory and traffic to
    // every chunk: one and two blocks per chunk give the line. Each
    // microbatch past the steady state adds the same too: two smaller
    // counts give that line. The (up to four) compiles are independent and
    // run at once; their figures combine as if one after the other (the
    // first refusal is the layout's error). A pipeline of many
    // microbatches is written out from a compile of a few (PipelineFold.h);
    // should its programs not follow the schedule, it is extrapolated from
    // two larger counts.
    int writtenFrom = pipelineFoldPoint(layout);
    auto estimated = estimates.find(layout.str());
    const bool atOnce = pastDepthAtOnce(
        layout, estimated == estimates.end() ? 0 : estimated->second.peakBytes);
    JobPlan plan;
    std::vector<std::string> errors;
    auto replayCounts = [&] {
      plan = planJobs(layout, writtenFrom, atOnce);
      return replayAll(plan.jobs, errors);
    };
    std::vector<std::optional<Replay>> replays = replayCounts();
    if ((plan.stages || plan.shifted) &&
        llvm::any_of(errors, [](const std::string &e) {
          return llvm::StringRef(e).starts_with(kStagesNotWrittenOut);
        })) {
      stagesNotWrittenOut.insert(layout.str());
      replays = replayCounts();
    }
    if (writtenFrom && llvm::any_of(errors, [](const std::string &e) {
          return llvm::StringRef(e).starts_with(kNotWrittenOut);
        })) {
      writtenFrom = 0;
      replays = replayCounts();
    }
    // (A pipeline written out from fewer ranks is compiled at a count of
    // their own: replayStageWriteOut.)
    if (const StageWriteOut *ranks = plan.stages    ? plan.stages.get()
                                     : plan.shifted ? plan.shifted->fewer.get()
                                                    : nullptr;
        writtenFrom && ranks)
      writtenFrom = stageCompileCount(layout, ranks->ranks, plan.pastDepth);
    if (writtenFrom && writtenFrom < layout.microbatches) {
      p.pipelineFoldedFrom = writtenFrom;
      ++result.pipelineFolded;
    }
    if (plan.stages || plan.shifted) {
      p.stagesFoldedFrom =
          plan.stages ? plan.stages->ranks : plan.shifted->fewer->ranks;
      ++result.stageFolded;
    }
    std::vector<Replay> perKeep;
    for (size_t k = 0; k < plan.keeps.size(); ++k) {
      std::optional<Replay> line;
      bool refused = false;
      for (size_t c = 0; c < plan.counts.size() && !refused; ++c)
        if (!replays[k * plan.counts.size() + c]) {
          error = errors[k * plan.counts.size() + c];
          refused = true;
        }
      if (!refused) {
        const size_t at = k * plan.counts.size();
        line = plan.countPoints
                   ? extrapolate(*replays[at], *replays[at + 1],
                                 plan.countPoints->first,
                                 plan.countPoints->second, layout.microbatches,
                                 layout.pp > 1 && layout.schedule == "gpipe",
                                 error)
                   : replays[at];
        if (plan.countPoints)
          p.foldedFrom = *plan.countPoints;
      }
      if (!line)
        break;
      perKeep.push_back(*line);
    }
    if (perKeep.size() == plan.keeps.size()) {
      if (plan.shifted) {
        // One block more per compiled chunk from the first compile to the
        // second; the whole chunks hold `shift` more than the first.
        replay = extrapolate(perKeep[0], perKeep[1], 0, 1, plan.shifted->shift,
                             /*growsWithMicrobatches=*/true, error);
        p.blocksFoldedFrom = {plan.shifted->fewer->keepBlocks,
                              plan.shifted->more->keepBlocks};
        ++result.stagesShortened;
      } else if (plan.blockPoints) {
        replay =
            extrapolate(perKeep[0], perKeep[1], 1, 2, double(blocks) / chunks,
                        /*growsWithMicrobatches=*/true, error);
        p.blocksFoldedFrom = *plan.blockPoints;
        ++result.layerFolded;
      } else {
        replay = perKeep[0];
      }
    }
    if (p.foldedFrom.first)
      ++result.folded;
    if (!replay) {
      p.reason = error;
      result.candidates.push_back(std::move(candidate));
      return false;
    }
    p.ranks = replay->ranks;
    p.peakBytes = replay->peakBytes;
    p.paramBytes = replay->paramBytes;
    p.gradBytes = replay->gradBytes;
    p.optimizerBytes = replay->optimizerBytes;
    p.commBytes = replay->commBytes;
    p.computeSeconds = replay->computeSeconds;
    p.waitSeconds = replay->waitSeconds;
    p.stepSeconds = replay->stepSeconds;
    double flops = 0;
    for (double rankFlops : replay->modelFlops)
      flops += rankFlops;
    // Each representative stands for as many ranks as the others (a
    // pipeline stage's dp x tp ranks).
    double perDevice = p.stepSeconds > 0 && !p.ranks.empty()
                           ? flops / p.stepSeconds / double(p.ranks.size())
                           : 0;
    p.tflopsPerDevice = perDevice / 1e12;
    p.mfu = perDevice / result.peakFlopsPerDevice;
    judgeMemory(p);
    if (plan.pastDepth)
      p.peakConfirmedFrom = p.pipelineFoldedFrom;
    // Written out at five microbatches from fewer ranks, a peak near the
    // device's memory is taken from the same ranks compiled past their
    // depth right away: the search then judges which layouts fit as a
    // whole compile would (its fastest feasible step bounds what it
    // compiles next).
    if ((plan.stages || plan.shifted) && p.pipelineFoldedFrom &&
        !plan.pastDepth &&
        std::abs(double(p.maxPeakBytes()) - double(cluster.memoryBytes())) <=
            double(cluster.memoryBytes()) * (layout.schedule == "interleaved"
                                                 ? kInterleavedPeakMargin
                                                 : kWrittenOutPeakMargin)) {
      std::string why;
      if (std::optional<Replay> deeper = replayStagesPastDepth(layout, why);
          deeper && deeper->ranks == p.ranks) {
        ++result.confirmed;
        p.writtenOutPeakBytes = p.maxPeakBytes();
        p.peakConfirmedFrom =
            stageCompileCount(layout, p.stagesFoldedFrom, true);
        p.peakBytes = deeper->peakBytes;
        judgeMemory(p);
      }
    }
    bool feasible = p.feasible;
    result.candidates.push_back(std::move(candidate));
    return feasible;
  }

  /// A compile the search replays: the layout, the repeated blocks its
  /// model is folded to (0: whole), and the microbatches its pipeline's
  /// programs are written out to (0: as compiled).
  struct ReplayJob {
    Layout layout;
    int keepBlocks = 0;
    int writeOutTo = 0;
    /// The microbatches whose rows the step's inputs hold (0: the
    /// compiled count's, or writeOutTo's).
    int rowsOf = 0;
    /// The ranks the pipeline is written out from (none: all compiled).
    std::shared_ptr<const StageWriteOut> stages;
    /// Only the ranks' memory is wanted: the programs are not replayed
    /// (no time, no bytes sent).
    bool memoryOnly = false;
    /// Written out from `stages` compiled past their depth
    /// (stageFoldMicrobatches), not at five microbatches.
    bool pastDepth = false;
  };

  struct ShiftedStages;
  /// The compiles evaluate() replays a layout from, and how their figures
  /// combine.
  struct JobPlan {
    /// The two microbatch counts the layout is folded from, if it is.
    std::optional<std::pair<int, int>> countPoints;
    /// The repeated blocks per chunk the layers are folded from, if they
    /// are.
    std::optional<std::pair<int, int>> blockPoints;
    /// The microbatch counts compiled.
    std::vector<int> counts;
    /// The ranks a deep pipeline is written out from (whole chunks), or
    /// the two compiles with fewer blocks per chunk it is written out from.
    std::shared_ptr<const StageWriteOut> stages;
    const ShiftedStages *shifted = nullptr;
    /// Per compile of each count: the repeated blocks kept (0: all) and
    /// the ranks written out from (none: every rank compiled).
    std::vector<std::pair<int, std::shared_ptr<const StageWriteOut>>> keeps;
    /// keeps x counts, in that order.
    std::vector<ReplayJob> jobs;
    /// The ranks written out from are compiled past their depth
    /// (pastDepthAtOnce).
    bool pastDepth = false;
  };

  /// The compiles of `layout`, written out from `writtenFrom` microbatches
  /// (0: folded or compiled at its own count): the compiles of every kept
  /// block count at the microbatch counts the layout is written out from
  /// or folded from.
  JobPlan planJobs(const Layout &layout, int writtenFrom,
                   bool pastDepth = false) const {
    JobPlan plan;
    const int chunks = layout.pp * std::max(1, layout.virtualStages);
    plan.countPoints = request.foldMicrobatches && !writtenFrom
                           ? foldPoints(layout)
                           : std::nullopt;
    plan.counts = {layout.microbatches};
    if (writtenFrom)
      plan.counts = {writtenFrom};
    else if (plan.countPoints)
      plan.counts = {plan.countPoints->first, plan.countPoints->second};
    // A deep pipeline is written out from one rank of each kind, with
    // fewer blocks per chunk where its chunks hold several; else the
    // layers are folded where there are many per chunk.
    // (Interleaved runs microbatches in groups of its ranks: the compiled
    // ranks' must group the counts compiled as they are.)
    auto groups = [&](const std::shared_ptr<const StageWriteOut> &ranks) {
      return writtenFrom || layout.schedule != "interleaved" ||
             llvm::all_of(plan.counts,
                          [&](int count) { return count % ranks->ranks == 0; });
    };
    plan.shifted = shiftedStageWriteOut(layout);
    if (plan.shifted && !groups(plan.shifted->fewer))
      plan.shifted = nullptr;
    plan.stages = plan.shifted ? nullptr : stageWriteOut(layout);
    if (plan.stages && !groups(plan.stages))
      plan.stages = nullptr;
    plan.blockPoints =
        plan.stages || plan.shifted ? std::nullopt : layerFoldPoints(chunks);
    plan.keeps = {{0, plan.stages}};
    if (plan.shifted)
      plan.keeps = {{0, plan.shifted->fewer}, {0, plan.shifted->more}};
    else if (plan.blockPoints)
      plan.keeps = {{plan.blockPoints->first, nullptr},
                    {plan.blockPoints->second, nullptr}};
    plan.pastDepth = pastDepth && writtenFrom && (plan.stages || plan.shifted);
    for (const auto &[keep, ranks] : plan.keeps)
      for (int count : plan.counts) {
        Layout compiled = layout;
        compiled.microbatches = count;
        plan.jobs.push_back({compiled, keep,
                             writtenFrom ? layout.microbatches : 0, 0, ranks,
                             /*memoryOnly=*/false, plan.pastDepth});
      }
    return plan;
  }

  /// Whether `layout`'s ranks written out from fewer are compiled past
  /// their depth at once, not at five microbatches: an interleaved
  /// pipeline whose screen estimate puts its peak (`estimatedPeak`; 0:
  /// none) within kPastDepthAtOnceBand of the margin its written-out peak
  /// would be compiled past its depth at (the compile past the depth
  /// gives the same step: one compile instead of two, one after the
  /// other, on the rows' costliest layouts).
  bool pastDepthAtOnce(const Layout &layout, uint64_t estimatedPeak) const {
    if (layout.pp < 3 || layout.schedule != "interleaved" || !estimatedPeak)
      return false;
    const double memory = double(cluster.memoryBytes());
    return std::abs(double(estimatedPeak) - memory) <=
           memory * (kInterleavedPeakMargin + kPastDepthAtOnceBand);
  }

  /// The microbatches a pipeline of `layout` written out from `ranks`
  /// compiled ranks is compiled at (at most its own): past their depth
  /// where asked (its peaks are then the whole compile's within a
  /// percent), else five (or a group of interleaved's).
  static int stageCompileCount(const Layout &layout, int ranks,
                               bool pastDepth) {
    // (Interleaved at least two groups of the ranks: at one, the second
    // chunk's gradient sums lived as they do at no other count, and the
    // 1T row's pp 12 peaked 20% short.)
    int count =
        pastDepth
            ? mlir::loom::stageFoldMicrobatches(layout.schedule, ranks)
            : mlir::loom::pipelineFoldMicrobatches(layout.schedule, ranks);
    if (layout.schedule == "interleaved")
      count = std::max(count, 2 * ranks);
    return std::min(layout.microbatches, count);
  }

  /// The ranks `layout`'s pipeline is written out from (none: it is
  /// compiled whole): for a pipeline of more ranks than it has kinds, with
  /// too few repeated blocks per chunk to fold its layers (where they
  /// fold, the fold's two small compiles run at once and cost less than
  /// one of the ranks' many blocks), cut where the compiler cuts the
  /// whole model (outlineOf).
  std::shared_ptr<const StageWriteOut>
  stageWriteOut(const Layout &layout) const {
    if (!request.foldStages || blocks == 0 || layout.pp < 3 ||
        layerFoldPoints(layout.pp * std::max(1, layout.virtualStages)) ||
        stagesNotWrittenOut.count(layout.str()))
      return nullptr;
    auto [it, inserted] = stageWriteOuts.try_emplace(cutKey(layout));
    if (inserted) {
      const loomrun::StageOutline *outline = outlineOf(layout);
      std::optional<StageWriteOut> chosen =
          outline
              ? chooseTemplateRanks(*outline, layout.pp, layout.virtualStages)
              : std::nullopt;
      if (chosen)
        it->second = std::make_shared<const StageWriteOut>(std::move(*chosen));
    }
    return it->second;
  }

  /// A deep pipeline whose chunks each hold three or more repeated blocks,
  /// written out from one rank of each kind twice: with every compiled
  /// chunk `shift` blocks short of its own (at least one block left in
  /// each), and with one block more. Each figure (step, bytes, every
  /// rank's peak) is on the line through the two, at the whole chunks:
  /// the two compiles hold a block or two per chunk where the whole
  /// pipeline's hold up to dozens, and its ranks' chunks keep their own
  /// places in a block, so the line reaches the compiler's own cut
  /// (docs/design/planner.md, "Writing stages out").
  struct ShiftedStages {
    std::shared_ptr<const StageWriteOut> fewer, more;
    int shift = 0;
  };
  const ShiftedStages *shiftedStageWriteOut(const Layout &layout) const {
    if (!request.foldStages || !request.foldLayers || blocks == 0 ||
        layout.pp < 3 || stagesNotWrittenOut.count(layout.str()))
      return nullptr;
    auto [it, inserted] = shiftedWriteOuts.try_emplace(cutKey(layout));
    if (inserted)
      if (const loomrun::StageOutline *outline = outlineOf(layout)) {
        const int v = std::max(1, layout.virtualStages);
        // (Interleaved sends each microbatch between ranks V times as
        // often: with a block or so per chunk its step was off the line
        // by 1.7% on the 1T row, where one block kept ran the line four
        // blocks past its compiles; with two, on it. Where two leave no
        // second compile, one is kept if the line then runs one block
        // past them: on the 146B and 76.1B rows' least chunks of three
        // blocks, the step within 2e-7 of the whole chunks' compile.)
        const int chunks = layout.pp * v;
        int shift = chunkBlocksSpare(*outline, chunks, v > 1 ? 2 : 1);
        if (v > 1 && shift < 2 && chunkBlocksSpare(*outline, chunks, 1) == 2)
          shift = 2;
        std::optional<StageWriteOut> fewer, more;
        if (shift >= 2) {
          fewer = chooseTemplateRanks(*outline, layout.pp, v, shift);
          more = chooseTemplateRanks(*outline, layout.pp, v, shift - 1);
        }
        if (fewer && more && fewer->ranks == more->ranks)
          it->second = ShiftedStages{
              std::make_shared<const StageWriteOut>(std::move(*fewer)),
              std::make_shared<const StageWriteOut>(std::move(*more)), shift};
      }
    return it->second ? &*it->second : nullptr;
  }
  mutable std::map<std::string, std::optional<ShiftedStages>> shiftedWriteOuts;

  /// How many whole repeated blocks every chunk of `outline`'s cut into
  /// `chunks` can lose and still hold `keep`: the least chunk's whole
  /// blocks, less `keep` (0 where a cut falls outside the blocks).
  static int chunkBlocksSpare(const loomrun::StageOutline &outline, int chunks,
                              int keep) {
    const int64_t period = int64_t(outline.period);
    const int64_t last = int64_t(outline.count) * period - 1;
    if (period == 0 || int(outline.cuts.size()) != chunks - 1)
      return 0;
    int64_t least = last + 1, from = -1;
    for (int k = 0; k < chunks; ++k) {
      int64_t to = k == chunks - 1 ? last : outline.cuts[size_t(k)];
      if (to <= from || to > last)
        return 0;
      least = std::min(least, to - from);
      from = to;
    }
    return int(std::max<int64_t>(0, least / period - keep));
  }

  /// What decides where the compiler cuts a layout's model into chunks:
  /// its tp, pp, virtual stages and rows.
  static std::string cutKey(const Layout &layout) {
    return std::to_string(layout.tp) + "/" + std::to_string(layout.pp) + "/" +
           std::to_string(layout.virtualStages) + "/" +
           std::to_string(layout.dp * layout.microbatchSize);
  }

  /// Where the compiler cuts `layout`'s model, from the training pipeline
  /// up to its cut, once per cutKey; null where
  /// the loss function does not repeat as many blocks as the forward
  /// function (whose count the blocks kept are given in).
  const loomrun::StageOutline *outlineOf(const Layout &layout) const {
    auto [it, inserted] = outlines.try_emplace(cutKey(layout));
    if (inserted)
      it->second = makeOutline(layout);
    return it->second ? &*it->second : nullptr;
  }
  mutable std::map<std::string, std::optional<loomrun::StageOutline>> outlines;

  /// `layout`'s stage outline as outlineOf keeps it (safe on any thread).
  std::optional<loomrun::StageOutline> makeOutline(const Layout &layout) const {
    return std::move(makeOutlines({layout})[0]);
  }

  /// The stage outlines of `layouts`, which differ at most in their
  /// virtual stages, from one training pipeline (outlineStagesEach).
  std::vector<std::optional<loomrun::StageOutline>>
  makeOutlines(const std::vector<Layout> &layouts) const {
    std::vector<int> virtualStages;
    for (const Layout &layout : layouts)
      virtualStages.push_back(layout.virtualStages);
    std::vector<rt::StatusOr<loomrun::StageOutline>> made = outlineStagesEach(
        request.modelPath, layoutOptions(request, layouts.front()),
        virtualStages);
    std::vector<std::optional<loomrun::StageOutline>> out;
    for (rt::StatusOr<loomrun::StageOutline> &outline : made)
      out.push_back(outline && int(outline->count) == blocks
                        ? std::optional(std::move(*outline))
                        : std::nullopt);
    return out;
  }

  /// The stage outlines (outlineOf) of the first kOutlinesAhead pipelines
  /// of `order` that have none yet, made at once on the compile pool. Each
  /// is a compile of the whole model up to its cut (60 to 100 ms on the
  /// 310.1B and 1T rows, one per tp, pp and rows, then a cut per virtual
  /// stage count: 25 ms of it on the 1T row), which the search would
  /// otherwise make one at a time before each layout's compiles, the pool
  /// idle.
  void outlineAhead(const std::vector<Screened> &order) {
    if (!request.foldStages || blocks == 0)
      return;
    // By cutKey but its virtual stages, in the order first met.
    std::vector<std::vector<Layout>> groups;
    std::map<std::string, size_t> groupOf;
    std::set<std::string> keys;
    for (const Screened &entry : order) {
      if (keys.size() == kOutlinesAhead)
        break;
      std::string key = cutKey(entry.layout);
      if (entry.layout.pp < 3 || outlines.count(key) ||
          !keys.insert(key).second)
        continue;
      Layout alike = entry.layout;
      alike.virtualStages = 1;
      auto [it, inserted] = groupOf.try_emplace(cutKey(alike), groups.size());
      if (inserted)
        groups.emplace_back();
      groups[it->second].push_back(entry.layout);
    }
    std::vector<std::vector<std::optional<loomrun::StageOutline>>> made(
        groups.size());
    std::vector<std::function<void()>> tasks;
    for (size_t i = 0; i < groups.size(); ++i)
      tasks.push_back([&, i] { made[i] = makeOutlines(groups[i]); });
    runAtOnce(tasks);
    for (size_t i = 0; i < groups.size(); ++i)
      for (size_t j = 0; j < groups[i].size(); ++j)
        outlines[cutKey(groups[i][j])] = std::move(made[i][j]);
  }

  /// The pipeline a probe of `layout`'s memory compiles (probedPeak): its
  /// first rank, one middle rank and its last, each chunk `perChunk` whole
  /// blocks (cut where a block ends), the layout's middle ranks written
  /// out from the middle one. Null where the model's nodes do not end
  /// where its blocks do.
  std::shared_ptr<const StageWriteOut> probeWriteOut(const Layout &layout,
                                                     int perChunk) const {
    const loomrun::StageOutline *outline = outlineOf(layout);
    if (!outline)
      return nullptr;
    const int v = std::max(1, layout.virtualStages), ranks = 3;
    auto out = std::make_shared<StageWriteOut>();
    out->ranks = ranks;
    out->keepBlocks = ranks * v * perChunk;
    for (int k = 1; k < ranks * v; ++k) {
      size_t position = size_t(k * perChunk) * outline->period - 1;
      if (position >= outline->cutNames.size() ||
          outline->cutNames[position].empty())
        return nullptr;
      out->cuts.push_back(outline->cutNames[position]);
    }
    out->rankTemplate.assign(size_t(layout.pp), 1);
    out->rankTemplate.front() = 0;
    out->rankTemplate.back() = ranks - 1;
    return out;
  }

  /// The peak of `layout`'s fullest rank from two small compiles, before
  /// it is compiled (docs/design/planner.md, "Probing a pipeline's
  /// memory"): one pipeline rank of each kind, with one and then two
  /// repeated blocks per chunk, each written out to all the layout's ranks
  /// and microbatches (so each rank holds what its place in the schedule
  /// keeps in flight), and the line through the two taken to the layout's
  /// blocks per chunk. The compiler's own liveness and memory plan give
  /// every byte, as they do the layout's compile, at a fraction of its
  /// cost. Nothing where the pipeline is not written out that way, or
  /// where its chunks hold two blocks or fewer (the probe would cost as
  /// much as the compile).
  std::optional<uint64_t> probedPeak(const Layout &layout) {
    const Replay *probe = memoryProbe(layout);
    if (!probe)
      return std::nullopt;
    return *llvm::max_element(probe->peakBytes);
  }

  /// The memory probe of `layout` (probedPeak), per rank (only the peaks
  /// are set); null where it has none.
  const Replay *memoryProbe(const Layout &layout) {
    auto [it, inserted] = memoryProbes.try_emplace(layout.str());
    if (inserted)
      it->second = probeMemory(layout);
    return it->second ? &*it->second : nullptr;
  }
  /// The memory probes by layout (nothing: none).
  std::map<std::string, std::optional<Replay>> memoryProbes;

  std::optional<Replay> probeMemory(const Layout &layout) {
    std::optional<std::vector<ReplayJob>> jobs = probeJobs(layout);
    if (!jobs)
      return std::nullopt;
    std::vector<std::string> errors;
    return probeFrom(layout, replayAll(*jobs, errors));
  }

  /// The two compiles of `layout`'s memory probe (probedPeak); nothing
  /// where it has none.
  std::optional<std::vector<ReplayJob>> probeJobs(const Layout &layout) const {
    const int chunks = layout.pp * std::max(1, layout.virtualStages);
    if (!request.foldStages || !request.foldLayers || blocks == 0 ||
        layout.pp < 3 || blocks <= 2 * chunks ||
        stagesNotWrittenOut.count(layout.str()))
      return std::nullopt;
    // (A pipeline written out from fewer blocks per chunk compiles about
    // what its probe would: its own compile gives its peaks.)
    if (shiftedStageWriteOut(layout))
      return std::nullopt;
    int writtenFrom = pipelineFoldPoint(layout);
    // (GPipe holds every microbatch: compiled at all of them, the probe
    // would cost what the layout's compile does.)
    if (!writtenFrom && layout.microbatches > 8)
      return std::nullopt;
    std::vector<ReplayJob> jobs;
    for (int perChunk : {1, 2}) {
      std::shared_ptr<const StageWriteOut> stages =
          probeWriteOut(layout, perChunk);
      if (!stages || (!writtenFrom && layout.schedule == "interleaved" &&
                      layout.microbatches % stages->ranks != 0))
        return std::nullopt;
      Layout compiled = layout;
      if (writtenFrom)
        compiled.microbatches = writtenFrom;
      jobs.push_back({compiled, perChunk * chunks,
                      writtenFrom ? layout.microbatches : 0, 0, stages,
                      /*memoryOnly=*/true});
    }
    return jobs;
  }

  /// `layout`'s memory probe from the replays of its two compiles
  /// (probeJobs).
  std::optional<Replay>
  probeFrom(const Layout &layout,
            const std::vector<std::optional<Replay>> &replays) const {
    const int chunks = layout.pp * std::max(1, layout.virtualStages);
    if (replays.size() != 2 || !replays[0] || !replays[1])
      return std::nullopt;
    const Replay &one = *replays[0], &two = *replays[1];
    if (one.ranks != two.ranks || int(one.ranks.size()) != layout.pp)
      return std::nullopt;
    // Each pipeline rank's peak on the line through its two, at the blocks
    // its own chunks hold where the compiler cuts the whole model (the cut
    // is balanced by cost, not by blocks: 16 layers on five ranks are
    // chunks of three and four).
    std::vector<double> perChunk = blocksPerRank(layout);
    Replay line = one;
    for (size_t t = 0; t < one.ranks.size(); ++t) {
      double at = perChunk.empty() ? double(blocks) / chunks : perChunk[t];
      double peak =
          double(one.peakBytes[t]) +
          (double(two.peakBytes[t]) - double(one.peakBytes[t])) * (at - 1);
      line.peakBytes[t] = uint64_t(std::max(0.0, peak));
    }
    return line;
  }

  /// Per pipeline rank of `layout`, the repeated blocks its chunks hold on
  /// average where the compiler cuts the whole model (outlineOf); empty
  /// where a cut falls outside the blocks.
  std::vector<double> blocksPerRank(const Layout &layout) const {
    const loomrun::StageOutline *outline = outlineOf(layout);
    const int v = std::max(1, layout.virtualStages), chunks = layout.pp * v;
    if (!outline || outline->period == 0 ||
        int(outline->cuts.size()) != chunks - 1)
      return {};
    const double period = double(outline->period);
    const int64_t last = int64_t(outline->count * outline->period) - 1;
    std::vector<double> perRank(size_t(layout.pp), 0);
    for (int k = 0; k < chunks; ++k) {
      int64_t from = k == 0 ? -1 : outline->cuts[size_t(k - 1)];
      int64_t to = k == chunks - 1 ? last : outline->cuts[size_t(k)];
      if ((k > 0 && from < 0) || (k < chunks - 1 && to < 0))
        return {};
      perRank[size_t(k % layout.pp)] += double(to - from) / period / v;
    }
    return perRank;
  }

  /// The stage write-outs by tp, pp, virtual stages and rows (null:
  /// none).
  mutable std::map<std::string, std::shared_ptr<const StageWriteOut>>
      stageWriteOuts;
  /// Layouts whose ranks could not be written out (they are compiled
  /// whole).
  std::set<std::string> stagesNotWrittenOut;

  /// Whether `p`'s fullest rank fits the device's memory (else by how much
  /// it does not).
  void judgeMemory(Prediction &p) const {
    uint64_t memory = cluster.memoryBytes();
    uint64_t worst = p.maxPeakBytes();
    p.feasible = false;
    p.shortfallBytes = 0;
    p.reason.clear();
    if (worst > memory) {
      p.shortfallBytes = worst - memory;
      p.reason = "rank " + std::to_string(p.worstRank()) + " needs " +
                 gib(double(worst)) + ", " + shortfall(p.shortfallBytes) +
                 " more than the device's " + gib(double(memory));
    } else {
      p.feasible = true;
    }
  }

  /// The replays of `jobs`, compiled at once on the compile pool (or
  /// taken from a compile already made or under way); nothing with the
  /// compiler's error in `errors` where one is refused. While it waits, a
  /// thread its jobs leave idle compiles what the search expects to need
  /// next (speculate).
  std::vector<std::optional<Replay>>
  replayAll(const std::vector<ReplayJob> &jobs,
            std::vector<std::string> &errors) const {
    std::vector<std::shared_ptr<PooledJob>> own;
    for (const ReplayJob &job : jobs) {
      auto it = pooled.find(jobKey(job));
      if (it != pooled.end() && it->second->ahead && !it->second->used)
        ++result.compiledAheadUsed;
      if (it != pooled.end())
        it->second->used = true;
      own.push_back(it != pooled.end() ? it->second : submit(job));
    }
    std::unique_lock<std::mutex> lock(poolMutex);
    uint64_t seen = poolCompletions;
    while (llvm::any_of(own, [](const auto &job) { return !job->done; })) {
      lock.unlock();
      speculate(own);
      lock.lock();
      // (Woken by any compile's end, one while it speculated included.)
      poolChanged.wait(lock, [&] { return poolCompletions != seen; });
      seen = poolCompletions;
    }
    lock.unlock();
    std::vector<std::optional<Replay>> replays;
    errors.clear();
    for (const std::shared_ptr<PooledJob> &job : own) {
      learnCompileRate(*job);
      const JobOutcome &outcome = job->outcome.get();
      replays.push_back(outcome.replay);
      errors.push_back(outcome.error);
    }
    return replays;
  }

  /// One compile's outcome: its replay, or the compiler's refusal.
  struct JobOutcome {
    std::optional<Replay> replay;
    std::string error;
  };
  /// A compile on the pool: its outcome once done, when it started, its
  /// size (compileUnits) and, once done, how long it took.
  struct PooledJob {
    std::shared_future<JobOutcome> outcome;
    std::chrono::steady_clock::time_point started;
    double units = 0, seconds = 0;
    /// Set by the pool's thread (under poolMutex).
    bool done = false;
    /// Whether its time was learnt from (learnCompileRate).
    bool learnt = false;
    /// Started ahead of the search (speculate), and since asked for.
    bool ahead = false, used = false;
  };

  /// What tells two compiles apart: everything replayLayout reads of a
  /// job.
  static std::string jobKey(const ReplayJob &job) {
    std::string key =
        job.layout.str() + "|" + std::to_string(job.keepBlocks) + "|" +
        std::to_string(job.writeOutTo) + "|" + std::to_string(job.rowsOf) +
        "|" + std::to_string(job.memoryOnly) + std::to_string(job.pastDepth);
    if (const StageWriteOut *stages = job.stages.get()) {
      key += "|" + std::to_string(stages->ranks) + "/" +
             std::to_string(stages->keepBlocks);
      for (const std::string &cut : stages->cuts)
        key += "," + cut;
      for (int from : stages->rankTemplate)
        key += ";" + std::to_string(from);
    }
    return key;
  }

  /// Starts `job` on the compile pool.
  std::shared_ptr<PooledJob> submit(const ReplayJob &job) const {
    auto pooledJob = std::make_shared<PooledJob>();
    pooledJob->units = compileUnits(job);
    pooledJob->started = std::chrono::steady_clock::now();
    auto promise = std::make_shared<std::promise<JobOutcome>>();
    pooledJob->outcome = promise->get_future().share();
    {
      std::lock_guard<std::mutex> lock(poolMutex);
      ++poolRunning;
    }
    compilePool().async([this, job, pooledJob, promise] {
      JobOutcome outcome;
      outcome.replay = replayLayout(job, outcome.error);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        pooledJob->started)
              .count();
      // (All under the lock, the notification too: once the search sees
      // nothing running it may end, and this thread must not touch it
      // after.)
      std::lock_guard<std::mutex> lock(poolMutex);
      promise->set_value(std::move(outcome));
      pooledJob->seconds = seconds;
      pooledJob->done = true;
      --poolRunning;
      ++poolCompletions;
      poolChanged.notify_all();
    });
    pooled[jobKey(job)] = pooledJob;
    return pooledJob;
  }

  /// How much a compile of `job` costs, in the units learnCompileRate
  /// times: the repeated blocks it compiles times its microbatches and
  /// ten (the passes before the microbatches are unrolled see each block
  /// once; those after, once per microbatch).
  double compileUnits(const ReplayJob &job) const {
    int kept = job.stages       ? job.stages->keepBlocks
               : job.keepBlocks ? job.keepBlocks
                                : std::max(1, blocks);
    int microbatches = job.layout.microbatches;
    if (job.stages && job.writeOutTo > microbatches) {
      Layout target = job.layout;
      target.microbatches = job.writeOutTo;
      microbatches =
          stageCompileCount(target, job.stages->ranks, job.pastDepth);
    }
    return double(kept) * double(microbatches + 10);
  }

  /// Learns the seconds a unit of compile takes from `job`'s, once.
  void learnCompileRate(PooledJob &job) const {
    if (job.learnt || job.units <= 0)
      return;
    job.learnt = true;
    double rate = job.seconds / job.units;
    secondsPerUnit = secondsPerUnit > 0 ? (secondsPerUnit + rate) / 2 : rate;
  }

  /// While the search waits on `own` (compiles a thread is left idle
  /// beside), starts the compiles of the layouts it expects to evaluate
  /// next (`upcoming`), as long as each is expected to end about when the
  /// last of `own` does (kSpeculationOverrun): a right guess is then ready
  /// when the search gets there, a wrong one cost a thread that would have
  /// waited. The search's decisions are the same either way; only when
  /// each compile runs changes.
  void speculate(const std::vector<std::shared_ptr<PooledJob>> &own) const {
    unsigned threads = compilePool().getMaxConcurrency();
    if (secondsPerUnit <= 0 || threads < 2)
      return;
    while (true) {
      double remaining = 0;
      {
        std::lock_guard<std::mutex> lock(poolMutex);
        if (poolRunning >= int(threads))
          return;
        auto now = std::chrono::steady_clock::now();
        for (const std::shared_ptr<PooledJob> &job : own)
          if (!job->done)
            remaining = std::max(
                remaining,
                job->units * secondsPerUnit -
                    std::chrono::duration<double>(now - job->started).count());
      }
      const ReplayJob *next = nextUpcomingJob();
      if (!next || compileUnits(*next) * secondsPerUnit >
                       remaining + kSpeculationOverrun)
        return;
      submit(*next)->ahead = true;
      ++result.compiledAhead;
      upcomingJobs.pop_front();
    }
  }

  /// The first compile of the upcoming layouts not made or under way yet
  /// (their jobs planned as evaluate() will plan them).
  const ReplayJob *nextUpcomingJob() const {
    while (true) {
      while (!upcomingJobs.empty() &&
             pooled.count(jobKey(upcomingJobs.front())))
        upcomingJobs.pop_front();
      if (!upcomingJobs.empty())
        return &upcomingJobs.front();
      if (upcomingPlanned >= upcoming.size())
        return nullptr;
      const auto &[layout, estimate] = upcoming[upcomingPlanned++];
      JobPlan plan = planJobs(layout, pipelineFoldPoint(layout),
                              pastDepthAtOnce(layout, estimate.peakBytes));
      upcomingJobs.insert(upcomingJobs.end(), plan.jobs.begin(),
                          plan.jobs.end());
    }
  }

  /// The layouts the search expects to evaluate next, best first, with the
  /// screen's estimates of them as they stand.
  void expectNext(std::vector<std::pair<Layout, LayoutEstimate>> layouts) {
    upcoming = std::move(layouts);
    upcomingPlanned = 0;
    upcomingJobs.clear();
  }

  /// Every compile the search started, by jobKey.
  mutable std::map<std::string, std::shared_ptr<PooledJob>> pooled;
  mutable std::mutex poolMutex;
  mutable std::condition_variable poolChanged;
  mutable int poolRunning = 0;
  mutable uint64_t poolCompletions = 0;
  /// Seconds per compileUnits, learnt from the compiles made.
  mutable double secondsPerUnit = 0;
  std::vector<std::pair<Layout, LayoutEstimate>> upcoming;
  mutable size_t upcomingPlanned = 0;
  mutable std::deque<ReplayJob> upcomingJobs;

  /// The replays of `jobs`, compiled at once; nothing, with the first
  /// refusal's error, where the compiler refuses one.
  std::optional<std::vector<Replay>>
  replayEach(const std::vector<ReplayJob> &jobs, std::string &error) const {
    std::vector<std::string> errors;
    std::vector<std::optional<Replay>> replays = replayAll(jobs, errors);
    std::vector<Replay> out;
    for (size_t i = 0; i < replays.size(); ++i) {
      if (!replays[i]) {
        error = errors[i];
        return std::nullopt;
      }
      out.push_back(std::move(*replays[i]));
    }
    return out;
  }

  /// The microbatch count a pipeline of `layout` is compiled at and
  /// written out from (0: it is compiled or folded as before): the
  /// schedules whose stages hold a bounded number of microbatches, with
  /// more microbatches than the fold compiles.
  int pipelineFoldPoint(const Layout &layout) const {
    if (!request.foldPipelines || layout.pp <= 1 ||
        (layout.schedule != "1f1b" && layout.schedule != "zb-h1" &&
         layout.schedule != "interleaved"))
      return 0;
    int from = mlir::loom::pipelineFoldMicrobatches(layout.schedule, layout.pp);
    return layout.microbatches > from ? from : 0;
  }

  /// Compiles `job`'s layout and replays its plan (written out to
  /// `job.writeOutTo` microbatches); the figures of each compiled rank, or
  /// nothing with `error` set.
  std::optional<Replay> replayLayout(const ReplayJob &job,
                                     std::string &error) const {
    const Layout &layout = job.layout;
    if (job.stages)
      return replayStageWriteOut(job, error);
    rt::StatusOr<rt::Plan> plan =
        compileLayout(request, layout, job.keepBlocks);
    if (!plan) {
      error = firstLine(plan.status().message());
      return std::nullopt;
    }
    std::optional<mlir::loom::PipelineFold> fold;
    if (job.writeOutTo > layout.microbatches) {
      int stagesPerRank = std::max(1, layout.virtualStages);
      std::optional<mlir::loom::PipelineSchedule> compiled =
          mlir::loom::makePipelineSchedule(layout.schedule, layout.pp,
                                           layout.microbatches, stagesPerRank,
                                           error);
      std::optional<mlir::loom::PipelineSchedule> target =
          compiled ? mlir::loom::makePipelineSchedule(layout.schedule,
                                                      layout.pp, job.writeOutTo,
                                                      stagesPerRank, error)
                   : std::nullopt;
      if (target)
        fold = mlir::loom::foldPipeline(*plan, *compiled, *target, error);
      if (!fold) {
        error = kNotWrittenOut + error;
        return std::nullopt;
      }
    }
    mlir::loom::PlanSimulation simulation =
        fold ? mlir::loom::simulatePrograms(*plan, fold->programs, cluster,
                                            false, &fold->copies)
             : mlir::loom::simulatePlan(*plan, cluster);
    if (!simulation.error.empty()) {
      error = "cannot be replayed: " + simulation.error;
      return std::nullopt;
    }
    // The step's inputs (the batch's rows) grow with the microbatches.
    int rowsOf = job.rowsOf ? job.rowsOf : fold ? job.writeOutTo : 0;
    double rowsGrow =
        rowsOf ? double(rowsOf) / double(layout.microbatches) : 1.0;
    Replay replay;
    for (size_t r = 0; r < plan->ranks.size(); ++r) {
      // Ranks without a program run copies of a representative's.
      if (plan->ranks[r].instructions.empty())
        continue;
      uint64_t sent = 0;
      if (fold) {
        for (const rt::Instruction *inst : fold->programs[r])
          sent += rt::plannedBytesSent(*plan, *inst);
      } else {
        for (const auto &[kind, bytes] : rt::plannedCommBytes(*plan, int(r)))
          sent += bytes;
      }
      appendRank(replay, int(r), *plan, int(r), rowsGrow,
                 fold ? fold->extraActivationBytes[r] : 0, sent,
                 simulation.ranks[r]);
    }
    replay.stepSeconds = simulation.stepSeconds;
    return replay;
  }

  /// Compiles one pipeline rank of each kind of `job`'s pipeline
  /// (job.stages) and replays the pipeline written out from it to all its
  /// ranks (and to job.writeOutTo microbatches). Each rank's memory is its
  /// kind's, with what its own place in the schedule holds in flight.
  std::optional<Replay> replayStageWriteOut(const ReplayJob &job,
                                            std::string &error) const {
    const Layout &layout = job.layout;
    const StageWriteOut &stages = *job.stages;
    const int chunksPerRank = std::max(1, layout.virtualStages);
    Layout compiledLayout = layout;
    compiledLayout.pp = stages.ranks;
    // Written out to more microbatches from a compile of a few (for
    // interleaved, in groups of its ranks), or compiled at the count.
    const int targetMicrobatches =
        job.writeOutTo ? job.writeOutTo : layout.microbatches;
    if (job.writeOutTo > layout.microbatches) {
      Layout target = layout;
      target.microbatches = job.writeOutTo;
      compiledLayout.microbatches =
          stageCompileCount(target, stages.ranks, job.pastDepth);
    }
    ModelCompileOptions options =
        layoutOptions(request, compiledLayout, stages.keepBlocks);
    options.train.stageCuts = stages.cuts;
    rt::StatusOr<rt::Plan> plan = compileShapesOnly(request.modelPath, options);
    if (!plan) {
      error = kStagesNotWrittenOut + firstLine(plan.status().message());
      return std::nullopt;
    }
    std::optional<mlir::loom::PipelineSchedule> compiled =
        mlir::loom::makePipelineSchedule(layout.schedule, stages.ranks,
                                         compiledLayout.microbatches,
                                         chunksPerRank, error);
    std::optional<mlir::loom::PipelineSchedule> target =
        compiled ? mlir::loom::makePipelineSchedule(layout.schedule, layout.pp,
                                                    targetMicrobatches,
                                                    chunksPerRank, error)
                 : std::nullopt;
    std::optional<mlir::loom::StageFold> fold =
        target ? mlir::loom::foldPipelineStages(*plan, *compiled, *target,
                                                stages.rankTemplate, error)
               : std::nullopt;
    if (!fold) {
      error = kStagesNotWrittenOut + error;
      return std::nullopt;
    }
    mlir::loom::PlanSimulation simulation;
    if (job.memoryOnly)
      simulation.ranks.resize(fold->programs.size());
    else
      simulation = mlir::loom::simulatePrograms(fold->plan, fold->programs,
                                                cluster, false, &fold->copies);
    if (!simulation.error.empty()) {
      error =
          kStagesNotWrittenOut + ("cannot be replayed: " + simulation.error);
      return std::nullopt;
    }
    // The step's inputs (the batch's rows) grow with the microbatches.
    int rowsOf = job.rowsOf ? job.rowsOf : targetMicrobatches;
    double rowsGrow = double(rowsOf) / double(compiledLayout.microbatches);
    Replay replay;
    for (size_t r = 0; r < fold->programs.size(); ++r) {
      if (fold->programs[r].empty())
        continue;
      uint64_t sent = 0;
      if (!job.memoryOnly)
        for (const rt::Instruction *inst : fold->programs[r])
          sent += rt::plannedBytesSent(fold->plan, *inst);
      appendRank(replay, int(r), *plan, fold->templateRank[r], rowsGrow,
                 fold->extraActivationBytes[r], sent, simulation.ranks[r]);
    }
    replay.stepSeconds = simulation.stepSeconds;
    return replay;
  }

  /// Adds to `replay` rank `rank`, which runs rank `from`'s program of
  /// `plan`: its states and planned peak, with the step's inputs grown by
  /// `rowsGrow` and `extraBytes` more in flight, sending `sentBytes`, as
  /// `simulated` replays it.
  static void appendRank(Replay &replay, int rank, const rt::Plan &plan,
                         int from, double rowsGrow, int64_t extraBytes,
                         uint64_t sentBytes,
                         const mlir::loom::PlanSimulation::Rank &simulated) {
    replay.ranks.push_back(rank);
    rt::RunReport report;
    rt::RankUsage usage = rt::rankUsage(plan, from, report);
    uint64_t inputs = 0, outputs = 0;
    for (const rt::Binding &binding : plan.ranks[from].inputs)
      inputs += binding.ref.bytes();
    for (const rt::Binding &binding : plan.ranks[from].outputs)
      outputs += binding.ref.bytes();
    uint64_t grownInputs = uint64_t(std::llround(double(inputs) * rowsGrow));
    int64_t peak = int64_t(usage.plannedPeakBytes) +
                   int64_t(grownInputs - inputs) + extraBytes;
    replay.peakBytes.push_back(uint64_t(std::max<int64_t>(peak, 0)));
    replay.paramBytes.push_back(usage.paramBytes);
    replay.gradBytes.push_back(usage.gradBytes);
    replay.optimizerBytes.push_back(usage.optimizerBytes);
    replay.trainedCount.push_back(usage.trainedCount);
    if (replay.ranks.size() == 1)
      replay.trainedShapes = usage.trainedShapes;
    replay.commBytes.push_back(sentBytes);
    replay.ioBytes.push_back(grownInputs + outputs);
    replay.computeSeconds.push_back(simulated.computeSeconds);
    replay.waitSeconds.push_back(simulated.waitSeconds);
    replay.modelFlops.push_back(simulated.modelFlops);
  }

  static std::string firstLine(const std::string &text) {
    return text.substr(0, text.find('\n'));
  }

  const PlanRequest &request;
  const mlir::loom::ClusterSpec &cluster;
  PlanResult &result;
  struct ModelStates {
    uint64_t params, grads, optimizer;
  };
  std::optional<ModelStates> states;
  /// How many times the model repeats its block (0: not at all, or layer
  /// folding is off).
  int blocks = 0;
  std::chrono::steady_clock::time_point started =
      std::chrono::steady_clock::now();
  /// Estimates layouts from probes (created once the blocks are counted).
  std::optional<LayoutScreen> screen;
  /// The layouts the search compiles or screens, in enumeration order.
  std::vector<Layout> pending;
  /// The screen's estimates of the layouts compiled, by Layout::str().
  std::map<std::string, LayoutEstimate> estimates;
  /// Layouts pruned because their model states alone exceed the device's
  /// memory, with that floor.
  std::vector<std::pair<uint64_t, Layout>> overMemory;
  /// The layouts their memory probe put over the device's memory.
  std::vector<Layout> probedOut;
};

void writeLayout(llvm::json::OStream &json, const Layout &layout) {
  json.object([&] {
    json.attribute("dp", layout.dp);
    json.attribute("tp", layout.tp);
    json.attribute("pp", layout.pp);
    json.attribute("zero", layout.zero);
    json.attribute("zero_shard_group", layout.zeroShardGroup);
    json.attribute("sequence_parallel", layout.sequenceParallel);
    json.attribute("microbatch_size", layout.microbatchSize);
    json.attribute("microbatches", layout.microbatches);
    json.attribute("schedule",
                   layout.schedule.empty() ? "none" : layout.schedule);
    json.attribute("virtual_stages", layout.virtualStages);
    json.attribute("recompute", layout.recompute);
  });
}

void writePrediction(llvm::json::OStream &json, const Prediction &p) {
  json.object([&] {
    json.attribute("feasible", p.feasible);
    if (!p.reason.empty())
      json.attribute("reason", p.reason);
    if (p.peakBytes.empty())
      return;
    json.attribute("step_s", p.stepSeconds);
    json.attribute("tflops_per_device", p.tflopsPerDevice);
    json.attribute("mfu", p.mfu);
    json.attribute("peak_bytes_per_rank", int64_t(p.maxPeakBytes()));
    json.attribute("shortfall_bytes", int64_t(p.shortfallBytes));
    if (p.estimatedStepSeconds > 0) {
      json.attribute("estimated_step_s", p.estimatedStepSeconds);
      json.attribute("estimated_peak_bytes", int64_t(p.estimatedPeakBytes));
    }
    if (p.pipelineFoldedFrom)
      json.attribute("written_out_from_microbatches", p.pipelineFoldedFrom);
    if (p.stagesFoldedFrom)
      json.attribute("written_out_from_ranks", p.stagesFoldedFrom);
    if (p.peakConfirmedFrom) {
      json.attribute("peak_from_microbatches", p.peakConfirmedFrom);
      // (None where compiled past the depth at once: pastDepthAtOnce.)
      if (p.writtenOutPeakBytes)
        json.attribute("written_out_peak_bytes",
                       int64_t(p.writtenOutPeakBytes));
    }
    if (p.foldedFrom.first)
      json.attributeArray("extrapolated_from_microbatches", [&] {
        json.value(p.foldedFrom.first);
        json.value(p.foldedFrom.second);
      });
    if (p.blocksFoldedFrom.first)
      json.attributeArray("extrapolated_from_blocks", [&] {
        json.value(p.blocksFoldedFrom.first);
        json.value(p.blocksFoldedFrom.second);
      });
    auto list = [&](const char *key, const std::vector<uint64_t> &values) {
      json.attributeArray(key, [&] {
        for (uint64_t value : values)
          json.value(int64_t(value));
      });
    };
    json.attributeArray("ranks", [&] {
      for (int rank : p.ranks)
        json.value(rank);
    });
    list("peak_bytes", p.peakBytes);
    list("param_bytes", p.paramBytes);
    list("grad_bytes", p.gradBytes);
    list("optimizer_bytes", p.optimizerBytes);
    list("comm_bytes", p.commBytes);
    json.attributeArray("compute_s", [&] {
      for (double value : p.computeSeconds)
        json.value(value);
    });
    json.attributeArray("wait_s", [&] {
      for (double value : p.waitSeconds)
        json.value(value);
    });
  });
}

} // namespace

bool LayoutConstraint::allows(const Layout &layout) const {
  for (const auto &[key, value] : fixed)
    if (layoutValue(layout, key) != value)
      return false;
  return true;
}

std::optional<LayoutConstraint>
loomrun::parseLayoutConstraint(const std::string &text, std::string &error) {
  LayoutConstraint constraint;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty())
      continue;
    size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0 ||
        equals + 1 == item.size()) {
      error = "--evaluate: '" + item + "' is not KEY=VALUE";
      return std::nullopt;
    }
    std::string key = canonicalKey(item.substr(0, equals));
    std::string value = item.substr(equals + 1);
    if (std::find(std::begin(kConstraintKeys), std::end(kConstraintKeys),
                  key) == std::end(kConstraintKeys)) {
      error = "--evaluate: unknown key '" + key +
              "' (expected dp, tp, pp, zero, group, sp, mbs, M, schedule, "
              "V, recompute)";
      return std::nullopt;
    }
    if (key != "schedule" && key != "recompute") {
      char *end = nullptr;
      long long number = std::strtoll(value.c_str(), &end, 10);
      if (!end || *end || number < 0) {
        error =
            "--evaluate: " + key + " takes a whole number, not '" + value + "'";
        return std::nullopt;
      }
    }
    if (key == "sp" && value == "true")
      value = "1";
    constraint.fixed[key] = value;
  }
  return constraint;
}

uint64_t Prediction::maxPeakBytes() const {
  uint64_t worst = 0;
  for (uint64_t bytes : peakBytes)
    worst = std::max(worst, bytes);
  return worst;
}

size_t Prediction::worstIndex() const {
  return std::max_element(peakBytes.begin(), peakBytes.end()) -
         peakBytes.begin();
}

int Prediction::worstRank() const {
  size_t index = worstIndex();
  return index < ranks.size() ? ranks[index] : int(index);
}

namespace {
/// What a layout adds to plain data parallelism, least first: recompute,
/// ZeRO, sequence parallelism, microbatches, pipeline and tensor
/// parallelism.
std::tuple<int, int, int, int, int, int> simplicity(const Layout &layout) {
  int recompute = layout.recompute == "none"        ? 0
                  : layout.recompute == "selective" ? 1
                                                    : 2;
  return {recompute,           layout.zero, int(layout.sequenceParallel),
          layout.microbatches, layout.pp,   layout.tp};
}
} // namespace

rt::StatusOr<PlanResult> loomrun::planLayout(const PlanRequest &request) {
  auto started = std::chrono::steady_clock::now();
  std::string error;
  std::optional<mlir::loom::ClusterSpec> cluster =
      mlir::loom::loadClusterSpec(request.clusterPath, error);
  if (!cluster)
    return rt::Status::error(error);
  if (request.globalBatch < 1)
    return rt::Status::error("--global-batch must be at least 1");
  if (auto it = request.constraint.fixed.find("recompute");
      it != request.constraint.fixed.end() && it->second != "none" &&
      it->second != "selective" && it->second != "full")
    return rt::Status::error("--evaluate: recompute=" + it->second +
                             ": the modes are none, selective and full");
  PlanResult result;
  result.devices = request.devices > 0 ? request.devices : cluster->devices();
  if (result.devices > cluster->devices())
    return rt::Status::error("--devices " + std::to_string(result.devices) +
                             " is more than " + request.clusterPath + " has (" +
                             std::to_string(cluster->devices()) + ")");
  result.peakFlopsPerDevice = cluster->peakFlops(request.precision);
  result.deviceMemoryBytes = cluster->memoryBytes();
  {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << cluster->nodes << " node" << (cluster->nodes == 1 ? "" : "s") << " x "
       << cluster->devicesPerNode << " devices ("
       << llvm::format("%g", cluster->device.memoryGiB) << " GiB, "
       << llvm::format("%g", result.peakFlopsPerDevice / 1e12) << " TFLOP/s "
       << request.precision << ")";
    result.clusterSummary = text;
  }
  // A model exported at a fixed batch takes microbatches of that many rows.
  PlanRequest fixed = request;
  if (auto bytes = llvm::MemoryBuffer::getFile(request.modelPath))
    fixed.fixedBatch = mlir::loom::fixedLeadingDimension((*bytes)->getBuffer(),
                                                         request.batchDim);
  if (fixed.fixedBatch > 0 && request.globalBatch % fixed.fixedBatch)
    return rt::Status::error(
        request.modelPath + ": its inputs are exported at a fixed batch of " +
        std::to_string(fixed.fixedBatch) +
        " rows, so every microbatch has that many: --global-batch " +
        std::to_string(request.globalBatch) + " is not a multiple of it");
  Search(fixed, *cluster, result).run();
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [](const Candidate &a, const Candidate &b) {
                     const Prediction &x = a.predicted, &y = b.predicted;
                     if (x.feasible != y.feasible)
                       return x.feasible;
                     if (x.feasible && x.stepSeconds != y.stepSeconds)
                       return x.stepSeconds < y.stepSeconds;
                     // Equally fast: the simpler layout (a recompute or
                     // ZeRO stage that gains nothing is not chosen).
                     if (x.feasible)
                       return simplicity(a.layout) < simplicity(b.layout);
                     // Refused by memory before refused by the compiler,
                     // the smallest shortfall first.
                     bool xm = !x.peakBytes.empty(), ym = !y.peakBytes.empty();
                     if (xm != ym)
                       return xm;
                     return x.shortfallBytes < y.shortfallBytes;
                   });
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  bool anyCompiled = false;
  for (const Candidate &candidate : result.candidates)
    anyCompiled |= !candidate.predicted.peakBytes.empty();
  if (!result.candidates.empty() && !anyCompiled)
    return rt::Status::error(
        "no layout of " + std::to_string(result.devices) +
        " devices compiles: " + result.candidates.front().predicted.reason);
  if (result.candidates.empty())
    return rt::Status::error("no layout of " + std::to_string(result.devices) +
                             " devices to evaluate" +
                             (result.pruned.empty()
                                  ? std::string()
                                  : " (" + result.pruned.front().second + ")"));
  return result;
}

std::string loomrun::formatPlanReport(const PlanRequest &request,
                                      const PlanResult &result) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "loom-plan: " << request.modelPath << " on " << result.devices
     << " devices of " << result.clusterSummary << ", global batch "
     << request.globalBatch << ", " << request.precision << "\n";
  os << "searched " << result.compiled << " layouts in "
     << llvm::format("%.2f", result.searchSeconds) << " s (each compiled and "
     << "replayed";
  if (result.folded)
    os << ", " << result.folded
       << " of them at two smaller microbatch counts and extrapolated";
  if (result.pipelineFolded)
    os << ", " << result.pipelineFolded
       << " pipelines written out from a compile of a few microbatches";
  if (result.stageFolded)
    os << ", " << result.stageFolded
       << " pipelines written out from a compile of one pipeline rank of "
          "each kind";
  if (result.stagesShortened)
    os << " (" << result.stagesShortened
       << " of them from two with fewer of the model's repeated blocks per "
          "chunk, a block apart, and extrapolated)";
  if (result.confirmed)
    os << ", " << result.confirmed
       << " of those compiled again for their peaks before being chosen";
  if (result.layerFolded)
    os << ", " << result.layerFolded
       << " with one and two of the model's repeated blocks per pipeline "
          "chunk and extrapolated";

  os << "; " << result.pruned.size() << " pruned before compiling";
  if (result.probedOverMemory)
    os << ", " << result.probedOverMemory
       << " of them by a probe of their memory (one pipeline rank of each "
          "kind) over the device's";
  if (result.compiledAhead)
    os << "; " << result.compiledAhead
       << " compiles started ahead on idle threads, "
       << result.compiledAheadUsed << " of them used";
  os << ")\n";
  if (result.stoppedEarly)
    os << "stopped at the time limit ("
       << llvm::format("%g", request.timeLimitSeconds)
       << " s): the layouts after these were not searched\n";
  if (result.screened)
    os << "screened " << result.screened << " layouts from " << result.probes
       << " probe compiles; " << result.screenedOut << " of them not compiled ("
       << (result.stoppedEarly
               ? "the time limit"
               : "estimated slower or larger than the compiled ones by more "
                 "than the screen's margin")
       << ")\n";
  const Candidate *choice = result.choice();
  auto describe = [&](const Prediction &p) {
    std::string line;
    llvm::raw_string_ostream ls(line);
    ls << "step " << milliseconds(p.stepSeconds) << ", "
       << llvm::format("%.2f", p.tflopsPerDevice) << " TFLOP/s per device, MFU "
       << llvm::format("%.1f%%", 100 * p.mfu) << ", peak "
       << gib(double(p.maxPeakBytes())) << " per rank";
    return line;
  };
  if (!choice) {
    os << "\nno layout fits:";
    const Candidate &best = result.candidates.front();
    if (!best.predicted.peakBytes.empty())
      os << " the closest, " << best.layout.str() << ", "
         << best.predicted.reason << "\n";
    else
      os << " " << best.layout.str()
         << " does not compile: " << best.predicted.reason << "\n";
    return text;
  }
  const Prediction &p = choice->predicted;
  os << "\nchoice: " << choice->layout.str() << "\n";
  // A peak written out and not compiled again past the pipeline's depth:
  // the alternatives', and the choice's where its pipeline was written
  // out from one rank of each kind and fits with room to spare.
  bool writtenOutPeaks = false;
  auto markWrittenOut = [&](const Prediction &q) {
    if (!q.pipelineFoldedFrom || q.peakConfirmedFrom)
      return;
    os << " [peak written out]";
    writtenOutPeaks = true;
  };
  os << "  predicted: " << describe(p);
  markWrittenOut(p);
  os << "\n";
  size_t worst = p.worstIndex();
  os << "  rank " << p.worstRank() << ": parameters "
     << gib(double(p.paramBytes[worst])) << ", gradients "
     << gib(double(p.gradBytes[worst])) << ", optimizer "
     << gib(double(p.optimizerBytes[worst])) << ", sends "
     << gib(double(p.commBytes[worst])) << " per step; compute "
     << milliseconds(p.computeSeconds[worst]) << ", waiting "
     << milliseconds(p.waitSeconds[worst]) << "\n";
  if (result.candidates.size() > 1)
    os << "\nalternatives:\n";
  int shown = 0;
  for (const Candidate &other : result.candidates) {
    if (&other == choice)
      continue;
    if (shown++ >= request.topK)
      break;
    const Prediction &q = other.predicted;
    os << "  " << other.layout.str() << ": ";
    if (q.feasible) {
      os << describe(q) << "; "
         << llvm::format("%.1f%%", 100 * (q.stepSeconds / p.stepSeconds - 1))
         << " slower";
      markWrittenOut(q);
      os << "\n";
    } else if (q.peakBytes.empty()) {
      os << "does not compile: " << q.reason << "\n";
    } else {
      os << "does not fit: " << q.reason << "\n";
    }
  }
  if (writtenOutPeaks)
    os << "  [peak written out]: the peak of the pipeline written out from a "
          "compile of a few\n  microbatches, which can hold fewer "
          "microbatches' activations than the whole\n  schedule (up to 14% "
          "short where compiled with all its ranks, 6.5% where\n  written "
          "out from one rank of each kind, whose peaks within 8% of the\n  "
          "device's memory are compiled past their depth); --evaluate the "
          "layout\n  with --no-stage-fold to compile it past its pipeline's "
          "depth\n";
  return text;
}

std::string loomrun::formatSimulation(const Candidate &candidate) {
  std::string text;
  llvm::raw_string_ostream os(text);
  const Prediction &p = candidate.predicted;
  int perStage = candidate.layout.dp * candidate.layout.tp;
  os << "replay of " << candidate.layout.str() << " (each rank shown stands "
     << "for the " << perStage << " rank" << (perStage == 1 ? "" : "s")
     << " of its pipeline stage; idle: after its last action):\n";
  os << "    rank      compute      waiting         idle         peak"
        "        sends\n";
  for (size_t i = 0; i < p.ranks.size(); ++i) {
    double idle =
        std::max(0.0, p.stepSeconds - p.computeSeconds[i] - p.waitSeconds[i]);
    os << llvm::format("  %6d %12s %12s %12s %12s %12s\n", p.ranks[i],
                       milliseconds(p.computeSeconds[i]).c_str(),
                       milliseconds(p.waitSeconds[i]).c_str(),
                       milliseconds(idle).c_str(),
                       gib(double(p.peakBytes[i])).c_str(),
                       gib(double(p.commBytes[i])).c_str());
  }
  os << "  step " << milliseconds(p.stepSeconds) << " (the slowest rank)\n";
  return text;
}

rt::StatusOr<std::string> loomrun::formatArenaPeak(const PlanRequest &request,
                                                   const Candidate &candidate) {
  // Compiled again as the prediction's peak was: at the larger of the
  // microbatch counts it was extrapolated from (the peak of a bounded
  // schedule; GPipe's grows with the count), every layer.
  // (A pipeline written out from a compile of a few microbatches is
  // compiled where the two-count fold would have: its stages then hold as
  // many microbatches as at the full count.)
  Layout layout = candidate.layout;
  if (candidate.predicted.foldedFrom.second)
    layout.microbatches = candidate.predicted.foldedFrom.second;
  else if (candidate.predicted.pipelineFoldedFrom)
    if (std::optional<std::pair<int, int>> points = foldPoints(layout))
      layout.microbatches = points->second;
  rt::StatusOr<rt::Plan> plan = compileLayout(request, layout);
  if (!plan)
    return plan.status();
  rt::RunReport report;
  int worst = -1;
  uint64_t worstPeak = 0;
  for (size_t r = 0; r < plan->ranks.size(); ++r) {
    if (plan->ranks[r].instructions.empty())
      continue;
    uint64_t peak = rt::rankUsage(*plan, int(r), report).plannedPeakBytes;
    if (worst < 0 || peak > worstPeak) {
      worst = int(r);
      worstPeak = peak;
    }
  }
  if (worst < 0)
    return std::string();
  const rt::RankProgram &program = plan->ranks[size_t(worst)];
  rt::ArenaPeak peak = rt::arenaPeak(*plan, worst, 10);
  std::string text;
  llvm::raw_string_ostream os(text);
  auto describe = [&](size_t index) {
    const rt::Instruction &at = program.instructions[index];
    os << at.kernel;
    if (!at.loc.empty())
      os << " at '" << at.loc << "'";
    if (!at.action.empty())
      os << " (" << at.action << ")";
  };
  os << "memory of " << layout.str() << ", rank " << worst
     << " (the fullest; peak " << gib(double(worstPeak)) << ": arena "
     << gib(double(program.arenaBytes)) << ", the rest weights it holds)\n";
  if (program.instructions.empty())
    return text;
  os << "  at its fullest, instruction " << peak.instruction << " of "
     << program.instructions.size() << ", ";
  describe(peak.instruction);
  os << ": " << gib(double(peak.liveBytes)) << " alive in " << peak.liveTensors
     << " tensors; the largest:\n";
  for (const rt::ArenaTensor &tensor : peak.largest) {
    uint64_t bytes = tensor.ref.bytes();
    std::string size =
        bytes >= (1u << 20)
            ? gib(double(bytes))
            : llvm::formatv("{0:F1} KiB", double(bytes) / 1024.0).str();
    os << llvm::format("  %12s  ", size.c_str())
       << rt::dtypeName(tensor.ref.dtype) << rt::shapeString(tensor.ref.shape)
       << "  ";
    if (tensor.writer < 0) {
      os << "a step input";
    } else {
      os << "from ";
      describe(size_t(tensor.writer));
    }
    os << "\n";
  }
  return text;
}

std::string loomrun::formatPlanJson(const PlanRequest &request,
                                    const PlanResult &result) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, 1);
  const Candidate *choice = result.choice();
  json.object([&] {
    json.attribute("model", request.modelPath);
    json.attribute("cluster", request.clusterPath);
    json.attribute("devices", result.devices);
    json.attribute("global_batch", request.globalBatch);
    json.attribute("precision", request.precision);
    json.attribute("search_s", result.searchSeconds);
    json.attribute("compiled", result.compiled);
    json.attribute("extrapolated", result.folded);
    json.attribute("written_out", result.pipelineFolded);
    json.attribute("confirmed", result.confirmed);
    json.attribute("extrapolated_by_blocks", result.layerFolded);
    json.attribute("written_out_from_fewer_ranks", result.stageFolded);
    json.attribute("written_out_from_fewer_blocks", result.stagesShortened);
    json.attribute("probed_over_memory", result.probedOverMemory);
    json.attribute("compiled_ahead", result.compiledAhead);
    json.attribute("compiled_ahead_used", result.compiledAheadUsed);
    json.attribute("screened", result.screened);
    json.attribute("probes", result.probes);
    json.attribute("screened_out", result.screenedOut);
    json.attributeArray("pruned", [&] {
      for (const auto &[layout, why] : result.pruned)
        json.object([&] {
          json.attributeBegin("choice");
          writeLayout(json, layout);
          json.attributeEnd();
          json.attribute("reason", why);
        });
    });
    json.attribute("stopped_at_time_limit", result.stoppedEarly);
    if (choice) {
      json.attributeBegin("choice");
      writeLayout(json, choice->layout);
      json.attributeEnd();
      json.attributeBegin("predicted");
      writePrediction(json, choice->predicted);
      json.attributeEnd();
    } else {
      json.attribute("choice", nullptr);
    }
    json.attributeArray("alternatives", [&] {
      for (const Candidate &other : result.candidates) {
        if (&other == choice)
          continue;
        json.object([&] {
          json.attributeBegin("choice");
          writeLayout(json, other.layout);
          json.attributeEnd();
          json.attributeBegin("predicted");
          writePrediction(json, other.predicted);
          json.attributeEnd();
        });
      }
    });
  });
  os << "\n";
  return text;
}

rt::StatusOr<std::string> loomrun::simulateTrace(const PlanRequest &request,
                                                 const Layout &layout) {
  std::string error;
  std::optional<mlir::loom::ClusterSpec> cluster =
      mlir::loom::loadClusterSpec(request.clusterPath, error);
  if (!cluster)
    return rt::Status::error(error);
  rt::StatusOr<rt::Plan> plan = compileLayout(request, layout);
  if (!plan)
    return plan.status();
  mlir::loom::PlanSimulation simulation =
      mlir::loom::simulatePlan(*plan, *cluster, /*recordEvents=*/true);
  if (!simulation.error.empty())
    return rt::Status::error(simulation.error);
  // Chrome's trace format (Perfetto opens it): one process per rank, a
  // track for its kernels, one for its transfers and a counter of its
  // memory; times in us.
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os);
  json.object([&] {
    json.attribute("displayTimeUnit", "ms");
    json.attributeArray("traceEvents", [&] {
      for (size_t r = 0; r < simulation.ranks.size(); ++r) {
        auto name = [&](const char *what, int tid, const std::string &value) {
          json.object([&] {
            json.attribute("ph", "M");
            json.attribute("name", what);
            json.attribute("pid", int64_t(r));
            json.attribute("tid", tid);
            json.attributeObject("args",
                                 [&] { json.attribute("name", value); });
          });
        };
        name("process_name", 0, "rank " + std::to_string(r) + " (simulated)");
        name("thread_name", 0, "compute");
        name("thread_name", 1, "communication");
      }
      // Each rank's memory as its kernels run: the arena's live bytes and
      // the weights it holds (a counter track per rank).
      std::vector<std::vector<uint64_t>> live(plan->ranks.size());
      std::vector<uint64_t> held(plan->ranks.size(), 0);
      rt::RunReport none;
      for (size_t r = 0; r < plan->ranks.size(); ++r) {
        if (plan->ranks[r].instructions.empty())
          continue;
        live[r] = mlir::loom::liveArenaBytes(plan->ranks[r]);
        held[r] = rt::rankUsage(*plan, int(r), none).plannedPeakBytes -
                  plan->ranks[r].arenaBytes;
      }
      for (const mlir::loom::PlanSimulationEvent &event : simulation.events) {
        if (event.instruction < 0 ||
            size_t(event.instruction) >= live[event.rank].size())
          continue;
        json.object([&] {
          json.attribute("ph", "C");
          json.attribute("name", "memory (bytes)");
          json.attribute("pid", event.rank);
          json.attribute("ts", event.start * 1e6);
          json.attributeObject("args", [&] {
            json.attribute("arena",
                           int64_t(live[event.rank][event.instruction]));
            json.attribute("weights", int64_t(held[event.rank]));
          });
        });
      }
      for (const mlir::loom::PlanSimulationEvent &event : simulation.events)
        json.object([&] {
          std::string label = event.name;
          if (!event.action.empty())
            label = event.action + " " + label;
          json.attribute("ph", "X");
          json.attribute("name", label);
          json.attribute("cat",
                         event.communication ? "communication" : "compute");
          json.attribute("pid", event.rank);
          json.attribute("tid", event.communication ? 1 : 0);
          json.attribute("ts", event.start * 1e6);
          json.attribute("dur", (event.end - event.start) * 1e6);
        });
    });
  });
  os << "\n";
  return text;
}

rt::StatusOr<Layout> loomrun::readPlannedLayout(const std::string &path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return rt::Status::error(path + ": " + file.getError().message());
  llvm::Expected<llvm::json::Value> value =
      llvm::json::parse((*file)->getBuffer());
  if (!value)
    return rt::Status::error(
        path + ": not valid JSON: " + llvm::toString(value.takeError()));
  const llvm::json::Object *root = value->getAsObject();
  const llvm::json::Object *choice = root ? root->getObject("choice") : nullptr;
  if (!choice)
    return rt::Status::error(
        path + ": no `choice` (a file `loom-plan --json` writes, with a "
               "layout that fits)");
  Layout layout;
  std::string error;
  auto integer = [&](const char *key, auto &out, int64_t minimum) {
    std::optional<int64_t> number = choice->getInteger(key);
    if (!number || *number < minimum) {
      if (error.empty())
        error = path + ": 'choice." + key +
                "' must be a whole number >= " + std::to_string(minimum);
      return;
    }
    out = std::remove_reference_t<decltype(out)>(*number);
  };
  integer("dp", layout.dp, 1);
  integer("tp", layout.tp, 1);
  integer("pp", layout.pp, 1);
  integer("zero", layout.zero, 0);
  integer("microbatch_size", layout.microbatchSize, 1);
  integer("microbatches", layout.microbatches, 1);
  integer("virtual_stages", layout.virtualStages, 1);
  // Files written before hybrid sharding was searched have no group.
  if (choice->get("zero_shard_group"))
    integer("zero_shard_group", layout.zeroShardGroup, 0);
  if (std::optional<bool> sp = choice->getBoolean("sequence_parallel"))
    layout.sequenceParallel = *sp;
  else if (error.empty())
    error = path + ": 'choice.sequence_parallel' must be true or false";
  if (std::optional<llvm::StringRef> schedule = choice->getString("schedule"))
    layout.schedule = *schedule == "none" ? "" : schedule->str();
  else if (error.empty())
    error = path + ": 'choice.schedule' must be a string";
  if (std::optional<llvm::StringRef> recompute =
          choice->getString("recompute")) {
    layout.recompute = recompute->str();
    if (*recompute != "none" && *recompute != "selective" &&
        *recompute != "full" && error.empty())
      error = path + ": 'choice.recompute' is " + recompute->str() +
              " (none, selective or full)";
  } else if (error.empty()) {
    error = path + ": 'choice.recompute' must be a string";
  }
  if (!error.empty())
    return rt::Status::error(error);
  return layout;
}
