//===- PlanSimulation.cpp - Timing a runtime plan on a cluster ------------===//

#include "loom/Analysis/PlanSimulation.h"
#include "loom/Runtime/ArenaTensors.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::loom;
using loomcost::CollectiveKind;
using loomrt::Instruction;
using loomrt::intAttrOr;
using loomrt::TensorRef;

namespace {

bool overlaps(const TensorRef &a, const TensorRef &b) {
  if (a.space != b.space)
    return false;
  if (a.space == TensorRef::Space::Weight)
    return a.offset == b.offset;
  return a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
}

bool anyOverlap(const std::vector<TensorRef> &as,
                const std::vector<TensorRef> &bs) {
  for (const TensorRef &a : as)
    for (const TensorRef &b : bs)
      if (overlaps(a, b))
        return true;
  return false;
}

struct Transfer {
  CollectiveKind kind;
  uint64_t fullBytes = 0;
  std::vector<int> ranks;
  /// The progress engine it queues on.
  std::tuple<int, int, int> channel;
  std::map<int, double> posts;
  double end = -1;
};

struct InFlight {
  const Instruction *inst;
  int transfer;
  /// The copy of its instruction that posted it (ProgramCopy).
  ProgramCopy copy;
};

struct RankState {
  int rank = 0;
  size_t pc = 0;
  double clock = 0;
  bool done = false;
  std::vector<InFlight> inFlight;
  /// Per group, the collectives posted so far; per (peer, tag, direction)
  /// the transfers.
  std::map<int, int> groupSequence;
  std::map<std::tuple<int, int, int>, int> pairSequence;
};

class Simulator {
public:
  Simulator(const loomrt::Plan &plan,
            const std::vector<InstructionSequence> &programs,
            const std::vector<std::vector<ProgramCopy>> *copies,
            const ClusterSpec &cluster, bool record)
      : plan(plan), programs(programs), copies(copies), cluster(cluster),
        record(record) {}

  PlanSimulation run() {
    size_t n = plan.ranks.size();
    states.assign(n, RankState());
    for (size_t r = 0; r < n; ++r)
      states[r].rank = int(r);
    result.ranks.assign(n, PlanSimulation::Rank());
    kernelSeconds.resize(n);
    // A program may run an instruction many times (a pipeline's programs
    // synthesized from a template's): each is timed once.
    llvm::DenseMap<const Instruction *, std::pair<double, double>> timed;
    for (size_t r = 0; r < n; ++r)
      for (const Instruction *inst : programs[r]) {
        auto [it, inserted] = timed.try_emplace(inst, 0.0, 0.0);
        if (inserted && inst->kind == Instruction::Kind::Kernel) {
          InstructionWork work = estimateInstructionWork(*inst);
          it->second = {cluster.kernelSeconds(work, inst->kernel),
                        work.modelFlops};
        }
        kernelSeconds[r].push_back(it->second.first);
        result.ranks[r].modelFlops += it->second.second;
      }
    // Ranks without a program run copies of a representative's (a plan
    // built by buildRepresentativePlan): their transfers are assumed posted
    // when the representatives' are.
    for (size_t r = 0; r < n; ++r)
      if (programs[r].empty())
        states[r].done = true;
    bool progress = true;
    while (progress) {
      progress = false;
      bool allDone = true;
      for (size_t r = 0; r < n; ++r) {
        if (states[r].done)
          continue;
        progress |= advance(int(r));
        allDone &= states[r].done;
      }
      if (allDone)
        break;
      if (!progress) {
        result.error = "the replay stopped: a transfer no rank meets";
        return result;
      }
    }
    for (size_t r = 0; r < n; ++r) {
      result.ranks[r].stepSeconds = states[r].clock;
      result.stepSeconds = std::max(result.stepSeconds, states[r].clock);
    }
    return result;
  }

private:
  /// Runs rank `r` until it must wait for a transfer whose end is not yet
  /// known, or to its end; whether it moved.
  bool advance(int r) {
    RankState &state = states[r];
    const InstructionSequence &program = programs[r];
    bool moved = false;
    while (state.pc < program.size()) {
      const Instruction &inst = *program[state.pc];
      std::optional<double> ready = waitFor(state, &inst);
      if (!ready)
        return moved;
      wait(r, *ready);
      if (inst.kind == Instruction::Kind::Kernel) {
        double seconds = kernelSeconds[r][state.pc];
        if (record)
          result.events.push_back({r, inst.kernel, inst.action, false,
                                   state.clock, state.clock + seconds,
                                   int(state.pc)});
        state.clock += seconds;
        result.ranks[r].computeSeconds += seconds;
      } else {
        post(r, inst);
      }
      ++state.pc;
      moved = true;
    }
    std::optional<double> ready = waitFor(state, nullptr);
    if (!ready)
      return moved;
    wait(r, *ready);
    state.done = true;
    return true;
  }

  /// When the transfers `inst` must wait for end (all of them when null),
  /// or nullopt while one's end is unknown. Drops the transfers waited for.
  std::optional<double> waitFor(RankState &state, const Instruction *inst) {
    double ready = state.clock;
    ProgramCopy copy = copyAt(state.rank, state.pc);
    for (const InFlight &flight : state.inFlight) {
      // Copies made for different microbatches: where their buffers
      // overlap, the plan copied from reused one microbatch's for another
      // in its own order, which the copies' order does not follow.
      if (inst && copy.microbatch >= 0 && flight.copy.microbatch >= 0 &&
          copy.microbatch != flight.copy.microbatch)
        continue;
      if (inst && !conflicts(*inst, *flight.inst))
        continue;
      double end = transfers[flight.transfer].end;
      if (end < 0)
        return std::nullopt;
      ready = std::max(ready, end);
    }
    llvm::erase_if(state.inFlight, [&](const InFlight &flight) {
      double end = transfers[flight.transfer].end;
      return end >= 0 && end <= ready;
    });
    return ready;
  }

  ProgramCopy copyAt(int rank, size_t pc) const {
    if (!copies || size_t(rank) >= copies->size() ||
        pc >= (*copies)[rank].size())
      return {};
    return (*copies)[rank][pc];
  }

  static bool conflicts(const Instruction &next, const Instruction &posted) {
    // The transfer reads its inputs and writes its outputs.
    return anyOverlap(next.inputs, posted.outputs) ||
           anyOverlap(next.outputs, posted.outputs) ||
           anyOverlap(next.outputs, posted.inputs);
  }

  void wait(int r, double until) {
    RankState &state = states[r];
    if (until > state.clock) {
      result.ranks[r].waitSeconds += until - state.clock;
      state.clock = until;
    }
  }

  void post(int r, const Instruction &inst) {
    RankState &state = states[r];
    std::optional<CollectiveKind> kind = loomcost::parseKind(inst.kernel);
    if (!kind)
      return;
    std::tuple<int, int, int, int> key;
    std::vector<int> ranks;
    std::tuple<int, int, int> channel;
    uint64_t fullBytes = 0;
    if (*kind == CollectiveKind::Send || *kind == CollectiveKind::Recv) {
      int peer = int(intAttrOr(inst.attrs, "peer", r));
      int tag = int(intAttrOr(inst.attrs, "tag", 0));
      bool send = *kind == CollectiveKind::Send;
      int from = send ? r : peer, to = send ? peer : r;
      int sequence = state.pairSequence[{peer, tag, send}]++;
      key = {-1 - from, to, tag, sequence};
      ranks = {from, to};
      channel = {-1, from, to};
      const std::vector<TensorRef> &buffer = send ? inst.inputs : inst.outputs;
      fullBytes = buffer.empty() ? 0 : buffer.front().bytes();
    } else {
      int group = int(intAttrOr(inst.attrs, "group", 0));
      int sequence = state.groupSequence[group]++;
      key = {group, 0, 0, sequence};
      if (group >= 0 && size_t(group) < plan.groups.size())
        ranks = plan.groups[group];
      channel = {group, 0, 0};
      bool byInput = *kind == CollectiveKind::ReduceScatter;
      const std::vector<TensorRef> &buffer =
          byInput ? inst.inputs : inst.outputs;
      fullBytes = buffer.empty() ? 0 : buffer.front().bytes();
    }
    auto [it, inserted] = transferIndex.try_emplace(key, transfers.size());
    if (inserted) {
      Transfer transfer;
      transfer.kind =
          *kind == CollectiveKind::Recv ? CollectiveKind::Send : *kind;
      transfer.fullBytes = fullBytes;
      transfer.ranks = ranks;
      transfer.channel = channel;
      transfers.push_back(std::move(transfer));
    }
    Transfer &transfer = transfers[it->second];
    transfer.posts[r] = state.clock;
    state.inFlight.push_back({&inst, int(it->second), copyAt(r, state.pc)});
    size_t expected = 0;
    for (int member : transfer.ranks)
      if (member >= 0 && size_t(member) < programs.size() &&
          !programs[member].empty())
        ++expected;
    if (transfer.posts.size() >= std::max<size_t>(1, expected))
      resolve(transfer);
  }

  void resolve(Transfer &transfer) {
    double start = channelFree[transfer.channel];
    for (const auto &[rank, posted] : transfer.posts)
      start = std::max(start, posted);
    double seconds = cluster.collectiveSeconds(
        transfer.kind, transfer.fullBytes, transfer.ranks);
    transfer.end = start + seconds;
    channelFree[transfer.channel] = transfer.end;
    for (const auto &[rank, posted] : transfer.posts) {
      result.ranks[rank].commSeconds[loomcost::kindName(transfer.kind)] +=
          seconds;
      if (record)
        result.events.push_back({rank, loomcost::kindName(transfer.kind), "",
                                 true, start, transfer.end, -1});
    }
  }

  const loomrt::Plan &plan;
  const std::vector<InstructionSequence> &programs;
  const std::vector<std::vector<ProgramCopy>> *copies;
  const ClusterSpec &cluster;
  bool record;
  PlanSimulation result;
  std::vector<RankState> states;
  std::vector<std::vector<double>> kernelSeconds;
  std::vector<Transfer> transfers;
  std::map<std::tuple<int, int, int, int>, size_t> transferIndex;
  std::map<std::tuple<int, int, int>, double> channelFree;
};

} // namespace

PlanSimulation mlir::loom::simulatePlan(const loomrt::Plan &plan,
                                        const ClusterSpec &cluster,
                                        bool recordEvents) {
  std::vector<InstructionSequence> programs(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r)
    for (const Instruction &inst : plan.ranks[r].instructions)
      programs[r].push_back(&inst);
  return Simulator(plan, programs, nullptr, cluster, recordEvents).run();
}

PlanSimulation mlir::loom::simulatePrograms(
    const loomrt::Plan &plan, const std::vector<InstructionSequence> &programs,
    const ClusterSpec &cluster, bool recordEvents,
    const std::vector<std::vector<ProgramCopy>> *copies) {
  return Simulator(plan, programs, copies, cluster, recordEvents).run();
}

std::vector<uint64_t>
mlir::loom::liveArenaBytes(const loomrt::RankProgram &program) {
  const size_t count = program.instructions.size();
  std::vector<int64_t> delta(count + 1, 0);
  for (const loomrt::ArenaTensor &tensor : loomrt::arenaTensors(program)) {
    delta[tensor.first] += int64_t(tensor.ref.bytes());
    delta[tensor.last + 1] -= int64_t(tensor.ref.bytes());
  }
  std::vector<uint64_t> live(count, 0);
  int64_t sum = 0;
  for (size_t i = 0; i < count; ++i) {
    sum += delta[i];
    live[i] = uint64_t(std::max<int64_t>(sum, 0));
  }
  return live;
}
