//===- ReplaceInitializers.cpp - Trained weights back into an ONNX model --===//
//
// `loom-run --train --save` writes the model it was given with the trained
// values in place of the initial ones, so the result is the same graph that
// any ONNX tool (and loom-run) already runs.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ONNX/ImportONNX.h"

#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

static int64_t elementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  case onnx::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

std::optional<std::string>
mlir::loom::replaceInitializers(StringRef modelBytes,
                                const llvm::StringMap<StringRef> &values,
                                std::string &error, size_t *replacedCount) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(modelBytes.data(), int(modelBytes.size()))) {
    error = "the model is not a binary ONNX ModelProto";
    return std::nullopt;
  }
  llvm::StringSet<> replaced;
  for (onnx::TensorProto &tensor :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(tensor.name());
    if (it == values.end())
      continue;
    int64_t bytes = elementBytes(tensor.data_type());
    for (int64_t dim : tensor.dims())
      bytes *= dim;
    if (bytes <= 0 || uint64_t(bytes) != it->second.size()) {
      error = "initializer '" + tensor.name() + "' holds " +
              std::to_string(bytes) + " bytes, but its trained value has " +
              std::to_string(it->second.size());
      return std::nullopt;
    }
    tensor.clear_float_data();
    tensor.clear_double_data();
    tensor.clear_int32_data();
    tensor.clear_int64_data();
    tensor.clear_external_data();
    tensor.set_data_location(onnx::TensorProto::DEFAULT);
    tensor.set_raw_data(it->second.data(), it->second.size());
    replaced.insert(tensor.name());
  }
  if (replacedCount)
    *replacedCount = replaced.size();
  std::string out;
  if (!model.SerializeToString(&out)) {
    error = "cannot serialize the model";
    return std::nullopt;
  }
  return out;
}
