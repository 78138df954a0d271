//===- Report.cpp - What each rank holds and sends ------------------------===//

#include "loom/Runtime/Session/Report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "loom/Analysis/LinkModel.h"

using namespace loomrt;

const std::vector<std::string> &loomrt::reportedCollectiveKinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> names;
    for (loomcost::CollectiveKind kind : loomcost::kCollectiveKinds)
      if (kind != loomcost::CollectiveKind::Recv)
        names.push_back(loomcost::kindName(kind));
    return names;
  }();
  return kinds;
}

RankUsage loomrt::rankUsage(const Plan &plan, int rank,
                            const RunReport &report) {
  RankUsage usage;
  usage.rank = rank;
  std::vector<bool> held = rankHeldWeights(plan, rank);
  // Mixed precision as ZeRO counts it: the bf16 copies are the parameters
  // the step computes with, their f32 masters optimizer state.
  std::set<std::string> masters;
  for (const Weight &weight : plan.weights)
    if (weight.castOf >= 0 && uint64_t(weight.castOf) < plan.weights.size())
      masters.insert(plan.weights[size_t(weight.castOf)].name);
  uint64_t heldBytes = 0, trainedBytes = 0;
  for (size_t id = 0; id < plan.weights.size(); ++id) {
    if (!held[id])
      continue;
    const Weight &weight = plan.weights[id];
    // What the executor allocates: state weights and copies in memory of
    // their own, each aligned; read-only weights in place in the plan.
    bool owned = weight.state || weight.castOf >= 0;
    heldBytes += owned ? (weight.bytes + kOwnedWeightAlignment - 1) /
                             kOwnedWeightAlignment * kOwnedWeightAlignment
                       : weight.bytes;
    if (!weight.state)
      continue;
    if (weight.castOf >= 0) {
      usage.paramBytes += weight.bytes;
      continue;
    }
    if (weight.name.rfind("optimizer.", 0) == 0) {
      usage.optimizerBytes += weight.bytes;
      continue;
    }
    trainedBytes += weight.bytes;
    ++usage.trainedCount;
    usage.trainedShapes.push_back({weight.shape, weight.bytes});
    if (masters.count(weight.name))
      usage.optimizerBytes += weight.bytes;
    else
      usage.paramBytes += weight.bytes;
  }
  usage.gradBytes = trainedBytes;
  if (size_t(rank) < plan.ranks.size() &&
      plan.ranks[size_t(rank)].gradientBytes >= 0)
    usage.gradBytes = uint64_t(plan.ranks[size_t(rank)].gradientBytes);
  uint64_t arena = size_t(rank) < plan.ranks.size()
                       ? plan.ranks[size_t(rank)].arenaBytes
                       : 0;
  usage.plannedPeakBytes = arena + heldBytes;
  usage.measuredPeakBytes = report.measuredPeakBytes;
  for (const std::string &kind : reportedCollectiveKinds()) {
    auto it = report.commBytesSent.find(kind);
    usage.commBytes[kind] = it == report.commBytesSent.end() ? 0 : it->second;
  }
  return usage;
}

ArenaPeak loomrt::arenaPeak(const Plan &plan, int rank, size_t largest) {
  ArenaPeak peak;
  if (rank < 0 || size_t(rank) >= plan.ranks.size())
    return peak;
  const RankProgram &program = plan.ranks[size_t(rank)];
  const size_t count = program.instructions.size();
  std::vector<ArenaTensor> tensors = arenaTensors(program);
  std::vector<int64_t> bytes(count + 1, 0), alive(count + 1, 0);
  for (const ArenaTensor &tensor : tensors) {
    bytes[tensor.countedFrom()] += int64_t(tensor.ref.bytes());
    bytes[tensor.last + 1] -= int64_t(tensor.ref.bytes());
    ++alive[tensor.countedFrom()];
    --alive[tensor.last + 1];
  }
  int64_t sum = 0, tensorsAlive = 0;
  for (size_t i = 0; i < count; ++i) {
    sum += bytes[i];
    tensorsAlive += alive[i];
    if (sum > int64_t(peak.liveBytes)) {
      peak.liveBytes = uint64_t(sum);
      peak.instruction = i;
      peak.liveTensors = size_t(tensorsAlive);
    }
  }
  std::vector<const ArenaTensor *> live;
  for (const ArenaTensor &tensor : tensors)
    if (tensor.countedFrom() <= peak.instruction &&
        peak.instruction <= tensor.last)
      live.push_back(&tensor);
  std::stable_sort(live.begin(), live.end(),
                   [](const ArenaTensor *a, const ArenaTensor *b) {
                     return a->ref.bytes() > b->ref.bytes();
                   });
  for (size_t k = 0; k < live.size() && k < largest; ++k)
    peak.largest.push_back(*live[k]);
  return peak;
}

std::map<std::string, uint64_t> loomrt::plannedCommBytes(const Plan &plan,
                                                         int rank) {
  std::map<std::string, uint64_t> sent;
  if (rank < 0 || size_t(rank) >= plan.ranks.size())
    return sent;
  for (const Instruction &inst : plan.ranks[size_t(rank)].instructions)
    if (loomcost::parseKind(inst.kernel))
      sent[inst.kernel] += plannedBytesSent(plan, inst);
  return sent;
}

uint64_t loomrt::plannedBytesSent(const Plan &plan, const Instruction &inst) {
  if (!loomcost::parseKind(inst.kernel))
    return 0;
  // The group the instruction names (`group=ID`), else the world.
  int64_t groupSize = int64_t(plan.ranks.size());
  auto group = inst.attrs.find("group");
  if (group != inst.attrs.end()) {
    int64_t id = std::get<int64_t>(group->second);
    if (id >= 0 && size_t(id) < plan.groups.size())
      groupSize = int64_t(plan.groups[size_t(id)].size());
  }
  return collectiveBytesSent(inst, groupSize);
}

std::string loomrt::formatReportJson(const std::vector<RankUsage> &ranks) {
  std::string text = "{\"ranks\": [";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankUsage &usage = ranks[i];
    text += i ? ",\n  " : "\n  ";
    text +=
        "{\"rank\": " + std::to_string(usage.rank) +
        ", \"param_bytes\": " + std::to_string(usage.paramBytes) +
        ", \"grad_bytes\": " + std::to_string(usage.gradBytes) +
        ", \"optimizer_bytes\": " + std::to_string(usage.optimizerBytes) +
        ", \"planned_peak_bytes\": " + std::to_string(usage.plannedPeakBytes) +
        ", \"measured_peak_bytes\": " +
        std::to_string(usage.measuredPeakBytes) + ", \"comm_bytes\": {";
    bool first = true;
    for (const std::string &kind : reportedCollectiveKinds()) {
      auto it = usage.commBytes.find(kind);
      text += (first ? "\"" : ", \"") + kind + "\": " +
              std::to_string(it == usage.commBytes.end() ? 0 : it->second);
      first = false;
    }
    text += "}";
    if (usage.bubbleFraction >= 0) {
      char bubble[32];
      std::snprintf(bubble, sizeof(bubble), "%.6f", usage.bubbleFraction);
      text += std::string(", \"bubble_fraction\": ") + bubble;
    }
    text += "}";
  }
  text += ranks.empty() ? "]}\n" : "\n]}\n";
  return text;
}

size_t loomrt::packedUsageSize() {
  return 7 + reportedCollectiveKinds().size();
}

std::vector<int64_t> loomrt::packUsage(const RankUsage &usage) {
  std::vector<int64_t> values = {
      usage.rank, int64_t(usage.paramBytes), int64_t(usage.gradBytes),
      int64_t(usage.optimizerBytes), int64_t(usage.plannedPeakBytes),
      int64_t(usage.measuredPeakBytes),
      // Parts per billion; -1 stays negative.
      int64_t(usage.bubbleFraction * 1e9)};
  for (const std::string &kind : reportedCollectiveKinds()) {
    auto it = usage.commBytes.find(kind);
    values.push_back(it == usage.commBytes.end() ? 0 : int64_t(it->second));
  }
  return values;
}

RankUsage loomrt::unpackUsage(const int64_t *values) {
  RankUsage usage;
  usage.rank = int(values[0]);
  usage.paramBytes = uint64_t(values[1]);
  usage.gradBytes = uint64_t(values[2]);
  usage.optimizerBytes = uint64_t(values[3]);
  usage.plannedPeakBytes = uint64_t(values[4]);
  usage.measuredPeakBytes = uint64_t(values[5]);
  usage.bubbleFraction = values[6] < 0 ? -1 : double(values[6]) / 1e9;
  size_t at = 7;
  for (const std::string &kind : reportedCollectiveKinds())
    usage.commBytes[kind] = uint64_t(values[at++]);
  return usage;
}
