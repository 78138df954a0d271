//===- Trace.h - A run as a Chrome/Perfetto trace ---------------*- C++ -*-===//
//
// `loom-run --trace FILE.json`: the last step of every rank in the Chrome
// trace event format (chrome://tracing, ui.perfetto.dev): one process per
// rank ("rank R"), with a "compute" track of its kernels and a
// "communication" track of its collectives, each a complete event ("ph":
// "X") named by the instruction's kernel and its ONNX node, e.g.
// "all_reduce /h.0/mlp/c_fc/MatMul"; times in microseconds from the
// earliest event of any rank. A collective lasts from its posting to its
// completion, so its slice overlapping kernels on the compute track is
// communication hidden behind compute. args: the instruction's index in
// its rank's program. In a pipeline, a third track, "pipeline", has one
// slice per schedule action the rank ran, named like `F s1 mb3` (the
// forward of stage 1 for microbatch 3; B backward, W weight gradients),
// from its first kernel's start to its last kernel's end.
//
// Plain C++17 on the runtime: no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_TRACE_H
#define LOOM_RUNTIME_SESSION_TRACE_H

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Plan.h"

#include <string>
#include <vector>

namespace loomrt {

/// The trace of `events[r]`, the traced run of rank r of `plan`.
std::string formatTrace(const Plan &plan,
                        const std::vector<std::vector<TraceEvent>> &events);

/// A pipeline rank's measured bubble in its traced run `events`: the share
/// of the time from its first action's first kernel to its last action's
/// last kernel that no kernel of an action ran (waiting for neighbours,
/// and the work outside the schedule's actions in between). -1 when the
/// rank's program has no actions (no pipeline) or nothing was traced.
double measuredBubble(const Plan &plan, int rank,
                      const std::vector<TraceEvent> &events);

/// `F1.3` as a trace names it: `F s1 mb3`.
std::string describeAction(const std::string &action);

} // namespace loomrt

#endif // LOOM_RUNTIME_SESSION_TRACE_H
