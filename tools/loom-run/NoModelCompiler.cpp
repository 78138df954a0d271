//===- NoModelCompiler.cpp - loom-run without the compiler ----------------===//
//
// Linked into runtime-only builds and loom-run-emulated, which run plans but
// cannot compile models.
//
//===----------------------------------------------------------------------===//

#include "ModelCompiler.h"
#include "Planner.h"

bool loomrun::haveModelCompiler() { return false; }

loomrt::StatusOr<loomrt::Plan>
loomrun::compileModel(const std::string &path, const ModelCompileOptions &) {
  return loomrt::Status::error(
      path + ": this loom-run was built without the compiler "
             "(a runtime-only build, or loom-run-emulated) and runs plan files "
             "only; compile the model "
             "with a full build's `loom-run --emit-plan`");
}

loomrt::StatusOr<loomrun::CompileOnlyResult>
loomrun::compileOnly(const std::string &path,
                     const ModelCompileOptions &options) {
  loomrt::StatusOr<loomrt::Plan> plan = compileModel(path, options);
  return plan.status();
}

loomrt::StatusOr<size_t>
loomrun::saveTrainedModel(const std::string &, const std::string &outPath,
                          const std::map<std::string, loomrt::HostTensor> &) {
  return loomrt::Status::error(
      "cannot write " + outPath +
      ": this loom-run was built without the compiler (a runtime-only build, "
      "or loom-run-emulated) "
      "and cannot write ONNX models");
}

loomrt::StatusOr<loomrun::PlanResult>
loomrun::planLayout(const PlanRequest &request) {
  return loomrt::Status::error(
      request.modelPath + ": --parallel auto plans by compiling the model, "
                          "which this loom-run (built without the compiler) "
                          "cannot; plan with a full build's `loom-plan "
                          "--json FILE` and pass --parallel FILE");
}

std::string loomrun::formatPlanReport(const PlanRequest &, const PlanResult &) {
  return "";
}

loomrt::StatusOr<loomrun::Layout>
loomrun::readPlannedLayout(const std::string &path) {
  return loomrt::Status::error(
      path + ": this loom-run was built without the compiler and cannot "
             "compile a model for a layout");
}
