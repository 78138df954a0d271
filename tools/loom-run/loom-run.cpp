//===- loom-run.cpp - Compile and run models on the Loom runtime ----------===//
//
//   loom-run MODEL [--input NAME=FILE | FILE]... [--output-dir DIR]
//            [--emit-plan FILE] [--report] [--dim NAME=SIZE]...
//            [--iterations N] [--warmup N]
//
// MODEL is an ONNX model (.onnx, .onnxtext), a loom module (.mlir) or a plan
// file. Plain C++ on the runtime: in a runtime-only build it runs plans, and
// compiling models is linked in (ModelCompiler.cpp) when MLIR is available.
//
//===----------------------------------------------------------------------===//

#include "ModelCompiler.h"

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/stat.h>

using namespace loom;
using namespace loom::runtime;

namespace {

const char *kUsage = R"(usage: loom-run MODEL [options] [INPUT_FILE...]

Compiles MODEL (.onnx, .onnxtext, .mlir) to a runtime plan, or loads a plan
file, and runs it on the CPU backend.

options:
  --input NAME=FILE   bind graph input NAME to FILE (.npy or ONNX TensorProto .pb);
                      a bare INPUT_FILE binds the next graph input in order
  --output-dir DIR    write every output to DIR/<output name>.npy
  --emit-plan FILE    write the compiled plan to FILE (runs only if inputs are given)
  --report            print planned vs measured peak memory and time per kernel
  --dim NAME=SIZE     size of a symbolic ONNX dimension (else read off the inputs)
  --function NAME     the function of a .mlir module to run
  --iterations N      run N times and report the mean time
  --warmup N          first run N untimed times (default 0)
  --help              this text
)";

struct Options {
  std::string model;
  std::vector<std::pair<std::string, std::string>> namedInputs;
  std::vector<std::string> positionalInputs;
  std::string outputDir;
  std::string emitPlan;
  bool report = false;
  int iterations = 1;
  int warmup = 0;
  ModelCompileOptions compile;
};

int fail(const std::string &message) {
  std::fprintf(stderr, "loom-run: %s\n", message.c_str());
  return 1;
}

bool parseInt(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  value = parsed;
  return true;
}

/// Parses argv; an error message on failure, "" on success.
std::string parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) -> bool {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        out = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string flag = arg.substr(0, arg.find('='));
    std::string text;
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--report") {
      options.report = true;
    } else if (flag == "--input" || flag == "--output-dir" ||
               flag == "--emit-plan" || flag == "--dim" ||
               flag == "--function" || flag == "--iterations" ||
               flag == "--warmup") {
      if (!value(text))
        return flag + " needs a value";
      if (flag == "--input") {
        size_t eq = text.find('=');
        if (eq == std::string::npos || eq == 0)
          return "--input expects NAME=FILE, got '" + text + "'";
        options.namedInputs.push_back(
            {text.substr(0, eq), text.substr(eq + 1)});
      } else if (flag == "--output-dir") {
        options.outputDir = text;
      } else if (flag == "--emit-plan") {
        options.emitPlan = text;
      } else if (flag == "--function") {
        options.compile.functionName = text;
      } else if (flag == "--iterations") {
        int64_t count;
        if (!parseInt(text, count) || count < 1 || count > 1000000)
          return "--iterations expects a positive count, got '" + text + "'";
        options.iterations = int(count);
      } else if (flag == "--warmup") {
        int64_t count;
        if (!parseInt(text, count) || count < 0 || count > 1000000)
          return "--warmup expects a count >= 0, got '" + text + "'";
        options.warmup = int(count);
      } else {
        size_t eq = text.find('=');
        int64_t size;
        if (eq == std::string::npos || eq == 0 ||
            !parseInt(text.substr(eq + 1), size) || size < 0)
          return "--dim expects NAME=SIZE with SIZE >= 0, got '" + text + "'";
        options.compile.dims[text.substr(0, eq)] = size;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      return "unknown option '" + arg + "' (see --help)";
    } else if (options.model.empty()) {
      options.model = arg;
    } else {
      options.positionalInputs.push_back(arg);
    }
  }
  if (options.model.empty())
    return "no model given (see --help)";
  return "";
}

std::string formatBytes(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f MiB (%llu bytes)",
                double(bytes) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(bytes));
  return text;
}

void printReport(const RunReport &report, int iterations) {
  std::printf("memory:\n");
  std::printf("  planned peak (arena)    %s\n",
              formatBytes(report.plannedArenaBytes).c_str());
  std::printf("  planned, whole pages    %s\n",
              formatBytes(report.plannedArenaPageBytes).c_str());
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

} // namespace

int main(int argc, char **argv) {
  Options options;
  std::string error = parseOptions(argc, argv, options);
  if (!error.empty())
    return fail(error);

  // Inputs are read first: their shapes fix the model's symbolic dims.
  std::vector<std::pair<std::string, HostTensor>> named;
  std::vector<HostTensor> positional;
  for (const auto &[name, path] : options.namedInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.inputShapes[name] = tensor->shape;
    named.push_back({name, std::move(*tensor)});
  }
  for (const std::string &path : options.positionalInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.positionalInputShapes.push_back(tensor->shape);
    positional.push_back(std::move(*tensor));
  }

  StatusOr<std::string> bytes = readFile(options.model);
  if (!bytes)
    return fail(bytes.status().message());
  std::shared_ptr<Plan> plan;
  if (looksLikePlan(*bytes)) {
    StatusOr<Plan> parsed = parsePlan(*bytes, options.model);
    if (!parsed)
      return fail(parsed.status().message());
    plan = std::make_shared<Plan>(std::move(*parsed));
  } else {
    bytes = std::string();
    StatusOr<Plan> compiled = compileModel(options.model, options.compile);
    if (!compiled) {
      std::fprintf(stderr, "%s\n", compiled.status().message().c_str());
      return 1;
    }
    plan = std::make_shared<Plan>(std::move(*compiled));
  }

  if (!options.emitPlan.empty()) {
    std::string text = writePlan(*plan);
    FILE *file = std::fopen(options.emitPlan.c_str(), "wb");
    if (!file || std::fwrite(text.data(), 1, text.size(), file) != text.size())
      return fail("cannot write " + options.emitPlan + ": " +
                  std::strerror(errno));
    std::fclose(file);
    bool wantsRun = !named.empty() || !positional.empty() ||
                    !options.outputDir.empty() || options.report;
    if (!wantsRun)
      return 0;
  }

  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(plan);
  if (!executor)
    return fail(options.model + ": " + executor.status().message());
  Executor &run = **executor;
  const RankProgram &program = run.program();
  if (positional.size() > program.inputs.size())
    return fail(std::to_string(positional.size()) +
                " input files given but the model has " +
                std::to_string(program.inputs.size()) + " inputs");
  std::vector<bool> bound(program.inputs.size(), false);
  for (size_t i = 0; i < positional.size(); ++i) {
    Status status = run.setInput(program.inputs[i].name, positional[i]);
    if (!status)
      return fail(status.withContext(options.positionalInputs[i]).message());
    bound[i] = true;
  }
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string &name = named[i].first;
    for (size_t j = 0; j < program.inputs.size(); ++j) {
      if (program.inputs[j].name != name)
        continue;
      if (bound[j])
        return fail("input '" + name + "' is given twice");
      bound[j] = true;
    }
    Status status = run.setInput(name, named[i].second);
    if (!status)
      return fail(status.withContext(options.namedInputs[i].second).message());
  }
  for (size_t j = 0; j < program.inputs.size(); ++j)
    if (!bound[j])
      return fail("input '" + program.inputs[j].name + "' (" +
                  dtypeName(program.inputs[j].ref.dtype) +
                  shapeString(program.inputs[j].ref.shape) +
                  ") was not given; pass --input " + program.inputs[j].name +
                  "=FILE");

  double seconds = 0;
  for (int iteration = 0; iteration < options.warmup + options.iterations;
       ++iteration) {
    bool timed = iteration >= options.warmup;
    Status status = run.run(options.report && timed);
    if (!status)
      return fail(options.model + ": " + status.message());
    if (timed)
      seconds += run.report().seconds;
  }

  if (!options.outputDir.empty()) {
    mkdir(options.outputDir.c_str(), 0777);
    for (size_t i = 0; i < program.outputs.size(); ++i) {
      HostTensor tensor = run.output(i);
      std::string name = tensor.name;
      for (char &c : name)
        if (c == '/' || c == '\\')
          c = '_';
      Status status =
          writeNpyFile(options.outputDir + "/" + name + ".npy", tensor);
      if (!status)
        return fail(status.message());
    }
  } else {
    for (size_t i = 0; i < program.outputs.size(); ++i)
      std::printf("%s\n", summarize(run.output(i)).c_str());
  }
  if (options.report) {
    RunReport report = run.report();
    report.seconds = seconds / options.iterations;
    printReport(report, options.iterations);
  }
  return 0;
}
