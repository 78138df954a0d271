//===- Train.h - loom-run --train: the training loop ------------*- C++ -*-===//
//
// Runs a training-step plan (made with ModelCompileOptions::train) over a
// data set: batches, metrics, progress, checkpoints, NaN checks. Plain C++ on
// the runtime; only --save needs the compiler (it writes ONNX).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_TRAIN_H
#define LOOM_TOOLS_LOOM_RUN_TRAIN_H

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom {

struct TrainOptions {
  /// Rows per step (all microbatches together).
  int64_t batchSize = 1;
  /// Total steps of the run; a resumed run continues up to this count.
  int64_t steps = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  std::string loss = "cross_entropy";
  std::string modelPath;
  std::string metricsPath;
  std::string savePath;
  /// Every state weight (parameters, their bf16 copies, optimizer state)
  /// as DIR/<name>.npy after the last step (--save-weights).
  std::string saveWeightsDir;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::string resumeDir;
  /// Profile the last step (--report).
  bool profileLastStep = false;
  /// Where the steps run (--device, --gpu, --allow-tf32).
  runtime::ExecutorOptions executor;
};

/// The whole data set: first dimension = samples.
struct Dataset {
  std::vector<std::pair<std::string, runtime::HostTensor>> named;
  std::vector<runtime::HostTensor> positional;
  std::vector<std::string> positionalPaths;
  /// Absent for loss `none`.
  std::optional<runtime::HostTensor> labels;
};

/// Trains; returns the process exit code, having printed any error.
/// `report` receives the executor's report after the last step.
int runTraining(std::shared_ptr<const runtime::Plan> plan, const Dataset &data,
                const TrainOptions &options, runtime::RunReport &report);

} // namespace loom

#endif // LOOM_TOOLS_LOOM_RUN_TRAIN_H
