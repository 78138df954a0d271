//===- Launcher.h - Starting the ranks of a plan ----------------*- C++ -*-===//
//
// A plan with N ranks runs as N threads of one process (`--ranks N`: the
// threads engine) or as one rank per process under mpirun (the MPI engine,
// or NCCL for GPUs). launchRanks starts them, gives each a communicator and
// its executor options, runs a per-rank body and collects how each rank
// ended. A rank whose body fails aborts the communicator with its message,
// so that the others stop at their next communication instead of waiting
// for a rank that is gone (docs/design/communication.md).
//
// Plain C++17 on the runtime: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_LAUNCHER_H
#define LOOM_RUNTIME_SESSION_LAUNCHER_H

#include "loom/Runtime/Communicator.h"
#include "loom/Runtime/Device.h"
#include "loom/Runtime/Plan.h"
#include "loom/Runtime/Status.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

class Executor;

/// True when this process was started by mpirun (Open MPI or a PMI launcher).
bool launchedByMPI();

/// `path` with every `{rank}` replaced by `rank`.
std::string substituteRank(const std::string &path, int rank);

struct LaunchOptions {
  /// What the plan is called in messages (its file).
  std::string model;
  /// --ranks N: run the N ranks as threads of this process. 0: a one-rank
  /// plan in this process, or one rank per process under mpirun.
  int threadRanks = 0;
  /// --comm-timeout, --check-collectives.
  CommOptions comm;
  /// Where the ranks run (--device, --gpu, ...). Each rank gets a copy: its
  /// GPU under mpirun, `{rank}` in `tuningFile` replaced by the rank.
  ExecutorOptions executor;
  /// --test-kill-rank R[:K]: rank R dies before its instruction K (see
  /// armTestKill).
  int killRank = -1;
  int64_t killAt = 0;
  /// The plan the ranks run, for the checks of an engine (NCCL's transfer
  /// order); none when null.
  const Plan *plan = nullptr;
};

/// What one rank's body gets.
struct RankContext {
  int rank = 0;
  /// The plan's rank count.
  int size = 1;
  /// One rank per process (mpirun): this process runs this rank alone.
  bool processPerRank = false;
  /// The communicator to create the rank's executor with
  /// (Executor::create): over all ranks, moving device buffers when the
  /// executor runs on a GPU.
  std::shared_ptr<Communicator> world;
  /// A communicator over the same ranks that moves host memory, for the
  /// body's own exchanges between runs (barrier, gathering weights); it may
  /// be `world` itself. Every rank must make the same calls on it in the
  /// same order, and never while a run of the executor is in flight.
  std::shared_ptr<Communicator> host;
  /// The options for this rank's executor.
  ExecutorOptions executor;
  /// Set by the --test-kill-rank hook (armTestKill) when the rank stops as
  /// if it had died: the others are then not told, and must notice.
  bool died = false;

  /// "rank R: " with several ranks, "" with one: the prefix of the rank's
  /// messages.
  std::string prefix() const;
};

/// How one rank run by this process ended.
struct RankOutcome {
  int rank = 0;
  Status status;
  /// It stopped through --test-kill-rank: it did not fail, it died.
  bool died = false;
};

struct LaunchResult {
  /// The plan's rank count.
  int ranks = 1;
  /// One rank per process (mpirun): `outcomes` holds this process's rank.
  bool processPerRank = false;
  /// The ranks this process ran, in rank order.
  std::vector<RankOutcome> outcomes;

  bool ok() const;
};

/// The body a rank runs; its error (unless the rank died) aborts the others.
using RankBody = std::function<Status(RankContext &)>;

/// Runs `body` for each of the `ranks` ranks of a plan: as threads with
/// `options.threadRanks` (which must equal `ranks`), or for the one rank of
/// this process under mpirun. A rank whose body fails (or whose
/// communicator cannot be set up for its device) aborts the others through
/// the communicator. Returns each local rank's outcome, or an error when no
/// rank could start (a wrong rank count, no GPU for --device cuda, a
/// communicator that could not be made); the error's message is written for
/// `loom-run` users and names options.model.
StatusOr<LaunchResult> launchRanks(int ranks, const LaunchOptions &options,
                                   const RankBody &body);

/// --test-kill-rank: when `context` is the rank options.killRank names,
/// makes `executor` stop before its instruction options.killAt as if the
/// rank had died: a process kills itself (SIGKILL, as a crash would); a
/// thread's run fails with "killed before instruction K (--test-kill-rank)"
/// and the rank is marked `died`, so that the others are not told.
void armTestKill(Executor &executor, const LaunchOptions &options,
                 RankContext &context);

/// Waits until every rank has arrived (a small all-reduce over
/// context.host); an error when a rank failed or the wait timed out. Nothing
/// with one rank.
Status barrier(const RankContext &context);

} // namespace loomrt

#endif // LOOM_RUNTIME_SESSION_LAUNCHER_H
