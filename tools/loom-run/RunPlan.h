//===- RunPlan.h - loom-run: running a plan on one or N ranks --*- C++ -*-===//
//
// Inference runs (everything but --train): bind the input files, run the
// plan the requested number of times, write or summarize the outputs. A plan
// with several ranks runs as threads in this process (--ranks N) or as one
// rank per process under mpirun, started by the runtime's launcher
// (loom/Runtime/Session/Launcher.h); see docs/design/communication.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_RUNPLAN_H
#define LOOM_TOOLS_LOOM_RUN_RUNPLAN_H

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"
#include "loom/Runtime/Session/Launcher.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loomrun {

struct RunOptions {
  std::string model;
  /// --input NAME=FILE; `{rank}` in FILE is replaced by the rank number.
  std::vector<std::pair<std::string, std::string>> namedInputs;
  std::vector<std::string> positionalInputs;
  std::string outputDir;
  bool report = false;
  int iterations = 1;
  int warmup = 0;
  /// How the ranks run: --ranks, --comm-timeout, --check-collectives,
  /// --test-kill-rank, and the executors' --device, --gpu, --allow-tf32, ...
  /// (launch.model is set from `model`).
  loomrt::LaunchOptions launch;
};

/// Runs `plan`; returns the exit code, having printed outputs or errors.
int runPlan(std::shared_ptr<const loomrt::Plan> plan,
            const RunOptions &options);

/// Planned vs measured memory and time per kernel.
void printReport(const loomrt::RunReport &report, int iterations);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOM_RUN_RUNPLAN_H
