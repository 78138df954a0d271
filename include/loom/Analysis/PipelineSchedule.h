//===- PipelineSchedule.h - Pipeline schedules as data ----------*- C++ -*-===//
//
// A pipeline schedule is, for every rank, the ordered list of what it does:
// the forward (F), backward (B) and weight-gradient (W) passes of its stages
// for each microbatch, and the sends and receives that move activations
// down the pipeline and gradients up it (docs/design/pipeline.md). The
// generators write the classic schedules (GPipe, 1F1B, Megatron's
// interleaved 1F1B, ZB-H1 of 2401.10241); `proveSchedule` checks a list
// (generated or a user's) before anything runs, and `simulateSchedule`
// replays it with costs for the step time, the bubble and the activations
// each stage holds. Plain C++: the passes, the planner and the runtime's
// trace share it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_PIPELINESCHEDULE_H
#define LOOM_ANALYSIS_PIPELINESCHEDULE_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace loom {

enum class PipelineActionKind {
  Forward,        // F: the stage's forward pass of the microbatch
  Backward,       // B: its backward (input gradient; also the weights'
                  //    unless the schedule has W actions)
  Weight,         // W: its weight gradient (zero-bubble schedules)
  SendActivation, // SF: the stage's output to the next stage's rank
  RecvActivation, // RF: the stage's input from the previous stage's rank
  SendGradient,   // SB: the stage's input gradient to the previous stage
  RecvGradient,   // RB: the stage's output gradient from the next stage
};

struct PipelineAction {
  PipelineActionKind kind;
  int stage;
  int microbatch;

  bool isCompute() const {
    return kind == PipelineActionKind::Forward ||
           kind == PipelineActionKind::Backward ||
           kind == PipelineActionKind::Weight;
  }
  bool operator==(const PipelineAction &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch;
  }
};

/// `F1.3`: the kind's letters, the stage, a dot, the microbatch.
std::string formatPipelineAction(const PipelineAction &action);
/// The inverse of formatPipelineAction; nullopt for anything else.
std::optional<PipelineAction> parsePipelineAction(llvm::StringRef text);

struct PipelineSchedule {
  /// The generator's name (`gpipe`, `1f1b`, `interleaved`, `zb-h1`) or
  /// `file`.
  std::string kind;
  int ranks = 0;
  /// Stages are placed round-robin: stage s runs on rank s % ranks (with
  /// V = stages / ranks virtual stages per rank, Megatron's loop order).
  int stages = 0;
  int microbatches = 0;
  /// Per rank, in order.
  std::vector<std::vector<PipelineAction>> actions;

  int rankOf(int stage) const { return stage % ranks; }
  /// Whether the backward passes are split into B and W.
  bool splitsBackward() const;
};

/// The compute actions of generator `kind` for `ranks` ranks, `microbatches`
/// microbatches and `virtualStages` stages per rank (1 except for
/// `interleaved`), or an error message. Communication is added by
/// addPipelineCommunication.
std::optional<PipelineSchedule>
makePipelineSchedule(llvm::StringRef kind, int ranks, int microbatches,
                     int virtualStages, std::string &error);

/// Adds, around every compute action whose neighbour stage is on another
/// rank, the receive before it (RF before F, RB before B) and the send
/// after it (SF after F, SB after B).
void addPipelineCommunication(PipelineSchedule &schedule);

/// Reads a user's schedule: one line per rank, `rank R: A A A ...` with
/// actions as formatPipelineAction writes them (blank lines and `#`
/// comments ignored). Sends and receives may be given or left to
/// addPipelineCommunication (all or none).
std::optional<PipelineSchedule> parsePipelineSchedule(llvm::StringRef text,
                                                      int stages,
                                                      int microbatches,
                                                      std::string &error);

/// Proves that `schedule` runs: every stage's F, B (and W, if any) of every
/// microbatch exactly once on the stage's rank, in the order F, B, W; every
/// send meets one receive on the neighbour's rank; and a replay of all
/// ranks with blocking receives (sends are posted and do not wait)
/// completes. Returns the first problem, naming the ranks and actions that
/// wait on each other; nullopt when it is proved.
std::optional<std::string> proveSchedule(const PipelineSchedule &schedule);

/// Per stage, the time of one microbatch's F, B and W (B includes W when the
/// schedule has no W actions) and the bytes of activations one microbatch
/// keeps from its F until its backward is done; `latency` for every send.
struct PipelineStageCosts {
  std::vector<double> forward, backward, weight, activationBytes;
  double latency = 0;
  /// The processors the ranks share: 0 when each rank has its own (a GPU
  /// or a node each). With fewer than the ranks (thread ranks or local MPI
  /// processes on one machine), ranks that compute at once share them
  /// equally, as the operating system time-slices them: each runs at
  /// `cores / computing` of its speed while more than `cores` compute.
  int cores = 0;

  /// Every stage: F = `forward`, B = `backward`, W = `weight`, one byte.
  static PipelineStageCosts uniform(int stages, double forward, double backward,
                                    double weight);
};

struct PipelineSimulation {
  struct Event {
    int rank;
    PipelineAction action;
    double start, end;
  };
  double stepTime = 0;
  /// Per rank: compute time, and 1 - busy / stepTime.
  std::vector<double> busy, bubble;
  /// The mean of the ranks' bubbles.
  double bubbleFraction = 0;
  /// Per rank: 1 - busy / the time from its first compute action's start
  /// to its last one's end, which is how a trace measures a rank's bubble
  /// (`--report-json`'s bubble_fraction: a rank's clock starts with its
  /// own work), and their mean.
  std::vector<double> actionBubble;
  double actionBubbleFraction = 0;
  /// Per stage: the most microbatches whose forward has run and whose
  /// backward (W when split) has not, and their activation bytes.
  std::vector<int> peakMicrobatches;
  std::vector<double> peakActivationBytes;
  std::vector<Event> events;
};

/// Replays a proved schedule: each rank runs its actions in order, a
/// compute action as soon as the rank is free, a receive when the matching
/// send has been posted plus the latency; with `costs.cores`, compute
/// actions that overlap share the cores (an action's span is then its
/// wall time, as a trace measures it).
PipelineSimulation simulateSchedule(const PipelineSchedule &schedule,
                                    const PipelineStageCosts &costs);

/// The schedule as a table: one line per rank, its actions in order.
std::string formatPipelineSchedule(const PipelineSchedule &schedule);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_PIPELINESCHEDULE_H
