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
#include <set>
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

/// The compiled microbatch that stands for every middle one of the
/// target's: of five, the third; of a count past the compiled ranks' depth
/// (stageFoldMicrobatches), the middle one, in every compiled rank's
/// steady state (the third still meets the warm-up's fewer deferred
/// weight gradients: the fullest ranks of ZB-H1 pipelines were then up to
/// 6% off).
constexpr int kMiddleOfFive = 2;
int middleOf(const PipelineSchedule &compiled) {
  return compiled.microbatches >=
                 stageFoldMicrobatches(compiled.kind, compiled.ranks)
             ? compiled.microbatches / 2
             : kMiddleOfFive;
}

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

int mlir::loom::stageFoldMicrobatches(llvm::StringRef kind, int ranks) {
  if (kind == "interleaved")
    return std::max(pipelineFoldMicrobatches(kind, ranks), 3 * ranks);
  return std::max(kFoldMicrobatches, 2 * ranks + 1);
}

namespace {

/// A compiled rank's program cut into its actions' runs of instructions,
/// and what a middle microbatch's actions keep alive for its later ones.
struct RankRuns {
  /// Each action, in the order the program first runs it.
  std::vector<PipelineAction> order;
  std::map<ActionKey, size_t> runOf;
  /// Per action of `order`, its instructions.
  std::vector<std::vector<size_t>> runs;
  /// Bytes by stage, the kind of action that writes them and the kind
  /// that reads them last (a forward's activations for its backward, a
  /// backward's output gradients for a deferred W).
  std::map<std::tuple<int, int, int>, int64_t> held;
  /// Per action of `order`: the most arena bytes alive while its run
  /// runs, less what the held classes keep alive then: its own working
  /// set, and what else the compile keeps alive meanwhile (a gradient's
  /// sum being made, a buffer a transfer still reads).
  std::vector<int64_t> ownBytes;

  /// The most arena bytes alive at once as the rank runs `actions` in
  /// order, each action's stage taken as `stageOf` says: at each action,
  /// what the held classes keep alive by then plus the own bytes of the
  /// compiled run it copies (`runOf`: its index in `order`, or -1 for
  /// none). So a schedule's peak is found where the microbatches it keeps
  /// in flight meet an action's working set, not where the compiled
  /// schedule's peak fell.
  template <typename StageOf, typename RunOf>
  int64_t mostLive(const std::vector<PipelineAction> &actions, StageOf stageOf,
                   RunOf runOf) const {
    int64_t live = 0, most = 0;
    for (const PipelineAction &action : actions) {
      if (!action.isCompute())
        continue;
      int stage = stageOf(action.stage);
      for (const auto &[key, bytes] : held)
        if (std::get<0>(key) == stage && std::get<1>(key) == int(action.kind))
          live += bytes;
      int run = runOf(action);
      most = std::max(most, live + (run >= 0 ? ownBytes[size_t(run)] : 0));
      for (const auto &[key, bytes] : held)
        if (std::get<0>(key) == stage && std::get<2>(key) == int(action.kind))
          live -= bytes;
    }
    return most;
  }

  /// The run index of `action` (-1: none).
  int runIndex(const PipelineAction &action) const {
    auto it = runOf.find(keyOf(action));
    return it == runOf.end() ? -1 : int(it->second);
  }
};

/// Cuts rank `r`'s program of `compiled` into its actions' runs; nothing,
/// with `error` set, when it does not follow `schedule`.
std::optional<RankRuns>
cutIntoRuns(const loomrt::Plan &compiled, size_t r,
            const PipelineSchedule &schedule, int middle,
            llvm::StringMap<std::optional<PipelineAction>> &parsed,
            std::string &error) {
  const std::vector<Instruction> &program = compiled.ranks[r].instructions;
  RankRuns out;
  // Each tagged instruction's action, in the order the program first
  // runs them.
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
    auto [run, added] =
        out.runOf.try_emplace(keyOf(*it->second), out.order.size());
    if (added)
      out.order.push_back(*it->second);
    owner[i] = int(run->second);
  }
  if (out.order.empty()) {
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
  out.runs.resize(out.order.size());
  for (size_t i = 0; i < program.size(); ++i)
    out.runs[size_t(owner[i] >= 0 ? owner[i] : 0)].push_back(i);
  // The program must follow its rank's schedule (an action may have
  // nothing to run: the first stage computes no input gradient).
  int rank = schedule.rankOf(out.order.front().stage);
  std::vector<PipelineAction> expected;
  for (const PipelineAction &action : schedule.actions[rank])
    if (action.isCompute() && out.runOf.count(keyOf(action)))
      expected.push_back(action);
  if (expected != out.order) {
    error = "rank " + std::to_string(r) +
            "'s program does not run its actions in the schedule's order";
    return std::nullopt;
  }

  // What a middle microbatch's actions keep alive for its later ones.
  for (const loomrt::ArenaTensor &tensor :
       loomrt::arenaTensors(compiled.ranks[r])) {
    if (tensor.first >= owner.size() || tensor.last >= owner.size())
      continue;
    int writer = owner[tensor.first], reader = owner[tensor.last];
    if (writer < 0 || reader < 0 || writer == reader)
      continue;
    const PipelineAction &from = out.order[size_t(writer)];
    const PipelineAction &to = out.order[size_t(reader)];
    if (from.microbatch != middle || to.microbatch != middle ||
        from.stage != to.stage)
      continue;
    out.held[{from.stage, int(from.kind), int(to.kind)}] +=
        int64_t(tensor.ref.bytes());
  }
  // Not every byte a forward keeps is a tensor its backward reads (a
  // send's buffer waits for its transfer; the memory planner keeps
  // some longer): where the rank runs two middle forwards of a stage
  // back to back, what is alive grows by all a forward keeps, and the
  // forward's classes are scaled to that growth.
  std::vector<uint64_t> live = liveArenaBytes(compiled.ranks[r]);
  for (int stage = 0; stage < schedule.stages; ++stage) {
    auto second =
        out.runOf.find({int(PipelineActionKind::Forward), stage, middle});
    auto third =
        out.runOf.find({int(PipelineActionKind::Forward), stage, middle + 1});
    if (second == out.runOf.end() || third == out.runOf.end() ||
        third->second != second->second + 1)
      continue;
    int64_t grown = int64_t(live[out.runs[third->second].back()]) -
                    int64_t(live[out.runs[second->second].back()]);
    int64_t classified = 0;
    for (const auto &[key, bytes] : out.held)
      if (std::get<0>(key) == stage &&
          std::get<1>(key) == int(PipelineActionKind::Forward))
        classified += bytes;
    if (grown <= classified)
      continue;
    if (classified == 0) {
      out.held[{stage, int(PipelineActionKind::Forward),
                int(schedule.splitsBackward()
                        ? PipelineActionKind::Weight
                        : PipelineActionKind::Backward)}] = grown;
      continue;
    }
    for (auto &[key, bytes] : out.held)
      if (std::get<0>(key) == stage &&
          std::get<1>(key) == int(PipelineActionKind::Forward))
        bytes = bytes * grown / classified;
  }
  // Each action's own bytes: what is alive during its run past what the
  // held classes account for at that point of the compiled schedule.
  out.ownBytes.assign(out.order.size(), 0);
  int64_t held = 0;
  for (size_t j = 0; j < out.order.size(); ++j) {
    const PipelineAction &action = out.order[j];
    for (const auto &[key, bytes] : out.held)
      if (std::get<0>(key) == action.stage &&
          std::get<1>(key) == int(action.kind))
        held += bytes;
    int64_t most = 0;
    for (size_t i : out.runs[j])
      most = std::max(most, int64_t(live[i]));
    out.ownBytes[j] = most - held;
    for (const auto &[key, bytes] : out.held)
      if (std::get<0>(key) == action.stage &&
          std::get<2>(key) == int(action.kind))
        held -= bytes;
  }
  return out;
}

/// The compiled microbatch (of `compiled`) whose instructions microbatch
/// `k` of `target` runs.
int templateMicrobatch(int k, int compiled, int target, int middle) {
  if (k < 2)
    return k;
  if (k >= target - 2)
    return compiled - (target - k);
  return middle;
}

} // namespace

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
  PipelineFold fold;
  fold.programs.resize(compiled.ranks.size());
  fold.copies.resize(compiled.ranks.size());
  fold.extraActivationBytes.assign(compiled.ranks.size(), 0);
  llvm::StringMap<std::optional<PipelineAction>> parsed;
  for (size_t r = 0; r < compiled.ranks.size(); ++r) {
    const std::vector<Instruction> &program = compiled.ranks[r].instructions;
    if (program.empty())
      continue;
    std::optional<RankRuns> runs = cutIntoRuns(compiled, r, compiledSchedule,
                                               kMiddleOfFive, parsed, error);
    if (!runs)
      return std::nullopt;
    int rank = compiledSchedule.rankOf(runs->order.front().stage);
    InstructionSequence &out = fold.programs[r];
    for (const PipelineAction &action : target.actions[rank]) {
      if (!action.isCompute())
        continue;
      PipelineAction from = action;
      from.microbatch =
          templateMicrobatch(action.microbatch, m0, m, kMiddleOfFive);
      auto it = runs->runOf.find(keyOf(from));
      if (it == runs->runOf.end())
        continue;
      for (size_t i : runs->runs[it->second]) {
        out.push_back(&program[i]);
        fold.copies[r].push_back({action.microbatch, from.microbatch});
      }
    }
    auto same = [](int stage) { return stage; };
    fold.extraActivationBytes[r] =
        runs->mostLive(target.actions[rank], same,
                       [&](const PipelineAction &action) {
                         PipelineAction from = action;
                         from.microbatch = templateMicrobatch(
                             action.microbatch, m0, m, kMiddleOfFive);
                         return runs->runIndex(from);
                       }) -
        runs->mostLive(compiledSchedule.actions[rank], same,
                       [&](const PipelineAction &action) {
                         return runs->runIndex(action);
                       });
  }
  return fold;
}

std::optional<StageFold> mlir::loom::foldPipelineStages(
    const loomrt::Plan &compiled, const PipelineSchedule &compiledSchedule,
    const PipelineSchedule &target, const std::vector<int> &rankTemplate,
    std::string &error) {
  const int m0 = compiledSchedule.microbatches, m = target.microbatches;
  const int p0 = compiledSchedule.ranks, p = target.ranks;
  // Chunks per rank.
  const int v = p0 > 0 ? compiledSchedule.stages / p0 : 0;
  if ((m0 < kFoldMicrobatches && m0 != m) ||
      compiledSchedule.kind != target.kind || v < 1 ||
      compiledSchedule.stages != v * p0 || target.stages != v * p || p0 < 3 ||
      int(rankTemplate.size()) != p || compiled.ranks.size() % size_t(p0)) {
    error = "the compiled schedule cannot be written out to the target's "
            "stages";
    return std::nullopt;
  }
  // Ranks are pipeline-rank-major: pipeline rank s holds ranks [s D,
  // (s + 1) D), the first of them its representative.
  const int d = int(compiled.ranks.size()) / p0;
  for (size_t r = 0; r < compiled.ranks.size(); ++r)
    if (compiled.ranks[r].instructions.empty() == (int(r) % d == 0)) {
      error = "the compiled plan's programs are not one per stage";
      return std::nullopt;
    }
  for (int s = 0; s < p; ++s)
    if (rankTemplate[s] < 0 || rankTemplate[s] >= p0 ||
        (s == 0) != (rankTemplate[s] == 0) ||
        (s == p - 1) != (rankTemplate[s] == p0 - 1)) {
      error = "pipeline rank " + std::to_string(s) + " has no template";
      return std::nullopt;
    }
  // The compiled microbatch a target microbatch runs: itself at the same
  // count.
  auto microbatchOf = [&](int k) {
    return m == m0 ? k
                   : templateMicrobatch(k, m0, m, middleOf(compiledSchedule));
  };

  StageFold fold;
  fold.plan.ranks.resize(size_t(d) * size_t(p));
  for (size_t r = 0; r < fold.plan.ranks.size(); ++r)
    fold.plan.ranks[r].rank = int(r);
  fold.programs.resize(fold.plan.ranks.size());
  fold.copies.resize(fold.plan.ranks.size());
  fold.templateRank.assign(fold.plan.ranks.size(), -1);
  fold.extraActivationBytes.assign(fold.plan.ranks.size(), 0);
  std::map<std::vector<int>, int64_t> groupIds;

  // Compiled rank `member`, seen from compiled pipeline rank `from`
  // written out as target pipeline rank `to`: the target rank in the same
  // place. Neighbours stay neighbours; the first and last pipeline ranks
  // stay the first and last.
  auto mapRank = [&](int member, int from, int to) -> int {
    int stage = member / d, local = member % d, mapped;
    if (stage == from)
      mapped = to;
    else if (stage == from + 1)
      mapped = to + 1;
    else if (stage == from - 1)
      mapped = to - 1;
    else if (stage == 0)
      mapped = 0;
    else if (stage == p0 - 1)
      mapped = p - 1;
    else
      return -1;
    return mapped * d + local;
  };
  // A group's members, written out: a group over every stage stays over
  // every stage.
  auto mapGroup = [&](int64_t id, int from, int to) -> int64_t {
    if (id < 0 || size_t(id) >= compiled.groups.size())
      return -1;
    const std::vector<int> &members = compiled.groups[size_t(id)];
    std::set<int> stages, locals;
    for (int member : members) {
      stages.insert(member / d);
      locals.insert(member % d);
    }
    std::vector<int> mapped;
    if (int(stages.size()) == p0 &&
        members.size() == stages.size() * locals.size()) {
      for (int stage = 0; stage < p; ++stage)
        for (int local : locals)
          mapped.push_back(stage * d + local);
    } else {
      for (int member : members) {
        int rank = mapRank(member, from, to);
        if (rank < 0)
          return -1;
        mapped.push_back(rank);
      }
      llvm::sort(mapped);
      if (std::adjacent_find(mapped.begin(), mapped.end()) != mapped.end())
        return -1;
    }
    auto [it, inserted] = groupIds.try_emplace(mapped, fold.plan.groups.size());
    if (inserted)
      fold.plan.groups.push_back(mapped);
    return it->second;
  };

  llvm::StringMap<std::optional<PipelineAction>> parsed;
  std::vector<std::optional<RankRuns>> stageRuns(p0);
  for (int c = 0; c < p0; ++c) {
    stageRuns[c] = cutIntoRuns(compiled, size_t(c * d), compiledSchedule,
                               middleOf(compiledSchedule), parsed, error);
    if (!stageRuns[c])
      return std::nullopt;
  }
  for (int t = 0; t < p; ++t) {
    const int c = rankTemplate[t];
    const std::vector<Instruction> &program =
        compiled.ranks[size_t(c * d)].instructions;
    // The template's instructions as this stage runs them: its transfers'
    // peers and groups are this stage's.
    std::vector<const Instruction *> local(program.size());
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction &inst = program[i];
      local[i] = &inst;
      if (inst.kind != Instruction::Kind::Collective)
        continue;
      Instruction copy = inst;
      if (auto peer = copy.attrs.find("peer"); peer != copy.attrs.end()) {
        int rank = mapRank(int(std::get<int64_t>(peer->second)), c, t);
        if (rank < 0) {
          error = "pipeline rank " + std::to_string(c) +
                  " sends to a rank that is not its neighbour";
          return std::nullopt;
        }
        peer->second = int64_t(rank);
      }
      if (auto group = copy.attrs.find("group"); group != copy.attrs.end()) {
        int64_t id = mapGroup(std::get<int64_t>(group->second), c, t);
        if (id < 0) {
          error = "pipeline rank " + std::to_string(c) +
                  "'s collective spans ranks that cannot be written out";
          return std::nullopt;
        }
        group->second = id;
      }
      fold.rewritten.push_back(std::move(copy));
      local[i] = &fold.rewritten.back();
    }
    const int r = t * d;
    fold.templateRank[r] = c * d;
    InstructionSequence &out = fold.programs[r];
    for (const PipelineAction &action : target.actions[t]) {
      if (!action.isCompute())
        continue;
      // The same pass's chunk on the template rank.
      PipelineAction from = action;
      from.stage = action.stage / p * p0 + c;
      from.microbatch = microbatchOf(action.microbatch);
      auto it = stageRuns[c]->runOf.find(keyOf(from));
      if (it == stageRuns[c]->runOf.end())
        continue;
      for (size_t i : stageRuns[c]->runs[it->second]) {
        out.push_back(local[i]);
        fold.copies[r].push_back({action.microbatch, from.microbatch});
      }
    }
    const RankRuns &runs = *stageRuns[c];
    auto stageOf = [&](int stage) { return stage / p * p0 + c; };
    fold.extraActivationBytes[r] =
        runs.mostLive(target.actions[t], stageOf,
                      [&](const PipelineAction &action) {
                        PipelineAction from = action;
                        from.stage = stageOf(action.stage);
                        from.microbatch = microbatchOf(action.microbatch);
                        return runs.runIndex(from);
                      }) -
        runs.mostLive(
            compiledSchedule.actions[c], [](int stage) { return stage; },
            [&](const PipelineAction &action) {
              return runs.runIndex(action);
            });
  }

  // Every transfer must meet its match: the sends from one stage to
  // another, in order, as the other receives them (tag and bytes).
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, uint64_t>>> sent,
      received;
  for (size_t r = 0; r < fold.programs.size(); ++r)
    for (const Instruction *inst : fold.programs[r]) {
      if (inst->kind != Instruction::Kind::Collective ||
          (inst->kernel != "send" && inst->kernel != "recv"))
        continue;
      bool send = inst->kernel == "send";
      int peer = int(loomrt::intAttrOr(inst->attrs, "peer", -1));
      int64_t tag = loomrt::intAttrOr(inst->attrs, "tag", 0);
      const std::vector<loomrt::TensorRef> &buffer =
          send ? inst->inputs : inst->outputs;
      uint64_t bytes = buffer.empty() ? 0 : buffer.front().bytes();
      if (send)
        sent[{int(r), peer}].push_back({tag, bytes});
      else
        received[{peer, int(r)}].push_back({tag, bytes});
    }
  if (sent != received) {
    error = "the written-out stages' sends and receives do not match";
    return std::nullopt;
  }
  return fold;
}
