//===- OpsetAdapter.h - Newer ONNX opsets onto libonnx's schemas -*- C++
//-*-===//
//
// libonnx 1.12 knows the default domain up to opset 17; PyTorch's current
// exporter writes 18 and newer. The adapter rewrites a model of opset
// 18..21 node by node into the forms libonnx's opset-17 schemas describe,
// from a table of every operator that changed in 18-21, so that ONNX's own
// validation and shape inference still check the model; the few nodes that
// have no opset-17 form (Gelu-20, Split-18 with `num_outputs`) keep their
// version, are validated by their converter, and are left out of ONNX's
// shape inference. It also inlines the model's local functions, which the
// newer exporter emits. docs/design/onnx-import.md has the decision.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_IMPORT_ONNX_OPSETADAPTER_H
#define LOOM_LIB_IMPORT_ONNX_OPSETADAPTER_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "onnx/onnx_pb.h"

#include <vector>

namespace mlir {
namespace loom {
namespace onnx_import {

/// The newest default-domain opset Loom imports.
constexpr int64_t kNewestOpset = 21;
/// The opset whose schemas the adapted model is validated against.
constexpr int64_t kAdaptedOpset = 17;

struct OpsetAdaptation {
  /// Per graph node: the version of the node's op at the model's opset
  /// when it has no opset-17 form (its converter is keyed by it), else 0.
  std::vector<int> nativeVersions;
  /// ONNX shape inference must skip the nodes kept at their own version
  /// (and what it then cannot infer after them).
  bool lenientInference = false;
};

/// Fuses SplitToSequence + SequenceAt (torch.export's `x.split(n)`) into
/// one node with a converter, and, when `opset` (the model's default-domain
/// opset, up to kNewestOpset) is newer than `libonnxOpset`, rewrites the
/// model into opset kAdaptedOpset. Errors are emitted at the node, as the
/// importer reports them, naming the op version that cannot be adapted.
FailureOr<OpsetAdaptation> adaptModel(onnx::ModelProto &model, int64_t opset,
                                      int64_t libonnxOpset,
                                      MLIRContext *context);

/// Replaces every call of a model-local function (a node whose domain and
/// op type name a FunctionProto of the model) by the function's body, with
/// values renamed apart and attribute references resolved. Errors are
/// emitted at the calling node.
LogicalResult inlineLocalFunctions(onnx::ModelProto &model,
                                   MLIRContext *context);

} // namespace onnx_import
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_IMPORT_ONNX_OPSETADAPTER_H
