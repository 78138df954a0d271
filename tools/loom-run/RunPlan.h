//===- RunPlan.h - loom-run: running a plan on one or N ranks --*- C++ -*-===//
//
// Inference runs (everything but --train): bind the input files, run the
// plan the requested number of times, write or summarize the outputs. A plan
// with several ranks runs as threads in this process (--ranks N) or as one
// rank per process under mpirun; see docs/design/communication.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_RUNPLAN_H
#define LOOM_TOOLS_LOOM_RUN_RUNPLAN_H

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom {

struct RunOptions {
  std::string model;
  /// --input NAME=FILE; `{rank}` in FILE is replaced by the rank number.
  std::vector<std::pair<std::string, std::string>> namedInputs;
  std::vector<std::string> positionalInputs;
  std::string outputDir;
  bool report = false;
  int iterations = 1;
  int warmup = 0;
  /// --ranks N: run N thread ranks; 0 = one rank, or MPI under mpirun.
  int ranks = 0;
  std::chrono::milliseconds commTimeout{std::chrono::seconds(60)};
  bool checkCollectives = false;
  /// --test-kill-rank R[:K]: rank R dies before its instruction K.
  int killRank = -1;
  int64_t killAt = 0;
  /// --device, --gpu, --allow-tf32.
  runtime::ExecutorOptions executor;
};

/// True when this process was started by mpirun (Open MPI or a PMI launcher).
bool launchedByMPI();

/// `path` with every `{rank}` replaced by `rank`.
std::string substituteRank(const std::string &path, int rank);

/// The file name --output-dir and --save-weights give a tensor named
/// `name`: `name` with bytes other than letters, digits, '.', '_' and '-'
/// written %XX (an ONNX name may hold '/'), then ".npy". Distinct names
/// give distinct files (on a case-sensitive file system). ASCII only,
/// whatever the locale.
std::string npyFileName(const std::string &name);

/// Runs `plan`; returns the exit code, having printed outputs or errors.
int runPlan(std::shared_ptr<const runtime::Plan> plan,
            const RunOptions &options);

/// Planned vs measured memory and time per kernel.
void printReport(const runtime::RunReport &report, int iterations);

} // namespace loom

#endif // LOOM_TOOLS_LOOM_RUN_RUNPLAN_H
