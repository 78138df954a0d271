//===- loom-plan.cpp - Choose a parallel layout for a model ---------------===//
//
// loom-plan MODEL.onnx --cluster FILE --global-batch B [--dim seq=S]
//           [--precision bf16] [--evaluate 'tp=2,pp=2'] [--json OUT]
//
// Searches the layouts of the model's training step on the described
// cluster and prints the fastest that fits, its prediction and why the
// others lost (docs/design/planner.md).
//
//===----------------------------------------------------------------------===//

#include "Planner.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

using namespace llvm;

/// The options `--help` lists: the tool's own, not the LLVM libraries'.
static cl::OptionCategory planCategory("loom-plan options");

static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx>"),
                                      cl::cat(planCategory));
static cl::opt<std::string>
    clusterPath("cluster", cl::Required,
                cl::desc("The cluster description (JSON; "
                         "examples/clusters, docs/design/planner.md)"),
                cl::value_desc("FILE"), cl::cat(planCategory));
static cl::opt<int64_t> globalBatch("global-batch", cl::Required,
                                    cl::desc("Rows of one optimizer step"),
                                    cl::value_desc("B"), cl::cat(planCategory));
static cl::list<std::string>
    dims("dim", cl::desc("A symbolic dimension of the model's inputs"),
         cl::value_desc("NAME=SIZE"), cl::cat(planCategory));
static cl::opt<std::string>
    batchDim("batch-dim", cl::init("batch"),
             cl::desc("The inputs' symbolic batch dimension (default batch)"),
             cl::value_desc("NAME"), cl::cat(planCategory));
static cl::opt<std::string>
    precision("precision", cl::init("f32"),
              cl::desc("f32, or bf16 (GEMMs in bf16, as loom-run)"),
              cl::cat(planCategory));
static cl::opt<std::string>
    gradPrecision("grad-precision", cl::init("f32"),
                  cl::desc("With --precision bf16: f32, or bf16 gradients "
                           "(as loom-run)"),
                  cl::cat(planCategory));
static cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                                      cl::desc("The optimizer (as loom-run)"),
                                      cl::cat(planCategory));
static cl::opt<std::string> loss("loss", cl::init("cross_entropy"),
                                 cl::desc("The loss (as loom-run)"),
                                 cl::cat(planCategory));
static cl::opt<std::string>
    evaluate("evaluate",
             cl::desc("Predict this (partial) layout, the rest searched: "
                      "dp, tp, pp, zero, group, sp, mbs, M, schedule, V, "
                      "recompute"),
             cl::value_desc("KEY=VALUE,..."), cl::cat(planCategory));
static cl::opt<int64_t>
    devices("devices", cl::init(0),
            cl::desc("Use this many of the cluster's devices (default all)"),
            cl::cat(planCategory));
static cl::opt<int> topK("top", cl::init(5),
                         cl::desc("Alternatives to print (default 5)"),
                         cl::cat(planCategory));
static cl::opt<bool>
    exhaustive("exhaustive",
               cl::desc("Compile every layout, also those the search can "
                        "tell lose"),
               cl::cat(planCategory));
static cl::opt<bool> noFold(
    "no-fold",
    cl::desc("Compile every layout whole, all its microbatches and layers, "
             "instead of extrapolating many microbatches from two smaller "
             "counts and many repeated layers from one and two per stage"),
    cl::cat(planCategory));
static cl::opt<bool> noPipelineFold(
    "no-pipeline-fold",
    cl::desc("Extrapolate a pipeline's many microbatches from two compiles "
             "of P + 1 and P + 3 (2P and 3P interleaved) instead of writing "
             "its programs out from one compile of five"),
    cl::cat(planCategory));
static cl::opt<bool> noStageFold(
    "no-stage-fold",
    cl::desc("Compile every rank of a deep pipeline instead of writing its "
             "ranks out from a compile of one rank of each kind"),
    cl::cat(planCategory));
static cl::opt<double> timeLimit(
    "time-limit", cl::init(0),
    cl::desc("Stop searching after this many seconds and choose among the "
             "layouts compiled by then (default: no limit)"),
    cl::value_desc("SECONDS"), cl::cat(planCategory));
static cl::opt<int> jobs(
    "jobs", cl::init(0),
    cl::desc("Compile this many layouts or probes at once, each on a thread "
             "of its own (default: one per core, at most eight); the result "
             "is the same"),
    cl::value_desc("N"), cl::cat(planCategory));
static cl::opt<bool>
    memory("memory",
           cl::desc("Print what the choice's fullest rank holds when its "
                    "memory is fullest: the largest tensors alive and what "
                    "writes them (compiles the choice again, every layer)"),
           cl::cat(planCategory));
static cl::opt<bool>
    simulate("simulate",
             cl::desc("Print the choice's replay rank by rank: step, compute "
                      "and waiting time, peak memory and bytes sent"),
             cl::cat(planCategory));
static cl::opt<std::string>
    tracePath("trace",
              cl::desc("Replay the chosen layout's plan on the cluster and "
                       "write its trace (Chrome/Perfetto JSON, one process "
                       "per rank)"),
              cl::value_desc("FILE"), cl::cat(planCategory));
static cl::opt<std::string> jsonPath("json",
                                     cl::desc("Write the result as JSON"),
                                     cl::value_desc("OUT"),
                                     cl::cat(planCategory));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(planCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-plan: choose the parallel layout of a model's training step for "
      "a cluster\n");
  auto fail = [](const std::string &message) {
    errs() << "loom-plan: error: " << message << "\n";
    return 1;
  };
  loomrun::PlanRequest request;
  request.modelPath = modelPath;
  request.clusterPath = clusterPath;
  request.globalBatch = globalBatch;
  request.batchDim = batchDim;
  if (precision != "f32" && precision != "bf16")
    return fail("--precision takes f32 or bf16, not '" + precision + "'");
  request.precision = precision;
  if (gradPrecision != "f32" && gradPrecision != "bf16")
    return fail("--grad-precision takes f32 or bf16, not '" + gradPrecision +
                "'");
  if (gradPrecision == "bf16" && precision != "bf16")
    return fail("--grad-precision bf16 needs --precision bf16");
  request.train.gradPrecision = gradPrecision;
  for (const std::string &dim : dims) {
    size_t equals = dim.find('=');
    char *end = nullptr;
    long long size = equals == std::string::npos
                         ? 0
                         : std::strtoll(dim.c_str() + equals + 1, &end, 10);
    if (equals == std::string::npos || equals == 0 || !end || *end || size < 1)
      return fail("--dim takes NAME=SIZE with a size >= 1, not '" + dim + "'");
    request.dims[dim.substr(0, equals)] = size;
  }
  if (request.dims.count(request.batchDim))
    return fail("--dim " + request.batchDim +
                ": the batch is the planner's to split (--global-batch)");
  request.train.optimizer = optimizer;
  request.train.loss = loss;
  request.train.bucketMB = 25;
  request.devices = devices;
  request.topK = topK;
  request.exhaustive = exhaustive;
  request.foldMicrobatches = !noFold;
  request.foldLayers = !noFold;
  request.foldPipelines = !noFold && !noPipelineFold;
  request.foldStages = request.foldPipelines && !noStageFold;
  request.timeLimitSeconds = timeLimit;
  if (jobs < 0)
    return fail("--jobs " + std::to_string(jobs) +
                ": give at least 1 (or 0: one per core, at most eight)");
  request.threads = jobs;
  if (!evaluate.empty()) {
    std::string error;
    std::optional<loomrun::LayoutConstraint> constraint =
        loomrun::parseLayoutConstraint(evaluate, error);
    if (!constraint)
      return fail(error);
    request.constraint = *constraint;
  }
  loomrt::StatusOr<loomrun::PlanResult> result = loomrun::planLayout(request);
  if (!result)
    return fail(result.status().message());
  outs() << loomrun::formatPlanReport(request, *result);
  outs().flush();
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << loomrun::formatPlanJson(request, *result);
    if (!out)
      return fail("cannot write " + jsonPath);
  }
  if (simulate && result->choice())
    outs() << "\n" << loomrun::formatSimulation(*result->choice());
  if (memory && !result->candidates.empty()) {
    // The choice, or the layout that came closest to fitting.
    loomrt::StatusOr<std::string> text =
        loomrun::formatArenaPeak(request, result->candidates.front());
    if (!text)
      return fail(text.status().message());
    outs() << "\n" << *text;
  }
  if (!tracePath.empty() && result->choice()) {
    loomrt::StatusOr<std::string> trace =
        loomrun::simulateTrace(request, result->choice()->layout);
    if (!trace)
      return fail(trace.status().message());
    std::ofstream out(tracePath);
    out << *trace;
    if (!out)
      return fail("cannot write " + tracePath);
    outs() << "trace of the choice's simulated step: " << tracePath << "\n";
  }
  return result->choice() ? 0 : 2;
}
