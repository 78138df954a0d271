//===- TensorIO.h - Host tensors and the files that hold them --*- C++ -*-===//
//
// Inputs and outputs of `loom-run`: NumPy .npy files and ONNX TensorProto
// .pb files (as in ONNX's backend test data). The TensorProto reader decodes
// the protobuf wire format itself so that the runtime needs no protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TENSORIO_H
#define LOOM_RUNTIME_TENSORIO_H

#include "loom/Runtime/Plan.h"

#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

/// A dense row-major tensor in host memory.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  /// The TensorProto's name, when read from one.
  std::string name;

  int64_t elements() const { return numElements(shape); }
};

/// Parses .npy bytes (format 1.0-3.0, C order, little-endian): <f2 <f4 <f8
/// <i4 <i8 and |b1 (read as i1). Other dtypes are an error naming them.
StatusOr<HostTensor> parseNpy(std::string_view bytes);
/// Serializes as .npy (format 1.0, C order).
std::string writeNpy(const HostTensor &tensor);

/// Parses a serialized onnx.TensorProto (dims, data_type, name, raw_data and
/// the typed *_data fields) of type FLOAT, DOUBLE, FLOAT16, BFLOAT16, BOOL,
/// INT32 or INT64.
StatusOr<HostTensor> parseTensorProto(std::string_view bytes);

/// Reads `path`, choosing the format by content (.npy magic) or else by
/// extension (.pb = TensorProto). Errors name the path.
StatusOr<HostTensor> readTensorFile(const std::string &path);
/// Writes `tensor` as .npy to `path`.
Status writeNpyFile(const std::string &path, const HostTensor &tensor);

/// `tensor` converted to `dtype` exactly as the elementwise `cast` converts
/// it. Only f32 and f64 to bf16 (rounded once to nearest even), what the
/// compiler's bf16 weight copies (`#loom.cast_of`) need; other pairs are an
/// error naming them.
StatusOr<HostTensor> castTensor(const HostTensor &tensor, DType dtype);

/// Reads a whole file.
StatusOr<std::string> readFile(const std::string &path);

/// Writes `bytes` to `path` through `path`.tmp renamed over it, so that
/// `path` is never half-written (checkpoints, trained models).
Status writeFileAtomically(const std::string &path, std::string_view bytes);

} // namespace loomrt

#endif // LOOM_RUNTIME_TENSORIO_H
