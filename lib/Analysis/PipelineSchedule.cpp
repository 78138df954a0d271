//===- PipelineSchedule.cpp - Generate, prove and simulate schedules ------===//

#include "loom/Analysis/PipelineSchedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::loom;
using Kind = PipelineActionKind;

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

static llvm::StringRef kindLetters(Kind kind) {
  switch (kind) {
  case Kind::Forward:
    return "F";
  case Kind::Backward:
    return "B";
  case Kind::Weight:
    return "W";
  case Kind::SendActivation:
    return "SF";
  case Kind::RecvActivation:
    return "RF";
  case Kind::SendGradient:
    return "SB";
  case Kind::RecvGradient:
    return "RB";
  }
  return "?";
}

std::string mlir::loom::formatPipelineAction(const PipelineAction &action) {
  return (kindLetters(action.kind) + llvm::Twine(action.stage) + "." +
          llvm::Twine(action.microbatch))
      .str();
}

std::optional<PipelineAction>
mlir::loom::parsePipelineAction(llvm::StringRef text) {
  // Longest letters first, so that `SF` is not read as `S`.
  for (Kind kind :
       {Kind::SendActivation, Kind::RecvActivation, Kind::SendGradient,
        Kind::RecvGradient, Kind::Forward, Kind::Backward, Kind::Weight}) {
    llvm::StringRef rest = text;
    if (!rest.consume_front(kindLetters(kind)))
      continue;
    auto [stageText, microbatchText] = rest.split('.');
    unsigned stage, microbatch;
    if (stageText.getAsInteger(10, stage) ||
        microbatchText.getAsInteger(10, microbatch))
      return std::nullopt;
    return PipelineAction{kind, int(stage), int(microbatch)};
  }
  return std::nullopt;
}

bool PipelineSchedule::splitsBackward() const {
  for (const std::vector<PipelineAction> &list : actions)
    for (const PipelineAction &action : list)
      if (action.kind == Kind::Weight)
        return true;
  return false;
}

std::string
mlir::loom::formatPipelineSchedule(const PipelineSchedule &schedule) {
  std::string text;
  for (auto [rank, list] : llvm::enumerate(schedule.actions)) {
    text += "rank " + std::to_string(rank) + ":";
    for (const PipelineAction &action : list)
      text += " " + formatPipelineAction(action);
    text += "\n";
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

static PipelineAction forward(int stage, int microbatch) {
  return {Kind::Forward, stage, microbatch};
}
static PipelineAction backward(int stage, int microbatch) {
  return {Kind::Backward, stage, microbatch};
}

/// GPipe: all forwards, then all backwards, in microbatch order.
static void gpipe(PipelineSchedule &schedule) {
  for (int rank = 0; rank < schedule.ranks; ++rank) {
    auto &list = schedule.actions[rank];
    for (int mb = 0; mb < schedule.microbatches; ++mb)
      list.push_back(forward(rank, mb));
    for (int mb = 0; mb < schedule.microbatches; ++mb)
      list.push_back(backward(rank, mb));
  }
}

/// 1F1B (PipeDream-Flush, Megatron's default): P - 1 - r forwards to fill
/// the pipeline, then one forward and one backward in turn, then the
/// remaining backwards. Stage r holds at most min(P - r, M) microbatches.
static void oneForwardOneBackward(PipelineSchedule &schedule) {
  int P = schedule.ranks, M = schedule.microbatches;
  for (int rank = 0; rank < P; ++rank) {
    auto &list = schedule.actions[rank];
    int warmup = std::min(P - 1 - rank, M);
    for (int mb = 0; mb < warmup; ++mb)
      list.push_back(forward(rank, mb));
    for (int i = 0; i < M - warmup; ++i) {
      list.push_back(forward(rank, warmup + i));
      list.push_back(backward(rank, i));
    }
    for (int mb = M - warmup; mb < M; ++mb)
      list.push_back(backward(rank, mb));
  }
}

/// Megatron's interleaved 1F1B (2104.04473): rank r holds stages r, r + P,
/// ..., r + (V - 1) P. Forwards go through the chunks in groups of P
/// microbatches (chunk (k / P) % V of microbatch (k / PV) P + k % P for
/// the k-th), backwards through the chunks in reverse; (P - r - 1) 2 +
/// (V - 1) P forwards fill the pipeline (all of them when M = P).
static void interleaved(PipelineSchedule &schedule, int V) {
  int P = schedule.ranks, M = schedule.microbatches;
  int total = M * V;
  for (int rank = 0; rank < P; ++rank) {
    auto &list = schedule.actions[rank];
    auto nth = [&](int k, bool isForward) {
      int chunk = (k / P) % V;
      if (!isForward)
        chunk = V - 1 - chunk;
      int mb = (k / (P * V)) * P + k % P;
      int stage = chunk * P + rank;
      return isForward ? forward(stage, mb) : backward(stage, mb);
    };
    int warmup =
        M == P ? total : std::min((P - rank - 1) * 2 + (V - 1) * P, total);
    int backwards = 0;
    for (int k = 0; k < warmup; ++k)
      list.push_back(nth(k, true));
    for (int k = warmup; k < total; ++k) {
      list.push_back(nth(k, true));
      list.push_back(nth(backwards++, false));
    }
    while (backwards < total)
      list.push_back(nth(backwards++, false));
  }
}

/// ZB-H1 (2401.10241): the backward split into B (input gradient, on the
/// critical path) and W (weight gradient, deferred). Stage i runs the
/// triples (F x, B x - (P - 1 - i), W x - (P - 1)) for x = 0 .. M + P - 2,
/// leaving out those outside [0, M): the same warm-up forwards as 1F1B,
/// at most min(P, M) microbatches in flight on every stage, and a bubble of
/// (P - 1)(F + B - W) instead of 1F1B's (P - 1)(F + B + W).
static void zeroBubbleH1(PipelineSchedule &schedule) {
  int P = schedule.ranks, M = schedule.microbatches;
  for (int rank = 0; rank < P; ++rank) {
    auto &list = schedule.actions[rank];
    for (int x = 0; x < M + P - 1; ++x) {
      int b = x - (P - 1 - rank), w = x - (P - 1);
      if (x < M)
        list.push_back(forward(rank, x));
      if (b >= 0 && b < M)
        list.push_back(backward(rank, b));
      if (w >= 0 && w < M)
        list.push_back({Kind::Weight, rank, w});
    }
  }
}

std::optional<PipelineSchedule>
mlir::loom::makePipelineSchedule(llvm::StringRef kind, int ranks,
                                 int microbatches, int virtualStages,
                                 std::string &error) {
  if (ranks < 1 || microbatches < 1 || virtualStages < 1) {
    error = "needs at least one rank, microbatch and virtual stage (has " +
            std::to_string(ranks) + ", " + std::to_string(microbatches) + ", " +
            std::to_string(virtualStages) + ")";
    return std::nullopt;
  }
  bool isInterleaved = kind == "interleaved";
  if (!isInterleaved && virtualStages != 1) {
    error = "schedule '" + kind.str() +
            "' runs one stage per rank; virtual stages are for "
            "'interleaved'";
    return std::nullopt;
  }
  if (isInterleaved && virtualStages < 2) {
    error = "'interleaved' needs at least 2 virtual stages per rank (has " +
            std::to_string(virtualStages) + ")";
    return std::nullopt;
  }
  if (isInterleaved && microbatches % ranks != 0) {
    error = "'interleaved' runs microbatches in groups of the " +
            std::to_string(ranks) + " ranks, which do not divide " +
            std::to_string(microbatches) + " microbatches";
    return std::nullopt;
  }
  PipelineSchedule schedule;
  schedule.kind = kind.str();
  schedule.ranks = ranks;
  schedule.stages = ranks * virtualStages;
  schedule.microbatches = microbatches;
  schedule.actions.resize(ranks);
  if (kind == "gpipe")
    gpipe(schedule);
  else if (kind == "1f1b")
    oneForwardOneBackward(schedule);
  else if (isInterleaved)
    interleaved(schedule, virtualStages);
  else if (kind == "zb-h1")
    zeroBubbleH1(schedule);
  else {
    error = "unknown schedule '" + kind.str() +
            "' (gpipe, 1f1b, interleaved, zb-h1)";
    return std::nullopt;
  }
  return schedule;
}

void mlir::loom::addPipelineCommunication(PipelineSchedule &schedule) {
  int last = schedule.stages - 1;
  for (auto [rank, list] : llvm::enumerate(schedule.actions)) {
    std::vector<PipelineAction> withCommunication;
    auto remote = [&](int stage) {
      return stage >= 0 && stage <= last && schedule.rankOf(stage) != int(rank);
    };
    for (const PipelineAction &action : list) {
      int s = action.stage, mb = action.microbatch;
      if (action.kind == Kind::Forward && remote(s - 1))
        withCommunication.push_back({Kind::RecvActivation, s, mb});
      if (action.kind == Kind::Backward && remote(s + 1))
        withCommunication.push_back({Kind::RecvGradient, s, mb});
      withCommunication.push_back(action);
      if (action.kind == Kind::Forward && remote(s + 1))
        withCommunication.push_back({Kind::SendActivation, s, mb});
      if (action.kind == Kind::Backward && remote(s - 1))
        withCommunication.push_back({Kind::SendGradient, s, mb});
    }
    list = std::move(withCommunication);
  }
}

std::optional<PipelineSchedule>
mlir::loom::parsePipelineSchedule(llvm::StringRef text, int stages,
                                  int microbatches, std::string &error) {
  PipelineSchedule schedule;
  schedule.kind = "file";
  schedule.microbatches = microbatches;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  bool anyCommunication = false;
  for (auto [number, rawLine] : llvm::enumerate(lines)) {
    llvm::StringRef line = rawLine.split('#').first.trim();
    if (line.empty())
      continue;
    std::string where = "line " + std::to_string(number + 1);
    auto [head, body] = line.split(':');
    head = head.trim();
    unsigned rank;
    if (!head.consume_front("rank") || head.trim().getAsInteger(10, rank) ||
        rank != schedule.actions.size()) {
      error = where + ": expected 'rank " +
              std::to_string(schedule.actions.size()) + ": ACTIONS'";
      return std::nullopt;
    }
    std::vector<PipelineAction> &list = schedule.actions.emplace_back();
    llvm::SmallVector<llvm::StringRef> words;
    body.split(words, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef word : words) {
      std::optional<PipelineAction> action = parsePipelineAction(word.trim());
      if (!action) {
        error = where + ": '" + word.str() +
                "' is no action (F, B, W, SF, RF, SB or RB, then STAGE.MB)";
        return std::nullopt;
      }
      anyCommunication |= !action->isCompute();
      list.push_back(*action);
    }
  }
  schedule.ranks = int(schedule.actions.size());
  schedule.stages = stages > 0 ? stages : schedule.ranks;
  if (schedule.ranks == 0) {
    error = "the schedule lists no rank";
    return std::nullopt;
  }
  if (!anyCommunication)
    addPipelineCommunication(schedule);
  return schedule;
}

//===----------------------------------------------------------------------===//
// Proof
//===----------------------------------------------------------------------===//

namespace {

using ActionKey = std::tuple<int, int, int>; // kind, stage, microbatch

ActionKey keyOf(const PipelineAction &action) {
  return {int(action.kind), action.stage, action.microbatch};
}

/// The send a receive waits for.
PipelineAction matchingSend(const PipelineAction &recv) {
  if (recv.kind == Kind::RecvActivation)
    return {Kind::SendActivation, recv.stage - 1, recv.microbatch};
  return {Kind::SendGradient, recv.stage + 1, recv.microbatch};
}

/// Replays the ranks' lists with blocking receives and posted sends, with
/// `duration` per compute action and `latency` per message. Stops when
/// every rank is done or none can move.
struct Replay {
  const PipelineSchedule &schedule;
  std::vector<size_t> next;
  std::vector<double> time, busy;
  std::map<ActionKey, double> posted; // send -> when its data arrives
  std::vector<PipelineSimulation::Event> events;

  explicit Replay(const PipelineSchedule &schedule)
      : schedule(schedule), next(schedule.ranks, 0), time(schedule.ranks, 0.0),
        busy(schedule.ranks, 0.0) {}

  template <typename Duration> bool run(Duration duration, double latency) {
    bool moved = true;
    while (moved) {
      moved = false;
      for (int rank = 0; rank < schedule.ranks; ++rank) {
        const auto &list = schedule.actions[rank];
        while (next[rank] < list.size()) {
          const PipelineAction &action = list[next[rank]];
          double start = time[rank], end = start;
          switch (action.kind) {
          case Kind::RecvActivation:
          case Kind::RecvGradient: {
            auto sent = posted.find(keyOf(matchingSend(action)));
            if (sent == posted.end())
              goto blocked;
            end = std::max(start, sent->second);
            break;
          }
          case Kind::SendActivation:
          case Kind::SendGradient:
            posted[keyOf(action)] = start + latency;
            break;
          default:
            end = start + duration(action);
            busy[rank] += end - start;
            break;
          }
          time[rank] = end;
          events.push_back({rank, action, start, end});
          ++next[rank];
          moved = true;
        }
      blocked:;
      }
    }
    for (int rank = 0; rank < schedule.ranks; ++rank)
      if (next[rank] < schedule.actions[rank].size())
        return false;
    return true;
  }

  /// The ranks that wait on each other, as a sentence.
  std::string describeWait() const {
    int start = -1;
    for (int rank = 0; rank < schedule.ranks && start < 0; ++rank)
      if (next[rank] < schedule.actions[rank].size())
        start = rank;
    std::vector<int> path;
    std::vector<int> seen(schedule.ranks, -1);
    int rank = start;
    while (rank >= 0 && seen[rank] < 0) {
      seen[rank] = int(path.size());
      path.push_back(rank);
      const PipelineAction &waiting = schedule.actions[rank][next[rank]];
      int sender = schedule.rankOf(matchingSend(waiting).stage);
      rank = next[sender] < schedule.actions[sender].size() ? sender : -1;
    }
    std::string text = "deadlock: ";
    size_t first = rank >= 0 ? size_t(seen[rank]) : 0;
    for (size_t i = first; i < path.size(); ++i) {
      int r = path[i];
      const PipelineAction &waiting = schedule.actions[r][next[r]];
      PipelineAction send = matchingSend(waiting);
      int sender = schedule.rankOf(send.stage);
      if (i != first)
        text += ", which ";
      else
        text += "rank " + std::to_string(r) + " ";
      text += "waits at " + formatPipelineAction(waiting) + " (its action #" +
              std::to_string(next[r]) + ") for " + formatPipelineAction(send) +
              " from rank " + std::to_string(sender);
    }
    if (rank >= 0)
      text += ": the ranks wait on each other";
    return text;
  }
};

} // namespace

std::optional<std::string>
mlir::loom::proveSchedule(const PipelineSchedule &schedule) {
  int P = schedule.ranks, S = schedule.stages, M = schedule.microbatches;
  if (P < 1 || M < 1 || S < P || S % P != 0 ||
      int(schedule.actions.size()) != P)
    return "needs ranks dividing the stages and at least one microbatch (has " +
           std::to_string(P) + " ranks, " + std::to_string(S) + " stages, " +
           std::to_string(M) + " microbatches)";
  bool split = schedule.splitsBackward();
  // Where each action is: rank and position.
  std::map<ActionKey, std::pair<int, size_t>> where;
  for (int rank = 0; rank < P; ++rank) {
    for (auto [position, action] : llvm::enumerate(schedule.actions[rank])) {
      std::string name = formatPipelineAction(action);
      if (action.stage < 0 || action.stage >= S || action.microbatch < 0 ||
          action.microbatch >= M)
        return "rank " + std::to_string(rank) + " runs " + name +
               ", outside the " + std::to_string(S) + " stages and " +
               std::to_string(M) + " microbatches";
      if (schedule.rankOf(action.stage) != rank)
        return "rank " + std::to_string(rank) + " runs " + name +
               ", but stage " + std::to_string(action.stage) + " is rank " +
               std::to_string(schedule.rankOf(action.stage)) + "'s";
      bool noPeer = ((action.kind == Kind::SendActivation ||
                      action.kind == Kind::RecvGradient) &&
                     action.stage == S - 1) ||
                    ((action.kind == Kind::RecvActivation ||
                      action.kind == Kind::SendGradient) &&
                     action.stage == 0);
      if (noPeer)
        return "rank " + std::to_string(rank) + " runs " + name +
               ", but stage " + std::to_string(action.stage) +
               " has no neighbour there";
      if (!action.isCompute()) {
        int peer = action.kind == Kind::SendActivation ||
                           action.kind == Kind::RecvGradient
                       ? action.stage + 1
                       : action.stage - 1;
        if (schedule.rankOf(peer) == rank)
          return "rank " + std::to_string(rank) + " runs " + name +
                 ", but stages " + std::to_string(action.stage) + " and " +
                 std::to_string(peer) + " are both on it";
      }
      if (!where.emplace(keyOf(action), std::make_pair(rank, position)).second)
        return "rank " + std::to_string(rank) + " runs " + name + " twice";
    }
  }
  auto position = [&](PipelineAction action) -> std::optional<size_t> {
    auto it = where.find(keyOf(action));
    if (it == where.end())
      return std::nullopt;
    return it->second.second;
  };
  for (int stage = 0; stage < S; ++stage) {
    int rank = schedule.rankOf(stage);
    std::string onRank = " on rank " + std::to_string(rank);
    for (int mb = 0; mb < M; ++mb) {
      PipelineAction f = forward(stage, mb), b = backward(stage, mb),
                     w{Kind::Weight, stage, mb};
      std::optional<size_t> fAt = position(f), bAt = position(b),
                            wAt = position(w);
      if (!fAt || !bAt)
        return "rank " + std::to_string(rank) + " never runs " +
               formatPipelineAction(fAt ? b : f);
      if (split && !wAt)
        return "rank " + std::to_string(rank) + " never runs " +
               formatPipelineAction(w) +
               " (the schedule splits backwards into B and W)";
      if (*bAt < *fAt)
        return formatPipelineAction(b) + onRank + " runs before " +
               formatPipelineAction(f);
      if (wAt && *wAt < *bAt)
        return formatPipelineAction(w) + onRank + " runs before " +
               formatPipelineAction(b);
      // Inputs: the previous stage's activation, the next stage's gradient
      // (the loss's, on the last stage, comes from its own forward).
      auto needs = [&](PipelineAction consumer, std::optional<size_t> at,
                       PipelineAction local, PipelineAction recv,
                       int neighbour) -> std::optional<std::string> {
        if (neighbour < 0 || neighbour >= S)
          return std::nullopt;
        bool sameRank = schedule.rankOf(neighbour) == rank;
        PipelineAction input = sameRank ? local : recv;
        std::optional<size_t> inputAt = position(input);
        if (!inputAt || *inputAt > *at)
          return formatPipelineAction(consumer) + onRank +
                 (inputAt ? " runs before " : " has no ") +
                 formatPipelineAction(input);
        return std::nullopt;
      };
      if (auto problem = needs(f, fAt, forward(stage - 1, mb),
                               {Kind::RecvActivation, stage, mb}, stage - 1))
        return problem;
      if (auto problem = needs(b, bAt, backward(stage + 1, mb),
                               {Kind::RecvGradient, stage, mb}, stage + 1))
        return problem;
    }
  }
  // Every send meets one receive, after what it sends.
  for (const auto &[key, place] : where) {
    auto [kindValue, stage, mb] = key;
    auto kind = Kind(kindValue);
    std::string onRank = " on rank " + std::to_string(place.first);
    PipelineAction action{kind, stage, mb};
    if (kind == Kind::SendActivation || kind == Kind::SendGradient) {
      PipelineAction recv =
          kind == Kind::SendActivation
              ? PipelineAction{Kind::RecvActivation, stage + 1, mb}
              : PipelineAction{Kind::RecvGradient, stage - 1, mb};
      if (!position(recv))
        return formatPipelineAction(action) + onRank + " has no " +
               formatPipelineAction(recv) + " on rank " +
               std::to_string(schedule.rankOf(recv.stage));
      PipelineAction source = kind == Kind::SendActivation
                                  ? forward(stage, mb)
                                  : backward(stage, mb);
      if (*position(source) > place.second)
        return formatPipelineAction(action) + onRank + " runs before " +
               formatPipelineAction(source);
    }
    if (kind == Kind::RecvActivation || kind == Kind::RecvGradient) {
      PipelineAction send = matchingSend(action);
      if (!position(send))
        return formatPipelineAction(action) + onRank + " has no " +
               formatPipelineAction(send) + " on rank " +
               std::to_string(schedule.rankOf(send.stage));
    }
  }
  Replay replay(schedule);
  if (!replay.run([](const PipelineAction &) { return 1.0; }, 0.0))
    return replay.describeWait();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

PipelineStageCosts PipelineStageCosts::uniform(int stages, double forward,
                                               double backward, double weight) {
  PipelineStageCosts costs;
  costs.forward.assign(stages, forward);
  costs.backward.assign(stages, backward);
  costs.weight.assign(stages, weight);
  costs.activationBytes.assign(stages, 1.0);
  return costs;
}

namespace {

/// All ranks in one clock, for ranks that share `cores` processors: at
/// every moment the ranks that compute progress at min(1, cores / their
/// number) of their speed. Each step runs every rank as far as it can
/// without waiting, then advances the clock to the next completion or
/// arrival. (The schedule is proved: it completes.)
struct SharedReplay {
  const PipelineSchedule &schedule;
  int cores;
  double latency;
  std::vector<size_t> next;
  std::vector<double> busy, remaining, started, ready;
  std::vector<bool> computing;
  std::map<ActionKey, double> posted;
  std::vector<PipelineSimulation::Event> events;
  double now = 0;

  SharedReplay(const PipelineSchedule &schedule, int cores, double latency)
      : schedule(schedule), cores(cores), latency(latency),
        next(schedule.ranks, 0), busy(schedule.ranks, 0.0),
        remaining(schedule.ranks, 0.0), started(schedule.ranks, 0.0),
        ready(schedule.ranks, 0.0), computing(schedule.ranks, false) {}

  template <typename Duration> void run(Duration duration) {
    while (true) {
      // Every rank that is not computing goes as far as it can now (again
      // while one moves: a send may unblock a rank visited before it).
      double arrival = std::numeric_limits<double>::infinity();
      bool moved = true;
      while (moved) {
        moved = false;
        arrival = std::numeric_limits<double>::infinity();
        for (int rank = 0; rank < schedule.ranks; ++rank) {
          const auto &list = schedule.actions[rank];
          while (!computing[rank] && next[rank] < list.size()) {
            const PipelineAction &action = list[next[rank]];
            double start = std::max(now, ready[rank]);
            if (start > now) { // waiting for data that is on its way
              arrival = std::min(arrival, start);
              break;
            }
            if (action.isCompute()) {
              computing[rank] = true;
              remaining[rank] = duration(action);
              started[rank] = now;
              moved = true;
              break;
            }
            if (action.kind == Kind::SendActivation ||
                action.kind == Kind::SendGradient) {
              posted[keyOf(action)] = now + latency;
            } else {
              auto sent = posted.find(keyOf(matchingSend(action)));
              if (sent == posted.end())
                break;
              if (sent->second > now) {
                ready[rank] = sent->second;
                arrival = std::min(arrival, sent->second);
                break;
              }
            }
            events.push_back({rank, action, now, now});
            ++next[rank];
            moved = true;
          }
        }
      }
      int active = int(std::count(computing.begin(), computing.end(), true));
      if (active == 0 && arrival == std::numeric_limits<double>::infinity())
        return;
      double rate = active > cores ? double(cores) / active : 1.0;
      double step = arrival - now;
      for (int rank = 0; rank < schedule.ranks; ++rank)
        if (computing[rank])
          step = std::min(step, remaining[rank] / rate);
      now += step;
      for (int rank = 0; rank < schedule.ranks; ++rank) {
        if (!computing[rank])
          continue;
        remaining[rank] -= step * rate;
        if (remaining[rank] > 1e-12 * std::max(1.0, now))
          continue;
        computing[rank] = false;
        busy[rank] += now - started[rank];
        events.push_back(
            {rank, schedule.actions[rank][next[rank]], started[rank], now});
        ++next[rank];
      }
    }
  }
};

} // namespace

PipelineSimulation
mlir::loom::simulateSchedule(const PipelineSchedule &schedule,
                             const PipelineStageCosts &costs) {
  bool split = schedule.splitsBackward();
  auto duration = [&](const PipelineAction &action) {
    int s = action.stage;
    switch (action.kind) {
    case Kind::Forward:
      return costs.forward[s];
    case Kind::Backward:
      return costs.backward[s] + (split ? 0.0 : costs.weight[s]);
    default:
      return costs.weight[s];
    }
  };
  PipelineSimulation result;
  if (costs.cores > 0 && costs.cores < schedule.ranks) {
    SharedReplay replay(schedule, costs.cores, costs.latency);
    replay.run(duration);
    result.events = std::move(replay.events);
    result.busy = replay.busy;
    result.stepTime = replay.now;
  } else {
    Replay replay(schedule);
    replay.run(duration, costs.latency);
    result.events = std::move(replay.events);
    result.busy = replay.busy;
    for (double end : replay.time)
      result.stepTime = std::max(result.stepTime, end);
  }
  for (double busy : result.busy) {
    double bubble = result.stepTime > 0 ? 1.0 - busy / result.stepTime : 0.0;
    result.bubble.push_back(bubble);
    result.bubbleFraction += bubble / schedule.ranks;
  }
  std::vector<double> first(schedule.ranks, -1), last(schedule.ranks, 0);
  for (const PipelineSimulation::Event &event : result.events) {
    if (event.action.kind != Kind::Forward &&
        event.action.kind != Kind::Backward &&
        event.action.kind != Kind::Weight)
      continue;
    if (first[event.rank] < 0)
      first[event.rank] = event.start;
    last[event.rank] = std::max(last[event.rank], event.end);
  }
  for (int rank = 0; rank < schedule.ranks; ++rank) {
    double window = first[rank] < 0 ? 0.0 : last[rank] - first[rank];
    double bubble = window > 0 ? 1.0 - result.busy[rank] / window : 0.0;
    result.actionBubble.push_back(bubble);
    result.actionBubbleFraction += bubble / schedule.ranks;
  }
  // A microbatch's activations live from its forward until its backward
  // (its weight gradient, when split) is done.
  result.peakMicrobatches.assign(schedule.stages, 0);
  std::vector<int> held(schedule.stages, 0);
  for (const std::vector<PipelineAction> &list : schedule.actions)
    for (const PipelineAction &action : list) {
      int s = action.stage;
      if (action.kind == Kind::Forward)
        result.peakMicrobatches[s] =
            std::max(result.peakMicrobatches[s], ++held[s]);
      if (action.kind == (split ? Kind::Weight : Kind::Backward))
        --held[s];
    }
  for (int s = 0; s < schedule.stages; ++s)
    result.peakActivationBytes.push_back(result.peakMicrobatches[s] *
                                         costs.activationBytes[s]);
  return result;
}
