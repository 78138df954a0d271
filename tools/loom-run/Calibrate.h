//===- Calibrate.h - loom-run --calibrate -----------------------*- C++ -*-===//
//
// Measures the machine loom-run runs on into a cluster description for the
// planner (docs/design/planner.md, "Calibration"): GEMM rates by size and
// precision, memory bandwidth and a kernel's fixed cost, measured with every
// rank busy at once (ranks that share a machine slow each other down), and
// the all-reduce's latency and bandwidth between the ranks. It runs small
// plans built in memory on the runtime's own kernels and engines, so the
// figures are those of the kernels a plan runs. Plain C++ on the runtime:
// a runtime-only build (a GPU machine) calibrates too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_CALIBRATE_H
#define LOOM_TOOLS_LOOM_RUN_CALIBRATE_H

#include "loom/Runtime/Session/Launcher.h"

#include <string>

namespace loomrun {

/// Runs the measurements on `ranks` ranks (threads, or under mpirun one per
/// process) and writes the cluster file to `outPath`; returns the exit
/// code, having printed the figures.
int calibrate(const std::string &outPath, int ranks,
              const loomrt::LaunchOptions &launch);

} // namespace loomrun

#endif // LOOM_TOOLS_LOOM_RUN_CALIBRATE_H
