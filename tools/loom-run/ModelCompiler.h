//===- ModelCompiler.h - loom-run's bridge to the compiler ------*- C++ -*-===//
//
// Plain C++ interface between loom-run (which also builds without MLIR, and
// then only runs plans) and the compiler: ONNX or .mlir in, runtime plan out.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H
#define LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H

#include "loom/Runtime/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace loom {

struct ModelCompileOptions {
  /// --dim NAME=SIZE values for symbolic ONNX dimensions.
  std::map<std::string, int64_t> dims;
  /// Shapes of the inputs the user gave, by graph input name, and for bare
  /// files by position; they fix the symbolic dimensions --dim leaves open.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  std::vector<std::vector<int64_t>> positionalInputShapes;
  /// The function of a .mlir module to run (default: its only one).
  std::string functionName;
};

/// True when this loom-run can compile models (it was built with MLIR).
bool haveModelCompiler();

/// Compiles the .onnx, .onnxtext or .mlir model at `path` to a plan.
/// Diagnostics are in the returned error, one per line, prefixed with the
/// file and the ONNX node name or line.
runtime::StatusOr<runtime::Plan>
compileModel(const std::string &path, const ModelCompileOptions &options);

} // namespace loom

#endif // LOOM_TOOLS_LOOM_RUN_MODELCOMPILER_H
