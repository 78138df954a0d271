//===- PipelineFold.cpp - A pipeline's step at M from a compile at fewer --===//
//
// Each program of the compiled plan is cut into its actions' runs of
// instructions. loom-split-stages tags every staged op with its action; the
// rest (receives, ZeRO's gathers, a microbatch's slice of the batch, the
// gradient sums, the optimizer) is placed by what it reads and writes.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/PipelineFold.h"
#include "loom/Runtime/ArenaTensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::loom;
using loomrt::Instruction;

namespace {

using ActionKey = std::tuple<int, int, int>;

/// The microbatches a plan is compiled at to be folded: the first two and
/// the last two differ from the rest (the gradient sums start with the
/// second microbatch's, and under mixed precision the first's widening
/// waits for it), and one in the middle stands for all others.
constexpr int kFoldMicrobatches = 5;

ActionKey keyOf(const PipelineAction &action) {
  return {int(action.kind), action.stage, action.microbatch};
}

/// For each instruction of `program`, the instructions that last wrote
/// what it reads.
std::vector<std::vector<size_t>>
producersOf(const std::vector<Instruction> &program) {
  std::vector<std::vector<size_t>> producers(program.size());
  // Arena bytes [start, end) by their last writer; weights by id.
  std::map<uint64_t, std::pair<uint64_t, size_t>> arena;
  std::map<uint64_t, size_t> weights;
  for (size_t i = 0; i < program.size(); ++i) {
    for (const loomrt::TensorRef &in : program[i].inputs) {
      if (in.space == loomrt::TensorRef::Space::Weight) {
        auto it = weights.find(in.offset);
        if (it != weights.end())
          producers[i].push_back(it->second);
        continue;
      }
      uint64_t start = in.offset, end = in.offset + in.bytes();
      auto it = arena.upper_bound(start);
      if (it != arena.begin() && std::prev(it)->second.first > start)
        --it;
      for (; it != arena.end() && it->first < end; ++it)
        producers[i].push_back(it->second.second);
    }
    for (const loomrt::TensorRef &out : program[i].outputs) {
      if (out.space == loomrt::TensorRef::Space::Weight) {
        weights[out.offset] = i;
        continue;
      }
      uint64_t start = out.offset, end = out.offset + out.bytes();
      auto it = arena.upper_bound(start);
      if (it != arena.begin() && std::prev(it)->second.first > start)
        --it;
      while (it != arena.end() && it->first < end)
        it = arena.erase(it);
      arena[start] = {end, i};
    }
  }
  return producers;
}

} // namespace

int mlir::loom::pipelineFoldMicrobatches(llvm::StringRef kind, int ranks) {
  if (kind != "interleaved")
    return kFoldMicrobatches;
  // Whole groups of `ranks` microbatches.
  return (kFoldMicrobatches + ranks - 1) / ranks * ranks;
}

std::optional<PipelineFold>
mlir::loom::foldPipeline(const loomrt::Plan &compiled,
                         const PipelineSchedule &compiledSchedule,
                         const PipelineSchedule &target, std::string &error) {
  const int m0 = compiledSchedule.microbatches, m = target.microbatches;
  if (m0 < kFoldMicrobatches || compiledSchedule.ranks != target.ranks ||
      compiledSchedule.stages != target.stages ||
      compiledSchedule.kind != target.kind) {
    error = "the compiled schedule cannot be folded to the target's";
    return std::nullopt;
  }
  // The compiled microbatch whose instructions microbatch `k` runs.
  auto templateOf = [&](int k) {
    if (k < 2)
      return k;
    if (k >= m - 2)
      return m0 - (m - k);
    return 2;
  };

  PipelineFold fold;
  fold.programs.resize(compiled.ranks.size());
  fold.copies.resize(compiled.ranks.size());
  fold.extraActivationBytes.assign(compiled.ranks.size(), 0);
  llvm::StringMap<std::optional<PipelineAction>> parsed;
  for (size_t r = 0; r < compiled.ranks.size(); ++r) {
    const std::vector<Instruction> &program = compiled.ranks[r].instructions;
    if (program.empty())
      continue;
    // Each tagged instruction's action, in the order the program first
    // runs them.
    std::vector<PipelineAction> order;
    std::map<ActionKey, size_t> runOf;
    std::vector<int> owner(program.size(), -1);
    for (size_t i = 0; i < program.size(); ++i) {
      const std::string &label = program[i].action;
      if (label.empty())
        continue;
      auto [it, inserted] = parsed.try_emplace(label);
      if (inserted)
        it->second = parsePipelineAction(label);
      if (!it->second)
        continue;
      auto [run, added] = runOf.try_emplace(keyOf(*it->second), order.size());
      if (added)
        order.push_back(*it->second);
      owner[i] = int(run->second);
    }
    if (order.empty()) {
      error = "rank " + std::to_string(r) + "'s program runs no action";
      return std::nullopt;
    }
    // The rest goes with the action of the first instruction that reads
    // what it writes (a receive, a gather or a slice of the batch prepares
    // that action's operands), else with the last action whose results it
    // reads (a gradient sum), else with the action before it (the
    // optimizer, after the last one).
    std::vector<std::vector<size_t>> producers = producersOf(program);
    std::vector<std::vector<size_t>> readers(program.size());
    for (size_t j = 0; j < program.size(); ++j)
      for (size_t i : producers[j])
        readers[i].push_back(j);
    for (size_t i = program.size(); i-- > 0;) {
      if (owner[i] >= 0)
        continue;
      for (size_t j : readers[i])
        if (owner[j] >= 0) {
          owner[i] = owner[j];
          break;
        }
    }
    int previous = -1;
    for (size_t i = 0; i < program.size(); ++i) {
      if (owner[i] < 0) {
        for (size_t p : producers[i])
          if (owner[p] >= 0)
            owner[i] = std::max(owner[i], owner[p]);
        if (owner[i] < 0)
          owner[i] = previous;
      }
      if (owner[i] >= 0)
        previous = owner[i];
    }
    std::vector<std::vector<size_t>> runs(order.size());
    for (size_t i = 0; i < program.size(); ++i)
      runs[size_t(owner[i] >= 0 ? owner[i] : 0)].push_back(i);
    // The program must follow its rank's schedule (an action may have
    // nothing to run: the first stage computes no input gradient).
    int rank = compiledSchedule.rankOf(order.front().stage);
    std::vector<PipelineAction> expected;
    for (const PipelineAction &action : compiledSchedule.actions[rank])
      if (action.isCompute() && runOf.count(keyOf(action)))
        expected.push_back(action);
    if (expected != order) {
      error = "rank " + std::to_string(r) +
              "'s program does not run its actions in the schedule's order";
      return std::nullopt;
    }

    InstructionSequence &out = fold.programs[r];
    for (const PipelineAction &action : target.actions[rank]) {
      if (!action.isCompute())
        continue;
      PipelineAction from = action;
      from.microbatch = templateOf(action.microbatch);
      auto it = runOf.find(keyOf(from));
      if (it == runOf.end())
        continue;
      for (size_t i : runs[it->second]) {
        out.push_back(&program[i]);
        fold.copies[r].push_back({action.microbatch, from.microbatch});
      }
    }

    // What a middle microbatch's actions keep alive for its later ones:
    // bytes by stage, the kind of action that writes them and the kind
    // that reads them last (a forward's activations for its backward, a
    // backward's output gradients for a deferred W).
    std::map<std::tuple<int, int, int>, int64_t> held;
    for (const loomrt::ArenaTensor &tensor :
         loomrt::arenaTensors(compiled.ranks[r])) {
      if (tensor.first >= owner.size() || tensor.last >= owner.size())
        continue;
      int writer = owner[tensor.first], reader = owner[tensor.last];
      if (writer < 0 || reader < 0 || writer == reader)
        continue;
      const PipelineAction &from = order[size_t(writer)];
      const PipelineAction &to = order[size_t(reader)];
      if (from.microbatch != 2 || to.microbatch != 2 || from.stage != to.stage)
        continue;
      held[{from.stage, int(from.kind), int(to.kind)}] +=
          int64_t(tensor.ref.bytes());
    }
    // Not every byte a forward keeps is a tensor its backward reads (a
    // send's buffer waits for its transfer; the memory planner keeps
    // some longer): where the rank runs two middle forwards of a stage
    // back to back, what is alive grows by all a forward keeps, and the
    // forward's classes are scaled to that growth.
    std::vector<uint64_t> live = liveArenaBytes(compiled.ranks[r]);
    for (int stage = 0; stage < compiledSchedule.stages; ++stage) {
      auto second = runOf.find({int(PipelineActionKind::Forward), stage, 2});
      auto third = runOf.find({int(PipelineActionKind::Forward), stage, 3});
      if (second == runOf.end() || third == runOf.end() ||
          third->second != second->second + 1)
        continue;
      int64_t grown = int64_t(live[runs[third->second].back()]) -
                      int64_t(live[runs[second->second].back()]);
      int64_t classified = 0;
      for (const auto &[key, bytes] : held)
        if (std::get<0>(key) == stage &&
            std::get<1>(key) == int(PipelineActionKind::Forward))
          classified += bytes;
      if (grown <= classified)
        continue;
      if (classified == 0) {
        held[{stage, int(PipelineActionKind::Forward),
              int(compiledSchedule.splitsBackward()
                      ? PipelineActionKind::Weight
                      : PipelineActionKind::Backward)}] = grown;
        continue;
      }
      for (auto &[key, bytes] : held)
        if (std::get<0>(key) == stage &&
            std::get<1>(key) == int(PipelineActionKind::Forward))
          bytes = bytes * grown / classified;
    }
    // Their most at once as the rank runs `actions` in order.
    auto mostHeld = [&](const std::vector<PipelineAction> &actions) {
      int64_t live = 0, most = 0;
      for (const PipelineAction &action : actions) {
        if (!action.isCompute())
          continue;
        for (const auto &[key, bytes] : held)
          if (std::get<0>(key) == action.stage &&
              std::get<1>(key) == int(action.kind))
            live += bytes;
        most = std::max(most, live);
        for (const auto &[key, bytes] : held)
          if (std::get<0>(key) == action.stage &&
              std::get<2>(key) == int(action.kind))
            live -= bytes;
      }
      return most;
    };
    fold.extraActivationBytes[r] = mostHeld(target.actions[rank]) -
                                   mostHeld(compiledSchedule.actions[rank]);
  }
  return fold;
}
