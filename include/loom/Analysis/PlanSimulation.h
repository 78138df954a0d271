//===- PlanSimulation.h - Timing a runtime plan on a cluster ----*- C++ -*-===//
//
// The planner predicts a layout's step time by replaying the plan the
// compiler built for it, instruction by instruction, on a described cluster
// (Cluster.h), with the overlap the executor really has
// (docs/design/communication.md, "Overlap"):
//   - a rank runs its kernels one after the other;
//   - it posts a collective, send or receive and goes on; the transfer
//     starts when every member of its group has posted it (a send when its
//     receive is posted too) and the group's previous transfer is done
//     (one progress engine per communicator), and lasts as the cluster's
//     link model says;
//   - before each instruction the rank waits for the transfers in flight
//     whose bytes the instruction touches (it reads what they write, or
//     writes what they read or write), and at the end of the step for all.
// The step time is the slowest rank's. Plain data in, plain data out: the
// planner, `loom-plan --simulate` and the accuracy benchmark share it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_PLANSIMULATION_H
#define LOOM_ANALYSIS_PLANSIMULATION_H

#include "loom/Analysis/Cluster.h"
#include "loom/Runtime/InstructionWork.h"
#include "loom/Runtime/Plan.h"

#include <string>
#include <vector>

namespace mlir {
namespace loom {

/// The work the replay times each kernel by (the runtime's count, which
/// calibration measures kernels against).
using loomrt::estimateInstructionWork;
using loomrt::InstructionWork;

struct PlanSimulationEvent {
  int rank;
  /// The kernel or collective, e.g. `matmul`, `all_reduce`.
  std::string name;
  /// The pipeline action (`F1.3`), if any.
  std::string action;
  bool communication;
  double start, end;
  /// The kernel's index in its rank's program (-1 for a transfer).
  int instruction = -1;
};

struct PlanSimulation {
  /// The slowest rank's time from the step's start to its last wait.
  double stepSeconds = 0;
  struct Rank {
    double stepSeconds = 0;
    /// Time in kernels, and blocked waiting for transfers.
    double computeSeconds = 0;
    double waitSeconds = 0;
    /// Megatron-counted FLOPs of the rank's kernels.
    double modelFlops = 0;
    /// Seconds spent transferring, by collective kind (kindName).
    std::map<std::string, double> commSeconds;
  };
  std::vector<Rank> ranks;
  /// With `recordEvents`: every kernel and transfer.
  std::vector<PlanSimulationEvent> events;
  /// Set when the replay cannot finish (a transfer no rank meets).
  std::string error;
};

/// The arena bytes in use while each instruction of `program` runs: every
/// tensor from the instruction that writes it (inputs from the start) to
/// the last that reads it, the arena's slots reused as the memory planner
/// reused them. Its maximum is at most the planned arena.
std::vector<uint64_t> liveArenaBytes(const loomrt::RankProgram &program);

/// Replays `plan` on `cluster` (rank r on device r). The plan must have
/// passed loomrt::checkCommunication, or hold the programs of
/// representatives only (buildRepresentativePlan): ranks without a program
/// are then taken to post their transfers when the representatives post
/// theirs, as copies of them do.
PlanSimulation simulatePlan(const loomrt::Plan &plan,
                            const ClusterSpec &cluster,
                            bool recordEvents = false);

/// A rank's program as the instructions it runs in order, owned by a plan
/// (the same instruction may run many times).
using InstructionSequence = std::vector<const loomrt::Instruction *>;

/// Where a program's instruction was copied from: it runs for microbatch
/// `microbatch` what the plan's program ran for microbatch `from` (-1: the
/// plan's own).
struct ProgramCopy {
  int microbatch = -1;
  int from = -1;
};

/// Replays `programs` (one per rank of `plan`, whose groups they use; empty
/// for ranks that run copies of a representative's) as simulatePlan
/// replays the plan's own. With `copies` (per rank, per instruction), an
/// instruction waits for no transfer posted by a copy made for another
/// microbatch: the plan copied from placed its microbatches' buffers for
/// its own order of them, which the copies do not follow.
PlanSimulation
simulatePrograms(const loomrt::Plan &plan,
                 const std::vector<InstructionSequence> &programs,
                 const ClusterSpec &cluster, bool recordEvents = false,
                 const std::vector<std::vector<ProgramCopy>> *copies = nullptr);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_PLANSIMULATION_H
