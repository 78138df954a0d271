//===- FixedBatch.cpp - The batch a model was exported at -----------------===//
//
// A model exported without dynamic axes (torch.onnx.export's default)
// declares its inputs' batch as a fixed size, and its graph often spells
// that size out again (a Reshape to [2, 16, 4, 8]). Loom then trains it
// with microbatches of exactly those rows, split over data parallelism by
// sharding like any batch; the planner needs to know the size to search
// only such layouts (docs/design/planner.md, "Models of a fixed batch").
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ONNX/ImportONNX.h"

#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringSet.h"

int64_t mlir::loom::fixedLeadingDimension(llvm::StringRef modelBytes,
                                          llvm::StringRef dimName) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(modelBytes.data(), int(modelBytes.size())))
    return 0;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  int64_t fixed = 0;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (initializers.contains(input.name()) ||
        !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &dims = input.type().tensor_type().shape().dim();
    if (dims.empty())
      continue;
    const onnx::TensorShapeProto::Dimension &leading = dims.Get(0);
    // A symbolic batch anywhere: the model takes any batch.
    for (const onnx::TensorShapeProto::Dimension &dim : dims)
      if (dim.has_dim_param() && dim.dim_param() == dimName.str())
        return 0;
    if (!leading.has_dim_value() || leading.dim_value() < 1)
      return 0;
    if (fixed && fixed != leading.dim_value())
      return 0;
    fixed = leading.dim_value();
  }
  return fixed;
}
