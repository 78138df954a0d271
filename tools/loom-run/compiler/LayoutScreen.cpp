//===- LayoutScreen.cpp - Estimating layouts from a few probes ------------===//
//
// A probe is the layout's tensor parallelism alone (dp = pp = 1) on the
// model folded to one and two repeated blocks, at one and two microbatches:
// the compiler and the replay give, per tp rank, the time of a microbatch
// and of the step's fixed part (the optimizer), per block and for the rest
// (embedding, head, loss), and the model states and activations likewise.
// The layout's data and pipeline parallelism are then composed on top:
// the schedule's bubble by its closed form (docs/design/pipeline.md), the
// gradients' collectives by the cluster's alpha-beta model with the overlap
// the runtime gives them, the ZeRO stage's shards and the microbatches the
// schedule keeps alive. The estimate only orders the search; every figure
// loom-plan reports comes from the compiled layout.
//
//===----------------------------------------------------------------------===//

#include "LayoutScreen.h"

#include "loom/Analysis/Cluster.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

using namespace loomrun;
using loomcost::CollectiveKind;

std::optional<ProbeFigures> LayoutScreen::figures(const Layout &layout,
                                                  int keep, int microbatches,
                                                  int64_t rows,
                                                  std::string &error) {
  ProbeKey key{layout.tp,        layout.sequenceParallel,
               layout.recompute, keep,
               microbatches,     rows};
  if (auto it = probes.find(key); it != probes.end()) {
    if (!it->second)
      error = errors[key];
    return it->second;
  }
  auto [alone, kept] = probeLayout(key);
  ++compiled;
  std::string why;
  std::optional<ProbeFigures> result = probe(alone, kept, why);
  probes[key] = result;
  if (!result) {
    errors[key] = why;
    error = why;
  }
  return result;
}

std::pair<Layout, int> LayoutScreen::probeLayout(const ProbeKey &key) const {
  Layout alone;
  alone.tp = std::get<0>(key);
  alone.sequenceParallel = std::get<1>(key);
  alone.recompute = std::get<2>(key);
  alone.microbatches = std::get<4>(key);
  alone.microbatchSize = std::get<5>(key);
  // A model exported at a fixed batch runs fewer rows on a rank only under
  // data parallelism: without tensor parallelism such a probe is the
  // data-parallel layout itself, and its first rank's kernels are the
  // figure (a rank's time is not proportional to its rows: a tiny model's
  // kernels cost about the same at half the rows). (With tensor
  // parallelism the kernels leave out the tp collectives a microbatch
  // waits for: probedRows keeps those probes whole.)
  if (alone.tp == 1 && fixedRows > alone.microbatchSize &&
      alone.microbatchSize > 0 && fixedRows % alone.microbatchSize == 0)
    alone.dp = int(fixedRows / alone.microbatchSize);
  return {alone, std::get<3>(key)};
}

std::vector<LayoutScreen::ProbeKey>
LayoutScreen::probeSequence(const Layout &layout) const {
  // As estimate() asks for them.
  const int keeps[2] = {blocks > 0 ? 1 : 0, blocks > 0 ? 2 : 0};
  const int64_t unit = probeRows();
  const int64_t probed = probedRows(layout);
  std::vector<ProbeKey> keys;
  for (int keep : keeps) {
    auto key = [&](int microbatches, int64_t rows) {
      return ProbeKey{layout.tp,        layout.sequenceParallel,
                      layout.recompute, keep,
                      microbatches,     rows};
    };
    keys.push_back(key(1, unit));
    keys.push_back(key(2, unit));
    if (probed != unit)
      keys.push_back(key(1, probed));
  }
  return keys;
}

void LayoutScreen::prefetch(const std::vector<Layout> &layouts) {
  std::vector<std::vector<ProbeKey>> sequences;
  for (const Layout &layout : layouts)
    sequences.push_back(probeSequence(layout));
  for (size_t round = 0;; ++round) {
    std::vector<ProbeKey> keys;
    std::set<ProbeKey> asked;
    bool more = false;
    for (const std::vector<ProbeKey> &sequence : sequences) {
      if (round >= sequence.size())
        continue;
      more = true;
      bool ready = std::all_of(sequence.begin(), sequence.begin() + round,
                               [&](const ProbeKey &k) {
                                 auto it = probes.find(k);
                                 return it != probes.end() && it->second;
                               });
      const ProbeKey &key = sequence[round];
      if (ready && !probes.count(key) && asked.insert(key).second)
        keys.push_back(key);
    }
    if (!more)
      break;
    std::vector<std::optional<ProbeFigures>> results(keys.size());
    std::vector<std::string> whys(keys.size());
    std::vector<std::function<void()>> tasks;
    for (size_t i = 0; i < keys.size(); ++i)
      tasks.push_back([&, i] {
        auto [alone, kept] = probeLayout(keys[i]);
        results[i] = probe(alone, kept, whys[i]);
      });
    if (runner)
      runner(tasks);
    else
      for (std::function<void()> &task : tasks)
        task();
    for (size_t i = 0; i < keys.size(); ++i) {
      ++compiled;
      probes[keys[i]] = results[i];
      if (!results[i])
        errors[keys[i]] = whys[i];
    }
  }
}

namespace {

/// A figure of the model with k repeated blocks: base + k * perBlock.
struct PerBlock {
  double base = 0, perBlock = 0;
  double at(double k) const { return std::max(0.0, base + k * perBlock); }
};

/// The line through the figures at one and two blocks (`blocks` > 0), or
/// the whole model's figure as the base (`blocks` == 0).
PerBlock fit(double one, double two, int blocks) {
  if (blocks == 0)
    return {one, 0};
  return {2 * one - two, two - one};
}

/// The ranks of a group of `size` members `stride` tp groups apart, in
/// Loom's mesh order (tp innermost, then dp): what decides whether the
/// group crosses nodes.
std::vector<int> groupRanks(int size, int stride, int tp) {
  std::vector<int> ranks;
  for (int i = 0; i < size; ++i)
    ranks.push_back(i * stride * tp);
  return ranks;
}

} // namespace

std::optional<LayoutEstimate> LayoutScreen::estimate(const Layout &layout,
                                                     std::string &error) {
  const int keeps[2] = {blocks > 0 ? 1 : 0, blocks > 0 ? 2 : 0};
  const int64_t rows = layout.microbatchSize;
  // Per block count: the step at one and two microbatches of one row
  // (the fixed part and a microbatch's time), and one microbatch of the
  // layout's rows (its time and activations).
  double fixed[2], microbatch[2], activations[2], params[2], grads[2],
      optimizer[2], accumulators[2], tensors[2];
  // ZeRO shards over dp, or over a hybrid group of it; a parameter only
  // where a dimension of its (tensor-parallel) block divides by the shard
  // count (PropagateSharding's shardOptimizerStates): the bytes of those
  // that shard, and of all.
  const int shard =
      layout.zero > 0
          ? (layout.zeroShardGroup > 0 ? layout.zeroShardGroup : layout.dp)
          : 1;
  double shardable[2], trained[2];
  // A model exported at a fixed batch compiles only microbatches of that
  // many rows (over all dp ranks): its rows probe is data-parallel where a
  // rank has fewer (probeLayout), and its first rank's kernels count; under
  // tensor parallelism the probe runs them all, and a rank's share of a
  // microbatch's time and activations is taken as proportional to its
  // rows.
  const int64_t unit = probeRows();
  const int64_t probed = probedRows(layout);
  const double share = double(rows) / double(probed);
  for (int i = 0; i < 2; ++i) {
    std::optional<ProbeFigures> one = figures(layout, keeps[i], 1, unit, error);
    std::optional<ProbeFigures> two =
        one ? figures(layout, keeps[i], 2, unit, error) : std::nullopt;
    std::optional<ProbeFigures> rowsProbe =
        two ? (probed == unit ? one
                              : figures(layout, keeps[i], 1, probed, error))
            : std::nullopt;
    if (!rowsProbe)
      return std::nullopt;
    double perMicrobatch = std::max(0.0, two->stepSeconds - one->stepSeconds);
    fixed[i] = std::max(0.0, one->stepSeconds - perMicrobatch);
    double rowsSeconds = rowsProbe->computeSeconds >= 0
                             ? rowsProbe->computeSeconds
                             : rowsProbe->stepSeconds;
    microbatch[i] = share * std::max(0.0, rowsSeconds - fixed[i]);
    params[i] = double(rowsProbe->paramBytes);
    grads[i] = double(rowsProbe->gradBytes);
    optimizer[i] = double(rowsProbe->optimizerBytes);
    tensors[i] = double(rowsProbe->trainedCount);
    shardable[i] = trained[i] = 0;
    for (const auto &[shape, bytes] : rowsProbe->trainedShapes) {
      trained[i] += double(bytes);
      if (llvm::any_of(
              shape, [&](int64_t dim) { return dim > 0 && dim % shard == 0; }))
        shardable[i] += double(bytes);
    }
    activations[i] =
        share * std::max(0.0, double(rowsProbe->peakBytes) - params[i] -
                                  grads[i] - optimizer[i]);
    // The sums a second microbatch's gradients accumulate into.
    accumulators[i] =
        std::max(0.0, double(two->peakBytes) - double(one->peakBytes));
  }
  const int pp = layout.pp, dp = layout.dp;
  const double K = blocks;
  // The fullest stage: an even share of the blocks, rounded up to whole
  // blocks (the cut points), plus everything outside them (the embedding
  // on the first stage, the head on the last: a tied one on both).
  auto stage = [&](const double(&figure)[2]) {
    PerBlock line = fit(figure[0], figure[1], blocks);
    if (pp == 1)
      return line.at(K);
    double perStage = blocks > 0 ? std::ceil(K / pp) : 0;
    return blocks > 0 ? line.base + perStage * line.perBlock : line.base / pp;
  };
  // Time: a microbatch through the slowest stage (half a block of
  // imbalance on average where blocks are cut whole), times the schedule's
  // length in microbatches.
  PerBlock perMicrobatch = fit(microbatch[0], microbatch[1], blocks);
  double t = perMicrobatch.at(K);
  const double M = layout.microbatches, P = pp,
               V = std::max(1, layout.virtualStages);
  // The other stages' time for a microbatch: how much longer than M
  // microbatches through the slowest stage the schedule takes to fill and
  // drain.
  double rest = 0;
  if (pp > 1) {
    // A model without repeated blocks: the slowest of the stages the
    // compiler would cut (a rank's V of them, interleaved), as a share of
    // the microbatch, and the rest of it the others'. (Spread evenly
    // instead, NeoX of examples/zoo, whose three cut points leave four
    // stages far apart, was estimated at less than half its compiled step
    // at pp 4.)
    auto slowest = slowestStageShares.find(int(P * V));
    if (blocks == 0 && slowest != slowestStageShares.end()) {
      rest = t * (1 - slowest->second);
      t *= slowest->second * V;
    } else {
      t = t / pp + 0.5 * perMicrobatch.perBlock;
      rest = (P - 1) * t;
    }
  }
  double compute = M * t;
  double inFlight = 1;
  if (pp > 1) {
    const std::string &kind = layout.schedule;
    if (kind == "interleaved") {
      compute = (M + (P - 1) / V) * t;
      inFlight = std::min(M * V, 2 * (P - 1) + (V - 1) * P + 1) / V;
    } else if (kind == "zb-h1") {
      // F = B = W: the bubble is (P - 1)(F + B - W), a third of 1F1B's;
      // with fewer microbatches than stages, fewer W fill it.
      compute = M * t + rest - std::min(1.0, M / P) * rest * 2 / 3;
      inFlight = std::min(M, P);
    } else {
      compute = M * t + rest;
      inFlight = kind == "gpipe" ? M : std::min(M, P);
    }
  }
  // The share of the fullest stage's parameters that ZeRO shards (all,
  // where the probes list none); what it does not shard stays whole on
  // every rank, and so does its update.
  const double stageTrained = stage(trained);
  const double sharded =
      shard > 1 && stageTrained > 0
          ? std::clamp(stage(shardable) / stageTrained, 0.0, 1.0)
          : 1.0;
  auto perRank = [&](double bytes, bool byZero) {
    return byZero ? bytes * (1 - sharded) + bytes * sharded / shard : bytes;
  };
  double fixedTime = perRank(stage(fixed), layout.zero >= 1);
  double stageParams = stage(params), stageGrads = stage(grads),
         stageOptimizer = stage(optimizer);
  double exposed = 0;
  if (dp > 1) {
    // Each trained tensor is reduced (and gathered) by a collective of its
    // own, but for data parallelism's gradient buckets (without a
    // pipeline): on a small model the collectives' latency, not their
    // bytes, is the cost.
    const double stageTensors = std::max(1.0, stage(tensors));
    // `count` collectives of `bytes` in all among `size` ranks `stride` tp
    // groups apart.
    auto seconds = [&](CollectiveKind kind, double bytes, int size, int stride,
                       double count) {
      count = std::max(1.0, count);
      return count *
             cluster.collectiveSeconds(kind, uint64_t(bytes / count),
                                       groupRanks(size, stride, layout.tp));
    };
    double reduce, gather = 0;
    if (layout.zero == 0) {
      double buckets =
          pp == 1 && bucketBytes > 0
              ? std::min(stageTensors, std::ceil(stageGrads / bucketBytes))
              : stageTensors;
      reduce = seconds(CollectiveKind::AllReduce, stageGrads, dp, 1, buckets);
    } else {
      reduce = seconds(CollectiveKind::ReduceScatter, stageGrads, shard, 1,
                       stageTensors);
      if (shard < dp)
        reduce += seconds(CollectiveKind::AllReduce, stageGrads / shard,
                          dp / shard, shard, stageTensors);
      gather = seconds(CollectiveKind::AllGather, stageParams, shard, 1,
                       stageTensors);
    }
    // The gradients reduce as the last microbatch's backward makes them
    // (two thirds of its time); ZeRO-1 and -2 gather the updated
    // parameters after the optimizer; ZeRO-3 gathers each microbatch's
    // parameters for its forward and backward, ahead of the compute.
    // ZeRO-2 and -3 reduce-scatter every microbatch's gradients (their
    // sums are sharded), each during that microbatch's backward.
    // ZeRO-3's gathers and the reduce-scatters share the rank's links, so
    // together they hide in that half of the compute.
    if (layout.zero >= 2) {
      double perStep = M * reduce + (layout.zero == 3 ? 2 * M * gather : 0);
      exposed = std::max(0.0, perStep - 0.5 * compute) + reduce / 2;
    } else {
      exposed = std::max(0.0, reduce - 2 * t / 3);
    }
    if (layout.zero < 3)
      exposed += gather;
  }
  LayoutEstimate out;
  out.stepSeconds = compute + fixedTime + exposed;
  double states = perRank(stageParams, layout.zero >= 3) +
                  perRank(stageGrads, layout.zero >= 2) +
                  perRank(stageOptimizer, layout.zero >= 1);
  if (layout.microbatches > 1)
    states += perRank(stage(accumulators), layout.zero >= 2);
  out.peakBytes = uint64_t(states + inFlight * stage(activations));
  return out;
}

std::optional<double> loomrun::lentCorrectionSpread(
    const std::vector<std::pair<std::string, double>> &compiles,
    size_t minFamilies, size_t minCompiles) {
  // Per family: the sum of its logs and its compiles.
  std::map<std::string, std::pair<double, size_t>> families;
  double total = 0;
  for (const auto &[family, logStep] : compiles) {
    families[family].first += logStep;
    ++families[family].second;
    total += logStep;
  }
  if (families.size() < std::max<size_t>(2, minFamilies) ||
      compiles.size() < minCompiles)
    return std::nullopt;
  double squares = 0;
  for (const auto &[family, logStep] : compiles) {
    const auto &[own, count] = families.at(family);
    double lent = (total - own) / double(compiles.size() - count);
    double error = std::exp(logStep - lent) - 1;
    squares += error * error;
  }
  return std::sqrt(squares / double(compiles.size()));
}
