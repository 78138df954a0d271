//===- RunPlan.cpp - loom-run: running a plan on one or N ranks -----------===//
//
// Every rank does the same thing: create its executor, read its inputs, run,
// and write or summarize its outputs. The runtime's launcher starts the
// ranks; a rank that fails aborts the others through the communicator, so a
// multi-rank run ends with every rank's error instead of waiting for a rank
// that is gone.
//
//===----------------------------------------------------------------------===//

#include "RunPlan.h"

#include "loom/Runtime/Session/Checkpoint.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <sys/stat.h>

using namespace loomrun;
using namespace loomrt;

namespace {

std::string formatBytes(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f MiB (%llu bytes)",
                double(bytes) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(bytes));
  return text;
}

/// min / max / mean of a float output, for the summary without --output-dir.
std::string summarize(const HostTensor &tensor) {
  std::string text =
      tensor.name + ": " + dtypeName(tensor.dtype) + shapeString(tensor.shape);
  if (tensor.dtype != DType::F32 || tensor.elements() == 0)
    return text;
  const float *data = reinterpret_cast<const float *>(tensor.data.data());
  double lo = data[0], hi = data[0], sum = 0;
  for (int64_t i = 0; i < tensor.elements(); ++i) {
    lo = std::fmin(lo, data[i]);
    hi = std::fmax(hi, data[i]);
    sum += data[i];
  }
  char stats[128];
  std::snprintf(stats, sizeof(stats), "  min %.6g  max %.6g  mean %.6g", lo, hi,
                sum / double(tensor.elements()));
  return text + stats;
}

/// Binds the input files to `run`'s inputs: positional files in order, then
/// named ones.
Status bindInputs(Executor &run, const RunOptions &options, int rank) {
  const RankProgram &program = run.program();
  if (options.positionalInputs.size() > program.inputs.size())
    return Status::error(std::to_string(options.positionalInputs.size()) +
                         " input files given but the model has " +
                         std::to_string(program.inputs.size()) + " inputs");
  std::vector<bool> bound(program.inputs.size(), false);
  for (size_t i = 0; i < options.positionalInputs.size(); ++i) {
    std::string path = substituteRank(options.positionalInputs[i], rank);
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return tensor.status();
    if (Status status = run.setInput(program.inputs[i].name, *tensor); !status)
      return status.withContext(path);
    bound[i] = true;
  }
  for (const auto &[name, file] : options.namedInputs) {
    for (size_t j = 0; j < program.inputs.size(); ++j) {
      if (program.inputs[j].name != name)
        continue;
      if (bound[j])
        return Status::error("input '" + name + "' is given twice");
      bound[j] = true;
    }
    std::string path = substituteRank(file, rank);
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return tensor.status();
    if (Status status = run.setInput(name, *tensor); !status)
      return status.withContext(path);
  }
  for (size_t j = 0; j < program.inputs.size(); ++j)
    if (!bound[j])
      return Status::error("input '" + program.inputs[j].name + "' (" +
                           dtypeName(program.inputs[j].ref.dtype) +
                           shapeString(program.inputs[j].ref.shape) +
                           ") was not given; pass --input " +
                           program.inputs[j].name + "=FILE");
  return Status::ok();
}

/// What one rank did: its printed summary and report.
struct RankResult {
  std::string summary;
  RunReport report;
  double seconds = 0;
};

/// One rank's run: its executor, inputs, iterations and outputs.
Status runRank(std::shared_ptr<const Plan> plan, const RunOptions &options,
               RankContext &context, RankResult &result) {
  int rank = context.rank;
  StatusOr<std::unique_ptr<Executor>> executor =
      Executor::create(plan, rank, context.world, context.executor);
  if (!executor)
    return executor.status();
  Executor &run = **executor;
  armTestKill(run, options.launch, context);
  if (Status status = bindInputs(run, options, rank); !status)
    return status;
  for (int iteration = 0; iteration < options.warmup + options.iterations;
       ++iteration) {
    bool timed = iteration >= options.warmup;
    if (Status status = run.run(options.report && timed); !status)
      return status;
    if (timed)
      result.seconds += run.report().seconds;
  }
  const RankProgram &program = run.program();
  if (!options.outputDir.empty()) {
    std::string dir = options.outputDir;
    mkdir(dir.c_str(), 0777);
    if (context.size > 1) {
      dir += "/rank" + std::to_string(rank);
      mkdir(dir.c_str(), 0777);
    }
    for (size_t i = 0; i < program.outputs.size(); ++i) {
      HostTensor tensor = run.output(i);
      if (Status status =
              writeNpyFile(dir + "/" + npyFileName(tensor.name), tensor);
          !status)
        return status;
    }
  } else {
    for (size_t i = 0; i < program.outputs.size(); ++i)
      result.summary += context.prefix() + summarize(run.output(i)) + "\n";
  }
  result.report = run.report();
  return Status::ok();
}

/// Prints one rank's outcome; false when it failed.
bool finish(const RankResult &result, const Status &status,
            const RunOptions &options, int rank, bool multi) {
  std::string prefix = multi ? "rank " + std::to_string(rank) + ": " : "";
  if (!result.report.cudaGraphs.empty())
    std::fprintf(stderr, "%sloom-run: CUDA graphs: %s\n", prefix.c_str(),
                 result.report.cudaGraphs.c_str());
  if (!result.report.launchGroups.empty())
    std::fprintf(stderr, "%sloom-run: launch groups: %s\n", prefix.c_str(),
                 result.report.launchGroups.c_str());
  if (!result.report.matmulEpilogues.empty())
    std::fprintf(stderr, "%sloom-run: matmul epilogues: %s\n", prefix.c_str(),
                 result.report.matmulEpilogues.c_str());
  if (!result.report.matmulTuning.empty())
    std::fprintf(stderr, "%sloom-run: matmul tuning: %s\n", prefix.c_str(),
                 result.report.matmulTuning.c_str());
  if (!status) {
    std::fprintf(stderr, "loom-run: %s%s: %s\n", prefix.c_str(),
                 options.model.c_str(), status.message().c_str());
    return false;
  }
  std::fputs(result.summary.c_str(), stdout);
  if (options.report) {
    if (multi)
      std::printf("%sreport\n", prefix.c_str());
    RunReport report = result.report;
    report.seconds = result.seconds / options.iterations;
    printReport(report, options.iterations);
  }
  return true;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "loom-run: %s\n", message.c_str());
  return 1;
}

} // namespace

int loomrun::runPlan(std::shared_ptr<const Plan> plan,
                     const RunOptions &options) {
  int ranks = int(plan->ranks.size());
  LaunchOptions launch = options.launch;
  launch.model = options.model;
  launch.plan = plan.get();
  std::vector<RankResult> results(ranks);
  StatusOr<LaunchResult> launched =
      launchRanks(ranks, launch, [&](RankContext &context) {
        return runRank(plan, options, context, results[context.rank]);
      });
  if (!launched)
    return fail(launched.status().message());
  // Outputs and errors in rank order.
  bool ok = true;
  for (const RankOutcome &outcome : launched->outcomes)
    ok = finish(results[outcome.rank], outcome.status, options, outcome.rank,
                ranks > 1) &&
         ok;
  return ok ? 0 : 1;
}

/// `loc` with the numbers that stand alone between '.' or '/' (layer
/// indices: /h.3/attn/MatMul) replaced by N, so that the layers of a model
/// add up in one row.
static std::string foldLayers(const std::string &loc) {
  std::string folded;
  for (size_t i = 0; i < loc.size();) {
    size_t end = i;
    while (end < loc.size() &&
           std::isdigit(static_cast<unsigned char>(loc[end])))
      ++end;
    bool delimitedBefore = i > 0 && (loc[i - 1] == '.' || loc[i - 1] == '/');
    bool delimitedAfter =
        end == loc.size() || loc[end] == '.' || loc[end] == '/';
    if (end > i && delimitedBefore && delimitedAfter) {
      folded += 'N';
      i = end;
    } else {
      folded += loc[i++];
    }
  }
  return folded;
}

/// The ten node paths (layers folded) with the most kernel time: where a
/// model's step goes when it has hundreds of instructions.
static void printByNodePath(const RunReport &report) {
  struct Row {
    int64_t calls = 0;
    double seconds = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const InstructionProfile &instruction : report.instructions) {
    Row &row = rows[{foldLayers(instruction.loc), instruction.kernel}];
    ++row.calls;
    row.seconds += instruction.seconds;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Row>> sorted(
      rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  if (sorted.size() > 10)
    sorted.resize(10);
  std::printf("by node path (layers folded):\n");
  for (const auto &[key, row] : sorted)
    std::printf("  %-14s %5lld %9.3f ms  %s\n", key.second.c_str(),
                static_cast<long long>(row.calls), row.seconds * 1e3,
                key.first.c_str());
}

void loomrun::printReport(const RunReport &report, int iterations) {
  std::printf("memory:\n");
  std::printf("  planned peak (arena)    %s\n",
              formatBytes(report.plannedArenaBytes).c_str());
  std::printf("  planned, whole pages    %s\n",
              formatBytes(report.plannedArenaPageBytes).c_str());
  // 0: the backend cannot tell (CUDA allocates the planned arena whole).
  if (report.measuredArenaBytes == 0 && report.plannedArenaPageBytes != 0)
    std::printf("  measured peak (touched) not measured on this device\n");
  else
    std::printf("  measured peak (touched) %s  %s\n",
                formatBytes(report.measuredArenaBytes).c_str(),
                report.measuredArenaBytes == report.plannedArenaPageBytes
                    ? "= planned"
                    : "!= planned");
  std::printf("  weights                 %s\n",
              formatBytes(report.weightBytes).c_str());
  std::printf("time: %.3f ms per run (%d run%s)\n", report.seconds * 1e3,
              iterations, iterations == 1 ? "" : "s");
  double total = 0;
  for (const KernelProfile &kernel : report.kernels)
    total += kernel.seconds;
  std::printf("%-16s %6s %12s %7s\n", "kernel", "calls", "time (ms)", "share");
  for (const KernelProfile &kernel : report.kernels)
    std::printf("%-16s %6lld %12.3f %6.1f%%\n", kernel.kernel.c_str(),
                static_cast<long long>(kernel.calls), kernel.seconds * 1e3,
                total > 0 ? 100 * kernel.seconds / total : 0.0);
  printByNodePath(report);
  std::vector<InstructionProfile> top = report.instructions;
  std::sort(top.begin(), top.end(),
            [](const InstructionProfile &a, const InstructionProfile &b) {
              return a.seconds > b.seconds;
            });
  if (top.size() > 10)
    top.resize(10);
  std::printf("slowest instructions:\n");
  for (const InstructionProfile &instruction : top)
    std::printf("  #%-4zu %-14s %9.3f ms  %s\n", instruction.index,
                instruction.kernel.c_str(), instruction.seconds * 1e3,
                instruction.loc.c_str());
}
