//===- PlanSimulation.cpp - Timing a runtime plan on a cluster ------------===//

#include "loom/Analysis/PlanSimulation.h"
#include "loom/Runtime/ArenaTensors.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <array>
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

/// A transfer: `key` names it (a group's collective by the group and
/// sequence; a send/recv pair by sender, receiver, tag and sequence).
using TransferKey = std::tuple<int, int, int, int>;
/// The progress engine a transfer queues on.
using Channel = std::tuple<int, int, int>;

/// Hashes tuples of ints well: DenseMap's own combination of `37 * v`
/// collides on the replay's keys (consecutive ranks, tags and sequences),
/// and its probes ran long.
template <typename Tuple> struct MixedTupleInfo : llvm::DenseMapInfo<Tuple> {
  static unsigned getHashValue(const Tuple &key) {
    return unsigned(std::apply(
        [](const auto &...values) { return llvm::hash_combine(values...); },
        key));
  }
};

struct Transfer {
  CollectiveKind kind;
  uint64_t fullBytes = 0;
  const std::vector<int> *ranks = nullptr;
  Channel channel;
  /// Who posted it when, by rank (in rank order).
  llvm::SmallVector<std::pair<int, double>, 4> posts;
  /// The ranks with a program among its members: it starts when all have
  /// posted.
  size_t expected = 1;
  double end = -1;
};

/// What the replay reads of a communication instruction, decoded once
/// (the programs of a pipeline written out from a template run the same
/// instruction many times).
struct Posting {
  CollectiveKind kind;
  /// Send and recv: the peer (none: the posting rank itself) and tag;
  /// else the group.
  std::optional<int> peer;
  int tag = 0, group = 0;
  uint64_t fullBytes = 0;
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
  llvm::DenseMap<int, int> groupSequence;
  llvm::DenseMap<std::tuple<int, int, int>, int,
                 MixedTupleInfo<std::tuple<int, int, int>>>
      pairSequence;
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
    commSeconds.assign(n, {});
    commPosted.assign(n, {});
    // A program may run an instruction many times (a pipeline's programs
    // synthesized from a template's): each is timed (or decoded) once.
    llvm::DenseMap<const Instruction *, std::pair<double, double>> timed;
    for (size_t r = 0; r < n; ++r)
      for (const Instruction *inst : programs[r]) {
        auto [it, inserted] = timed.try_emplace(inst, 0.0, 0.0);
        if (inserted && inst->kind == Instruction::Kind::Kernel) {
          InstructionWork work = estimateInstructionWork(*inst);
          it->second = {cluster.kernelSeconds(work, inst->kernel),
                        work.modelFlops};
        } else if (inserted) {
          postings.try_emplace(inst, decode(*inst));
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
      for (CollectiveKind kind : loomcost::kCollectiveKinds)
        if (commPosted[r][size_t(kind)])
          result.ranks[r].commSeconds[loomcost::kindName(kind)] =
              commSeconds[r][size_t(kind)];
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

  /// `inst`'s kind, peer or group and bytes.
  static std::optional<Posting> decode(const Instruction &inst) {
    std::optional<CollectiveKind> kind = loomcost::parseKind(inst.kernel);
    if (!kind)
      return std::nullopt;
    Posting posting;
    posting.kind = *kind;
    bool pair = *kind == CollectiveKind::Send || *kind == CollectiveKind::Recv;
    if (pair) {
      auto peer = inst.attrs.find("peer");
      if (peer != inst.attrs.end() &&
          std::holds_alternative<int64_t>(peer->second))
        posting.peer = int(std::get<int64_t>(peer->second));
      posting.tag = int(intAttrOr(inst.attrs, "tag", 0));
    } else {
      posting.group = int(intAttrOr(inst.attrs, "group", 0));
    }
    posting.fullBytes = loomrt::collectiveFullBytes(inst);
    return posting;
  }

  void post(int r, const Instruction &inst) {
    RankState &state = states[r];
    const std::optional<Posting> &posting = postings.find(&inst)->second;
    if (!posting)
      return;
    const CollectiveKind kind = posting->kind;
    TransferKey key;
    Channel channel;
    int from = 0, to = 0;
    bool pair = kind == CollectiveKind::Send || kind == CollectiveKind::Recv;
    if (pair) {
      int peer = posting->peer.value_or(r);
      bool send = kind == CollectiveKind::Send;
      from = send ? r : peer;
      to = send ? peer : r;
      int sequence = state.pairSequence[{peer, posting->tag, send}]++;
      key = {-1 - from, to, posting->tag, sequence};
      channel = {-1, from, to};
    } else {
      int sequence = state.groupSequence[posting->group]++;
      key = {posting->group, 0, 0, sequence};
      channel = {posting->group, 0, 0};
    }
    const std::vector<int> *ranks;
    if (pair) {
      ranks = &pairRanks.try_emplace({from, to}, std::vector<int>{from, to})
                   .first->second;
    } else {
      int group = posting->group;
      ranks = group >= 0 && size_t(group) < plan.groups.size()
                  ? &plan.groups[group]
                  : &noRanks;
    }
    const size_t expected = postersOf(ranks);
    // Only transfers other ranks will post too are looked up again (and
    // only until the last of them has): the index holds those pending.
    size_t index = transfers.size();
    bool pending = false;
    if (expected > 1) {
      auto [it, inserted] = transferIndex.try_emplace(key, transfers.size());
      index = it->second;
      pending = true;
    }
    if (index == transfers.size()) {
      Transfer transfer;
      transfer.kind = pair ? CollectiveKind::Send : kind;
      transfer.fullBytes = posting->fullBytes;
      transfer.ranks = ranks;
      transfer.channel = channel;
      transfer.expected = expected;
      transfers.push_back(std::move(transfer));
    }
    Transfer &transfer = transfers[index];
    auto at = llvm::lower_bound(transfer.posts, r, [](const auto &p, int rank) {
      return p.first < rank;
    });
    if (at != transfer.posts.end() && at->first == r)
      at->second = state.clock;
    else
      transfer.posts.insert(at, {r, state.clock});
    state.inFlight.push_back({&inst, int(index), copyAt(r, state.pc)});
    if (transfer.posts.size() >= transfer.expected) {
      resolve(transfer);
      if (pending)
        transferIndex.erase(key);
    }
  }

  /// How many of `ranks` have a program (at least one: the poster).
  size_t postersOf(const std::vector<int> *ranks) {
    auto [it, inserted] = posters.try_emplace(ranks, 0);
    if (inserted) {
      size_t count = 0;
      for (int member : *ranks)
        if (member >= 0 && size_t(member) < programs.size() &&
            !programs[member].empty())
          ++count;
      it->second = std::max<size_t>(1, count);
    }
    return it->second;
  }

  void resolve(Transfer &transfer) {
    double &free = channelFree[transfer.channel];
    double start = free;
    for (const auto &[rank, posted] : transfer.posts)
      start = std::max(start, posted);
    // (The same collective of the same size on the same ranks recurs
    // every microbatch: its time is looked up once.)
    auto [cost, inserted] = collectiveCost.try_emplace(
        {int(transfer.kind), transfer.fullBytes, transfer.ranks}, 0.0);
    if (inserted)
      cost->second = cluster.collectiveSeconds(
          transfer.kind, transfer.fullBytes, *transfer.ranks);
    double seconds = cost->second;
    transfer.end = start + seconds;
    free = transfer.end;
    for (const auto &[rank, posted] : transfer.posts) {
      commSeconds[rank][size_t(transfer.kind)] += seconds;
      commPosted[rank][size_t(transfer.kind)] = true;
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
  /// Per rank, the seconds transferring by kind (the result's
  /// commSeconds, summed by name at the end).
  static constexpr size_t kKinds = std::size(loomcost::kCollectiveKinds);
  std::vector<std::array<double, kKinds>> commSeconds;
  std::vector<std::array<bool, kKinds>> commPosted;
  llvm::DenseMap<const Instruction *, std::optional<Posting>> postings;
  std::vector<Transfer> transfers;
  llvm::DenseMap<TransferKey, size_t, MixedTupleInfo<TransferKey>>
      transferIndex;
  llvm::DenseMap<Channel, double, MixedTupleInfo<Channel>> channelFree;
  llvm::DenseMap<const std::vector<int> *, size_t> posters;
  /// The members of each sender and receiver pair's transfers.
  std::map<std::pair<int, int>, std::vector<int>> pairRanks;
  const std::vector<int> noRanks;
  llvm::DenseMap<std::tuple<int, uint64_t, const std::vector<int> *>, double>
      collectiveCost;
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
    delta[tensor.countedFrom()] += int64_t(tensor.ref.bytes());
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
