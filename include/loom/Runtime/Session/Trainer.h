//===- Trainer.h - The training loop ----------------------------*- C++ -*-===//
//
// Runs a training-step plan (one run = one optimizer step) over a data set
// on every rank of the plan: batches, metrics, progress, checkpoints, NaN
// checks, and the trained state at the end. Each rank runs its own program
// and reads the rows of the step's global batch that the plan assigns its
// inputs (Binding::batchOffset). See docs/design/training.md.
//
// Plain C++17 on the runtime: no LLVM/MLIR. Writing an ONNX model (--save)
// needs the compiler, so the caller passes it in as a callback.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_TRAINER_H
#define LOOM_RUNTIME_SESSION_TRAINER_H

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"
#include "loom/Runtime/Session/Launcher.h"
#include "loom/Runtime/TensorIO.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loomrt {

/// Writes the trained model given every state weight by name; returns how
/// many of the model's initializers it replaced.
using SaveModelFn = std::function<StatusOr<size_t>(
    const std::map<std::string, HostTensor> &values)>;

struct TrainOptions {
  /// Rows of the global batch per step (all ranks, all microbatches
  /// together).
  int64_t batchSize = 1;
  /// Total steps of the run; a resumed run continues up to this count.
  int64_t steps = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  std::string loss = "cross_entropy";
  /// --metrics FILE: one JSON line per step.
  std::string metricsPath;
  /// --save OUT.onnx: after the last step `saveModel` writes it (called once,
  /// in the process that runs rank 0, with every state tensor whole: each
  /// weight taken from the lowest rank that holds it, the slices of a
  /// sharded tensor assembled).
  std::string savePath;
  SaveModelFn saveModel;
  /// Every state tensor (parameters, their bf16 copies, optimizer state)
  /// as DIR/<name>.npy after the last step (--save-weights), whole: written
  /// by the lowest rank that holds a weight of it, which gathers the slices
  /// of a sharded tensor from the ranks that hold them.
  std::string saveWeightsDir;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::string resumeDir;
  /// Profile the last step (--report).
  bool profileLastStep = false;
  /// --report-json FILE: after the last step, every rank's usage
  /// (Session/Report.h), written by the process that runs rank 0.
  std::string reportJsonPath;
  /// --trace FILE.json: the last step of every rank as a Chrome/Perfetto
  /// trace (Session/Trace.h), written by the process that runs rank 0.
  std::string tracePath;
  /// No progress lines (a second run that only checks the first, as
  /// `loom-run --verify`'s single-device run).
  bool quiet = false;
  /// Hand every state tensor back whole after the last step
  /// (TrainResult::state), gathered to rank 0 as --save gathers it.
  bool keepState = false;
  /// How the ranks run (--ranks, mpirun, --device, --comm-timeout, ...);
  /// launch.model names the plan in messages.
  LaunchOptions launch;
};

/// The whole data set: first dimension = samples.
struct Dataset {
  std::vector<std::pair<std::string, HostTensor>> named;
  std::vector<HostTensor> positional;
  std::vector<std::string> positionalPaths;
  /// Absent for loss `none`.
  std::optional<HostTensor> labels;
};

/// A rank's executor report after its last step.
struct RankReport {
  int rank = 0;
  RunReport report;
};

/// What a training run hands back, when it succeeded.
struct TrainResult {
  /// The report of every rank this process ran, in rank order.
  std::vector<RankReport> reports;
  /// The loss of every step this run took, in order (in the process that
  /// runs the rank whose loss is reported).
  std::vector<double> losses;
  /// With TrainOptions::keepState, every state tensor whole after the last
  /// step, by name (in the process that runs rank 0).
  std::map<std::string, HostTensor> state;
};

/// Trains `plan` on `data`; returns the process exit code, having printed
/// progress, the results and any error (prefixed `loom-run: error: `).
/// `result` receives what the run hands back when training succeeded.
int runTraining(std::shared_ptr<const Plan> plan, const Dataset &data,
                const TrainOptions &options, TrainResult &result);
/// The same, keeping only the reports.
int runTraining(std::shared_ptr<const Plan> plan, const Dataset &data,
                const TrainOptions &options, std::vector<RankReport> &reports);

} // namespace loomrt

#endif // LOOM_RUNTIME_SESSION_TRAINER_H
