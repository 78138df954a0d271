//===- NoModelCompiler.cpp - loom-run without the compiler ----------------===//
//
// Linked into runtime-only builds and loom-run-emulated, which run plans but
// cannot compile models.
//
//===----------------------------------------------------------------------===//

#include "ModelCompiler.h"

bool loom::haveModelCompiler() { return false; }

loom::runtime::StatusOr<loom::runtime::Plan>
loom::compileModel(const std::string &path, const ModelCompileOptions &) {
  return runtime::Status::error(
      path + ": this loom-run was built without the compiler "
             "(a runtime-only build, or loom-run-emulated) and runs plan files "
             "only; compile the model "
             "with a full build's `loom-run --emit-plan`");
}

loom::runtime::StatusOr<size_t>
loom::saveTrainedModel(const std::string &, const std::string &outPath,
                       const std::map<std::string, runtime::HostTensor> &) {
  return runtime::Status::error(
      "cannot write " + outPath +
      ": this loom-run was built without the compiler (a runtime-only build, "
      "or loom-run-emulated) "
      "and cannot write ONNX models");
}
