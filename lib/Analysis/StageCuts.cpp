//===- StageCuts.cpp - Cutting a model into pipeline stages ---------------===//

#include "loom/Analysis/StageCuts.h"
#include "loom/Analysis/OpCost.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "llvm/Support/Format.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::loom;

namespace {

double tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return double(tensor.getNumElements()) *
         double((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// Values every stage can produce itself: parameter reads and constants.
bool isRereadable(Operation *op) { return isa<ParamOp, ConstantOp>(op); }

/// The function's ops in order, and what the cut analysis needs of them.
struct OpTable {
  std::vector<Operation *> ops;
  std::vector<double> seconds;  // forward + backward of each op
  std::vector<double> crossing; // activation bytes alive after op i
  // The same in elements: where the model is narrow, whatever the
  // precision (a bf16 cast before the head is not a narrower place).
  std::vector<double> crossingElements;
  std::vector<double> resultBytes; // activations op i keeps
  /// The parameter bytes first read by op i (a parameter belongs to the
  /// stage of its first reader).
  std::vector<double> parameterBytes;

  OpTable(func::FuncOp func, const StageCostRates &rates) {
    for (Operation &op : func.getBody().front().without_terminator())
      ops.push_back(&op);
    unsigned n = ops.size();
    llvm::DenseMap<Operation *, unsigned> index;
    for (unsigned i = 0; i < n; ++i)
      index[ops[i]] = i;
    seconds.assign(n, 0);
    crossing.assign(n, 0);
    resultBytes.assign(n, 0);
    parameterBytes.assign(n, 0);
    crossingElements.assign(n, 0);
    std::vector<double> delta(n + 1, 0), deltaElements(n + 1, 0);
    llvm::DenseSet<Attribute> seenParameters;
    for (unsigned i = 0; i < n; ++i) {
      Operation *op = ops[i];
      if (isRereadable(op))
        continue;
      seconds[i] = estimateOpSeconds(op, rates) * (1 + rates.backwardFactor);
      for (Value operand : op->getOperands())
        if (auto read = operand.getDefiningOp<ParamOp>())
          if (seenParameters.insert(read.getNameAttr()).second)
            parameterBytes[i] += tensorBytes(read.getType());
      for (Value result : op->getResults()) {
        double bytes = tensorBytes(result.getType());
        resultBytes[i] += bytes;
        unsigned last = i;
        for (Operation *user : result.getUsers()) {
          auto it = index.find(user);
          last = std::max(last, it == index.end() ? n : it->second);
        }
        // Alive after ops i .. last - 1.
        delta[i] += bytes;
        delta[last] -= bytes;
        double elements =
            bytes > 0
                ? double(
                      cast<RankedTensorType>(result.getType()).getNumElements())
                : 0;
        deltaElements[i] += elements;
        deltaElements[last] -= elements;
      }
    }
    double alive = 0, aliveElements = 0;
    for (unsigned i = 0; i < n; ++i) {
      alive += delta[i];
      crossing[i] = alive;
      aliveElements += deltaElements[i];
      crossingElements[i] = aliveElements;
    }
  }
};

} // namespace

std::string mlir::loom::formatBytes(double bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes >= 1 << 20)
    os << llvm::format("%.1f MiB", bytes / (1 << 20));
  else if (bytes >= 1 << 10)
    os << llvm::format("%.1f KiB", bytes / (1 << 10));
  else
    os << int64_t(bytes) << " B";
  return text;
}

double mlir::loom::estimateOpSeconds(Operation *op,
                                     const StageCostRates &rates) {
  OpCost cost = estimateOpCost(op);
  if (cost.matmulFlops > 0)
    return cost.matmulFlops / rates.gemmFlopsPerSecond;
  return (cost.bytesRead + cost.bytesWritten) / rates.bytesPerSecond;
}

std::string mlir::loom::stageCutNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string name = stageCutNodeName(inner); !name.empty())
        return name;
  return "";
}

std::vector<StageCutPoint>
mlir::loom::findStageCutPoints(func::FuncOp forward) {
  OpTable table(forward, StageCostRates());
  unsigned n = table.ops.size();
  // Where the fewest activations are alive (ignoring the start, before
  // any is made, and the end); a run of such places is one cut point,
  // right after the op that leaves the model that narrow.
  // Counted in elements: under mixed precision the bf16 cast that feeds
  // the head is half the bytes of the residual stream between layers, but
  // no narrower a place to cut.
  const std::vector<double> &width = table.crossingElements;
  double narrowest = std::numeric_limits<double>::infinity();
  for (unsigned i = 0; i + 1 < n; ++i)
    if (width[i] > 0)
      narrowest = std::min(narrowest, width[i]);
  std::vector<StageCutPoint> points;
  bool inRun = false;
  for (unsigned i = 0; i + 1 < n; ++i) {
    bool narrow = width[i] > 0 && width[i] <= narrowest;
    if (narrow && !inRun)
      points.push_back(
          {i, stageCutNodeName(table.ops[i]->getLoc()), table.crossing[i]});
    inRun = narrow;
  }
  return points;
}

std::optional<StagePlan>
mlir::loom::cutIntoStages(func::FuncOp forward, int stages,
                          const StageCostRates &rates,
                          const std::vector<std::string> &userCuts,
                          double memoryCapBytes, std::string &error) {
  OpTable table(forward, rates);
  unsigned n = table.ops.size();
  if (stages < 1) {
    error = "needs at least one stage";
    return std::nullopt;
  }
  std::vector<StageCutPoint> chosen;
  std::vector<double> prefixSeconds(n + 1, 0), prefixParameters(n + 1, 0),
      prefixActivations(n + 1, 0);
  for (unsigned i = 0; i < n; ++i) {
    prefixSeconds[i + 1] = prefixSeconds[i] + table.seconds[i];
    prefixParameters[i + 1] = prefixParameters[i] + table.parameterBytes[i];
    prefixActivations[i + 1] = prefixActivations[i] + table.resultBytes[i];
  }
  // Stage s spans ops (from, to]: from = the previous cut (or -1).
  auto memory = [&](int from, int to, int stage) {
    double parameters = prefixParameters[to + 1] - prefixParameters[from + 1];
    double activations =
        prefixActivations[to + 1] - prefixActivations[from + 1];
    // Weights, gradients and AdamW's two moments, and 1F1B's in-flight
    // microbatches of activations.
    return 4 * parameters + activations * double(stages - stage);
  };
  if (!userCuts.empty()) {
    if (int(userCuts.size()) != stages - 1) {
      error = std::to_string(userCuts.size()) + " stage cuts make " +
              std::to_string(userCuts.size() + 1) + " stages, not " +
              std::to_string(stages);
      return std::nullopt;
    }
    int previous = -1;
    for (const std::string &node : userCuts) {
      int at = -1;
      for (unsigned i = 0; i < n; ++i)
        if (stageCutNodeName(table.ops[i]->getLoc()) == node)
          at = int(i);
      if (at < 0) {
        error = "stage cut '" + node + "' names no node of @" +
                forward.getSymName().str();
        return std::nullopt;
      }
      if (at <= previous || at + 1 >= int(n)) {
        error = "stage cut '" + node +
                "' does not come after the previous cut and before the "
                "function's last op";
        return std::nullopt;
      }
      chosen.push_back({unsigned(at), node, table.crossing[at]});
      previous = at;
    }
  } else if (stages > 1) {
    std::vector<StageCutPoint> points = findStageCutPoints(forward);
    if (int(points.size()) < stages - 1) {
      error = "cannot cut @" + forward.getSymName().str() + " into " +
              std::to_string(stages) + " stages: it has " +
              std::to_string(points.size()) +
              " cut points (places where the fewest activations are alive)";
      return std::nullopt;
    }
    // best[k][j]: the slowest stage of the best way to end stage k at
    // point j (stages 0..k), under the memory cap.
    unsigned K = points.size();
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(stages - 1,
                                          std::vector<double>(K, inf));
    std::vector<std::vector<int>> from(stages - 1, std::vector<int>(K, -1));
    auto fits = [&](int begin, int end, int stage) {
      return memoryCapBytes <= 0 || memory(begin, end, stage) <= memoryCapBytes;
    };
    auto time = [&](int begin, int end) {
      return prefixSeconds[end + 1] - prefixSeconds[begin + 1];
    };
    for (unsigned j = 0; j < K; ++j)
      if (fits(-1, points[j].afterOp, 0))
        best[0][j] = time(-1, points[j].afterOp);
    for (int k = 1; k < stages - 1; ++k)
      for (unsigned j = 0; j < K; ++j)
        for (unsigned i = 0; i < j; ++i) {
          if (best[k - 1][i] == inf ||
              !fits(points[i].afterOp, points[j].afterOp, k))
            continue;
          double slowest = std::max(best[k - 1][i],
                                    time(points[i].afterOp, points[j].afterOp));
          if (slowest < best[k][j]) {
            best[k][j] = slowest;
            from[k][j] = int(i);
          }
        }
    double bestTotal = inf;
    int last = -1;
    for (unsigned j = 0; j < K; ++j) {
      if (best[stages - 2][j] == inf ||
          !fits(points[j].afterOp, int(n) - 1, stages - 1))
        continue;
      double slowest =
          std::max(best[stages - 2][j], time(points[j].afterOp, int(n) - 1));
      if (slowest < bestTotal) {
        bestTotal = slowest;
        last = int(j);
      }
    }
    if (last < 0) {
      error = "no cut of @" + forward.getSymName().str() + " into " +
              std::to_string(stages) + " stages keeps every stage under " +
              std::to_string(int64_t(memoryCapBytes)) + " bytes";
      return std::nullopt;
    }
    for (int k = stages - 2, j = last; k >= 0; j = from[k][j], --k)
      chosen.push_back(points[j]);
    std::reverse(chosen.begin(), chosen.end());
  }

  StagePlan plan;
  plan.cuts = chosen;
  plan.stageOfOp.assign(n, 0);
  for (unsigned i = 0, stage = 0; i < n; ++i) {
    plan.stageOfOp[i] = int(stage);
    if (stage < chosen.size() && chosen[stage].afterOp == i)
      ++stage;
  }
  // Parameter reads and constants go with their first reader.
  for (unsigned i = 0; i < n; ++i) {
    if (!isRereadable(table.ops[i]))
      continue;
    for (unsigned j = i + 1; j < n; ++j)
      if (llvm::is_contained(table.ops[j]->getOperands(),
                             table.ops[i]->getResult(0))) {
        plan.stageOfOp[i] = plan.stageOfOp[j];
        break;
      }
  }
  int begin = -1;
  for (int stage = 0; stage < stages; ++stage) {
    int end = stage + 1 < stages ? int(chosen[stage].afterOp) : int(n) - 1;
    plan.seconds.push_back(prefixSeconds[end + 1] - prefixSeconds[begin + 1]);
    plan.parameterBytes.push_back(prefixParameters[end + 1] -
                                  prefixParameters[begin + 1]);
    plan.activationBytes.push_back(prefixActivations[end + 1] -
                                   prefixActivations[begin + 1]);
    plan.sendBytes.push_back(stage + 1 < stages ? chosen[stage].crossingBytes
                                                : 0);
    begin = end;
  }
  return plan;
}
